package check

import (
	"fmt"
	"math"
	"slices"
	"sort"
)

// kv names one version: a value of a key.
type kv struct{ k, v int64 }

// versions is what the checker inferred about each key's versions.
type versions struct {
	writer map[kv]int32      // who appended or wrote each value
	order  map[int64][]int64 // list keys: the version order (the longest committed read)
	pos    map[kv]int32      // list keys: a value's position in order
	// succ maps a register version (nil: the initial one, key-only kv with v ignored) to the
	// committed transactions that read it and then overwrote the key: its known successors.
	succ map[regVersion][]int32
	// unobserved lists, per list key, the committed transactions whose appends no read shows:
	// they must come after every observed version, since every read is a prefix of the final order.
	unobserved map[int64][]int32
	// regWriters lists, per register key, the committed transactions that wrote it: all are
	// later than the initial nil version.
	regWriters map[int64][]int32
	// seen marks the transactions whose writes a counted read of another transaction shows. An
	// info transaction among them committed, so all its writes took effect, not only those seen.
	seen []bool
}

type regVersion struct {
	k     int64
	v     int64
	isNil bool
}

// reader reports whether t's reads count under the model: committed reads always, aborted reads
// only for opacity.
func (c *checker) reader(t *txn) bool {
	return t.readsKnown && (t.st == stOK || (t.st == stFail && c.m.abortedReaders))
}

// inGraph reports whether t is a node of the dependency graph.
func (c *checker) inGraph(t *txn) bool {
	return t.st != stFail || (c.m.abortedReaders && t.readsKnown)
}

// visibleWriter reports whether writer index w (-1: none) can be the source of ww/wr edges.
func (c *checker) visibleWriter(w int32) bool { return w >= 0 && c.h.txns[w].st != stFail }

func (c *checker) writerOf(k, v int64) int32 {
	if w, ok := c.v.writer[kv{k, v}]; ok {
		return w
	}
	return -1
}

// direct infers versions and reports the anomalies that need no cycle.
func (c *checker) direct() {
	h := c.h
	for i, a := range h.internal {
		if !h.internalFail[i] || c.m.abortedReaders {
			c.add(a)
		}
	}
	c.v = &versions{writer: map[kv]int32{}, order: map[int64][]int64{}, pos: map[kv]int32{}, succ: map[regVersion][]int32{},
		unobserved: map[int64][]int32{}, regWriters: map[int64][]int32{}}
	dup := map[kv]bool{}
	for i, t := range h.txns {
		for _, s := range t.keys {
			for _, v := range s.writes {
				x := kv{s.key, v}
				if w, ok := c.v.writer[x]; ok {
					if !dup[x] {
						dup[x] = true
						c.add(c.duplicate(s.key, v, h.txns[w], t))
					}
					continue
				}
				c.v.writer[x] = int32(i)
			}
		}
	}
	c.listOrders()
	c.markSeen()
	for i, t := range h.txns {
		if !c.committed(int32(i)) {
			continue
		}
		for _, s := range t.keys {
			if len(s.writes) == 0 {
				continue
			}
			if !s.list {
				c.v.regWriters[s.key] = append(c.v.regWriters[s.key], int32(i))
			} else if _, ok := c.v.pos[kv{s.key, s.final()}]; !ok {
				c.v.unobserved[s.key] = append(c.v.unobserved[s.key], int32(i))
			}
		}
	}
	c.readChecks()
	if c.m.forbidLostUpdate {
		c.lostUpdates()
	}
	if c.m.fractured {
		c.fracturedReads()
	}
}

// markSeen fills c.v.seen from the reads that count under the model.
func (c *checker) markSeen() {
	h := c.h
	c.v.seen = make([]bool, len(h.txns))
	for i, t := range h.txns {
		if !c.reader(t) {
			continue
		}
		for _, s := range t.keys {
			for _, v := range s.externalValues() {
				if w := c.writerOf(s.key, v); w >= 0 && w != int32(i) {
					c.v.seen[w] = true
				}
			}
		}
	}
}

// committed reports whether transaction i is known to have committed: it completed ok, or its
// outcome is unknown but a read shows one of its writes.
func (c *checker) committed(i int32) bool {
	st := c.h.txns[i].st
	return st == stOK || (st == stInfo && c.v.seen[i])
}

func (c *checker) duplicate(k, v int64, a, b *txn) Anomaly {
	kk := k
	typ, verb := "duplicate-write", "wrote"
	if c.h.listKey[k] {
		typ, verb = "duplicate-append", "appended"
	}
	what := fmt.Sprintf("%s and %s both %s %d to key %d", txnName(a), txnName(b), verb, v, k)
	if a == b {
		what = fmt.Sprintf("%s %s %d to key %d twice", txnName(a), verb, v, k)
	}
	return Anomaly{Type: typ, Key: &kk, Txns: uniqIDs(a, b),
		Explanation: what + "; values must be unique per key for reads to name their writer."}
}

// listOrders takes each list key's version order from the longest committed read and checks every
// other read is a prefix of it (Elle: list-append reads reveal the order directly, and two reads
// that are not prefixes of one another cannot both be right).
func (c *checker) listOrders() {
	h := c.h
	longest := map[int64]int32{}
	// Under opacity, aborted transactions' reads are observations of committed state too.
	for i, t := range h.txns {
		if !c.reader(t) {
			continue
		}
		for _, s := range t.keys {
			if s.list && s.hasExt {
				full := c.fullRead(t, &s)
				if j, ok := longest[s.key]; !ok || len(full) > len(c.fullRead(h.txns[j], h.txns[j].sum(s.key))) {
					longest[s.key] = int32(i)
				}
			}
		}
	}
	keys := make([]int64, 0, len(longest))
	for k := range longest {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		src := h.txns[longest[k]]
		order := c.fullRead(src, src.sum(k))
		c.v.order[k] = order
		reported := false
		for i, v := range order {
			x := kv{k, v}
			if _, ok := c.v.pos[x]; ok {
				if !reported {
					kk := k
					c.add(Anomaly{Type: "duplicate-append", Key: &kk, Txns: []int64{src.id},
						Explanation: fmt.Sprintf("%s read key %d as %s, in which %d appears twice.", txnName(src), k, fmtList(order), v)})
					reported = true
				}
				continue
			}
			c.v.pos[x] = int32(i)
		}
		// Every observed element must have been appended by a transaction that did not abort.
		for _, v := range order {
			c.checkElement(src, k, v, order)
		}
		c.checkAppendsWhole(src, k, order)
	}
	seen := map[int64]bool{}
	for _, t := range h.txns {
		if !c.reader(t) {
			continue
		}
		for i := range t.keys {
			s := &t.keys[i]
			if !s.list || !s.hasExt {
				continue
			}
			order := c.v.order[s.key]
			full := c.fullRead(t, s)
			if isPrefix(full, order) && isPrefix(s.extList, order) {
				continue
			}
			s.incompatible = true
			for _, v := range full {
				c.checkElement(t, s.key, v, full)
			}
			if seen[s.key] && t.st == stOK {
				continue
			}
			seen[s.key] = true
			kk := s.key
			src := h.txns[longest[s.key]]
			c.add(Anomaly{Type: "incompatible-order", Key: &kk, Txns: uniqIDs(t, src),
				Explanation: fmt.Sprintf("%s read key %d as %s, but %s read it as %s: neither is a prefix of the other, so no single order of appends explains both.",
					txnName(t), s.key, fmtList(full), txnName(src), fmtList(order))})
		}
	}
}

// checkAppendsWhole reports a read of list key k, the key's version order, that holds an append of
// a transaction without that transaction's earlier appends to k before it: the transaction's
// appends take effect together and in its order, so no execution gives such a list (a read of
// [2] after one transaction appended 1 then 2 passed: G1b looks only at a read's last element,
// and a transaction's appends count as observed by their last one). Every other read is a
// prefix of this one (or reported incompatible), so checking it covers them.
func (c *checker) checkAppendsWhole(src *txn, k int64, order []int64) {
	for i, v := range order {
		w := c.writerOf(k, v)
		if w < 0 {
			continue
		}
		wt := c.h.txns[w]
		for _, e := range wt.sum(k).writes {
			if e == v {
				break
			}
			if p, ok := c.v.pos[kv{k, e}]; !ok || int(p) >= i {
				kk := k
				where := "not"
				if ok {
					where = "only after it"
				}
				c.add(Anomaly{Type: "incompatible-order", Key: &kk, Txns: uniqIDs(wt, src),
					Explanation: fmt.Sprintf("%s read key %d as %s, which holds %d but %s %d, which %s appended before it: a transaction's appends take effect together and in its order.",
						txnName(src), k, fmtList(order), v, where, e, txnName(wt))})
				return
			}
		}
	}
}

// fullRead is the transaction's longest read of a list key: its external read followed by its own
// appends that it then read back. Internally inconsistent transactions fall back to the external read.
func (c *checker) fullRead(t *txn, s *keySum) []int64 {
	if t.st != stOK {
		return s.extList // an aborted transaction's own appends never took effect
	}
	for i := len(t.ops) - 1; i >= 0; i-- {
		m := t.ops[i]
		if m.Key == s.key && m.F == "r" && t.readsKnown {
			if len(m.Value.List) >= len(s.extList) {
				return m.Value.List
			}
			break
		}
	}
	return s.extList
}

// checkElement reports an element of a list read that no transaction appended (garbage) or that
// an aborted transaction appended (G1a).
func (c *checker) checkElement(reader *txn, k, v int64, read []int64) {
	w := c.writerOf(k, v)
	kk := k
	switch {
	case w < 0:
		c.add(Anomaly{Type: "garbage-read", Key: &kk, Txns: []int64{reader.id},
			Explanation: fmt.Sprintf("%s read key %d as %s, but no transaction appended %d to key %d.", txnName(reader), k, fmtList(read), v, k)})
	case c.h.txns[w].st == stFail && c.h.txns[w] != reader:
		c.add(Anomaly{Type: "G1a", Key: &kk, Txns: []int64{c.h.txns[w].id, reader.id},
			Explanation: fmt.Sprintf("%s read key %d as %s, which includes %d, appended by %s, which aborted (an aborted read).",
				txnName(reader), k, fmtList(read), v, txnName(c.h.txns[w]))})
	}
}

// readChecks looks at each external read's last value: an intermediate version (G1b), and for
// registers garbage and aborted reads; and collects register successors.
func (c *checker) readChecks() {
	h := c.h
	for i, t := range h.txns {
		for _, s := range t.keys {
			if !s.list && s.hasExt && len(s.writes) > 0 && t.st == stOK {
				rv := regVersion{k: s.key, v: s.extVal, isNil: s.extNil}
				if s.extNil {
					rv.v = 0
				}
				c.v.succ[rv] = append(c.v.succ[rv], int32(i))
			}
		}
		if !c.reader(t) {
			continue
		}
		for _, s := range t.keys {
			if !s.hasExt {
				continue
			}
			kk := s.key
			var v int64
			if s.list {
				if len(s.extList) == 0 {
					continue
				}
				v = s.extList[len(s.extList)-1]
			} else {
				if s.extNil {
					continue
				}
				v = s.extVal
			}
			w := c.writerOf(s.key, v)
			if w < 0 {
				if !s.list {
					c.add(Anomaly{Type: "garbage-read", Key: &kk, Txns: []int64{t.id},
						Explanation: fmt.Sprintf("%s read key %d = %d, but no transaction wrote %d to key %d.", txnName(t), s.key, v, v, s.key)})
				}
				continue
			}
			wt := h.txns[w]
			if wt == t {
				continue
			}
			if !s.list && wt.st == stFail {
				c.add(Anomaly{Type: "G1a", Key: &kk, Txns: []int64{wt.id, t.id},
					Explanation: fmt.Sprintf("%s read key %d = %d, written by %s, which aborted (an aborted read).", txnName(t), s.key, v, txnName(wt))})
				continue
			}
			if ws := wt.sum(s.key); ws.final() != v {
				verb, read := "wrote", fmt.Sprintf("= %d", v)
				if s.list {
					verb, read = "appended", "as "+fmtList(s.extList)
				}
				c.add(Anomaly{Type: "G1b", Key: &kk, Txns: []int64{wt.id, t.id},
					Explanation: fmt.Sprintf("%s read key %d %s, an intermediate version: %s %s %d and then %s %d to key %d (an intermediate read).",
						txnName(t), s.key, read, txnName(wt), verb, v, verb, ws.final(), s.key)})
			}
		}
	}
}

// lostUpdates reports committed transactions that read the same version of a key and both wrote
// it: one of the writes was lost (Elle's lost-update; forbidden by SI and PSI as well).
func (c *checker) lostUpdates() {
	type slot struct {
		k     int64
		n     int // list: prefix length
		v     int64
		isNil bool
	}
	groups := map[slot][]int32{}
	var order []slot
	for i, t := range c.h.txns {
		if t.st != stOK || !t.readsKnown {
			continue
		}
		for _, s := range t.keys {
			if !s.hasExt || len(s.writes) == 0 || s.incompatible {
				continue
			}
			x := slot{k: s.key, n: -1}
			if s.list {
				x.n = len(s.extList)
			} else {
				x.v, x.isNil = s.extVal, s.extNil
				if s.extNil {
					x.v = 0
				}
			}
			if _, ok := groups[x]; !ok {
				order = append(order, x)
			}
			groups[x] = append(groups[x], int32(i))
		}
	}
	for _, x := range order {
		g := groups[x]
		if len(g) < 2 {
			continue
		}
		kk := x.k
		var ids []int64
		var names []string
		for _, i := range g {
			ids = append(ids, c.h.txns[i].id)
			names = append(names, txnName(c.h.txns[i]))
		}
		s := c.h.txns[g[0]].sum(x.k)
		read := "= " + fmtReg(s.extVal, s.extNil)
		if s.list {
			read = "as " + fmtList(s.extList)
		}
		c.add(Anomaly{Type: "lost-update", Key: &kk, Txns: ids,
			Explanation: fmt.Sprintf("%s all read key %d %s and all wrote key %d and committed: each overwrote a version the others also based their write on, so some update was lost.",
				joinAnd(names), x.k, read, x.k)})
	}
}

// fracturedReads reports a transaction that saw some of another's writes but missed others on keys
// it also read (Bailis et al.'s read atomicity; wren.md §6.2 item 2).
func (c *checker) fracturedReads() {
	h := c.h
	for _, t := range h.txns {
		if t.st != stOK || !t.readsKnown {
			continue
		}
		// The writers T observed, and through which key.
		type src struct {
			w   int32
			key int64
			v   int64
		}
		var srcs []src
		seen := map[int32]bool{}
		for _, s := range t.keys {
			if s.incompatible {
				continue
			}
			for _, v := range s.externalValues() {
				if w := c.writerOf(s.key, v); c.visibleWriter(w) && h.txns[w] != t && !seen[w] {
					seen[w] = true
					srcs = append(srcs, src{w, s.key, v})
				}
			}
		}
		sort.Slice(srcs, func(i, j int) bool { return srcs[i].w < srcs[j].w })
		for _, x := range srcs {
			wt := h.txns[x.w]
			for _, ws := range wt.keys {
				if len(ws.writes) == 0 || ws.key == x.key {
					continue
				}
				s := t.sum(ws.key)
				if s == nil || !s.hasExt || s.incompatible {
					continue
				}
				missed := false
				if s.list {
					p, ok := c.v.pos[kv{ws.key, ws.final()}]
					missed = (ok && int(p) >= len(s.extList)) || (!ok && c.committed(x.w))
				} else if s.extNil {
					missed = true
				} else if s.extVal != ws.final() {
					missed = ws.hasExt && !ws.extNil && ws.extVal == s.extVal
				}
				if !missed {
					continue
				}
				kk := ws.key
				saw := fmt.Sprintf("read key %d = %d", x.key, x.v)
				missedRead := fmt.Sprintf("read key %d = %s", ws.key, fmtReg(s.extVal, s.extNil))
				verb := "write of"
				if s.list {
					saw = fmt.Sprintf("read key %d as %s", x.key, fmtList(t.sum(x.key).extList))
					missedRead = fmt.Sprintf("read key %d as %s", ws.key, fmtList(s.extList))
					verb = "append of"
				}
				c.add(Anomaly{Type: "fractured-read", Key: &kk, Txns: []int64{wt.id, t.id},
					Explanation: fmt.Sprintf("%s %s, seeing %s's %s %d, but %s, missing %s's %s %d to key %d: it saw only part of %s's writes.",
						txnName(t), saw, txnName(wt), verb, x.v, missedRead, txnName(wt), verb, ws.final(), ws.key, txnName(wt)),
					Cycle: []Edge{
						{From: wt.id, To: t.id, Type: "wr", Key: ptr(x.key), Explanation: fmt.Sprintf("%s %s, written by %s", txnName(t), saw, txnName(wt))},
						{From: t.id, To: wt.id, Type: "rw", Key: &kk, Explanation: fmt.Sprintf("%s %s, before %s's %s %d", txnName(t), missedRead, txnName(wt), verb, ws.final())},
					}})
				break
			}
		}
	}
}

// buildGraph derives the model's dependency graph.
func (c *checker) buildGraph() *graph {
	h := c.h
	b := &graphBuilder{nTxn: len(h.txns), n: len(h.txns)}
	want := c.m.kinds
	// ww and wr/rw for list keys.
	if want&kWW != 0 {
		keys := make([]int64, 0, len(c.v.order))
		for k := range c.v.order {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			prev, prevV := int32(-1), int64(0)
			for _, v := range c.v.order[k] {
				w := c.writerOf(k, v)
				if !c.visibleWriter(w) {
					continue
				}
				if prev >= 0 && w != prev {
					b.add(edge{from: prev, to: w, kind: kWW, key: k, v1: prevV, v2: v})
				}
				prev, prevV = w, v
			}
			if prev >= 0 {
				for _, u := range c.v.unobserved[k] {
					if u != prev {
						b.add(edge{from: prev, to: u, kind: kWW, key: k, v1: prevV, v2: h.txns[u].sum(k).final(), later: true})
					}
				}
			}
		}
	}
	nilEdges := 0 // rw edges from reads of nil registers to the keys' writers, up to maxNilEdges
	for i, t := range h.txns {
		if !c.reader(t) || !c.inGraph(t) {
			continue
		}
		ti := int32(i)
		for _, s := range t.keys {
			if !s.hasExt || s.incompatible {
				continue
			}
			if s.list {
				order := c.v.order[s.key]
				n := len(s.extList)
				if n > 0 && c.m.wrFromEveryAppend {
					// Each append the read shows is one the reader observed: under causal
					// consistency its writer is in the reader's causal past, and ww edges, which
					// would reach it from the last one's writer, are not part of that past.
					from := map[int32]bool{}
					for _, v := range s.extList {
						if w := c.writerOf(s.key, v); c.visibleWriter(w) && w != ti && !from[w] {
							from[w] = true
							b.add(edge{from: w, to: ti, kind: kWR, key: s.key, v1: v})
						}
					}
				} else if n > 0 {
					last := s.extList[n-1]
					if w := c.writerOf(s.key, last); c.visibleWriter(w) && w != ti {
						b.add(edge{from: w, to: ti, kind: kWR, key: s.key, v1: last})
					}
				}
				if n < len(order) {
					if w := c.writerOf(s.key, order[n]); c.visibleWriter(w) && w != ti {
						e := edge{from: ti, to: w, kind: kRW, key: s.key, v2: order[n], nil1: n == 0}
						if n > 0 {
							e.v1 = s.extList[n-1]
						}
						b.add(e)
					}
				} else {
					for _, u := range c.v.unobserved[s.key] {
						if u != ti {
							b.add(edge{from: ti, to: u, kind: kRW, key: s.key, v2: h.txns[u].sum(s.key).final(), nil1: n == 0, later: true})
						}
					}
				}
				continue
			}
			if !s.extNil {
				if w := c.writerOf(s.key, s.extVal); c.visibleWriter(w) && w != ti {
					b.add(edge{from: w, to: ti, kind: kWR, key: s.key, v1: s.extVal})
					if len(s.writes) > 0 && t.st == stOK {
						b.add(edge{from: w, to: ti, kind: kWW, key: s.key, v1: s.extVal, v2: s.final()})
					}
				}
			}
			rv := regVersion{k: s.key, v: s.extVal, isNil: s.extNil}
			if s.extNil {
				rv.v = 0
			}
			succ := c.v.succ[rv]
			if s.extNil {
				// Every committed write follows the initial version; bounded so a hot key cannot
				// make the graph quadratic.
				if ws := c.v.regWriters[s.key]; len(ws) <= maxNilSuccessors || nilEdges+len(ws) <= maxNilEdges {
					succ = ws
					nilEdges += len(ws)
				} else {
					// Real-time order reaches the later writers from the first ones
					// (realtimeSuccessors) where the model has it for this key; elsewhere the
					// edges left out could hide a cycle, and the history cannot be called valid
					// (65 blind writers hid a G-single from serializable: review).
					if c.m.kinds&kRT == 0 || c.m.regionRT && !c.hasRegion(s.key) {
						c.edgesDropped = true
					}
					if !c.nilCapped {
						c.nilCapped = true
						c.notes = append(c.notes, fmt.Sprintf("register key %d has %d writers; reads of nil were linked only to writers that read nil first and to the first writers in real time", s.key, len(ws)))
					}
				}
			}
			for _, u := range succ {
				if u != ti {
					b.add(edge{from: ti, to: u, kind: kRW, key: s.key, v1: s.extVal, nil1: s.extNil, v2: h.txns[u].sum(s.key).final()})
				}
			}
			for _, u := range c.realtimeSuccessors(s.key, s.extVal, s.extNil) {
				if u != ti && !slices.Contains(succ, u) {
					b.add(edge{from: ti, to: u, kind: kRW, key: s.key, v1: s.extVal, nil1: s.extNil, v2: h.txns[u].sum(s.key).final(), later: true})
				}
			}
		}
	}
	var nodes []int32
	for i, t := range h.txns {
		if c.inGraph(t) {
			nodes = append(nodes, int32(i))
		}
	}
	if want&kPO != 0 {
		// Session order runs from a process's last completed transaction: one with an unknown
		// outcome may still be running when the process (reused, in a hand-written history;
		// Meridian's drivers give it a new id) invokes the next.
		lastOK := map[int]int32{}
		for _, i := range nodes {
			p := h.txns[i].process
			if j, ok := lastOK[p]; ok {
				b.add(edge{from: j, to: i, kind: kPO, key: int64(p)})
			}
			if h.txns[i].st == stOK {
				lastOK[p] = i
			}
		}
	}
	if want&kRT != 0 {
		switch {
		case c.m.keyRT:
			c.keyRealtime(b, nodes)
		case c.m.regionRT:
			c.regionRealtime(b, nodes)
		default:
			b.addRealtime(h.txns, nodes, -1)
		}
	}
	return b.finish()
}

// keyRealtime adds, per key, real-time order from the transactions that wrote it to all that
// later read or wrote it, and from all that touched it to those that later wrote it: two
// chains, so that two reads of the key stay unordered.
func (c *checker) keyRealtime(b *graphBuilder, nodes []int32) {
	h := c.h
	accessors, writers := map[int64][]int32{}, map[int64][]int32{}
	for _, i := range nodes {
		for _, s := range h.txns[i].keys {
			accessors[s.key] = append(accessors[s.key], i)
			if len(s.writes) > 0 {
				writers[s.key] = append(writers[s.key], i)
			}
		}
	}
	keys := make([]int64, 0, len(accessors))
	for k := range accessors {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if len(writers[k]) == 0 {
			continue // reads alone are not ordered
		}
		b.addRealtimeFrom(h.txns, writers[k], accessors[k], k)
		b.addRealtimeFrom(h.txns, accessors[k], writers[k], k)
	}
}

// regionRealtime adds one real-time chain per region over the transactions relevant to it: those
// that read or wrote a key of that region (notes/rls.md §1.2, 𝒢_T).
func (c *checker) regionRealtime(b *graphBuilder, nodes []int32) {
	h := c.h
	members := map[int][]int32{}
	fallback := 0
	for _, i := range nodes {
		t := h.txns[i]
		var regs []int
		for _, s := range t.keys {
			r, ok := h.keyRegions[s.key]
			if !ok {
				r = t.region
				fallback++
			}
			if !slices.Contains(regs, r) {
				regs = append(regs, r)
			}
		}
		for _, r := range regs {
			members[r] = append(members[r], i)
		}
	}
	switch {
	case h.keyRegions == nil:
		c.notes = append(c.notes, "the history names no key regions (no meta line with key_regions); each transaction's region was taken to be its client's region")
	case fallback > 0:
		c.notes = append(c.notes, fmt.Sprintf("%d key accesses were to keys without a region in key_regions; the client's region was used for them", fallback))
	}
	regs := make([]int, 0, len(members))
	for r := range members {
		regs = append(regs, r)
	}
	slices.Sort(regs)
	for _, r := range regs {
		b.addRealtime(h.txns, members[r], int64(r))
	}
}

// hasRegion reports whether the history gives key k's region.
func (c *checker) hasRegion(k int64) bool {
	_, ok := c.h.keyRegions[k]
	return ok
}

// maxNilSuccessors is how many rw edges one read of a nil register always gets; more (one to
// every writer of the key) come out of a history-wide budget, maxNilEdges. Reads of nil are few
// (a key is nil until its first write), so the budget covers every writer of a hot key in the
// runs of a few minutes that a history checker sees; past it, a read gets edges to the writers
// that read nil first and, under real-time order, to the first writers in real time.
const maxNilSuccessors = 64

var maxNilEdges = 2_000_000 // a variable for tests

// realtimeSuccessors returns, under a model that orders transactions in real time, the committed
// writers of register key k that real time places right after the version read (v, or the
// initial version if isNil): those invoked after its writer completed and not after another such
// writer completed. Blind writes reveal no version order by themselves, but a writer that
// completed before another was invoked wrote the earlier version, so a read of it precedes the
// later writer; without this a stale read of a blindly written register passed. The later
// writers are reached from these by real-time edges, which keeps the edges per read to the
// writers concurrent with the first successor.
func (c *checker) realtimeSuccessors(k, v int64, isNil bool) []int32 {
	if c.m.kinds&kRT == 0 {
		return nil
	}
	if c.m.regionRT && !c.hasRegion(k) {
		// Without the key's region its writers need not share a real-time chain.
		return nil
	}
	after := int64(math.MinInt64)
	if !isNil {
		w := c.writerOf(k, v)
		if !c.visibleWriter(w) || c.h.txns[w].sum(k).final() != v {
			return nil // a garbage, aborted or intermediate read, reported already
		}
		after = c.h.txns[w].completeTime
	}
	tl := c.timeline(k)
	i := sort.Search(len(tl.ws), func(x int) bool { return c.h.txns[tl.ws[x]].invokeTime > after })
	if i == len(tl.ws) {
		return nil
	}
	j := i
	for j < len(tl.ws) && c.h.txns[tl.ws[j]].invokeTime <= tl.minEnd[i] {
		j++
	}
	if j-i > maxNilSuccessors {
		j = i + maxNilSuccessors
		c.edgesDropped = true // the writers left out are concurrent with the first: nothing reaches them
		if !c.rtCapped {
			c.rtCapped = true
			c.notes = append(c.notes, fmt.Sprintf("register key %d has over %d concurrent writers; reads were linked only to some of them", k, maxNilSuccessors))
		}
	}
	return tl.ws[i:j]
}

// regTimeline is a register key's committed writers by invocation time, with minEnd[i] the
// earliest completion among ws[i:].
type regTimeline struct {
	ws     []int32
	minEnd []int64
}

func (c *checker) timeline(k int64) *regTimeline {
	if tl, ok := c.timelines[k]; ok {
		return tl
	}
	tl := &regTimeline{ws: slices.Clone(c.v.regWriters[k])}
	sort.SliceStable(tl.ws, func(a, b int) bool { return c.h.txns[tl.ws[a]].invokeTime < c.h.txns[tl.ws[b]].invokeTime })
	tl.minEnd = make([]int64, len(tl.ws)+1)
	tl.minEnd[len(tl.ws)] = neverCompleted
	for x := len(tl.ws) - 1; x >= 0; x-- {
		tl.minEnd[x] = min(tl.minEnd[x+1], c.h.txns[tl.ws[x]].completeTime)
	}
	if c.timelines == nil {
		c.timelines = map[int64]*regTimeline{}
	}
	c.timelines[k] = tl
	return tl
}

// externalValues lists the values s read from other transactions: its list's elements, or its
// register's value (none when it read nil or nothing outside the transaction).
func (s *keySum) externalValues() []int64 {
	switch {
	case !s.hasExt:
		return nil
	case s.list:
		return s.extList
	case s.extNil:
		return nil
	}
	return []int64{s.extVal}
}

func isPrefix(a, b []int64) bool { return len(a) <= len(b) && equal(a, b[:len(a)]) }

func ptr(k int64) *int64 { return &k }

func uniqIDs(a, b *txn) []int64 {
	if a == b {
		return []int64{a.id}
	}
	return []int64{a.id, b.id}
}
