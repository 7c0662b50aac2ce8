package crdb

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/meridiandb/meridian/client"
	"github.com/meridiandb/meridian/internal/bench"
	"github.com/meridiandb/meridian/internal/check"
	"github.com/meridiandb/meridian/internal/node"
	"github.com/meridiandb/meridian/internal/node/nodetest"
	"github.com/meridiandb/meridian/internal/protocol/prototest"
	"github.com/meridiandb/meridian/internal/protocol/txnkit"
	"github.com/meridiandb/meridian/internal/sim"
	"github.com/meridiandb/meridian/internal/storage"
	"github.com/meridiandb/meridian/internal/storage/durable"
	"github.com/meridiandb/meridian/internal/storage/mvcc"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/ts"
)

const ms = int64(time.Millisecond)

// maxVersionsPerKey returns the most versions any key holds on any data node of s.
func maxVersionsPerKey(s *sim.Sim) int {
	most := 0
	for _, id := range dataNodes(s.Topology()) {
		if n, ok := s.Handler(id).(*Node); ok {
			n.store.Ascend("", "", func(_ string, vs []mvcc.Version) bool {
				most = max(most, len(vs))
				return true
			})
		}
	}
	return most
}

// TestVersionGCHistories runs contended list-append histories (20 keys, hot enough that every
// key is written many times a second) with gc-ttl 300ms and 50ms, so that leaseholders collect
// versions many times during the run, with and without crashes. max-offset is half the TTL,
// the most checkGCTTL allows. The histories stay serializable (at 50ms with hundreds of
// too-old aborts), versions are collected, and the versions a key holds stay bounded: over the
// last third of the run the fullest key holds on average no more than the fullest ever did in
// the first third. (A mean against a peak: with GC the count is steady from the start, so one
// third's peak against another's compares noise, and ±5 versions around 15 went either way.
// The first third used to be GC's worst: a start or restart raises a node's read floor to its
// clock + 2×max-offset, which at the 500ms default held back every pass for a second; now it
// is a TTL.) Keeping every version (gc-ttl 1000h, the behaviour before GC) fails that test by
// far, and leaves the hottest key with more than twice as many at the end as with GC, and
// growing. The same runs at 50ms with operations below the horizon served from what GC left
// (the refusal switched off) must be caught by the checker on at least one of them (G-single
// and G-nonadjacent cycles when written).
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
	// fullness is how many versions the fullest key holds, sampled every 50ms, per third of the
	// measured window: at most, and on average.
	type fullness struct {
		peak [3]int
		mean [3]float64
	}
	bounded := func(f fullness) bool { return f.mean[2] <= float64(f.peak[0]) }
	do := func(t *testing.T, r run, ttl, maxOffset string) (*check.Report, int64, fullness) {
		var f fullness
		var samples [3]int
		res := prototest.Run(t, prototest.Case{Protocol: name, Seed: r.seed, Workload: prototest.ListAppend(20, 0.8),
			Duration: 6 * time.Second, Options: map[string]string{txnkit.GCTTLOption: ttl, "max-offset": maxOffset},
			Faults: func(s *sim.Sim, w bench.Window) {
				if r.faults != nil {
					r.faults(s, w)
				}
				third := (w.End - w.MeasureFrom) / 3
				for at := w.MeasureFrom; at < w.End; at += 50 * ms {
					i := min(int((at-w.MeasureFrom)/third), 2)
					s.At(at, func() {
						v := maxVersionsPerKey(s)
						f.peak[i] = max(f.peak[i], v)
						f.mean[i] = (f.mean[i]*float64(samples[i]) + float64(v)) / float64(samples[i]+1)
						samples[i]++
					})
				}
			}})
		c := res.ProtocolMetrics.Counters
		t.Logf("%s/seed-%d gc-ttl=%s max-offset=%s: %d committed, %d versions collected in %d passes, %d too-old aborts, versions on the fullest key per third: at most %v, on average %.1f",
			r.name, r.seed, ttl, maxOffset, res.Committed, c["gc/versions-removed"], c["gc/passes"], res.AbortsByCause[txnkit.AbortTooOld], f.peak, f.mean)
		return prototest.MustCheck(t, res, model), c["gc/versions-removed"], f
	}
	for _, c := range []struct{ ttl, maxOffset string }{{"300ms", "150ms"}, {"50ms", "25ms"}} {
		for _, r := range runs {
			t.Run(fmt.Sprintf("gc-ttl-%s/%s/seed-%d", c.ttl, r.name, r.seed), func(t *testing.T) {
				rep, removed, f := do(t, r, c.ttl, c.maxOffset)
				prototest.ExpectValid(t, rep, 50)
				if removed == 0 {
					t.Errorf("no version was collected with gc-ttl %s", c.ttl)
				}
				if !bounded(f) {
					t.Errorf("the fullest key held at most %d versions in the first third of the run, %.1f on average in the last: GC does not bound them", f.peak[0], f.mean[2])
				}
				if c.ttl == "300ms" && r.seed == 1 && r.faults == nil {
					_, removed, kept := do(t, r, "1000h", c.maxOffset)
					if removed != 0 || bounded(kept) || kept.peak[2] <= 2*f.peak[2] || kept.peak[2] <= kept.peak[0] {
						t.Errorf("gc-ttl 1000h: %d versions collected, on the fullest key per third at most %v, on average %.1f; want none collected, unbounded, more than twice %d and growing",
							removed, kept.peak, kept.mean, f.peak[2])
					}
				}
			})
		}
	}

	t.Run("refusal-off", func(t *testing.T) {
		refuseBelowGCHorizon = false
		defer func() { refuseBelowGCHorizon = true }()
		caught := 0
		for _, r := range runs {
			rep, _, _ := do(t, r, "50ms", "25ms")
			t.Logf("%s/seed-%d without the refusal: %s %v", r.name, r.seed, rep.Verdict, rep.AnomalyTypes)
			if rep.Verdict == check.Invalid {
				caught++
			}
		}
		if caught == 0 {
			t.Errorf("with operations below the GC horizon served, no run was caught")
		}
	})
}

// gcReadScenario runs a transaction that takes its timestamp at about 100 ms (its first
// operation, on its own gateway in region 1: a read, or with readWrite a write) and reads key
// k at about 700 ms. Meanwhile k's leaseholder d, in region 0, commits v0 (at 20 ms, before
// the reader's timestamp), then v1 and v2 (at 150 and 200 ms, after it and past its
// uncertainty limit: max-offset is 20ms), and with gc-ttl 200ms collects v0 and v1 by 600 ms;
// the reader's snapshot needs v0. between, if set, runs at 600 ms (a crash and restart of
// d). It returns the read's value, the too-old aborts its gateway counted, and the read's error.
func gcReadScenario(t *testing.T, readWrite bool, between func(s *sim.Sim, d topo.NodeID)) (string, int64, error) {
	t.Helper()
	b := newBatchSim(t, map[string]string{txnkit.GCTTLOption: "200ms", "max-offset": "20ms"})
	s, tp := b.s, b.tp
	defer s.Stop()
	d := tp.DataNodes(0)[0]
	readerCoord := tp.DataNodes(1)[0] // elsewhere, so the reader outlives a crash of d
	k := prototest.KeysOn(t, tp, d, "gc", 1)[0]
	other := prototest.KeysOn(t, tp, readerCoord, "gc-other", 1)[0]
	var failures []string
	fail := func(format string, args ...any) { failures = append(failures, fmt.Sprintf(format, args...)) }
	write := func(at int64, v string) {
		s.AddClient(0, d, at, func(db *client.DB) {
			if err := client.RunTxn(db, client.TxnOptions{}, func(tx *client.Txn) error { return tx.Put(k, []byte(v)) }); err != nil {
				fail("write %s: %v", v, err)
			}
		})
	}
	write(20*ms, "v0")
	write(150*ms, "v1")
	write(200*ms, "v2")
	var got string
	var readErr error
	done := false
	s.AddClient(1, readerCoord, 100*ms, func(db *client.DB) {
		defer func() { done = true }()
		tx := db.Begin(client.TxnOptions{ReadOnly: !readWrite})
		// The first operation takes the timestamp, between v0 and v1.
		if readWrite {
			if err := tx.Put(other, []byte("r")); err != nil {
				fail("first write: %v", err)
				return
			}
		} else if _, err := tx.Get(other); err != nil && !errors.Is(err, client.ErrNotFound) {
			fail("first read: %v", err)
			return
		}
		db.Transport().Sleep(600 * time.Millisecond)
		v, err := tx.Get(k)
		got, readErr = string(v), err
		_ = tx.Abort()
	})
	s.At(600*ms, func() {
		if n := s.Handler(d).(*Node).m.Counters["gc/versions-removed"]; n < 2 {
			fail("k's leaseholder collected %d versions by 600 ms, want v0 and v1 gone", n)
		}
		if between != nil {
			between(s, d)
		}
	})
	s.RunUntil(2 * int64(time.Second))
	if !done {
		fail("the reader did not finish")
	}
	for _, f := range failures {
		t.Error(f)
	}
	return got, s.Handler(readerCoord).(*Node).m.Counters["abort/"+txnkit.AbortTooOld], readErr
}

// TestReadBelowGCHorizonRefused: a transaction, read-only or not, that takes its timestamp and
// stalls past gc-ttl while k is overwritten and collected has its read of k refused (cause
// too-old, counted under abort/too-old) instead of answered from what GC left. With the
// refusal switched off the same read finds no value, though v0 committed before the reader's
// timestamp: the refusal is what keeps it correct. after-restart: k's leaseholder crashes
// after collecting and restarts before the read; the horizon is persisted with the deletes, so
// the restarted node still refuses (and without the refusal it too answers wrongly: the
// deletes are durable).
func TestReadBelowGCHorizonRefused(t *testing.T) {
	restart := func(t *testing.T) func(s *sim.Sim, d topo.NodeID) {
		return func(s *sim.Sim, d topo.NodeID) {
			before := s.Handler(d).(*Node).store.GCHorizon()
			s.Crash(d)
			if err := s.Restart(d); err != nil {
				t.Errorf("restart: %v", err)
				return
			}
			if after := s.Handler(d).(*Node).store.GCHorizon(); after.IsZero() || before.Less(after) {
				t.Errorf("horizon %v before the crash, %v after the restart: want it recovered", before, after)
			}
		}
	}
	for _, readWrite := range []bool{false, true} {
		for _, crash := range []bool{false, true} {
			kind, life := "read-only", "live"
			if readWrite {
				kind = "read-write"
			}
			if crash {
				life = "after-restart"
			}
			t.Run(kind+"/"+life, func(t *testing.T) {
				var between func(s *sim.Sim, d topo.NodeID)
				if crash {
					between = restart(t)
				}
				_, tooOld, err := gcReadScenario(t, readWrite, between)
				var ae *client.AbortError
				if !errors.As(err, &ae) || ae.Cause != txnkit.AbortTooOld {
					t.Fatalf("read below the horizon: %v, want an abort with cause %q", err, txnkit.AbortTooOld)
				}
				if tooOld != 1 {
					t.Errorf("the reader's gateway counted %d abort/too-old, want 1", tooOld)
				}

				refuseBelowGCHorizon = false
				defer func() { refuseBelowGCHorizon = true }()
				got, _, err := gcReadScenario(t, readWrite, between)
				if !errors.Is(err, client.ErrNotFound) {
					t.Fatalf("without the refusal the read returned %q, %v; want the wrong answer (nothing, where v0 is right), which shows the refusal matters", got, err)
				}
			})
		}
	}
}

// TestRefreshAcrossGCHorizon drives one leaseholder by hand. Key k has committed versions at
// 1.05 s and 1.25 s, key q at 1.02 s and 1.04 s; with gc-ttl 200ms a pass at 1.45 s collects
// at horizon 1.25 s, removing k's 1.05 s version and q's 1.02 s one. A refresh of k from 1.0 s
// to 1.2 s must fail (1.05 s lies in between), but only the collected version said so: the
// leaseholder refuses it (too-old), and without the refusal it answers OK, wrongly. A refresh
// from below the horizon to above it is answered, and rightly: of k from 1.0 s to 1.3 s it
// fails (the kept 1.25 s version stands in for the collected one), of q from 1.1 s to 1.3 s it
// succeeds. A write below the horizon is refused as well.
func TestRefreshAcrossGCHorizon(t *testing.T) {
	cfg, err := prototest.SimConfig(prototest.Case{Protocol: name, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	tp := cfg.Topology
	env := &nodetest.ScriptEnv{ID: tp.DataNodes(0)[0], Topo: tp, Clock: int64(time.Second), Disk: durable.NewMem()}
	h, err := proto{}.NewNode(node.Config{Env: env, Durable: env.Disk, Options: map[string]string{txnkit.GCTTLOption: "200ms", "max-offset": "20ms"}})
	if err != nil {
		t.Fatal(err)
	}
	n := h.(*Node)
	c := tp.DataNodes(1)[0] // the coordinators of every transaction here
	keys := prototest.KeysOn(t, tp, n.self, "refresh-gc", 2)
	k, q := keys[0], keys[1]
	at := func(msec int64) ts.Timestamp { return ts.Timestamp{Wall: msec * ms} }
	settle := func() {
		for range 3 {
			env.Flush()
			env.Advance(0)
		}
		env.Flush()
	}
	seq := uint64(0)
	commit := func(key string, when ts.Timestamp) {
		seq++
		txn := storage.MakeTxnID(int32(c), seq)
		n.Handle(c, &WriteReq{Req: seq, Txn: TxnMeta{ID: txn, Age: when, RecordNode: c, Coord: c}, Key: key, Value: []byte("v"), WriteTS: when})
		settle()
		n.Handle(c, &ResolveReq{Txn: txn, Keys: []string{key}, Commit: true, TS: when, Record: -1})
		settle()
		if v, ok := n.store.Latest(key); !ok || v.TS != when || v.State != mvcc.Committed {
			t.Fatalf("%s: latest version %+v, want committed at %v", key, v, when)
		}
	}
	commit(k, at(1050))
	commit(k, at(1250))
	commit(q, at(1020))
	commit(q, at(1040))
	env.Advance(500 * time.Millisecond) // to 1.5 s: the pass due at 1.45 s runs
	settle()
	env.Take()
	if hz := n.store.GCHorizon(); hz != at(1250) {
		t.Fatalf("horizon %v, want 1.25 s", hz)
	}
	if got := n.m.Counters["gc/versions-removed"]; got != 2 {
		t.Fatalf("%d versions collected, want k's and q's oldest", got)
	}
	refresh := func(key string, from, to ts.Timestamp) *RefreshResp {
		t.Helper()
		seq++
		n.Handle(c, &RefreshReq{Req: seq, Txn: storage.MakeTxnID(int32(c), 1000), Keys: []string{key}, From: from, To: to})
		for _, s := range env.Take() {
			if r, ok := s.M.(*RefreshResp); ok && r.Req == seq {
				return r
			}
		}
		t.Fatalf("refresh of %s from %v to %v: no answer", key, from, to)
		return nil
	}
	if r := refresh(k, at(1000), at(1200)); !r.TooOld || r.OK {
		t.Errorf("refresh of k from 1.0 s to 1.2 s, below the horizon: %+v, want refused as too old", r)
	}
	if r := refresh(k, at(1000), at(1300)); r.TooOld || r.OK {
		t.Errorf("refresh of k from 1.0 s to 1.3 s, across the horizon: %+v, want answered, failed", r)
	}
	if r := refresh(q, at(1100), at(1300)); r.TooOld || !r.OK {
		t.Errorf("refresh of q from 1.1 s to 1.3 s, across the horizon: %+v, want answered, OK", r)
	}

	// A write below the horizon is refused too; one at it is not.
	for _, w := range []struct {
		at     ts.Timestamp
		tooOld bool
	}{{at(1200), true}, {at(1250), false}} {
		seq++
		txn := storage.MakeTxnID(int32(c), seq)
		n.Handle(c, &WriteReq{Req: seq, Txn: TxnMeta{ID: txn, Age: w.at, RecordNode: c, Coord: c}, Key: q, Value: []byte("w"), WriteTS: w.at})
		settle()
		var resp *WriteResp
		for _, s := range env.Take() {
			if r, ok := s.M.(*WriteResp); ok && r.Req == seq {
				resp = r
			}
		}
		if resp == nil || resp.TooOld != w.tooOld {
			t.Errorf("write at %v (horizon 1.25 s): %+v, want TooOld=%v", w.at, resp, w.tooOld)
		}
		n.Handle(c, &ResolveReq{Txn: txn, Keys: []string{q}, Record: -1})
		settle()
		env.Take()
	}

	refuseBelowGCHorizon = false
	defer func() { refuseBelowGCHorizon = true }()
	if r := refresh(k, at(1000), at(1200)); !r.OK {
		t.Errorf("without the refusal, refresh of k from 1.0 s to 1.2 s: %+v; want the wrong answer (OK: the 1.05 s version that makes it fail was collected), which shows the refusal matters", r)
	}
}
