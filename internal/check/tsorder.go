package check

import (
	"fmt"
	"sort"
)

// Timestamp order. Meridian's protocols (K2, Spanner, CockroachDB) serialize committed
// transactions by the commit timestamps they report, a promise stronger than any model the
// checker knows: a history may be serializable while its timestamps contradict its dependencies,
// and the protocol is broken all the same (notes/k2.md §6.2 tests 2 and 4). A history whose meta
// line declares it (history.Op.TimestampOrder) is held to it, for the committed transactions
// whose completions carry a timestamp (timestamp-order):
//   - a ww dependency runs to a higher timestamp: a key has one version per timestamp;
//   - an rw dependency too: a version written at or below a read's timestamp is one the read
//     must see;
//   - a wr dependency runs to the same timestamp or a higher one: a read at t sees versions at
//     t. Two transactions may share a timestamp (CockroachDB pushes several above one read), and
//     a reader at t may see a writer at t; K2 hands out unique ones, but uniqueness is not the
//     order, and two that each saw the other's writes make a cycle the model's search reports.
//   - Under a model with a global real-time order (strict-serializable, opacity), a transaction
//     that wrote and completed before another that wrote was invoked has the lower timestamp
//     (timestamp-realtime): Spanner's external consistency, which K2's commit wait gives too.
//     Read-only transactions are left out: a snapshot read at a timestamp above true time may
//     end before a later one picks a lower timestamp, and neither changes what the other sees.
//     A per-key or per-region real-time order promises less, and is not held to this.
//   - Under such a model, where the meta line also declares the times true time in the
//     timestamps' frame (history.Op.TrueTime: the simulator's histories), a writer's timestamp
//     lies within its lifetime, invocation < timestamp < completion (timestamp-lifetime): K2's
//     Property 4.1, and Spanner's commit-wait rule. It shows a skipped commit wait on every
//     run, where real-time order needs a later writer that happens to pick a lower timestamp.

// commitTS is a commit timestamp (history.Op.CommitTS), ordered as ts.Timestamp.
type commitTS struct {
	wall            int64
	logical, origin uint32
}

func (a commitTS) less(b commitTS) bool {
	if a.wall != b.wall {
		return a.wall < b.wall
	}
	if a.logical != b.logical {
		return a.logical < b.logical
	}
	return a.origin < b.origin
}

func (a commitTS) String() string { return fmt.Sprintf("%d.%d@%d", a.wall, a.logical, a.origin) }

// stamped reports whether transaction i is held to its timestamp.
func (c *checker) stamped(i int32) bool {
	t := c.h.txns[i]
	return t.st == stOK && t.hasTS
}

func (c *checker) tsOrder() {
	if !c.h.tsOrder {
		return
	}
	for i := range c.h.txns {
		if c.stamped(int32(i)) {
			c.timestamped++
		}
	}
	c.dependenciesInTimestampOrder()
	if c.m.order == kRT && !c.m.regionRT && !c.m.keyRT && !c.h.untimed {
		c.realtimeInTimestampOrder()
		if c.h.trueTime {
			c.timestampsWithinLifetimes()
		}
	}
}

func wrote(t *txn) bool {
	for _, k := range t.keys {
		if len(k.writes) > 0 {
			return true
		}
	}
	return false
}

func (c *checker) dependenciesInTimestampOrder() {
	if c.g == nil {
		return
	}
	for _, e := range c.g.edges {
		if e.kind&(kWW|kWR|kRW) == 0 || int(e.from) >= c.g.nTxn || int(e.to) >= c.g.nTxn || !c.stamped(e.from) || !c.stamped(e.to) {
			continue
		}
		from, to := c.h.txns[e.from], c.h.txns[e.to]
		if from.ts.less(to.ts) || e.kind == kWR && from.ts == to.ts {
			continue
		}
		want := "lower"
		if e.kind != kWR {
			want = "strictly lower"
		}
		key := e.key
		c.add(Anomaly{Type: "timestamp-order", Txns: []int64{from.id, to.id}, Key: &key,
			Explanation: fmt.Sprintf("T%d (timestamp %v) precedes T%d (timestamp %v) by %s on key %d, but its timestamp is not the %s", from.id, from.ts, to.id, to.ts, e.kind, e.key, want)})
	}
}

// realtimeInTimestampOrder finds, for each transaction that wrote, the highest timestamp among
// the writers that completed before it was invoked; it must be below the transaction's own.
func (c *checker) realtimeInTimestampOrder() {
	var byEnd, byStart []int32
	for i, t := range c.h.txns {
		if c.stamped(int32(i)) && wrote(t) {
			byEnd = append(byEnd, int32(i))
			byStart = append(byStart, int32(i))
		}
	}
	txns := c.h.txns
	sort.SliceStable(byEnd, func(a, b int) bool { return txns[byEnd[a]].completeTime < txns[byEnd[b]].completeTime })
	sort.SliceStable(byStart, func(a, b int) bool { return txns[byStart[a]].invokeTime < txns[byStart[b]].invokeTime })
	best := int32(-1) // the highest timestamp among those completed so far
	j := 0
	for _, i := range byStart {
		t := txns[i]
		for j < len(byEnd) && txns[byEnd[j]].completeTime < t.invokeTime {
			if e := byEnd[j]; best < 0 || txns[best].ts.less(txns[e].ts) {
				best = e
			}
			j++
		}
		if best >= 0 && !txns[best].ts.less(t.ts) {
			p := txns[best]
			c.add(Anomaly{Type: "timestamp-realtime", Txns: []int64{p.id, t.id},
				Explanation: fmt.Sprintf("T%d completed (at %d) before T%d was invoked (at %d), but its timestamp %v is not below T%d's %v", p.id, p.completeTime, t.id, t.invokeTime, p.ts, t.id, t.ts)})
		}
	}
}

// timestampsWithinLifetimes reports the writers whose timestamp is not strictly between their
// invocation and completion times.
func (c *checker) timestampsWithinLifetimes() {
	for i, t := range c.h.txns {
		if !c.stamped(int32(i)) || !wrote(t) || t.invokeTime < t.ts.wall && t.ts.wall < t.completeTime {
			continue
		}
		c.add(Anomaly{Type: "timestamp-lifetime", Txns: []int64{t.id},
			Explanation: fmt.Sprintf("T%d ran from %d to %d in true time, but its timestamp %v is not within that", t.id, t.invokeTime, t.completeTime, t.ts)})
	}
}
