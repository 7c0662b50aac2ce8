package k2

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/meridiandb/meridian/internal/bench"
	"github.com/meridiandb/meridian/internal/clock"
	"github.com/meridiandb/meridian/internal/node"
	"github.com/meridiandb/meridian/internal/node/nodetest"
	"github.com/meridiandb/meridian/internal/protocol/prototest"
	"github.com/meridiandb/meridian/internal/protocol/txnkit/recordgctest"
	"github.com/meridiandb/meridian/internal/sim"
	"github.com/meridiandb/meridian/internal/storage"
	"github.com/meridiandb/meridian/internal/storage/durable"
	"github.com/meridiandb/meridian/internal/storage/txnrec"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/ts"
	"github.com/meridiandb/meridian/internal/wire"
)

// TestRecordsForgotten runs checked workloads, with and without crashes, and counts the
// transaction records the recorders hold. During the run they hold about as many as there are
// transactions in flight, not one per transaction ever run; once the run has gone quiet for a
// few leases they hold none (every decided record was forgotten, and every record a crash left
// undecided was aborted and then forgotten); and after every data node restarts from its disk
// they still hold none (the deletions were persisted). Keeping every record, as recorders did
// before, leaves one per read-write transaction.
func TestRecordsForgotten(t *testing.T) {
	for _, c := range []struct {
		name   string
		opts   map[string]string
		faults func(s *sim.Sim, w bench.Window)
	}{
		{name: "crash-free"},
		{name: "sync-finalize", opts: map[string]string{"async-finalize": "off"}},
		{name: "duplicates", faults: func(s *sim.Sim, _ bench.Window) { s.SetDuplication(0.1) }},
		{name: "crashes", faults: prototest.Crashes(400*time.Millisecond,
			map[topo.NodeID]time.Duration{0: 300 * time.Millisecond, 2: 700 * time.Millisecond, 4: 1200 * time.Millisecond})},
	} {
		t.Run(c.name, func(t *testing.T) {
			var s *sim.Sim
			peak := 0
			kept := func() (total int) {
				for _, id := range recordgctest.DataNodes(s.Topology()) {
					if h, ok := s.Handler(id).(*Node); ok {
						total += h.recordsKept()
					}
				}
				return total
			}
			res := prototest.Run(t, prototest.Case{Protocol: "k2", Seed: 1, Options: c.opts, Workload: prototest.ListAppend(20, 0.8),
				Faults: func(sm *sim.Sim, w bench.Window) {
					s = sm
					if c.faults != nil {
						c.faults(sm, w)
					}
					for at := w.MeasureFrom; at <= w.End; at += 10 * ms {
						s.At(at, func() { peak = max(peak, kept()) })
					}
				}})
			prototest.ExpectValid(t, prototest.MustCheck(t, res, model), 50)
			m := res.ProtocolMetrics.Counters
			rw := m["commit"] + m["commit.unknown"]
			for _, n := range res.AbortsByCause {
				rw += int64(n)
			}
			s.RunFor(5 * time.Second) // five leases: lease aborts, queries and re-sent finalizations settle
			quiet := kept()
			left := recordgctest.RestartAll(t, s, func(h node.Handler) int { return h.(*Node).recordsKept() })
			t.Logf("%d read-write commits, %d transactions ended in the window; records: at most %d held during it, %d once quiet, after restarts %v; forgotten %d",
				m["commit"], rw, peak, quiet, left, m["recorder.forgotten"])
			// 20 clients run one transaction at a time; a record lives through its transaction
			// and its finalization (a WAN round trip or two), so a few per client at most.
			if peak > 60 {
				t.Errorf("recorders held %d records at once during the run: they are not forgotten", peak)
			}
			if quiet != 0 || len(left) > 0 {
				t.Errorf("records left once the run went quiet: %d, and after every data node restarted: %v", quiet, left)
			}
		})
	}
}

// gcScript is a recorder under test (data node 0 of region 0) driven message by message, with
// its disk kept so that it can be restarted from it.
type gcScript struct {
	t    *testing.T
	env  *nodetest.ScriptEnv
	n    *Node
	cfg  config
	disk *durable.Mem
	c, d topo.NodeID // a coordinator and another participant, in other regions
	key  string      // a key the recorder holds
	txn  storage.TxnID
	at   ts.Timestamp
}

func newGCScript(t *testing.T, broken bool) *gcScript {
	t.Helper()
	tp, c := scriptDeployment(t, nil)
	c.forgetAtDecision = broken
	g := &gcScript{t: t, cfg: c, disk: durable.NewMem(),
		env: &nodetest.ScriptEnv{ID: tp.DataNodes(0)[0], Topo: tp, Clock: int64(time.Second), Epsilon: 100 * time.Microsecond},
		c:   tp.DataNodes(1)[0], d: tp.DataNodes(2)[0]}
	g.env.Disk = g.disk
	g.start()
	g.key = prototest.KeysOn(t, tp, g.n.self, "gc", 1)[0]
	g.txn = storage.MakeTxnID(int32(g.c), 1<<32|1)
	g.at = ts.Timestamp{Wall: g.env.Clock, Origin: uint32(g.c)}
	return g
}

// start (re)builds the node from the disk and lets its incarnation persist; after a restart,
// the oracle answers its request for the recovery read floor.
func (g *gcScript) start() {
	g.t.Helper()
	n, err := newNode(g.env, g.disk, g.cfg)
	if err != nil {
		g.t.Fatal(err)
	}
	g.n = n
	g.env.Flush()
	if n.recovering {
		n.Handle(n.oracle, &clock.TSBatchReply{ReqID: n.recoverID, Low: g.env.Clock, Up: g.env.Clock})
	}
	g.env.Take()
}

// settle completes every persist and every timer due now.
func (g *gcScript) settle() { recordgctest.Settle(g.env) }

// deliver hands the node m from from and returns what it sent once settled.
func (g *gcScript) deliver(from topo.NodeID, m wire.Msg) []nodetest.Sent {
	return recordgctest.Deliver(g.env, g.n, from, m)
}

// commit writes the key (creating the record) and commits at the recorder, with d as the
// other participant, then finalizes the recorder's own intent as the coordinator would.
func (g *gcScript) commit() {
	g.t.Helper()
	g.deliver(g.c, &WriteReq{ReqID: 1, Txn: g.txn, TS: g.at, Key: g.key, Value: []byte("v"), Recorder: g.n.self, CreateRecord: true, WSeq: 1})
	var committed bool
	for _, s := range g.deliver(g.c, &CommitReq{ReqID: 2, Txn: g.txn, TS: g.at, Participants: []topo.NodeID{g.n.self, g.d}}) {
		if r, ok := s.M.(*CommitResp); ok && r.ReqID == 2 {
			committed = r.Committed
		}
	}
	if !committed {
		g.t.Fatal("the recorder did not commit the transaction")
	}
	g.deliver(g.c, &FinalizeReq{Txn: g.txn, Commit: true, TS: g.at, Recorder: g.n.self})
}

// push sends a PUSHWS from d and returns the decision it gets. The coordinator has ended the
// transaction (it had its answer), and says so when asked, as it would.
func (g *gcScript) push() (answered, committed bool) {
	sent := g.deliver(g.d, &PushReq{Txn: g.txn})
	for len(sent) > 0 {
		var next []nodetest.Sent
		for _, s := range sent {
			switch m := s.M.(type) {
			case *PushResp:
				if s.To == g.d && m.Txn == g.txn {
					answered, committed = true, m.Committed
				}
			case *EndedQuery:
				if s.To == g.c && slices.Contains(m.Txns, g.txn) {
					next = append(next, g.deliver(g.c, &Ended{Txns: []storage.TxnID{g.txn}})...)
				}
			}
		}
		sent = next
	}
	return answered, committed
}

// askedCoordinator reports whether the node has asked the coordinator, since the last Take,
// whether it ended the transaction.
func (g *gcScript) askedCoordinator() bool {
	return recordgctest.SentTo(g.env.Take(), g.c, func(m *EndedQuery) bool { return slices.Contains(m.Txns, g.txn) })
}

// recovered returns how many records are on the disk once the next tick has persisted what
// no batch took.
func (g *gcScript) recovered() int {
	g.t.Helper()
	g.env.Advance(g.cfg.lease / 4)
	g.settle()
	g.env.Take()
	recs, err := txnrec.Recover(g.disk)
	if err != nil {
		g.t.Fatal(err)
	}
	return recs.Len()
}

// TestLatePushAfterCommit: a transaction commits and its coordinator finalizes the recorder's own
// intent, but the finalization of the other participant is late; a reader there meets the
// intent and pushes the recorder. The recorder still knows the transaction committed, since
// that participant has not acknowledged, and forgets the record only once it does (also on
// disk). The broken variant forgets at the decision: the push finds the transaction unknown,
// the coordinator has ended it, and the recorder answers "aborted", which would have the
// participant discard a committed write. The test must catch that.
func TestLatePushAfterCommit(t *testing.T) {
	for _, broken := range []bool{false, true} {
		t.Run(fmt.Sprintf("forget-at-decision=%v", broken), func(t *testing.T) {
			g := newGCScript(t, broken)
			g.commit()
			answered, committed := g.push()
			if broken {
				if answered && committed {
					t.Fatal("the broken variant answered the late PUSHWS correctly: the test cannot tell it from the correct one")
				}
				t.Logf("broken variant caught: late PUSHWS answered=%v committed=%v for a committed transaction", answered, committed)
				return
			}
			if !answered || !committed {
				t.Fatalf("late PUSHWS: answered=%v committed=%v, want committed", answered, committed)
			}
			if n := g.n.recordsKept(); n != 1 {
				t.Fatalf("%d records before the participant acknowledged, want 1", n)
			}
			g.deliver(g.d, &Finalized{Txns: []storage.TxnID{g.txn}})
			if n, r := g.n.recordsKept(), g.recovered(); n != 0 || r != 0 {
				t.Fatalf("after every participant acknowledged: %d records, %d after a restart; want none", n, r)
			}
		})
	}
}

// TestAbortedForgotten: a record aborted by its coordinator goes at once; one aborted by lease
// expiry goes once its coordinator says it ended the transaction. A PUSHWS about either one
// later, from a participant still holding an intent, finds it unknown and is answered
// "aborted" as soon as the coordinator confirms, not a lease later, and the placeholder it
// made goes too.
func TestAbortedForgotten(t *testing.T) {
	for _, byLease := range []bool{false, true} {
		t.Run(fmt.Sprintf("lease=%v", byLease), func(t *testing.T) {
			g := newGCScript(t, false)
			g.deliver(g.c, &WriteReq{ReqID: 1, Txn: g.txn, TS: g.at, Key: g.key, Value: []byte("v"), Recorder: g.n.self, CreateRecord: true, WSeq: 1})
			if byLease {
				g.env.Advance(g.cfg.lease + g.cfg.lease/4) // the coordinator is silent: lease abort
				g.settle()
				if n := g.n.recordsKept(); n != 1 {
					t.Fatalf("%d records right after the lease abort, want 1 (the coordinator has not said it ended)", n)
				}
				g.env.Advance(g.cfg.lease)
				g.settle()
				if !g.askedCoordinator() {
					t.Fatal("the recorder did not ask the coordinator about the transaction it aborted")
				}
				g.deliver(g.c, &Ended{Txns: []storage.TxnID{g.txn}})
			} else {
				g.deliver(g.c, &AbortReq{Txn: g.txn})
			}
			if n, r := g.n.recordsKept(), g.recovered(); n != 0 || r != 0 {
				t.Fatalf("aborted and ended: %d records, %d after a restart; want none", n, r)
			}
			if answered, committed := g.push(); !answered || committed {
				t.Fatalf("PUSHWS about the forgotten aborted transaction: answered=%v committed=%v, want aborted at once", answered, committed)
			}
			if n, r := g.n.recordsKept(), g.recovered(); n != 0 || r != 0 {
				t.Fatalf("after the late PUSHWS: %d records, %d after a restart; want none", n, r)
			}
		})
	}
}

// TestRecorderRestartRefinalizes: the recorder crashes after the commit, before the other
// participant acknowledged (its finalization was lost). The restarted recorder recovers the
// decided record with its participants, asks the coordinator a lease later, and once told the
// coordinator ended the transaction re-sends the finalization to the participant that never
// acknowledged; its acknowledgement lets the record go, on disk too.
func TestRecorderRestartRefinalizes(t *testing.T) {
	g := newGCScript(t, false)
	g.commit()
	g.start() // crash and restart from the disk
	if n := g.n.recordsKept(); n != 1 {
		t.Fatalf("%d records after the restart, want the committed one", n)
	}
	g.env.Advance(g.cfg.lease + g.cfg.lease/4)
	g.settle()
	if !g.askedCoordinator() {
		t.Fatal("the restarted recorder did not ask the coordinator")
	}
	var to []topo.NodeID
	for _, s := range g.deliver(g.c, &Ended{Txns: []storage.TxnID{g.txn}}) {
		if m, ok := s.M.(*FinalizeReq); ok && m.Txn == g.txn && m.Commit && m.TS == g.at && m.Recorder == g.n.self {
			to = append(to, s.To)
		}
	}
	// The recorder's own acknowledgement died with it too: it finalizes itself again.
	if !slices.Contains(to, g.d) {
		t.Fatalf("finalization re-sent to %v, want %d among them", to, g.d)
	}
	for _, p := range to {
		if p == g.n.self {
			g.deliver(g.c, &FinalizeReq{Txn: g.txn, Commit: true, TS: g.at, Recorder: g.n.self})
		}
	}
	if n := g.n.recordsKept(); n != 1 {
		t.Fatalf("%d records before the participant acknowledged, want 1", n)
	}
	g.deliver(g.d, &Finalized{Txns: []storage.TxnID{g.txn}})
	if n, r := g.n.recordsKept(), g.recovered(); n != 0 || r != 0 {
		t.Fatalf("after the acknowledgement: %d records, %d after a restart; want none", n, r)
	}
}

// TestCommitUnknownRefused: a recorder never commits a transaction it holds no record of (its
// first write creates the record before any commit, so an unknown one was forgotten, which
// only an aborted or ended one is).
func TestCommitUnknownRefused(t *testing.T) {
	g := newGCScript(t, false)
	for _, s := range g.deliver(g.c, &CommitReq{ReqID: 9, Txn: g.txn, TS: g.at, Participants: []topo.NodeID{g.n.self}}) {
		if r, ok := s.M.(*CommitResp); ok && r.ReqID == 9 && r.Committed {
			t.Fatal("an unknown transaction was committed")
		}
	}
	if n := g.n.recordsKept(); n != 0 {
		t.Fatalf("%d records after refusing an unknown commit, want none", n)
	}
}
