package spanner

import (
	"maps"
	"time"

	"github.com/meridiandb/meridian/internal/node"
	"github.com/meridiandb/meridian/internal/protocol"
	"github.com/meridiandb/meridian/internal/storage"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/ts"
	"github.com/meridiandb/meridian/internal/wire"
)

// Deadlock detection (lock-policy=detect): every conflict blocks, as K2's Fig. 7 describes
// d2PL ("blocks on all conflict types"), and deadlocks are found and broken after they form,
// which is what K2's Fig. 17d counts. Wound-wait and wait-die instead prevent them by aborting
// on conflict.
//
// One detector for the whole deployment (on the first data node) assembles the global wait-for
// graph from the participants' reports, the design TiDB uses for its pessimistic transactions.
// Each report is a participant's whole part of the graph, read from its lock table's queues
// (locks.Table.WaitsFor), sent whenever it changed and again every decision-timeout while it is
// not empty; the detector keeps only the newest report of each participant (by incarnation,
// then sequence number). Sending snapshots rather than wait/unwait events makes the graph
// exactly what the lock tables said, whatever the order reports arrive in: no edge can be
// missed (an upgrade that goes ahead of queued requests simply shows in the next report), a
// late report cannot resurrect a finished wait, and a participant's restart replaces its old
// edges. A life reports waits only once its incarnation is durable, so that the number orders
// lives (Participant.lifeDurable). After each report the detector searches for cycles through
// the report's waiters and aborts the youngest transaction of each cycle (a WoundReq with cause
// "deadlock" to its coordinator, which ignores it if it already decided to commit: the edge
// was stale). A victim's edges are ignored until no report lists it as waiting, so a doomed
// transaction cannot get others killed. A victim some report still lists as waiting a keep-alive
// period after its wound went is wounded again: the WoundReq was lost, and its edges, ignored
// meanwhile, would leave the deadlock unbroken for good. (Its abort reaches the participants
// and their next report within a few one-way delays, so without faults nothing goes twice.)
// Reports from other regions reach the detector a WAN delay later, so a
// cross-region deadlock costs about one round trip to the detector's region. If the detector
// restarts it learns the graph again from the periodic reports.

// Wait is one waiting request at a participant: Waiter waits for Blockers.
type Wait struct {
	Waiter   storage.TxnID
	Age      ts.Timestamp // victim choice: the youngest (largest age) transaction of a cycle dies
	Blockers []storage.TxnID
}

// WaitGraph is a participant's whole part of the wait-for graph (lock-policy=detect).
type WaitGraph struct {
	Inc, Seq uint64 // the sender's incarnation and report number: newer replaces older
	Waits    []Wait
}

// detectorOf returns the node that runs the deadlock detector: the first data node.
func detectorOf(t *topo.Topology) node.ID {
	for _, n := range t.Nodes {
		if n.Roles&topo.RoleData != 0 {
			return node.ID(n.ID)
		}
	}
	return 0
}

type report struct {
	inc, seq uint64
	waits    []Wait
}

// Detector holds the newest report of every participant. Deterministic: participants are
// walked in the order they first reported, edges in report order.
type Detector struct {
	send    func(node.ID, wire.Msg)
	now     func() int64
	rewound time.Duration // a victim still waiting this long after its wound is wounded again
	metrics *protocol.Metrics
	reports map[node.ID]*report
	senders []node.ID
	// Derived from the reports after each one: who each transaction waits for, and ages.
	waitsFor map[storage.TxnID][]storage.TxnID
	ages     map[storage.TxnID]ts.Timestamp
	victims  map[storage.TxnID]int64 // local clock when each victim's wound last went
}

// newDetector sends with send, reads the node's clock with now, and wounds again a victim still
// reported waiting rewound after its wound went.
func newDetector(send func(node.ID, wire.Msg), now func() int64, rewound time.Duration, m *protocol.Metrics) *Detector {
	return &Detector{send: send, now: now, rewound: rewound, metrics: m, reports: map[node.ID]*report{},
		victims: map[storage.TxnID]int64{}}
}

func (d *Detector) onWaitGraph(from node.ID, m *WaitGraph) {
	r := d.reports[from]
	switch {
	case r == nil:
		d.senders = append(d.senders, from)
	case m.Inc < r.inc || (m.Inc == r.inc && m.Seq <= r.seq):
		return // older than what we have
	}
	d.reports[from] = &report{inc: m.Inc, seq: m.Seq, waits: m.Waits}
	d.rebuild()
	for _, w := range m.Waits {
		// The new edges may close several cycles; each victim's edges go dead, so this ends.
		for cycle := d.cycleThrough(w.Waiter); cycle != nil; cycle = d.cycleThrough(w.Waiter) {
			d.breakCycle(cycle)
		}
		if at, victim := d.victims[w.Waiter]; victim && d.now()-at >= int64(d.rewound) {
			d.metrics.Add("deadlock-wounds-resent", 1)
			d.wound(w.Waiter)
		}
	}
}

// rebuild derives the graph from the reports and forgets victims no report lists as waiting.
func (d *Detector) rebuild() {
	d.waitsFor = map[storage.TxnID][]storage.TxnID{}
	d.ages = map[storage.TxnID]ts.Timestamp{}
	for _, s := range d.senders {
		for _, w := range d.reports[s].waits {
			d.waitsFor[w.Waiter] = append(d.waitsFor[w.Waiter], w.Blockers...)
			d.ages[w.Waiter] = w.Age
		}
	}
	maps.DeleteFunc(d.victims, func(t storage.TxnID, _ int64) bool { return d.waitsFor[t] == nil })
}

// cycleThrough returns a cycle of the wait-for graph that contains start (start first), or
// nil. Victims' edges do not count.
func (d *Detector) cycleThrough(start storage.TxnID) []storage.TxnID {
	if d.isVictim(start) {
		return nil
	}
	seen := map[storage.TxnID]bool{}
	var path []storage.TxnID
	var dfs func(storage.TxnID) bool
	dfs = func(t storage.TxnID) bool {
		path = append(path, t)
		seen[t] = true
		for _, next := range d.waitsFor[t] {
			if next == start {
				return true
			}
			if next != t && !seen[next] && !d.isVictim(next) && dfs(next) {
				return true
			}
		}
		path = path[:len(path)-1]
		return false
	}
	if dfs(start) {
		return path
	}
	return nil
}

// breakCycle aborts the youngest transaction of the cycle (largest age, then largest id).
func (d *Detector) breakCycle(cycle []storage.TxnID) {
	victim := cycle[0]
	for _, t := range cycle[1:] {
		if c := d.ages[t].Compare(d.ages[victim]); c > 0 || (c == 0 && t > victim) {
			victim = t
		}
	}
	d.metrics.Add("deadlocks-detected", 1)
	d.wound(victim)
}

// wound tells victim's coordinator to abort it.
func (d *Detector) wound(victim storage.TxnID) {
	d.victims[victim] = d.now()
	d.send(node.ID(victim.Coordinator()), &WoundReq{Txn: victim, Cause: causeDeadlock})
}

func (d *Detector) isVictim(t storage.TxnID) bool {
	_, ok := d.victims[t]
	return ok
}

// Len returns the number of waiting transactions in the detector's graph (tests).
func (d *Detector) Len() int { return len(d.waitsFor) }
