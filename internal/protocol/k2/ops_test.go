package k2

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/meridiandb/meridian/client"
	"github.com/meridiandb/meridian/internal/bench"
	"github.com/meridiandb/meridian/internal/protocol/prototest"
	"github.com/meridiandb/meridian/internal/sim"
	"github.com/meridiandb/meridian/internal/storage"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/ts"
	"github.com/meridiandb/meridian/internal/wire"
)

// Scripted scenarios around OpsReq/OpsResp: a client request's reads and writes go to each data
// node in one message, and the node answers them together. Each scenario runs a few hand-made
// transactions in the simulator on the protocol tests' deployment.

const ms = int64(time.Millisecond)

// newScript builds a bare simulator (no workload) with the given k2 options; edit, if set,
// adjusts the simulator's configuration first.
func newScript(t *testing.T, opts map[string]string, edit func(*sim.Config)) *sim.Sim {
	t.Helper()
	cfg, err := prototest.SimConfig(prototest.Case{Protocol: "k2", Options: opts, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(&cfg)
	}
	s, err := sim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

// failures collects what client coroutines found wrong: they cannot call t.Fatal.
type failures []string

func (f *failures) add(format string, args ...any) { *f = append(*f, fmt.Sprintf(format, args...)) }

func (f failures) report(t *testing.T) {
	t.Helper()
	for _, s := range f {
		t.Error(s)
	}
}

// holdIntents runs a transaction that writes keys and commits only after hold: its intents stay
// undecided meanwhile, so any later reader of those keys parks on PUSHWS.
func holdIntents(s *sim.Sim, region topo.RegionID, coord topo.NodeID, at int64, hold time.Duration, keys []string, fail *failures) {
	s.AddClient(region, coord, at, func(db *client.DB) {
		tx := db.Begin(client.TxnOptions{})
		rows := make([]wire.KV, len(keys))
		for i, k := range keys {
			rows[i] = wire.KV{Key: k, Value: []byte("held:" + k)}
		}
		if err := tx.PutMany(rows); err != nil {
			fail.add("holder: %v", err)
			return
		}
		db.Transport().Sleep(hold)
		if err := tx.Commit(); err != nil {
			fail.add("holder commit: %v", err)
		}
	})
}

// TestOpsRefusalNotHeldByParkedRead: a batch sends one node a write that the node refuses and a
// read that parks on PUSHWS behind an undecided intent. The refusal ends the transaction, so it
// must reach the coordinator at once; waiting for the read's answer kept the doomed
// transaction's intents in other readers' way until the unrelated writer committed (here a
// second), or past op-timeout.
func TestOpsRefusalNotHeldByParkedRead(t *testing.T) {
	s := newScript(t, nil, nil)
	tp := s.Topology()
	d := tp.DataNodes(0)[0]
	k := prototest.KeysOn(t, tp, d, "refusal", 3)
	a, b, c := k[0], k[1], k[2]
	var fail failures
	holdIntents(s, 0, d, 100*ms, time.Second, []string{a}, &fail)
	var took int64
	var cause string
	s.AddClient(0, d, 105*ms, func(db *client.DB) {
		tx := db.Begin(client.TxnOptions{})
		if _, err := tx.GetMany([]string{c}); err != nil { // takes the timestamp, above the holder's
			fail.add("first read: %v", err)
			return
		}
		db.Transport().Sleep(20 * time.Millisecond) // a younger reader raises b's watermark meanwhile
		start := db.Transport().Now()
		_, err := tx.Batch([]wire.BatchOp{{Op: wire.OpGet, Key: a}, {Op: wire.OpPut, Key: b, Value: []byte("late")}})
		took = db.Transport().Now() - start
		var ae *client.AbortError
		if !errors.As(err, &ae) {
			fail.add("batch: %v, want an abort", err)
			return
		}
		cause = ae.Cause
	})
	s.AddClient(0, d, 110*ms, func(db *client.DB) {
		if err := client.RunTxn(db, client.TxnOptions{}, func(tx *client.Txn) error { _, err := tx.GetMany([]string{b}); return err }); err != nil {
			fail.add("younger reader: %v", err)
		}
	})
	s.RunUntil(3 * int64(time.Second))
	fail.report(t)
	t.Logf("refused batch answered after %.1f ms, cause %q", float64(took)/1e6, cause)
	if cause != "read-watermark" || took > 50*ms {
		t.Errorf("the refused write's abort took %.1f ms (cause %q): it waited for the parked read", float64(took)/1e6, cause)
	}
}

// TestOpsWriteAnswerNotHeldByParkedRead: Table 2's write phase must not absorb a PUSHWS wait. A
// batch's write is answered from memory, its read on the same node parks for a second behind
// an undecided intent; op.write is the write's round trip, not the read's wait.
func TestOpsWriteAnswerNotHeldByParkedRead(t *testing.T) {
	s := newScript(t, nil, nil)
	tp := s.Topology()
	d := tp.DataNodes(0)[0]
	k := prototest.KeysOn(t, tp, d, "phase", 2)
	var fail failures
	holdIntents(s, 0, d, 100*ms, time.Second, []string{k[0]}, &fail)
	s.AddClient(0, d, 105*ms, func(db *client.DB) {
		err := client.RunTxn(db, client.TxnOptions{}, func(tx *client.Txn) error {
			_, err := tx.Batch([]wire.BatchOp{{Op: wire.OpGet, Key: k[0]}, {Op: wire.OpPut, Key: k[1], Value: []byte("w")}})
			return err
		})
		if err != nil {
			fail.add("batch transaction: %v", err)
		}
	})
	s.RunUntil(3 * int64(time.Second))
	fail.report(t)
	m := s.Handler(d).(*Node).m.Snapshot()
	w, push := m.Distributions["op.write"], m.Distributions["phase.pushws"]
	t.Logf("op.write n=%d p99 %.1f ms, phase.pushws p99 %.1f ms", w.Count, w.P99, push.P99)
	if push.Count != 1 || push.P99 < 500 {
		t.Fatalf("phase.pushws %+v: the read did not wait behind the held intent", push)
	}
	if w.Count != 2 || w.P99 > 50 {
		t.Errorf("op.write %+v: a write's answer waited for a parked read of its batch", w)
	}
}

// TestOpsReadAnswerNotHeldByFlush: without write pipelining a write is answered once durable,
// and a read of the same batch is not a write: phase.read must not absorb the flush.
func TestOpsReadAnswerNotHeldByFlush(t *testing.T) {
	s := newScript(t, map[string]string{"write-pipelining": "off"}, func(c *sim.Config) { c.FlushLatency = 50 * time.Millisecond })
	tp := s.Topology()
	coord, d := tp.DataNodes(0)[0], tp.DataNodes(1)[0]
	k := prototest.KeysOn(t, tp, d, "flush", 2)
	var fail failures
	s.AddClient(0, coord, 100*ms, func(db *client.DB) {
		err := client.RunTxn(db, client.TxnOptions{}, func(tx *client.Txn) error {
			_, err := tx.Batch([]wire.BatchOp{{Op: wire.OpGet, Key: k[0]}, {Op: wire.OpPut, Key: k[1], Value: []byte("w")}})
			return err
		})
		if err != nil {
			fail.add("batch transaction: %v", err)
		}
	})
	s.RunUntil(3 * int64(time.Second))
	fail.report(t)
	m := s.Handler(coord).(*Node).m.Snapshot()
	r, w := m.Distributions["phase.read"], m.Distributions["op.write"]
	t.Logf("phase.read p99 %.1f ms, op.write p99 %.1f ms", r.P99, w.P99)
	if w.Count != 1 || w.P99 < 50 {
		t.Fatalf("op.write %+v: the write did not wait for its flush", w)
	}
	// One WAN round trip to region 1 is 27.3 ms; the flush would add 50.
	if r.Count != 1 || r.P99 > 40 {
		t.Errorf("phase.read %+v: a read's answer waited for a write's flush", r)
	}
}

// TestStaleAnswerAfterCoordinatorRestart: a coordinator crashes while its batch of reads is
// parked at a data node, and restarts. The reads are answered after the restart, when a new
// transaction has a batch of reads parked at the same node. Request ids restarted from zero, so
// the old answers were taken for the new transaction's: it read each key's neighbour's value.
func TestStaleAnswerAfterCoordinatorRestart(t *testing.T) {
	s := newScript(t, nil, nil)
	tp := s.Topology()
	coord, d, holder := tp.DataNodes(0)[0], tp.DataNodes(1)[0], tp.DataNodes(2)[0]
	k := prototest.KeysOn(t, tp, d, "restart", 2)
	var fail failures
	holdIntents(s, 2, holder, 100*ms, time.Second, k, &fail)
	old := s.AddClient(0, coord, 200*ms, func(db *client.DB) {
		tx := db.Begin(client.TxnOptions{})
		_, _ = tx.GetMany(k) // parks; its coordinator dies meanwhile
	})
	old.SetTimeout(time.Second)
	s.At(300*ms, func() { s.Crash(coord) })
	s.At(350*ms, func() {
		if err := s.Restart(coord); err != nil {
			fail.add("restart: %v", err)
		}
	})
	var got []client.Read
	s.AddClient(0, coord, 500*ms, func(db *client.DB) {
		err := client.RunTxn(db, client.TxnOptions{}, func(tx *client.Txn) error {
			var err error
			got, err = tx.GetMany([]string{k[1], k[0]})
			return err
		})
		if err != nil {
			fail.add("reader after restart: %v", err)
		}
	})
	s.RunUntil(3 * int64(time.Second))
	fail.report(t)
	want := []string{"held:" + k[1], "held:" + k[0]}
	for i := range want {
		if i >= len(got) || !bytes.Equal(got[i].Value, []byte(want[i])) {
			t.Fatalf("reads after the restart %q, want %q: answers to the coordinator's previous life were taken", values(got), want)
		}
	}
}

func values(rs []client.Read) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = string(r.Value)
	}
	return out
}

// TestOpsHeldWhileRecovering: a data node that restarted serves nothing until its read floor is
// set (it waits for its oracle, cut off here for 100 ms). A batch of reads and writes arriving
// meanwhile is held, then served in full: the transaction commits and a later one reads its
// writes.
func TestOpsHeldWhileRecovering(t *testing.T) {
	s := newScript(t, nil, nil)
	tp := s.Topology()
	coord, d := tp.DataNodes(0)[0], tp.DataNodes(1)[0]
	k := prototest.KeysOn(t, tp, d, "recover", 4)
	var fail failures
	s.At(100*ms, func() { s.Crash(d) })
	s.At(150*ms, func() {
		s.PartitionNodes(d, tp.Oracle(1))
		if err := s.Restart(d); err != nil {
			fail.add("restart: %v", err)
		}
	})
	held := 0
	s.At(240*ms, func() {
		n := s.Handler(d).(*Node)
		if !n.recovering {
			fail.add("node %d is not recovering: the scenario tests nothing", d)
		}
		for _, h := range n.held {
			if _, ok := h.m.(*OpsReq); ok {
				held++
			}
		}
	})
	s.At(250*ms, s.Heal)
	s.AddClient(0, coord, 200*ms, func(db *client.DB) {
		err := client.RunTxn(db, client.TxnOptions{}, func(tx *client.Txn) error {
			_, err := tx.Batch([]wire.BatchOp{{Op: wire.OpGet, Key: k[0]}, {Op: wire.OpGet, Key: k[1]},
				{Op: wire.OpPut, Key: k[2], Value: []byte("two")}, {Op: wire.OpPut, Key: k[3], Value: []byte("three")}})
			return err
		})
		if err != nil {
			fail.add("batch during recovery: %v", err)
			return
		}
		err = client.RunTxn(db, client.TxnOptions{ReadOnly: true}, func(tx *client.Txn) error {
			got, err := tx.GetMany(k[2:])
			if err != nil {
				return err
			}
			if string(got[0].Value) != "two" || string(got[1].Value) != "three" {
				fail.add("read back %q, %q", got[0].Value, got[1].Value)
			}
			return nil
		})
		if err != nil {
			fail.add("read back: %v", err)
		}
	})
	s.RunUntil(3 * int64(time.Second))
	fail.report(t)
	if held != 1 {
		t.Errorf("%d OpsReqs held while recovering, want 1", held)
	}
}

// TestOpsMalformed hands a data node and a coordinator OpsReqs, OpsResps, probes and restart
// notices that no correct peer sends (empty, zero-valued operations, unknown request ids, an
// answer of the wrong kind, a notice from a node that did not restart), as a garbled or hostile
// frame off the network could: nothing panics, an answer of the wrong kind is not taken for the
// operation's, and a false notice costs a probe, not the transaction.
func TestOpsMalformed(t *testing.T) {
	s := newScript(t, nil, nil)
	tp := s.Topology()
	coord, d, holder := tp.DataNodes(0)[0], tp.DataNodes(1)[0], tp.DataNodes(2)[0]
	k := prototest.KeysOn(t, tp, d, "bad", 2)
	var fail failures
	holdIntents(s, 2, holder, 100*ms, 500*time.Millisecond, k[:1], &fail)
	var got []wire.BatchResult
	s.AddClient(0, coord, 200*ms, func(db *client.DB) {
		err := client.RunTxn(db, client.TxnOptions{}, func(tx *client.Txn) error {
			var err error
			got, err = tx.Batch([]wire.BatchOp{{Op: wire.OpGet, Key: k[0]}, {Op: wire.OpPut, Key: k[1], Value: []byte("w")}})
			return err
		})
		if err != nil {
			fail.add("batch: %v", err)
		}
	})
	hostile := func(to, from topo.NodeID, m wire.Msg) {
		defer func() {
			if r := recover(); r != nil {
				fail.add("%T %+v at node %d: panic %v", m, m, to, r)
			}
		}()
		s.Handler(to).(*Node).Handle(from, m)
	}
	s.At(250*ms, func() {
		n := s.Handler(coord).(*Node)
		var readID, writeID uint64
		for _, t := range n.busy {
			for j, f := range t.flights {
				switch id := t.firstReq + uint64(j); {
				case f.out && f.kind == opWrite:
					writeID = id
				case f.out:
					readID = id
				}
			}
		}
		if readID == 0 {
			fail.add("no read in flight at 250 ms: the scenario tests nothing")
		}
		for _, m := range []wire.Msg{
			&OpsReq{},
			&OpsReq{Reads: []ReadReq{{}}, Writes: []WriteReq{{}}},
			&OpsReq{Writes: []WriteReq{{Key: k[1], TS: ts.Timestamp{Wall: 1}, Txn: storage.TxnID(1), Recorder: d}, {Key: k[1]}}},
			&OpsReq{Reads: []ReadReq{{Key: k[0], TS: ts.Max}}},
			&OpsProbe{},
			&OpsProbe{Ops: []uint64{0, 1 << 62}},
		} {
			hostile(d, coord, m)
		}
		for _, m := range []wire.Msg{
			&OpsResp{},
			&OpsResp{Reads: []ReadResp{{}, {ReqID: 1 << 62}}, Writes: []WriteResp{{Aborted: true}}},
			// The parked read's id, answered as a write: not the read's answer.
			&OpsResp{Writes: []WriteResp{{ReqID: readID, Inc: 1}}},
			// And the other way round, if the write is still out.
			&OpsResp{Reads: []ReadResp{{ReqID: writeID, Found: true, Value: []byte("bogus")}}},
			// A probe answer that no probe asked for, saying the parked read is lost: ignored.
			&OpsProbeResp{},
			&OpsProbeResp{ReqID: readID, Missing: []uint64{readID}},
			// A restart notice from a node that did not restart (duplicated, or forged): the
			// coordinator probes it, and it answers that it holds the parked read.
			&Restarted{},
		} {
			hostile(coord, d, m)
		}
	})
	s.RunUntil(3 * int64(time.Second))
	fail.report(t)
	if len(got) != 2 || string(got[0].Value) != "held:"+k[0] {
		t.Errorf("batch results %+v: want the held value of %s", got, k[0])
	}
	if c := s.Handler(coord).(*Node).m.Snapshot().Counters; c["probe"] != 1 || c["abort.op-lost"] != 0 {
		t.Errorf("%d probes and %d op-lost aborts after one false restart notice, want 1 and none", c["probe"], c["abort.op-lost"])
	}
}

// TestDuplicatedMessages: the network delivers one message in ten twice (client requests and
// replies, OpsReqs and OpsResps, commits, durability notes), with crashes in some runs, and
// histories stay strictly serializable.
func TestDuplicatedMessages(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		t.Run(fmt.Sprintf("seed-%d", seed), func(t *testing.T) {
			res := prototest.Run(t, prototest.Case{Protocol: "k2", Seed: seed, Workload: prototest.ListAppend(15, 0.5), Clients: 6,
				Faults: func(s *sim.Sim, w bench.Window) {
					s.SetDuplication(0.1)
					if seed == 2 {
						prototest.CrashDataNode(1, 300*time.Millisecond, 400*time.Millisecond)(s, w)
					}
				}})
			prototest.ExpectValid(t, prototest.MustCheck(t, res, model), 50)
		})
	}
}
