package crdb

import (
	"fmt"
	"testing"
	"time"

	"github.com/meridiandb/meridian/client"
	"github.com/meridiandb/meridian/internal/protocol/prototest"
	"github.com/meridiandb/meridian/internal/protocol/txnkit"
	"github.com/meridiandb/meridian/internal/storage/mvcc"
)

// TestSelfHeldProofAfterRecoveryAndGCKeepsCommit is TestProofAfterRecoveryAndGCKeepsCommit
// with the record on the gateway itself: X on gateway C writes kC (C leads it, so the record is
// C's) and k1 (on L1) and commits with parallel commits. C's proof of k1 and its first
// retransmission are lost (C and L1 cut off); then C's clock jumps ahead by 235ms (within
// crdb's max-offset of 500ms), so that C, as record holder, finds X's STAGING record silent
// for more than two heartbeat intervals at its next tick (X starts at 205ms so that its
// heartbeats follow C's ticks closely; the jump is too small to make the proof due again at
// that tick, which would prove k1 at once), recovers it while C and L1 can talk,
// finds both writes, commits X and resolves them, sending itself the resolution of kC. Another
// client overwrites k1, L1's version GC (gc-ttl 1s) removes X's version, and C's proof, sent
// again once the links heal, finds k1's write missing. X committed: its client must be told so.
func TestSelfHeldProofAfterRecoveryAndGCKeepsCommit(t *testing.T) {
	b := newBatchSim(t, map[string]string{txnkit.GCTTLOption: "1s"})
	s, tp := b.s, b.tp
	defer s.Stop()
	c, l1 := tp.DataNodes(0)[0], tp.DataNodes(2)[0]
	cn := func() *Node { return s.Handler(c).(*Node) }
	kC := prototest.KeysOn(t, tp, c, "self", 1)[0]
	k1, k2 := prototest.KeysOn(t, tp, l1, "self", 2)[0], prototest.KeysOn(t, tp, l1, "self", 2)[1]
	var failures []string
	fail := func(format string, args ...any) { failures = append(failures, fmt.Sprintf(format, args...)) }
	var commitAt, resentAt int64
	var commitErr error
	committed, recovered := false, false
	var watch func()
	watch = func() { // the proof's first retransmission (lost): heal, and jump C's clock just before its next tick
		if cn().m.Counters["rpc/retransmitted"] == 0 {
			s.At(s.Now()+int64(100*time.Microsecond), watch)
			return
		}
		resentAt = s.Now()
		s.Heal()
		s.At(resentAt+int64(100*time.Millisecond), func() { s.SkewClock(c, 235*time.Millisecond) })
		s.At(resentAt+int64(350*time.Millisecond), func() {
			recovered = cn().m.Counters["recovery/committed"] > 0
			s.PartitionNodes(c, l1) // before the proof's next retransmission
		})
		s.At(resentAt+int64(1800*time.Millisecond), s.Heal)
	}
	s.AddClient(0, c, 205*ms, func(db *client.DB) {
		tx := db.Begin(client.TxnOptions{})
		for _, k := range []string{kC, k1} { // kC first: the record goes to C
			if err := tx.Put(k, []byte("x")); err != nil {
				fail("X: put %s: %v", k, err)
				return
			}
		}
		db.Transport().Sleep(time.Second)
		commitAt = s.Now()
		s.PartitionNodes(c, l1)
		s.At(commitAt, watch)
		commitErr, committed = tx.Commit(), true
		t.Logf("X's commit returned %v after %v", commitErr, time.Duration(s.Now()-commitAt))
	})
	s.AddClient(2, l1, 100*ms, func(db *client.DB) {
		for !recovered {
			db.Transport().Sleep(10 * time.Millisecond)
			if s.Now() > int64(10*time.Second) {
				return
			}
		}
		overwriteForGC(db, k1, k2, 1200*time.Millisecond, fail)
	})
	s.RunUntil(int64(12 * time.Second))
	for _, f := range failures {
		t.Error(f)
	}
	cm := cn().m.Counters
	t.Logf("commit at %v, proof resent at +%v; C's recoveries: %d committed, %d aborted; L1 collected %d versions; C's commits recovered: %d; write-lost aborts %d",
		time.Duration(commitAt), time.Duration(resentAt-commitAt), cm["recovery/committed"], cm["recovery/aborted"],
		s.Handler(l1).(*Node).m.Counters["gc/versions-removed"], cm["commit/recovered"], cm["abort/write-lost"])
	if !recovered {
		t.Fatal("C did not recover X while it could reach L1: the test's timing no longer sets the scene")
	}
	if !committed {
		t.Fatal("X's commit never returned")
	}
	if commitErr != nil {
		visible := false
		for _, v := range cn().store.Versions(kC) {
			visible = visible || (v.State == mvcc.Committed && string(v.Value) == "x")
		}
		t.Fatalf("X, which C's own recovery committed (its write of kC committed: %v), was answered %v", visible, commitErr)
	}
}
