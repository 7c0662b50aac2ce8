package check

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"

	"github.com/meridiandb/meridian/internal/history"
)

// Transaction outcomes.
type status uint8

const (
	stOK status = iota
	stFail
	stInfo
)

func (s status) String() string {
	switch s {
	case stOK:
		return "ok"
	case stFail:
		return "aborted"
	default:
		return "outcome unknown"
	}
}

// neverCompleted is the completion time of an info (or never-completed) transaction: it may take
// effect at any later time, so nothing is real-time after it.
const neverCompleted = math.MaxInt64

// txn is one transaction: an invocation and its completion.
type txn struct {
	id           int64 // index of the invoke line
	process      int
	region       int
	st           status
	invokeTime   int64
	completeTime int64
	// readsKnown is false when the completion does not carry read results (info, or a fail
	// without values).
	readsKnown bool
	ops        []history.MicroOp
	keys       []keySum
	// ts is the commit timestamp an ok completion carried (hasTS), see tsorder.go.
	ts    commitTS
	hasTS bool
}

// keySum is what one transaction did to one key, the unit edges are inferred from.
type keySum struct {
	key  int64
	list bool
	// hasExt is set when the transaction observed the key's committed state: its first read,
	// with the transaction's own earlier appends removed (registers: a read before any own write).
	hasExt bool
	// extList is the external read of a list key; extVal/extNil that of a register.
	extList []int64
	extVal  int64
	extNil  bool
	// writes are the values appended or written, in order.
	writes []int64
	// incompatible marks a list read that is not a prefix of the key's version order.
	incompatible bool
}

func (t *txn) sum(key int64) *keySum {
	for i := range t.keys {
		if t.keys[i].key == key {
			return &t.keys[i]
		}
	}
	return nil
}

// final is the last value the transaction wrote to the key.
func (s *keySum) final() int64 { return s.writes[len(s.writes)-1] }

// hist is a history assembled into transactions.
type hist struct {
	txns              []*txn
	nOK, nFail, nInfo int
	// nReads counts external reads by committed transactions: with none, nothing can be inferred.
	nReads     int
	keyRegions map[int64]int
	listKey    map[int64]bool // key → is a list (absent: register or unknown)
	// untimed marks a history none of whose operations carries a time: it has no real-time
	// order, and every invocation and completion time is 0.
	untimed bool
	// tsOrder: a meta line declared that commit timestamps order the transactions.
	tsOrder bool
	// trueTime: a meta line declared the times true time in the timestamps' frame.
	trueTime bool
	notes    []string
	// internal collects internal-consistency violations found while assembling.
	internal []Anomaly
	// internalFail marks which internal anomalies came from aborted transactions.
	internalFail []bool
}

// build pairs invocations with completions and summarises each transaction per key.
func build(ops []history.Op) (*hist, error) {
	h := &hist{listKey: map[int64]bool{}}
	// A missing time reads as 0: some operations without one would put their transactions
	// before every timed one in real time.
	var first *history.Op
	for i := range ops {
		op := &ops[i]
		if op.Type == history.Meta {
			continue
		}
		if first == nil {
			first, h.untimed = op, op.Untimed
			continue
		}
		if op.Untimed != h.untimed {
			what := `no "time", though line %d (index %d) has one`
			if h.untimed {
				what = `a "time", though line %d (index %d) has none`
			}
			return nil, fmt.Errorf("history line %d (index %d): "+what+"; either every operation carries a time or none does",
				op.Line, op.Index, first.Line, first.Index)
		}
	}
	pending := map[int]*txn{}
	kinds := map[int64]byte{} // 'l' list, 'r' register
	var prev *history.Op      // the last event before op
	for i := range ops {
		op := &ops[i]
		where := fmt.Sprintf("history op %d (index %d)", i+1, op.Index)
		if op.Line > 0 {
			where = fmt.Sprintf("history line %d (index %d)", op.Line, op.Index)
		}
		if op.Type != history.Meta {
			// Transactions are ordered by their invocations' indexes (session order among
			// them): events out of index order would put a process's transactions in another
			// order than the history's (review: a read-your-writes violation passed).
			switch {
			case prev != nil && op.Index == prev.Index:
				return nil, fmt.Errorf("%s: the previous event has index %d too: every event needs its own index", where, prev.Index)
			case prev != nil && op.Index < prev.Index:
				return nil, fmt.Errorf("%s: index below the previous event's (%d): events must be in index order", where, prev.Index)
			}
			prev = op
		}
		switch op.Type {
		case history.Meta:
			h.tsOrder = h.tsOrder || op.TimestampOrder
			h.trueTime = h.trueTime || op.TrueTime
			if op.KeyRegions != nil {
				if h.keyRegions == nil {
					h.keyRegions = map[int64]int{}
				}
				for ks, r := range op.KeyRegions {
					k, err := strconv.ParseInt(ks, 10, 64)
					if err != nil {
						return nil, fmt.Errorf("%s: key_regions key %q is not an integer", where, ks)
					}
					h.keyRegions[k] = r
				}
			}
			continue
		case history.Invoke:
			if p, ok := pending[op.Process]; ok {
				return nil, fmt.Errorf("%s: process %d invoked a transaction while its transaction %d was still running", where, op.Process, p.id)
			}
			pending[op.Process] = &txn{id: op.Index, process: op.Process, region: op.Region, st: stInfo,
				invokeTime: op.Time, completeTime: neverCompleted, ops: op.Value}
		case history.OK, history.Fail, history.Info:
			t, ok := pending[op.Process]
			if !ok {
				return nil, fmt.Errorf("%s: %s completion for process %d, which has no transaction running", where, op.Type, op.Process)
			}
			delete(pending, op.Process)
			if op.Type == history.OK {
				if err := restates(t.ops, op.Value); err != nil {
					return nil, fmt.Errorf("%s: %s completion of process %d does not restate its invocation (index %d): %w", where, op.Type, op.Process, t.id, err)
				}
			} else if err := drawnFrom(t.ops, op.Value); err != nil {
				return nil, fmt.Errorf("%s: %s completion of process %d records what its invocation (index %d) did not ask for: %w", where, op.Type, op.Process, t.id, err)
			}
			if op.Time < t.invokeTime {
				return nil, fmt.Errorf("%s: completion time %d is before its invocation time %d", where, op.Time, t.invokeTime)
			}
			switch op.Type {
			case history.OK:
				t.st, t.completeTime = stOK, op.Time
				if c := op.CommitTS; c != nil {
					t.ts, t.hasTS = commitTS{c.Wall, c.Logical, c.Origin}, true
				}
				t.readsKnown = true
				if len(op.Value) > 0 || len(t.ops) == 0 {
					t.ops = op.Value
				} else {
					t.readsKnown = false
				}
			case history.Fail:
				t.st, t.completeTime = stFail, op.Time
				if len(op.Value) > 0 {
					t.ops, t.readsKnown = op.Value, true
				}
			case history.Info:
				if len(op.Value) > 0 {
					t.ops = op.Value
				}
			}
			h.txns = append(h.txns, t)
		default:
			return nil, fmt.Errorf("%s: unknown type %q", where, op.Type)
		}
		for _, m := range op.Value {
			var kind byte
			switch {
			case m.F == history.FAppend:
				kind = 'l'
				if m.Value.Kind != history.Int {
					return nil, fmt.Errorf("%s: append to key %d needs an integer value", where, m.Key)
				}
			case m.F == history.FWrite:
				kind = 'r'
				if m.Value.Kind != history.Int {
					return nil, fmt.Errorf("%s: write to key %d needs an integer value", where, m.Key)
				}
			case m.Value.Kind == history.List:
				kind = 'l'
			case m.Value.Kind == history.Int:
				kind = 'r'
			default:
				continue
			}
			if prev, ok := kinds[m.Key]; ok && prev != kind {
				return nil, fmt.Errorf("%s: key %d is used both as a list (append) and as a register (w)", where, m.Key)
			}
			kinds[m.Key] = kind
		}
	}
	// A transaction still running when the history ends has an unknown outcome.
	procs := make([]int, 0, len(pending))
	for p := range pending {
		procs = append(procs, p)
	}
	sort.Ints(procs)
	for _, p := range procs {
		h.txns = append(h.txns, pending[p])
	}
	// Named by their invocations' indexes, which increase (checked above), so no two share one.
	sort.SliceStable(h.txns, func(i, j int) bool { return h.txns[i].id < h.txns[j].id })
	for k, v := range kinds {
		if v == 'l' {
			h.listKey[k] = true
		}
	}
	for _, t := range h.txns {
		switch t.st {
		case stOK:
			h.nOK++
		case stFail:
			h.nFail++
		default:
			h.nInfo++
		}
		h.summarise(t)
	}
	return h, nil
}

// restates checks that an ok completion's micro-ops are its invocation's with only read values
// changed. The function, key and written value are the client's request, which no database
// can alter: a completion that disagrees is a recording fault, not an anomaly, and judging
// either side alone (as Elle does, taking the completion) gave verdicts about a transaction
// that never ran, e.g. "unknown" for a read recorded back as an append. A fail or info
// completion is not checked: the transaction's effects are unknown or none, the checker reads
// nothing from it, and a workload may record there only what it performed, in its own order
// (the register and list bodies buffer writes to the end).
func restates(inv, comp []history.MicroOp) error {
	if len(comp) != len(inv) {
		return fmt.Errorf("it has %d micro-ops, the invocation %d", len(comp), len(inv))
	}
	for i := range comp {
		a, b := inv[i], comp[i]
		if a.F != b.F || a.Key != b.Key || (a.F != history.FRead && (a.Value.Kind != b.Value.Kind || a.Value.Int != b.Value.Int)) {
			ja, _ := a.MarshalJSON()
			jb, _ := b.MarshalJSON()
			return fmt.Errorf("micro-op %d is %s where the invocation asked for %s (only values read may differ)", i+1, jb, ja)
		}
	}
	return nil
}

// drawnFrom checks a fail or info completion's micro-ops against its invocation's: it may record
// what it performed in its own order, and only part of it, but each micro-op must be one the
// invocation asked for (a write with the value asked). A completion naming another write would
// make the checker take that write as possibly performed, and a read of it as no garbage read.
func drawnFrom(inv, comp []history.MicroOp) error {
	used := make([]bool, len(inv))
	for i, b := range comp {
		found := false
		for j, a := range inv {
			if !used[j] && a.F == b.F && a.Key == b.Key && (a.F == history.FRead || (a.Value.Kind == b.Value.Kind && a.Value.Int == b.Value.Int)) {
				used[j], found = true, true
				break
			}
		}
		if !found {
			jb, _ := b.MarshalJSON()
			return fmt.Errorf("micro-op %d, %s, is not among the invocation's", i+1, jb)
		}
	}
	return nil
}

// summarise fills t.keys and checks internal consistency: within a transaction a read must show
// the transaction's own earlier writes and agree with its earlier reads.
func (h *hist) summarise(t *txn) {
	type state struct {
		known bool // cur is the key's full value as the transaction sees it
		cur   []int64
		val   int64
		isNil bool
		own   []int64 // own appends since cur was last known
		wrote bool
	}
	states := make([]state, 0, len(t.ops))
	for _, m := range t.ops {
		ki := -1
		for i := range t.keys {
			if t.keys[i].key == m.Key {
				ki = i
				break
			}
		}
		if ki < 0 {
			t.keys = append(t.keys, keySum{key: m.Key, list: h.listKey[m.Key]})
			states = append(states, state{})
			ki = len(t.keys) - 1
		}
		s, st := &t.keys[ki], &states[ki]
		switch m.F {
		case history.FAppend:
			s.writes = append(s.writes, m.Value.Int)
			st.wrote = true
			if st.known {
				st.cur = append(st.cur, m.Value.Int)
			} else {
				st.own = append(st.own, m.Value.Int)
			}
		case history.FWrite:
			s.writes = append(s.writes, m.Value.Int)
			st.wrote, st.known, st.val, st.isNil = true, true, m.Value.Int, false
		case history.FRead:
			if !t.readsKnown {
				continue
			}
			if s.list {
				var l []int64
				if m.Value.Kind == history.List {
					l = m.Value.List
				}
				if st.known {
					if !equal(l, st.cur) {
						h.addInternal(t, m.Key, fmt.Sprintf("read key %d as %s, but its own earlier operations imply %s", m.Key, fmtList(l), fmtList(st.cur)))
					}
				} else {
					if !hasSuffix(l, st.own) {
						h.addInternal(t, m.Key, fmt.Sprintf("read key %d as %s, which does not end with its own appends %s", m.Key, fmtList(l), fmtList(st.own)))
					} else if !s.hasExt {
						s.hasExt, s.extList = true, l[:len(l)-len(st.own)]
					}
				}
				st.known, st.cur, st.own = true, append([]int64(nil), l...), nil
			} else {
				isNil := m.Value.Kind == history.None
				v := m.Value.Int
				if st.known {
					if isNil != st.isNil || (!isNil && v != st.val) {
						h.addInternal(t, m.Key, fmt.Sprintf("read key %d = %s, but its own earlier operations imply %s", m.Key, fmtReg(v, isNil), fmtReg(st.val, st.isNil)))
					}
				} else if !st.wrote {
					s.hasExt, s.extVal, s.extNil = true, v, isNil
				}
				st.known, st.val, st.isNil = true, v, isNil
			}
		}
	}
	// A read before the transaction's own write of a value cannot show that value: the
	// transaction wrote it only later (Elle's future read). Values are unique per key, so a
	// value it writes names it as the writer, and readChecks, which skips a transaction's own
	// values, passed such a read.
	for i := range t.keys {
		s := &t.keys[i]
		if !s.hasExt || len(s.writes) == 0 {
			continue
		}
		if s.list {
			for _, v := range s.extList {
				if slices.Contains(s.writes, v) {
					h.addInternal(t, s.key, fmt.Sprintf("read key %d as %s, which holds %d, a value it appends only later (a future read)", s.key, fmtList(s.extList), v))
					break
				}
			}
		} else if !s.extNil && slices.Contains(s.writes, s.extVal) {
			h.addInternal(t, s.key, fmt.Sprintf("read key %d = %d, a value it writes only later (a future read)", s.key, s.extVal))
		}
	}
	if t.st == stOK {
		for i := range t.keys {
			if t.keys[i].hasExt {
				h.nReads++
			}
		}
	}
}

func (h *hist) addInternal(t *txn, key int64, what string) {
	k := key
	h.internal = append(h.internal, Anomaly{
		Type:        "internal",
		Explanation: fmt.Sprintf("%s %s.", txnName(t), what),
		Txns:        []int64{t.id},
		Key:         &k,
	})
	h.internalFail = append(h.internalFail, t.st == stFail)
}

func equal(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func hasSuffix(l, suf []int64) bool {
	return len(l) >= len(suf) && equal(l[len(l)-len(suf):], suf)
}
