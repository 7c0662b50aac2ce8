package spanner

import (
	"slices"

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
// One detector for the whole deployment keeps the global wait-for graph, the design TiDB
// uses for its pessimistic transactions: each participant reports a wait (waiter → the
// holders and queued requests ahead of it) when it starts and again when it ends; the detector
// checks each new wait for a cycle through the waiter and, on finding one, picks the youngest
// transaction of the cycle as the victim and asks its coordinator to abort it (a WoundReq with
// cause "deadlock"; a coordinator that already decided to commit ignores it, as for a wound —
// then the edge was stale). Reports from other regions reach the detector a WAN delay later,
// so a cross-region deadlock costs about one round trip to the detector's region.
//
// A wait's blockers are the incompatible holders and the requests queued ahead of it when it
// began; the only later arrivals ahead of it are upgrades (an upgrader already holds the lock
// and goes to the head of the queue), which the participant reports as extra blockers of the
// waits they jumped. The graph lives in the detector's memory, so a detector restart forgets
// the waits in progress; the participants' idle timeout, which aborts a transaction whose
// coordinator has been silent (a waiting one included), is the backstop.

// WaitsFor reports to the detector that Waiter started waiting at the sender for Blockers, or,
// for a wait already reported, that it now also waits for Blockers.
type WaitsFor struct {
	Waiter   storage.TxnID
	Age      ts.Timestamp // victim choice: the youngest (largest age) transaction of a cycle dies
	Wait     uint64       // the sender's id for this wait, repeated by WaitEnded
	Blockers []storage.TxnID
}

// WaitEnded reports that a wait the sender reported is over (granted, or the waiter aborted).
type WaitEnded struct {
	Waiter storage.TxnID
	Wait   uint64
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

type waitKey struct {
	from node.ID
	wait uint64
}

type waitEdge struct {
	waiter   storage.TxnID
	blockers []storage.TxnID
	dead     bool // its waiter was chosen as a victim: ignored until its WaitEnded arrives
}

// Detector holds the global wait-for graph. Deterministic: edges are walked in arrival order.
type Detector struct {
	send    func(node.ID, wire.Msg)
	metrics *protocol.Metrics
	waits   map[waitKey]*waitEdge
	byTxn   map[storage.TxnID][]waitKey // a waiter's waits, in arrival order
	ages    map[storage.TxnID]ts.Timestamp
	// early holds WaitEnded messages that overtook their WaitsFor (messages from one sender
	// are not ordered); the late WaitsFor is then dropped.
	early map[waitKey]bool
}

func newDetector(send func(node.ID, wire.Msg), m *protocol.Metrics) *Detector {
	return &Detector{send: send, metrics: m, waits: map[waitKey]*waitEdge{},
		byTxn: map[storage.TxnID][]waitKey{}, ages: map[storage.TxnID]ts.Timestamp{}, early: map[waitKey]bool{}}
}

func (d *Detector) onWaitsFor(from node.ID, m *WaitsFor) {
	k := waitKey{from, m.Wait}
	if d.early[k] {
		delete(d.early, k)
		return
	}
	if e := d.waits[k]; e != nil {
		// More blockers for a wait in progress (an upgrade went ahead of it in a queue).
		e.blockers = append(e.blockers, m.Blockers...)
	} else {
		d.waits[k] = &waitEdge{waiter: m.Waiter, blockers: m.Blockers}
		d.byTxn[m.Waiter] = append(d.byTxn[m.Waiter], k)
	}
	d.ages[m.Waiter] = m.Age
	// The new edges may close several cycles; each victim's edges go dead, so this ends.
	for cycle := d.cycleThrough(m.Waiter); cycle != nil; cycle = d.cycleThrough(m.Waiter) {
		d.breakCycle(cycle)
	}
}

func (d *Detector) onWaitEnded(from node.ID, m *WaitEnded) {
	k := waitKey{from, m.Wait}
	if d.waits[k] == nil {
		d.early[k] = true
		return
	}
	delete(d.waits, k)
	keys := slices.DeleteFunc(d.byTxn[m.Waiter], func(x waitKey) bool { return x == k })
	if len(keys) == 0 {
		delete(d.byTxn, m.Waiter)
		delete(d.ages, m.Waiter)
	} else {
		d.byTxn[m.Waiter] = keys
	}
}

// successors are the transactions txn currently waits for, over all its live waits.
func (d *Detector) successors(txn storage.TxnID, visit func(storage.TxnID) bool) bool {
	for _, k := range d.byTxn[txn] {
		e := d.waits[k]
		if e == nil || e.dead {
			continue
		}
		for _, b := range e.blockers {
			if b != txn && visit(b) {
				return true
			}
		}
	}
	return false
}

// cycleThrough returns a cycle of the wait-for graph that contains start (start first), or
// nil. Only cycles through the newest waiter can be new, so that is all it looks for.
func (d *Detector) cycleThrough(start storage.TxnID) []storage.TxnID {
	seen := map[storage.TxnID]bool{}
	var path []storage.TxnID
	var dfs func(storage.TxnID) bool
	dfs = func(t storage.TxnID) bool {
		path = append(path, t)
		seen[t] = true
		if d.successors(t, func(next storage.TxnID) bool {
			if next == start {
				return true
			}
			return !seen[next] && dfs(next)
		}) {
			return true
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
	for _, k := range d.byTxn[victim] {
		d.waits[k].dead = true
	}
	d.metrics.Add("deadlocks-detected", 1)
	d.send(node.ID(victim.Coordinator()), &WoundReq{Txn: victim, Cause: causeDeadlock})
}

// Len returns the number of waits the detector tracks (tests).
func (d *Detector) Len() int { return len(d.waits) }
