package check

import (
	"fmt"
	"strconv"
	"strings"
)

// step is one edge of a reported cycle, with real-time barrier chains collapsed into a single
// transaction-to-transaction edge.
type step struct {
	from, to int32
	e        *edge
}

// explainCycle turns a cycle of graph edges into an anomaly. A causal-pattern cycle ends with its
// rw edge; it is rotated to start there, which is how the violation reads.
func (c *checker) explainCycle(path []int32, causal bool) Anomaly {
	g := c.g
	var steps []step
	for i := 0; i < len(path); i++ {
		e := &g.edges[path[i]]
		from := e.from
		for int(e.to) >= g.nTxn && i+1 < len(path) {
			i++
			e2 := &g.edges[path[i]]
			if e2.kind != kRT {
				break
			}
			e = &edge{from: from, to: e2.to, kind: kRT, key: e.key}
		}
		steps = append(steps, step{from: from, to: e.to, e: e})
	}
	if causal && len(steps) > 1 {
		steps = append([]step{steps[len(steps)-1]}, steps[:len(steps)-1]...)
	}
	rw, adjacent, hasRT, hasPO, allWW, aborted := 0, false, false, false, true, false
	for i, s := range steps {
		switch s.e.kind {
		case kRW:
			rw++
			if steps[(i+1)%len(steps)].e.kind == kRW {
				adjacent = true
			}
		case kRT:
			hasRT = true
		case kPO:
			hasPO = true
		}
		if s.e.kind != kWW {
			allWW = false
		}
		if c.h.txns[s.from].st == stFail {
			aborted = true
		}
	}
	var typ string
	switch {
	case causal && fracturedShape(steps):
		typ = "fractured-read"
	case causal:
		typ = "causality-violation"
	case rw == 0 && allWW:
		typ = "G0"
	case rw == 0:
		typ = "G1c"
	case rw == 1:
		typ = "G-single"
	case adjacent:
		typ = "G2-item"
	default:
		typ = "G-nonadjacent"
	}
	if !causal {
		if hasPO {
			typ += "-process"
		}
		if hasRT {
			typ += "-realtime"
		}
		if aborted {
			typ += "-aborted-reader"
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d transactions form a cycle, so no order of them satisfies %s.\n", describe(typ), len(steps), c.m.name)
	b.WriteString("Let\n")
	for _, s := range steps {
		t := c.h.txns[s.from]
		if c.h.untimed {
			fmt.Fprintf(&b, "  %s = process %d, region %d, %s\n", txnName(t), t.process, t.region, t.st)
		} else {
			fmt.Fprintf(&b, "  %s = process %d, region %d, %s, invoked at %d%s\n", txnName(t), t.process, t.region, t.st, t.invokeTime, completedAt(t))
		}
	}
	b.WriteString("Then")
	var edges []Edge
	for _, s := range steps {
		e := Edge{From: c.h.txns[s.from].id, To: c.h.txns[s.to].id, Type: s.e.kind.String(), Explanation: c.explainEdge(s)}
		if s.e.kind&(kWW|kWR|kRW) != 0 {
			e.Key = ptr(s.e.key)
		}
		edges = append(edges, e)
		fmt.Fprintf(&b, "\n  %s < %s (%s): %s", txnName(c.h.txns[s.from]), txnName(c.h.txns[s.to]), e.Type, e.Explanation)
	}
	var ids []int64
	for _, s := range steps {
		ids = append(ids, c.h.txns[s.from].id)
	}
	return Anomaly{Type: typ, Explanation: b.String(), Cycle: edges, Txns: ids}
}

// fracturedShape: rw on x, ww on x, then a single wr edge — the reader saw one of the writer's
// versions but an older version of x, which the writer also wrote.
func fracturedShape(steps []step) bool {
	n := len(steps)
	if n < 2 || steps[0].e.kind != kRW || steps[n-1].e.kind != kWR {
		return false
	}
	for _, s := range steps[1 : n-1] {
		if s.e.kind != kWW || s.e.key != steps[0].e.key {
			return false
		}
	}
	return true
}

func describe(typ string) string {
	base := typ
	for _, suf := range []string{"-aborted-reader", "-realtime", "-process"} {
		base = strings.TrimSuffix(base, suf)
	}
	d := map[string]string{
		"G0":                  "G0 (write cycle)",
		"G1c":                 "G1c (circular information flow)",
		"G-single":            "G-single (read skew: a cycle with one anti-dependency)",
		"G2-item":             "G2-item (write skew: a cycle of anti-dependencies)",
		"G-nonadjacent":       "G-nonadjacent (a cycle whose anti-dependencies are never adjacent, e.g. long fork)",
		"causality-violation": "causality violation (an effect seen without its cause)",
		"fractured-read":      "fractured read (part of a transaction's writes seen)",
	}[base]
	if d == "" {
		d = base
	}
	if strings.Contains(typ, "-process") {
		d += " with process order"
	}
	if strings.Contains(typ, "-realtime") {
		d += " with real-time order"
	}
	if strings.Contains(typ, "-aborted-reader") {
		d += ", through the reads of an aborted transaction"
	}
	return d
}

func (c *checker) explainEdge(s step) string {
	h := c.h
	a, b := h.txns[s.from], h.txns[s.to]
	e := s.e
	list := h.listKey[e.key]
	switch e.kind {
	case kWW:
		if list && e.later {
			return fmt.Sprintf("%s appended %d to key %d, and %s appended %d, which no read shows, so it comes later", txnName(a), e.v1, e.key, txnName(b), e.v2)
		}
		if list {
			return fmt.Sprintf("%s appended %d to key %d and %s appended %d right after it", txnName(a), e.v1, e.key, txnName(b), e.v2)
		}
		return fmt.Sprintf("%s wrote key %d = %d and %s read that version and overwrote it with %d", txnName(a), e.key, e.v1, txnName(b), e.v2)
	case kWR:
		if list {
			return fmt.Sprintf("%s read key %d as %s, seeing %s's append of %d", txnName(b), e.key, fmtList(b.sum(e.key).extList), txnName(a), e.v1)
		}
		return fmt.Sprintf("%s read key %d = %d, written by %s", txnName(b), e.key, e.v1, txnName(a))
	case kRW:
		if list && e.later {
			return fmt.Sprintf("%s read key %d as %s, and %s committed an append of %d to it, which no read shows, so it comes after that version", txnName(a), e.key, fmtList(a.sum(e.key).extList), txnName(b), e.v2)
		}
		if list {
			return fmt.Sprintf("%s read key %d as %s, and %s appended %d right after that version", txnName(a), e.key, fmtList(a.sum(e.key).extList), txnName(b), e.v2)
		}
		if e.later && !e.nil1 {
			return fmt.Sprintf("%s read key %d = %d, and %s, invoked after that version's writer completed, overwrote it with %d", txnName(a), e.key, e.v1, txnName(b), e.v2)
		}
		return fmt.Sprintf("%s read key %d = %s, and %s overwrote that version with %d", txnName(a), e.key, fmtReg(e.v1, e.nil1), txnName(b), e.v2)
	case kPO:
		return fmt.Sprintf("%s and %s ran in that order on process %d", txnName(a), txnName(b), a.process)
	case kRT:
		why := fmt.Sprintf("%s completed at %d, before %s was invoked at %d", txnName(a), a.completeTime, txnName(b), b.invokeTime)
		switch {
		case c.m.keyRT:
			why += fmt.Sprintf(", and both touch key %d", e.key)
		case e.key >= 0:
			why += fmt.Sprintf(", and both touch region %d", e.key)
		}
		// A stale read: b read a key a wrote (under per-key real time, the edge's key).
		for _, s := range a.keys {
			if c.m.keyRT && s.key != e.key {
				continue
			}
			if len(s.writes) > 0 && a.st != stFail {
				if bs := b.sum(s.key); bs != nil && bs.hasExt {
					why += fmt.Sprintf(" (a stale read: %s should see %s's write of key %d)", txnName(b), txnName(a), s.key)
					break
				}
			}
		}
		return why
	}
	return "?"
}

func txnName(t *txn) string { return "T" + strconv.FormatInt(t.id, 10) }

func completedAt(t *txn) string {
	if t.completeTime == neverCompleted {
		return ", never completed"
	}
	return fmt.Sprintf(", completed at %d", t.completeTime)
}

// fmtList shows a list read, eliding the middle of long ones.
func fmtList(l []int64) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, v := range l {
		if len(l) > 8 && i == 3 {
			fmt.Fprintf(&b, " … (%d more)", len(l)-6)
		}
		if len(l) > 8 && i >= 3 && i < len(l)-3 {
			continue
		}
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(strconv.FormatInt(v, 10))
	}
	b.WriteByte(']')
	return b.String()
}

func fmtReg(v int64, isNil bool) string {
	if isNil {
		return "nil"
	}
	return strconv.FormatInt(v, 10)
}

func joinAnd(names []string) string {
	if len(names) <= 1 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}
