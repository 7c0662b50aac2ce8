package crdb

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/meridiandb/meridian/internal/bench"
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

// dataNodes lists every data node of a deployment.
var dataNodes = recordgctest.DataNodes

// TestRecordsForgotten runs checked workloads, with parallel commits and without, with
// duplicated messages and with crashes, and counts the transaction records the record holders
// keep. During the run they hold about as many as there are transactions in flight, not one
// per transaction ever run; once the run has gone quiet for a few expiries they hold none, in
// memory (records and their volatile state) or on disk (records and push floors: every data
// node restarted from its disk holds none either). Keeping every record, as holders did
// before, leaves one per read-write transaction. No request is still blocked on an intent
// either: a crash leaves intents of aborted transactions behind, whose records are forgotten,
// and the requests that meet them must still learn that they aborted (the second crash plan,
// seed 2, left a read waiting forever on such an intent while waiting pushes were answered
// "pending"). Nor does any node still await an answer: one a crash swallowed used to be
// awaited for ever, with the transaction or blocked request it belonged to (both crash plans
// left some).
func TestRecordsForgotten(t *testing.T) {
	for _, c := range []struct {
		name   string
		seed   uint64
		opts   map[string]string
		faults func(s *sim.Sim, w bench.Window)
	}{
		{name: "crash-free"},
		{name: "no-parallel-commits", opts: map[string]string{"parallel-commits": "off", "write-pipelining": "off"}},
		{name: "duplicates", faults: func(s *sim.Sim, _ bench.Window) { s.SetDuplication(0.1) }},
		{name: "crashes", faults: prototest.Crashes(400*time.Millisecond,
			map[topo.NodeID]time.Duration{0: 300 * time.Millisecond, 2: 700 * time.Millisecond, 4: 1200 * time.Millisecond})},
		{name: "crashes-2", seed: 2, faults: prototest.Crashes(400*time.Millisecond,
			map[topo.NodeID]time.Duration{1: 300 * time.Millisecond, 3: 700 * time.Millisecond, 4: 1200 * time.Millisecond})},
	} {
		t.Run(c.name, func(t *testing.T) {
			var s *sim.Sim
			peak := 0
			kept := func() (records, states int) {
				for _, id := range dataNodes(s.Topology()) {
					if h, ok := s.Handler(id).(*Node); ok {
						records += h.recordsKept()
						states += len(h.recState)
					}
				}
				return records, states
			}
			blocked := func() (n, calls int) {
				for _, id := range dataNodes(s.Topology()) {
					if h, ok := s.Handler(id).(*Node); ok {
						for _, ops := range h.blocked {
							n += len(ops)
						}
						calls += len(h.pending)
					}
				}
				return n, calls
			}
			seed := c.seed
			if seed == 0 {
				seed = 1
			}
			res := prototest.Run(t, prototest.Case{Protocol: name, Seed: seed, Options: c.opts, Workload: prototest.ListAppend(20, 0.8),
				Faults: func(sm *sim.Sim, w bench.Window) {
					s = sm
					if c.faults != nil {
						c.faults(sm, w)
					}
					for at := w.MeasureFrom; at <= w.End; at += int64(10 * time.Millisecond) {
						s.At(at, func() { r, _ := kept(); peak = max(peak, r) })
					}
				}})
			prototest.ExpectValid(t, prototest.MustCheck(t, res, model), 50)
			s.RunFor(5 * time.Second) // five expiries: queries, recoveries and re-sent resolutions settle
			quiet, states := kept()
			stuck, calls := blocked()
			left := recordgctest.RestartAll(t, s, func(h node.Handler) int { return h.(*Node).recordsKept() + len(h.(*Node).recState) })
			m := res.ProtocolMetrics.Counters
			t.Logf("%d read-write commits; records: at most %d held during the run, %d (and %d volatile states) once quiet, after restarts %v; forgotten %d",
				m["commit/ok"], peak, quiet, states, left, m["record/forgotten"])
			// 20 clients run one transaction at a time; a record lives through its transaction
			// and its resolution (a WAN round trip or two), so a few per client at most.
			if peak > 60 {
				t.Errorf("record holders held %d records at once during the run: they are not forgotten", peak)
			}
			if quiet != 0 || states != 0 || len(left) > 0 {
				t.Errorf("left once the run went quiet: %d records, %d volatile states; after every data node restarted (records and push floors): %v", quiet, states, left)
			}
			if stuck > 0 || calls > 0 {
				t.Errorf("once the run went quiet: %d requests still blocked on an intent, %d answers still awaited", stuck, calls)
			}
		})
	}
}

// gcScript is a record holder under test (data node 0 of region 0) driven message by message,
// with its disk kept so that it can be restarted from it.
type gcScript struct {
	t      *testing.T
	env    *nodetest.ScriptEnv
	n      *Node
	disk   *durable.Mem
	broken bool
	c, l   topo.NodeID // a coordinator and another leaseholder, in other regions
	kh, kl string      // keys the holder and the other leaseholder hold
	txn    storage.TxnID
	at     ts.Timestamp
}

func newGCScript(t *testing.T, broken bool) *gcScript {
	t.Helper()
	cfg, err := prototest.SimConfig(prototest.Case{Protocol: name, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	tp := cfg.Topology
	g := &gcScript{t: t, disk: durable.NewMem(), broken: broken,
		env: &nodetest.ScriptEnv{ID: tp.DataNodes(0)[0], Topo: tp, Clock: int64(time.Second)},
		c:   tp.DataNodes(1)[0], l: tp.DataNodes(2)[0]}
	g.env.Disk = g.disk
	g.start()
	g.kh = prototest.KeysOn(t, tp, g.n.self, "gc", 1)[0]
	g.kl = prototest.KeysOn(t, tp, g.l, "gc", 1)[0]
	g.txn = storage.MakeTxnID(int32(g.c), 1)
	g.at = ts.Timestamp{Wall: g.env.Clock, Origin: uint32(g.c)}
	return g
}

// start (re)builds the node from the disk.
func (g *gcScript) start() {
	g.t.Helper()
	h, err := proto{}.NewNode(node.Config{Env: g.env, Durable: g.disk})
	if err != nil {
		g.t.Fatal(err)
	}
	g.n = h.(*Node)
	g.n.set.forgetAtDecision = g.broken
	g.env.Take()
}

// settle completes every persist and every timer due now.
func (g *gcScript) settle() { recordgctest.Settle(g.env) }

// deliver hands the node m from from and returns what it sent once settled.
func (g *gcScript) deliver(from topo.NodeID, m wire.Msg) []nodetest.Sent {
	return recordgctest.Deliver(g.env, g.n, from, m)
}

// askedCoordinator reports whether the node has asked the coordinator, since the last Take,
// whether it ended the transaction.
func (g *gcScript) askedCoordinator() bool {
	return recordgctest.SentTo(g.env.Take(), g.c, func(m *EndedQuery) bool { return slices.Contains(m.Txns, g.txn) })
}

// commit writes both keys' intents (the holder's creating the record), stages and commits with
// parallel commits, and resolves the holder's own intent as the coordinator would.
func (g *gcScript) commit() {
	g.t.Helper()
	meta := TxnMeta{ID: g.txn, Age: g.at, RecordNode: g.n.self, Coord: g.c}
	g.deliver(g.c, &WriteReq{Req: 1, Txn: meta, Key: g.kh, Value: []byte("v"), WriteTS: g.at, CreateRecord: true})
	staged := false
	for _, s := range g.deliver(g.c, &EndTxnReq{Req: 2, Txn: g.txn, Status: EndStage, TS: g.at, InFlight: []string{g.kh, g.kl}}) {
		if r, ok := s.M.(*EndTxnResp); ok && r.Req == 2 {
			staged = r.Outcome == EndOK
		}
	}
	if !staged {
		g.t.Fatal("the holder did not stage the transaction")
	}
	g.deliver(g.c, &EndTxnReq{Txn: g.txn, Status: EndCommit, TS: g.at})
	if r, ok := g.n.recs.Get(g.txn); ok && r.Status != txnrec.Committed {
		g.t.Fatalf("record %v after the explicit commit", r.Status)
	}
	g.deliver(g.c, &ResolveReq{Txn: g.txn, Keys: []string{g.kh}, Commit: true, TS: g.at, Record: g.n.self})
}

// push sends a push of the given type from the other leaseholder and returns its outcome. The
// coordinator has ended the transaction, and says so when asked, as it would.
func (g *gcScript) push(typ uint8) uint8 {
	var outcome uint8
	sent := g.deliver(g.l, &PushReq{Req: 7, Pushee: g.txn, Type: typ, PushTo: g.at.Next()})
	for len(sent) > 0 {
		var next []nodetest.Sent
		for _, s := range sent {
			switch m := s.M.(type) {
			case *PushResp:
				if s.To == g.l && m.Req == 7 {
					outcome = m.Outcome
				}
			case *EndedQuery:
				if s.To == g.c && slices.Contains(m.Txns, g.txn) {
					next = append(next, g.deliver(g.c, &Ended{Txns: []storage.TxnID{g.txn}})...)
				}
			}
		}
		sent = next
	}
	return outcome
}

// onDisk returns how many records and push floors the disk holds once the next tick has
// persisted what no batch took.
func (g *gcScript) onDisk() int {
	g.t.Helper()
	g.env.Advance(g.n.set.heartbeat)
	g.settle()
	g.env.Take()
	recs, err := txnrec.Recover(g.disk)
	if err != nil {
		g.t.Fatal(err)
	}
	floors := 0
	if err := g.disk.Scan([]byte{prefixPushFloor}, []byte{prefixPushFloor + 1}, func(_, _ []byte) bool { floors++; return true }); err != nil {
		g.t.Fatal(err)
	}
	return recs.Len() + floors
}

// TestLatePushAfterCommit: a transaction commits (parallel commit, then the explicit commit) and
// its coordinator resolves the holder's own intent, but the resolution of the other
// leaseholder is late; an older writer there meets the intent and pushes to abort it. The
// holder still knows the transaction committed, since that leaseholder has not acknowledged,
// and forgets the record only once it does (also on disk). The broken variant forgets at the
// decision: the push finds the transaction unknown and aborts it, which would have the
// leaseholder discard a committed write. The test must catch that.
func TestLatePushAfterCommit(t *testing.T) {
	for _, broken := range []bool{false, true} {
		t.Run(fmt.Sprintf("forget-at-decision=%v", broken), func(t *testing.T) {
			g := newGCScript(t, broken)
			g.commit()
			got := g.push(PushAbort)
			if broken {
				if got == PushCommitted {
					t.Fatal("the broken variant answered the late push correctly: the test cannot tell it from the correct one")
				}
				t.Logf("broken variant caught: late push to abort a committed transaction answered %d (PushAborted is %d)", got, PushAborted)
				return
			}
			if got != PushCommitted {
				t.Fatalf("late push: outcome %d, want committed (%d)", got, PushCommitted)
			}
			if n := g.n.recordsKept(); n != 1 {
				t.Fatalf("%d records before the leaseholder acknowledged, want 1", n)
			}
			g.deliver(g.l, &Resolved{Txns: []storage.TxnID{g.txn}})
			if n, d := g.n.recordsKept()+len(g.n.recState), g.onDisk(); n != 0 || d != 0 {
				t.Fatalf("after every leaseholder acknowledged: %d records or states, %d on disk; want none", n, d)
			}
		})
	}
}

// TestAbortedForgotten: a record aborted by its coordinator goes at once; one aborted by a push
// goes once its coordinator says it ended the transaction, with the push floor a reader left.
// A push about it later, from a leaseholder still holding an intent, finds it unknown and is
// answered "aborted", and the record it made goes too.
func TestAbortedForgotten(t *testing.T) {
	for _, byPush := range []bool{false, true} {
		t.Run(fmt.Sprintf("push=%v", byPush), func(t *testing.T) {
			g := newGCScript(t, false)
			meta := TxnMeta{ID: g.txn, Age: g.at, RecordNode: g.n.self, Coord: g.c}
			g.deliver(g.c, &WriteReq{Req: 1, Txn: meta, Key: g.kh, Value: []byte("v"), WriteTS: g.at, CreateRecord: true})
			if byPush {
				if got := g.push(PushTimestamp); got != PushPushed {
					t.Fatalf("timestamp push: outcome %d", got)
				}
				if got := g.push(PushAbort); got != PushAborted {
					t.Fatalf("abort push: outcome %d", got)
				}
				if n := g.n.recordsKept(); n != 1 {
					t.Fatalf("%d records right after the push aborted it, want 1 (the coordinator has not said it ended)", n)
				}
				g.env.Advance(2 * 5 * 200 * time.Millisecond) // two expiries: the holder asks
				g.settle()
				if !g.askedCoordinator() {
					t.Fatal("the holder did not ask the coordinator about the transaction a push aborted")
				}
				g.deliver(g.c, &Ended{Txns: []storage.TxnID{g.txn}})
			} else {
				g.deliver(g.c, &EndTxnReq{Txn: g.txn, Status: EndAbort})
			}
			if n, d := g.n.recordsKept()+len(g.n.recState), g.onDisk(); n != 0 || d != 0 {
				t.Fatalf("aborted and ended: %d records or states, %d records or floors on disk; want none", n, d)
			}
			if got := g.push(PushAbort); got != PushAborted {
				t.Fatalf("push about the forgotten aborted transaction: outcome %d, want aborted", got)
			}
			g.push(PushQuery)
			if n, d := g.n.recordsKept()+len(g.n.recState), g.onDisk(); n != 0 || d != 0 {
				t.Fatalf("after the late pushes: %d records or states, %d on disk; want none", n, d)
			}
		})
	}
}

// TestWaitingPushAboutForgotten: a record aborted by its coordinator is forgotten; a leaseholder
// still holds the transaction's intent (the abort's resolution died with it in a crash), and a
// younger request there waits on it, pushing as a waiting push does: once, then again every
// poll period while answered "pending". It must learn that the transaction aborted. Answered
// "pending" while the holder asked the coordinator, it never did: each poll found the
// transaction unknown, and by the next one the holder had heard "ended", aborted it and
// forgotten it again, so the request (and the key, for every younger transaction) waited
// forever.
func TestWaitingPushAboutForgotten(t *testing.T) {
	g := newGCScript(t, false)
	meta := TxnMeta{ID: g.txn, Age: g.at, RecordNode: g.n.self, Coord: g.c}
	g.deliver(g.c, &WriteReq{Req: 1, Txn: meta, Key: g.kh, Value: []byte("v"), WriteTS: g.at, CreateRecord: true})
	g.deliver(g.c, &EndTxnReq{Txn: g.txn, Status: EndAbort})
	if n := g.n.recordsKept() + len(g.n.recState); n != 0 {
		t.Fatalf("%d records or states once aborted and ended, want none", n)
	}
	// Polls for two expiries: the pusher's own view, whatever the holder's timers do.
	polls := int(2 * g.n.set.expiry / g.n.set.pollPeriod)
	for i := range polls {
		got := g.push(PushQuery)
		if got == PushAborted {
			if n, d := g.n.recordsKept()+len(g.n.recState), g.onDisk(); n != 0 || d != 0 {
				t.Fatalf("after the waiting push was answered: %d records or states, %d on disk; want none", n, d)
			}
			return
		}
		if got != PushPending {
			t.Fatalf("poll %d: outcome %d, want aborted (%d)", i, got, PushAborted)
		}
		g.env.Advance(g.n.set.pollPeriod)
		g.settle()
		g.env.Take()
	}
	t.Fatalf("a waiting push about a forgotten aborted transaction was answered pending %d times in a row", polls)
}

// TestHolderRestartReresolves: the record holder crashes after the commit, before the other
// leaseholder acknowledged (its resolution was lost). The restarted holder recovers the
// committed record with its keys, asks the coordinator an expiry later, and once told the
// coordinator ended the transaction re-sends the resolution to the leaseholders that have not
// acknowledged; their acknowledgements let the record go, on disk too.
func TestHolderRestartReresolves(t *testing.T) {
	g := newGCScript(t, false)
	g.commit()
	g.start() // crash and restart from the disk
	if n := g.n.recordsKept(); n != 1 {
		t.Fatalf("%d records after the restart, want the committed one", n)
	}
	g.env.Advance(2 * 5 * 200 * time.Millisecond)
	g.settle()
	if !g.askedCoordinator() {
		t.Fatal("the restarted holder did not ask the coordinator")
	}
	var to []topo.NodeID
	for _, s := range g.deliver(g.c, &Ended{Txns: []storage.TxnID{g.txn}}) {
		if m, ok := s.M.(*ResolveReq); ok && m.Txn == g.txn && m.Commit && m.Record == g.n.self {
			to = append(to, s.To)
		}
	}
	if !slices.Contains(to, g.l) {
		t.Fatalf("resolution re-sent to %v, want %d among them", to, g.l)
	}
	for _, nd := range to {
		if nd == g.n.self {
			g.deliver(g.c, &ResolveReq{Txn: g.txn, Keys: []string{g.kh}, Commit: true, TS: g.at, Record: g.n.self})
		}
	}
	if n := g.n.recordsKept(); n != 1 {
		t.Fatalf("%d records before the leaseholder acknowledged, want 1", n)
	}
	g.deliver(g.l, &Resolved{Txns: []storage.TxnID{g.txn}})
	if n, d := g.n.recordsKept()+len(g.n.recState), g.onDisk(); n != 0 || d != 0 {
		t.Fatalf("after the acknowledgement: %d records or states, %d on disk; want none", n, d)
	}
}

// TestLateEndTxnRefused: a transaction's coordinator rolls it back, and the holder forgets the
// aborted record. A stage or commit of it arriving afterwards (a message held back on a
// connection the real runtime has since redialled, or from a coordinator's previous life) must
// not create a record and stage or commit it: the holder would then resolve as committed the
// intents of a transaction its client was told aborted, wherever the rollback's resolution had
// not arrived. Holders kept aborted records for ever before, which refused it; the forgotten
// one must be refused too, as K2's recorder refuses to commit a transaction it does not know.
func TestLateEndTxnRefused(t *testing.T) {
	for _, st := range []uint8{EndStage, EndCommit} {
		t.Run(fmt.Sprintf("status=%d", st), func(t *testing.T) {
			g := newGCScript(t, false)
			meta := TxnMeta{ID: g.txn, Age: g.at, RecordNode: g.n.self, Coord: g.c}
			g.deliver(g.c, &WriteReq{Req: 1, Txn: meta, Key: g.kh, Value: []byte("v"), WriteTS: g.at, CreateRecord: true})
			g.deliver(g.c, &EndTxnReq{Txn: g.txn, Status: EndAbort})
			if n := g.n.recordsKept() + len(g.n.recState); n != 0 {
				t.Fatalf("%d records or states once aborted and ended, want none", n)
			}
			var outcome uint8
			for _, s := range g.deliver(g.c, &EndTxnReq{Req: 3, Txn: g.txn, Status: st, TS: g.at, InFlight: []string{g.kh, g.kl}}) {
				if r, ok := s.M.(*EndTxnResp); ok && r.Req == 3 {
					outcome = r.Outcome
				}
			}
			if r, ok := g.n.recs.Get(g.txn); ok || outcome != EndAborted {
				t.Fatalf("late EndTxn (status %d) of a rolled-back, forgotten transaction: answered %d (EndAborted is %d), record %v (kept: %v)",
					st, outcome, EndAborted, r.Status, ok)
			}
			if n, d := g.n.recordsKept()+len(g.n.recState), g.onDisk(); n != 0 || d != 0 {
				t.Fatalf("after the late EndTxn: %d records or states, %d on disk; want none", n, d)
			}
		})
	}
}
