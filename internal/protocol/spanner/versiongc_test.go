package spanner

import (
	"fmt"
	"testing"
	"time"

	"github.com/meridiandb/meridian/internal/bench"
	"github.com/meridiandb/meridian/internal/check"
	"github.com/meridiandb/meridian/internal/node"
	"github.com/meridiandb/meridian/internal/node/nodetest"
	"github.com/meridiandb/meridian/internal/protocol/prototest"
	"github.com/meridiandb/meridian/internal/protocol/txnkit"
	"github.com/meridiandb/meridian/internal/storage"
	"github.com/meridiandb/meridian/internal/storage/durable"
	"github.com/meridiandb/meridian/internal/storage/locks"
	"github.com/meridiandb/meridian/internal/ts"
	"github.com/meridiandb/meridian/internal/wire"
)

// withoutGCRefusal runs f with snapshot reads below the GC horizon answered from what GC left.
func withoutGCRefusal(f func()) {
	refuseBelowGCHorizon = false
	defer func() { refuseBelowGCHorizon = true }()
	f()
}

// TestVersionGCHistories runs contended list-append histories (read-only transactions
// included) with gc-ttl 300ms over 3 s, so participants collect versions many times during the
// run, in both write-lock modes, with and without a node crash: the histories stay strictly
// serializable and versions are really removed.
func TestVersionGCHistories(t *testing.T) {
	for _, writeLocks := range []string{"buffered", "eager"} {
		for _, seed := range []uint64{1, 2} {
			t.Run(fmt.Sprintf("%s/seed%d", writeLocks, seed), func(t *testing.T) {
				res := runGC(t, "300ms", writeLocks, seed)
				m := res.ProtocolMetrics.Counters
				if m["gc/versions-removed"] == 0 {
					t.Errorf("no version collected with gc-ttl 300ms over 3 s")
				}
				if m["ro_commits"] == 0 {
					t.Errorf("no read-only transaction committed: the run does not exercise snapshot reads")
				}
				// The crash run (seed 2) commits little in eager mode: 48 checked transactions.
				prototest.ExpectValid(t, prototest.MustCheck(t, res, "strict-serializable"), 40)
			})
		}
	}
}

// TestVersionGCRefusalUnderLoad: with gc-ttl 60ms, shorter than a cross-region read-only
// transaction, some snapshot reads fall below their participant's horizon. They are refused
// (too-old aborts, retried by the clients) and the histories stay strictly serializable; with
// the refusal switched off the same runs serve them from what GC left, and the checker finds
// the anomalies (G-single in each of these seeds when this was written).
func TestVersionGCRefusalUnderLoad(t *testing.T) {
	seeds := []uint64{1, 2, 3}
	var tooOld int64
	for _, seed := range seeds {
		res := runGC(t, "60ms", "buffered", seed)
		tooOld += res.AbortsByCause[txnkit.AbortTooOld]
		prototest.ExpectValid(t, prototest.MustCheck(t, res, "strict-serializable"), 50)
	}
	if tooOld == 0 {
		t.Fatalf("no snapshot read was refused with gc-ttl 60ms: the runs do not exercise the refusal")
	}
	caught := 0
	withoutGCRefusal(func() {
		for _, seed := range seeds {
			rep := prototest.MustCheck(t, runGC(t, "60ms", "buffered", seed), "strict-serializable")
			t.Logf("refusal off, seed %d: %s %v", seed, rep.Verdict, rep.AnomalyTypes)
			if rep.Verdict == check.Invalid {
				caught++
			}
		}
	})
	if caught == 0 {
		t.Errorf("with snapshot reads below the GC horizon served, no run was caught")
	}
}

// runGC runs list-append over 10 keys for 3 s with gc-ttl ttl; seed 2 crashes a node.
func runGC(t *testing.T, ttl, writeLocks string, seed uint64) *bench.Result {
	t.Helper()
	c := prototest.Case{Protocol: Name, Seed: seed,
		Options:  map[string]string{txnkit.GCTTLOption: ttl, "write-locks": writeLocks},
		Workload: prototest.ListAppend(10, 0), Duration: 3 * time.Second}
	if seed == 2 {
		c.Faults = crashOne
	}
	res := prototest.Run(t, c)
	m := res.ProtocolMetrics.Counters
	t.Logf("gc-ttl=%s %s seed %d: commits=%d ro=%d passes=%d versions-removed=%d keys-removed=%d too-old=%d late-commits=%d",
		ttl, writeLocks, seed, res.Committed, m["ro_commits"], m["gc/passes"], m["gc/versions-removed"], m["gc/keys-removed"],
		res.AbortsByCause[txnkit.AbortTooOld], m["gc/late-commits"])
	return res
}

// gcSnapshotScenario drives a cluster with gc-ttl 100ms: a writer commits v0 to k, a read-only
// transaction starts and reads k (v0), the writer commits v1 and v2, and 200 ms later the
// participant of k has collected v0 and v1. The read-only transaction then reads k again (alone,
// or in a batch with another key of the same participant, which goes as one multi-key
// SnapReadReq) at its old snapshot. It returns the cluster and the answer to that read.
func gcSnapshotScenario(t *testing.T, batch bool) (*testCluster, *wire.ClientReply) {
	t.Helper()
	c := newTestClusterConfig(t, Config{Policy: locks.WoundWait, IdleTimeout: 5 * time.Second,
		DecisionTimeout: 500 * time.Millisecond, GCTTL: 100 * time.Millisecond})
	const writer, reader node.ID = 100, 101
	k, other := c.key(1, 0, "gc/k"), c.key(1, 1, "gc/other")
	var txn uint64
	write := func(v string) {
		t.Helper()
		txn++
		if r := c.request(writer, &wire.ClientRequest{Txn: txn, Op: wire.OpPut, Key: k, Value: []byte(v)}); r == nil || r.Code != wire.CodeOK {
			t.Fatalf("put %s: %+v", v, r)
		}
		if r := c.request(writer, &wire.ClientRequest{Txn: txn, Seq: 1, Op: wire.OpCommit}); r == nil || r.Code != wire.CodeOK {
			t.Fatalf("commit %s: %+v", v, r)
		}
		c.now += int64(10 * time.Millisecond)
	}
	read := func(seq uint32) *wire.ClientReply {
		req := &wire.ClientRequest{Txn: 1, Seq: seq, Op: wire.OpGet, Key: k, ReadOnly: true}
		if batch {
			req.Op, req.Key, req.Batch = wire.OpBatch, "", gets(k, other)
		}
		return c.request(reader, req)
	}

	write("v0")
	first := read(0)
	if batch {
		checkResults(t, "first read", first, []string{"v0", ""})
	} else if first == nil || first.Code != wire.CodeOK || !first.Found || string(first.Value) != "v0" {
		t.Fatalf("first read of k: %+v, want v0", first)
	}
	write("v1")
	write("v2")
	c.fireTimers(200 * time.Millisecond)
	part := c.nodes[c.tp.PrimaryOf(k)]
	if n := part.metrics.Counters["gc/versions-removed"]; n < 2 {
		t.Fatalf("k's participant removed %d versions, want v0 and v1 gone", n)
	}
	return c, read(1)
}

// TestSnapshotBelowGCHorizonRefused: a read-only transaction whose snapshot fell below its
// participant's GC horizon (other transactions overwrote the key and a pass removed the versions
// it reads) is aborted with cause too-old, counted under aborts/too-old, for a single read and a
// multi-key one. With the refusal switched off the same read returns what GC left — nothing,
// though the same transaction read v0 at the same snapshot before — so the refusal is what keeps
// snapshot reads right.
func TestSnapshotBelowGCHorizonRefused(t *testing.T) {
	for _, batch := range []bool{false, true} {
		name := map[bool]string{false: "get", true: "batch"}[batch]
		t.Run(name, func(t *testing.T) {
			c, r := gcSnapshotScenario(t, batch)
			if r == nil || r.Code != wire.CodeAborted || r.Cause != txnkit.AbortTooOld {
				t.Fatalf("read below the horizon: %+v, want an abort with cause %q", r, txnkit.AbortTooOld)
			}
			if n := c.nodes[0].metrics.Counters["aborts/"+txnkit.AbortTooOld]; n != 1 {
				t.Errorf("aborts/%s = %d, want 1", txnkit.AbortTooOld, n)
			}
			checkQuiet(t, c)

			withoutGCRefusal(func() {
				_, r := gcSnapshotScenario(t, batch)
				if batch {
					checkResults(t, "read below the horizon without the refusal", r, []string{"", ""})
				} else if r == nil || r.Code != wire.CodeOK || r.Found {
					t.Fatalf("without the refusal the read answered %+v; want the wrong answer (not found, where v0 is right), which shows the refusal matters", r)
				}
			})
		})
	}
}

// scriptNode is one data node (coordinator and participant) over a hand-driven env, with gc-ttl
// 100ms; the test plays its coordinators and read-only transactions by sending it messages.
type scriptNode struct {
	t    *testing.T
	env  *nodetest.ScriptEnv
	n    *Node
	next uint64 // transaction ids handed out
}

const scriptCoord node.ID = 4 // the coordinator the test plays

func newScriptNode(t *testing.T, disk *durable.Mem, clock int64) *scriptNode {
	t.Helper()
	env := &nodetest.ScriptEnv{ID: 1, Clock: clock, Epsilon: time.Millisecond, Disk: disk}
	n, err := NewNode(env, disk, Config{Policy: locks.WoundWait, CommitWait: true, IdleTimeout: 5 * time.Second,
		DecisionTimeout: 500 * time.Millisecond, GCTTL: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	env.Flush()
	env.Take()
	return &scriptNode{t: t, env: env, n: n, next: uint64(clock)}
}

func (s *scriptNode) txn() storage.TxnID {
	s.next++
	return storage.MakeTxnID(int32(scriptCoord), s.next)
}

// prepare prepares a write of key=value and returns the transaction and its vote.
func (s *scriptNode) prepare(key, value string) (storage.TxnID, *PrepareResp) {
	id := s.txn()
	s.n.Handle(scriptCoord, &PrepareReq{Txn: id, Age: ts.Timestamp{Wall: s.env.Clock}, Writes: []Write{{Key: key, Value: []byte(value)}}})
	s.env.Flush()
	return id, votes(s.env.Take())[id]
}

// commit writes key=value in a transaction of its own, committed just above its prepare
// timestamp, and returns the commit timestamp.
func (s *scriptNode) commit(key, value string) ts.Timestamp {
	s.t.Helper()
	id, v := s.prepare(key, value)
	if v == nil || !v.OK {
		s.t.Fatalf("write %s=%s: vote %+v", key, value, v)
	}
	at := tsAfter(v.TS, 0, uint32(scriptCoord))
	s.n.Handle(scriptCoord, &DecideReq{Txn: id, Commit: true, TS: at})
	s.env.Flush()
	s.env.Take()
	return at
}

// snapRead reads key at a snapshot; it returns the answer, or nil if the read is parked.
func (s *scriptNode) snapRead(key string, at ts.Timestamp) *SnapReadResp {
	s.n.Handle(scriptCoord, &SnapReadReq{Txn: s.txn(), Key: key, At: at})
	for _, m := range s.env.Take() {
		if r, ok := m.M.(*SnapReadResp); ok {
			return r
		}
	}
	return nil
}

func (s *scriptNode) removed() int64 { return s.n.metrics.Counters["gc/versions-removed"] }

// TestVersionGCAfterRestart: a participant collects v0 and v1 of a key below a snapshot's
// timestamp and refuses the snapshot (too-old); after a crash and a restart — before any new
// pass could raise the horizon again — the horizon recovered from disk still refuses it. With
// the refusal off, the restarted participant answers "not found" where v0 is right: the deletes
// were durable, and only the recovered horizon stands between them and a wrong answer. Reads
// at or above the horizon answer as before the collection.
func TestVersionGCAfterRestart(t *testing.T) {
	disk := durable.NewMem()
	s := newScriptNode(t, disk, int64(time.Second))
	const k = "k"
	s.commit(k, "v0")
	s.env.Clock += int64(10 * time.Millisecond)
	snap := ts.Timestamp{Wall: s.env.Clock}
	if r := s.snapRead(k, snap); r == nil || r.Cause != "" || !r.Found || string(r.Value) != "v0" {
		t.Fatalf("snapshot read before GC: %+v, want v0", r)
	}
	s.env.Clock += int64(10 * time.Millisecond)
	s.commit(k, "v1")
	s.env.Clock += int64(10 * time.Millisecond)
	v2 := s.commit(k, "v2")
	s.env.Advance(200 * time.Millisecond)
	s.env.Flush() // the pass's deletes, and the horizon ahead of them, reach the disk
	horizon := s.n.Part.Store().GCHorizon()
	if s.removed() != 2 || !v2.LessEq(horizon) {
		t.Fatalf("removed %d versions up to horizon %v, want v0 and v1 gone and v2 (%v) at or below it", s.removed(), horizon, v2)
	}
	if r := s.snapRead(k, snap); r == nil || r.Cause != txnkit.AbortTooOld {
		t.Fatalf("snapshot below the horizon: %+v, want refused with %q", r, txnkit.AbortTooOld)
	}

	// Crash and restart a moment later: no timer fires, so no pass runs in the new life.
	s2 := newScriptNode(t, disk, s.env.Clock+int64(time.Millisecond))
	if got := s2.n.Part.Store().GCHorizon(); got != horizon {
		t.Fatalf("horizon after restart %v, want %v", got, horizon)
	}
	if r := s2.snapRead(k, snap); r == nil || r.Cause != txnkit.AbortTooOld {
		t.Fatalf("snapshot below the horizon after restart: %+v, want refused with %q", r, txnkit.AbortTooOld)
	}
	if r := s2.snapRead(k, horizon); r == nil || r.Cause != "" || !r.Found || string(r.Value) != "v2" {
		t.Fatalf("snapshot at the horizon after restart: %+v, want v2", r)
	}
	withoutGCRefusal(func() {
		if r := s2.snapRead(k, snap); r == nil || r.Cause != "" || r.Found {
			t.Fatalf("without the refusal the restarted participant answered %+v; want the wrong answer (not found, where v0 is right)", r)
		}
	})
}

// TestLateCommitBelowGCHorizon: a transaction stays prepared on k while the horizon passes its
// prepare timestamp (its decision is late: think of a coordinator down for longer than gc-ttl),
// and a snapshot read at the horizon parks behind its intent. The commit, at a timestamp below
// the horizon, is installed all the same (a decided commit is final) and counted; the parked
// read and later reads at or above the horizon see it, as they would have had it arrived at
// once, and the next pass collects the version it superseded.
func TestLateCommitBelowGCHorizon(t *testing.T) {
	s := newScriptNode(t, durable.NewMem(), int64(time.Second))
	const k, j = "k", "j"
	s.commit(k, "k0")
	s.env.Clock += int64(time.Millisecond)
	late, vote := s.prepare(k, "late")
	if vote == nil || !vote.OK {
		t.Fatalf("prepare: %+v", vote)
	}
	// Garbage on another key, decided after the prepare, moves the horizon past it.
	s.env.Clock += int64(10 * time.Millisecond)
	s.commit(j, "j0")
	s.commit(j, "j1")
	s.env.Advance(200 * time.Millisecond)
	horizon := s.n.Part.Store().GCHorizon()
	if !vote.TS.Less(horizon) {
		t.Fatalf("horizon %v did not pass the prepare timestamp %v", horizon, vote.TS)
	}
	if r := s.snapRead(k, horizon); r != nil {
		t.Fatalf("snapshot read at the horizon answered %+v over a prepared intent below it", r)
	}
	at := tsAfter(vote.TS, 0, uint32(scriptCoord))
	s.n.Handle(scriptCoord, &DecideReq{Txn: late, Commit: true, TS: at})
	s.env.Flush()
	var parked *SnapReadResp
	for _, m := range s.env.Take() {
		if r, ok := m.M.(*SnapReadResp); ok {
			parked = r
		}
	}
	if parked == nil || parked.Cause != "" || string(parked.Value) != "late" {
		t.Fatalf("parked snapshot read answered %+v, want the late commit's value", parked)
	}
	if n := s.n.metrics.Counters["gc/late-commits"]; n != 1 {
		t.Errorf("gc/late-commits = %d, want 1", n)
	}
	before := s.removed()
	s.env.Advance(200 * time.Millisecond)
	if s.removed() != before+1 {
		t.Errorf("the pass after the late commit removed %d versions, want k0", s.removed()-before)
	}
	if r := s.snapRead(k, s.n.Part.Store().GCHorizon()); r == nil || r.Cause != "" || string(r.Value) != "late" {
		t.Fatalf("snapshot read at the new horizon: %+v, want the late commit's value", r)
	}
}

// TestParkedSnapshotRefusedWhenHorizonPassesIt: a snapshot read of k and j parks on k behind a
// prepared intent; while it waits, j is overwritten twice and the horizon passes the snapshot,
// so the version of j it needs (j0) is collected. When k's decision resumes the read, it is
// refused (too-old), not answered: with the refusal off it finds no j, where j0 is right.
func TestParkedSnapshotRefusedWhenHorizonPassesIt(t *testing.T) {
	run := func() *SnapReadResp {
		s := newScriptNode(t, durable.NewMem(), int64(time.Second))
		const k, j = "k", "j"
		s.commit(j, "j0")
		s.env.Clock += int64(time.Millisecond)
		id, vote := s.prepare(k, "k0")
		if vote == nil || !vote.OK {
			t.Fatalf("prepare: %+v", vote)
		}
		snap := vote.TS
		s.n.Handle(scriptCoord, &SnapReadReq{Txn: s.txn(), Keys: []string{k, j}, At: snap})
		if sent := s.env.Take(); len(sent) != 0 {
			t.Fatalf("snapshot read behind a prepared intent answered: %+v", sent[0].M)
		}
		s.env.Clock += int64(10 * time.Millisecond)
		s.commit(j, "j1")
		s.commit(j, "j2")
		s.env.Advance(200 * time.Millisecond)
		if h := s.n.Part.Store().GCHorizon(); !snap.Less(h) || s.removed() != 2 {
			t.Fatalf("horizon %v, %d versions removed: want j0 and j1 gone and the snapshot %v below the horizon", h, s.removed(), snap)
		}
		s.n.Handle(scriptCoord, &DecideReq{Txn: id, Commit: true, TS: tsAfter(snap, 0, uint32(scriptCoord))})
		s.env.Flush()
		for _, m := range s.env.Take() {
			if r, ok := m.M.(*SnapReadResp); ok {
				return r
			}
		}
		t.Fatalf("the parked snapshot read was not resumed by the decision")
		return nil
	}
	if r := run(); r.Cause != txnkit.AbortTooOld {
		t.Fatalf("resumed snapshot read below the horizon: %+v, want refused with %q", r, txnkit.AbortTooOld)
	}
	withoutGCRefusal(func() {
		r := run()
		if r.Cause != "" || len(r.Results) != 2 || r.Results[1].Found {
			t.Fatalf("without the refusal the resumed read answered %+v; want the wrong answer (no j, where j0 is right)", r)
		}
	})
}

// TestPrepareBelowGCHorizonRefused: a prepare whose timestamp would fall below the horizon (a
// local clock far off TrueTime) votes no with too-old and lays no intent, so no commit can start
// out below the horizon.
func TestPrepareBelowGCHorizonRefused(t *testing.T) {
	s := newScriptNode(t, durable.NewMem(), int64(time.Second))
	st := s.n.Part.Store()
	st.CollectGarbage(ts.Timestamp{Wall: s.env.Clock + int64(time.Hour)}, 0) // a horizon an hour ahead
	id, vote := s.prepare("k", "v")
	if vote == nil || vote.OK || vote.Cause != txnkit.AbortTooOld {
		t.Fatalf("prepare below the horizon: vote %+v, want no with %q", vote, txnkit.AbortTooOld)
	}
	if keys := st.IntentKeys(id); len(keys) != 0 {
		t.Errorf("intents left on %v", keys)
	}
	if n := s.n.Part.locks.Len(); n != 0 {
		t.Errorf("%d keys still locked", n)
	}
}

// TestGCTTLOption: gc-ttl takes durations from 10ms to 1000h and refuses the rest with an option
// error naming it.
func TestGCTTLOption(t *testing.T) {
	c, err := ParseOptions(nil)
	if err != nil || c.gcTTL() != txnkit.DefaultGCTTL {
		t.Fatalf("default gc-ttl: %v, %v", c.GCTTL, err)
	}
	for v, want := range map[string]time.Duration{"10ms": 10 * time.Millisecond, "300ms": 300 * time.Millisecond, "1000h": 1000 * time.Hour} {
		c, err := ParseOptions(map[string]string{txnkit.GCTTLOption: v})
		if err != nil || c.GCTTL != want {
			t.Errorf("gc-ttl=%s: %v, %v; want %v", v, c.GCTTL, err, want)
		}
	}
	for _, v := range []string{"bogus", "", "0s", "9ms", "-1s", "1001h"} {
		if _, err := ParseOptions(map[string]string{txnkit.GCTTLOption: v}); err == nil {
			t.Errorf("gc-ttl=%q accepted", v)
		}
	}
}

// TestVersionGCOfPreloadAfterRestart: a restarted participant gets its preloaded rows back
// below the versions it recovered, which makes them garbage at once; it collects them although
// nothing is written to it again. The kick at recovery came before them, and only a write's
// persist armed the collector after it.
func TestVersionGCOfPreloadAfterRestart(t *testing.T) {
	disk := durable.NewMem()
	s := newScriptNode(t, disk, int64(time.Second))
	const k = "k"
	s.commit(k, "v")
	s2 := newScriptNode(t, disk, s.env.Clock+int64(time.Second))
	if err := s2.n.Preload([]wire.KV{{Key: k, Value: []byte("row")}}); err != nil {
		t.Fatal(err)
	}
	if n := len(s2.n.Part.Store().Versions(k)); n != 2 {
		t.Fatalf("%d versions of k after the preload, want the recovered one and the row below it", n)
	}
	s2.env.Advance(200 * time.Millisecond)
	if got := s2.n.Part.Store().Versions(k); s2.removed() != 1 || len(got) != 1 || string(got[0].Value) != "v" {
		t.Fatalf("restarted participant removed %d versions, kept %d; want the preloaded row gone and v kept", s2.removed(), len(got))
	}
}
