package k2

import (
	"errors"
	"testing"
	"time"

	"github.com/meridiandb/meridian/client"
	"github.com/meridiandb/meridian/internal/bench"
	"github.com/meridiandb/meridian/internal/check"
	"github.com/meridiandb/meridian/internal/node/nodetest"
	"github.com/meridiandb/meridian/internal/protocol/prototest"
	"github.com/meridiandb/meridian/internal/protocol/txnkit"
	"github.com/meridiandb/meridian/internal/sim"
	"github.com/meridiandb/meridian/internal/storage"
	"github.com/meridiandb/meridian/internal/storage/durable"
	"github.com/meridiandb/meridian/internal/storage/mvcc"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/ts"
	"github.com/meridiandb/meridian/internal/wire"
)

// TestVersionGCHistories runs contended histories with a short gc-ttl, so that data nodes
// collect versions many times during the run, with and without crashes: histories stay strictly
// serializable and versions are removed. The same runs with old reads served from what GC left
// (the refusal switched off) are caught by the checker.
func TestVersionGCHistories(t *testing.T) {
	type run struct {
		name   string
		seed   uint64
		faults func(s *sim.Sim, w bench.Window)
	}
	var runs []run
	for _, seed := range []uint64{1, 2} {
		runs = append(runs, run{"no-faults", seed, nil},
			run{"crashes", seed, prototest.Crashes(300*time.Millisecond, map[topo.NodeID]time.Duration{0: 700 * time.Millisecond, 2: 1400 * time.Millisecond})})
	}
	do := func(r run) *check.Report {
		res := prototest.Run(t, prototest.Case{Protocol: "k2", Seed: r.seed, Workload: prototest.ListAppend(20, 0.8),
			Options: map[string]string{txnkit.GCTTLOption: "200ms"}, Faults: r.faults})
		c := res.ProtocolMetrics.Counters
		t.Logf("%s/seed-%d: %d committed, %d versions collected, %d too-old aborts", r.name, r.seed, res.Committed, c["gc/versions-removed"], res.AbortsByCause[txnkit.AbortTooOld])
		if c["gc/versions-removed"] == 0 {
			t.Errorf("%s/seed-%d: no version was collected with gc-ttl 200ms", r.name, r.seed)
		}
		return prototest.MustCheck(t, res, model)
	}
	for _, r := range runs {
		prototest.ExpectValid(t, do(r), 50)
	}

	refuseBelowGCHorizon = false
	defer func() { refuseBelowGCHorizon = true }()
	caught := 0
	for _, r := range runs {
		if do(r).Verdict == check.Invalid {
			caught++
		}
	}
	if caught == 0 {
		t.Errorf("with reads below the GC horizon served, no run was caught")
	}
}

// gcScenario runs a read-only transaction that takes its timestamp at 100 ms and reads key k at
// 700 ms. Meanwhile k is written v0 (before the reader's timestamp), then v1 and v2 (after it),
// and with gc-ttl 200ms the data node collects v0 and v1; the reader's snapshot needs v0.
// between, if set, runs at 600 ms (a crash and restart of k's node). It returns the read's
// value or error.
func gcScenario(t *testing.T, between func(s *sim.Sim, d topo.NodeID)) (string, error) {
	t.Helper()
	s := newScript(t, map[string]string{txnkit.GCTTLOption: "200ms"}, nil)
	tp := s.Topology()
	d := tp.DataNodes(0)[0]
	readerCoord := tp.DataNodes(1)[0] // elsewhere, so the reader outlives a crash of d
	k := prototest.KeysOn(t, tp, d, "gc", 1)[0]
	other := prototest.KeysOn(t, tp, readerCoord, "gc-other", 1)[0]
	var fail failures
	write := func(at int64, v string) {
		s.AddClient(0, d, at, func(db *client.DB) {
			if err := client.RunTxn(db, client.TxnOptions{}, func(tx *client.Txn) error { return tx.Put(k, []byte(v)) }); err != nil {
				fail.add("write %s: %v", v, err)
			}
		})
	}
	write(20*ms, "v0")
	write(150*ms, "v1")
	write(200*ms, "v2")
	var got string
	var readErr error
	s.AddClient(1, readerCoord, 100*ms, func(db *client.DB) {
		tx := db.Begin(client.TxnOptions{})
		if _, err := tx.Get(other); err != nil && !errors.Is(err, client.ErrNotFound) { // takes the timestamp, between v0 and v1
			fail.add("first read: %v", err)
			return
		}
		db.Transport().Sleep(600 * time.Millisecond)
		v, err := tx.Get(k)
		got, readErr = string(v), err
		_ = tx.Abort()
	})
	collected := func() {
		if n := s.Handler(d).(*Node).m.Counters["gc/versions-removed"]; n < 2 {
			t.Errorf("k's node collected %d versions by 600 ms, want v0 and v1 gone", n)
		}
	}
	s.At(600*ms, func() {
		collected()
		if between != nil {
			between(s, d)
		}
	})
	s.RunUntil(2 * int64(time.Second))
	fail.report(t)
	return got, readErr
}

// TestReadBelowGCHorizonRefused: a transaction older than the GC horizon has its read refused
// (too-old) instead of answered from what GC left. With the refusal switched off the same read
// finds no value, though v0 committed before the reader began: the refusal is what keeps it
// correct.
func TestReadBelowGCHorizonRefused(t *testing.T) {
	for _, c := range []struct {
		name    string
		between func(s *sim.Sim, d topo.NodeID)
	}{
		{"live", nil},
		// The horizon is persisted with the deletes, so the restarted node still refuses.
		{"after-restart", func(s *sim.Sim, d topo.NodeID) {
			s.Crash(d)
			if err := s.Restart(d); err != nil {
				t.Errorf("restart: %v", err)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := gcScenario(t, c.between)
			var ae *client.AbortError
			if !errors.As(err, &ae) || ae.Cause != txnkit.AbortTooOld {
				t.Fatalf("read below the horizon: %v, want an abort with cause %q", err, txnkit.AbortTooOld)
			}

			refuseBelowGCHorizon = false
			defer func() { refuseBelowGCHorizon = true }()
			got, err := gcScenario(t, c.between)
			if !errors.Is(err, client.ErrNotFound) {
				t.Fatalf("without the refusal the read returned %q, %v; want the wrong answer (nothing), which shows the refusal matters", got, err)
			}
		})
	}
}

// TestVersionGCAfterRestartWithoutWrites: a restarted data node collects the garbage it
// recovered, and the garbage that reinstalling its preloaded rows leaves under recovered
// versions, although nothing is written to it again. Only a write's persist armed the
// collector: the incarnation's persist and an idle tick's empty batch do not, so the garbage
// stayed until the next write, for ever on a node that gets none.
func TestVersionGCAfterRestartWithoutWrites(t *testing.T) {
	for _, c := range []struct {
		name     string
		versions int  // committed versions of the key written before the crash
		preload  bool // the restarted node gets its preloaded row back, below them
	}{
		{"recovered", 3, false},
		{"preloaded", 1, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := prototest.SimConfig(prototest.Case{Protocol: "k2", Seed: 1})
			if err != nil {
				t.Fatal(err)
			}
			opts, err := parseConfig(100*time.Microsecond, 0, map[string]string{txnkit.GCTTLOption: "200ms"})
			if err != nil {
				t.Fatal(err)
			}
			tp := cfg.Topology
			self := tp.DataNodes(0)[0]
			k := prototest.KeysOn(t, tp, self, "gc", 1)[0]
			disk := durable.NewMem()
			life := func(clock int64) (*Node, *nodetest.ScriptEnv) {
				t.Helper()
				env := &nodetest.ScriptEnv{ID: self, Topo: tp, Clock: clock, Epsilon: 100 * time.Microsecond, Disk: disk}
				n, err := newNode(env, disk, opts)
				if err != nil {
					t.Fatal(err)
				}
				env.Flush()
				return n, env
			}
			n, env := life(int64(time.Second))
			for i := range c.versions {
				v := mvcc.Version{TS: ts.Timestamp{Wall: env.Clock + int64(i+1)*ms}, Txn: storage.MakeTxnID(9, uint64(i+1)), Value: []byte{byte(i)}}
				if err := n.store.PutCommitted(k, v); err != nil {
					t.Fatal(err)
				}
			}
			n.persist(n.dataWrites(), nil)
			env.Flush()

			n, env = life(env.Clock + int64(time.Second)) // the crash: the pass the first life armed never runs
			if c.preload {
				if err := n.Preload([]wire.KV{{Key: k, Value: []byte("row")}}); err != nil {
					t.Fatal(err)
				}
			}
			garbage := len(n.store.Versions(k)) - 1
			if garbage == 0 {
				t.Fatal("k has no superseded version: the scenario tests nothing")
			}
			env.Advance(300 * time.Millisecond)
			if removed := n.m.Counters["gc/versions-removed"]; removed != int64(garbage) || len(n.store.Versions(k)) != 1 {
				t.Fatalf("restarted node removed %d of %d superseded versions, %d of k left; want all but the latest gone", removed, garbage, len(n.store.Versions(k)))
			}
		})
	}
}
