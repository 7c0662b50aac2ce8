package crdb

import (
	"fmt"
	"testing"
	"time"

	"github.com/meridiandb/meridian/client"
	"github.com/meridiandb/meridian/internal/protocol/prototest"
	"github.com/meridiandb/meridian/internal/protocol/txnkit"
	"github.com/meridiandb/meridian/internal/storage/txnrec"
)

// TestAbortAfterRecoveryAnswersCommitted: the coordinator of a staged transaction found one of
// its writes missing and aborted it. But its proofs' answers had been lost, the record holder,
// hearing nothing, recovered the STAGING record, found every write and committed it, and once
// its resolved versions were superseded, version GC removed them; the proof sent again then
// found nothing. The client was told a committed transaction aborted (sim --protocol crdb
// --opt gc-ttl=1s under 20% loss, seed 89). The coordinator now asks the holder to abort and
// waits: the holder must answer that the record is committed, at its timestamp.
func TestAbortAfterRecoveryAnswersCommitted(t *testing.T) {
	g := newGCScript(t, false)
	w := g.stageAndRecover()
	if r, ok := g.n.recs.Get(g.txn); !ok || r.Status != txnrec.Committed {
		t.Fatalf("recovery left the record %v, want committed", r.Status)
	}
	abort := &EndTxnReq{Req: 3, Txn: g.txn, Status: EndAbort}
	answered := false
	for _, s := range g.deliver(g.c, abort) {
		if r, ok := s.M.(*EndTxnResp); ok && r.Req == abort.Req {
			answered = true
			if r.Outcome != EndCommitted || r.TS != w.WrittenTS {
				t.Errorf("the awaited abort of a record recovery committed was answered %d at %v, want committed (%d) at %v", r.Outcome, r.TS, EndCommitted, w.WrittenTS)
			}
		}
	}
	if !answered {
		t.Fatal("the awaited abort went unanswered")
	}
	if r, _ := g.n.recs.Get(g.txn); r.Status != txnrec.Committed {
		t.Errorf("the record is %v after the abort, want still committed", r.Status)
	}
}

// stageAndRecover writes g.kh for g.txn (creating its record on the holder) and stages it;
// then the coordinator falls silent (its proofs' answers lost) and the holder recovers the
// record, proving its own key to itself. It returns the write's answer.
func (g *gcScript) stageAndRecover() *WriteResp {
	meta := TxnMeta{ID: g.txn, Age: g.at, RecordNode: g.n.self, Coord: g.c}
	w := g.writeAnswer(&WriteReq{Req: 1, Txn: meta, Key: g.kh, Value: []byte("v"), WriteTS: g.at, CreateRecord: true})
	g.deliver(g.c, &EndTxnReq{Req: 2, Txn: g.txn, Status: EndStage, TS: w.WrittenTS, InFlight: []string{g.kh}})
	g.env.Advance(2 * g.n.set.expiry)
	g.settle()
	for queue := g.env.Take(); len(queue) > 0; {
		s := queue[0]
		queue = queue[1:]
		if s.To == g.n.self {
			queue = append(queue, g.deliver(g.n.self, s.M)...)
		}
	}
	return w
}

// overwriteForGC overwrites key, then, pause later, writes trigger, whose persist runs its
// leaseholder's version GC (the trigger should share key's leaseholder), and pauses again.
func overwriteForGC(db *client.DB, key, trigger string, pause time.Duration, fail func(string, ...any)) {
	for _, k := range []string{key, trigger} {
		if err := client.RunTxn(db, client.TxnOptions{}, func(tx *client.Txn) error { return tx.Put(k, []byte("y")) }); err != nil {
			fail("put %s: %v", k, err)
		}
		db.Transport().Sleep(pause)
	}
}

// TestProofAfterRecoveryAndGCKeepsCommit runs the whole of it: transaction X on gateway C
// writes kR (on R, which holds its record) and k1 (on L1) and commits with parallel commits.
// C is cut off from L1 before its proof goes out, and from R once the staging has arrived, so
// R, hearing nothing, recovers X, finds both writes and commits it. Another client overwrites
// k1, and L1's version GC (gc-ttl 200ms) removes X's resolved version of it. When the links
// heal, C's proof finds k1's write missing. X committed: its client must be told so.
func TestProofAfterRecoveryAndGCKeepsCommit(t *testing.T) {
	b := newBatchSim(t, map[string]string{txnkit.GCTTLOption: "200ms", "max-offset": "20ms"})
	s, tp := b.s, b.tp
	defer s.Stop()
	r, c, l1 := tp.DataNodes(0)[0], tp.DataNodes(1)[0], tp.DataNodes(2)[0]
	kR := prototest.KeysOn(t, tp, r, "proof", 1)[0]
	k1, k2 := prototest.KeysOn(t, tp, l1, "proof", 2)[0], prototest.KeysOn(t, tp, l1, "proof", 2)[1]
	oneWay := int64(tp.OneWay(tp.RegionOf(c), tp.RegionOf(r)))
	var failures []string
	fail := func(format string, args ...any) { failures = append(failures, fmt.Sprintf(format, args...)) }
	var commitAt int64
	var commitErr error
	committed := false
	s.AddClient(1, c, 100*ms, func(db *client.DB) {
		tx := db.Begin(client.TxnOptions{})
		for _, k := range []string{kR, k1} { // kR first: the record goes to R
			if err := tx.Put(k, []byte("x")); err != nil {
				fail("X: put %s: %v", k, err)
				return
			}
		}
		db.Transport().Sleep(time.Second) // both pipelined writes have landed
		commitAt = s.Now()
		s.PartitionNodes(c, l1)
		s.At(commitAt+3*oneWay/2, func() { s.PartitionNodes(c, r) })
		s.At(commitAt+int64(2500*time.Millisecond), s.Heal)
		commitErr, committed = tx.Commit(), true
	})
	// The overwrite of k1, once R has recovered X (a second or so after the commit), and a
	// write on L1 past the GC horizon, whose persist runs L1's version GC.
	s.AddClient(2, l1, 100*ms, func(db *client.DB) {
		db.Transport().Sleep(2200 * time.Millisecond)
		overwriteForGC(db, k1, k2, 400*time.Millisecond, fail)
	})
	s.RunUntil(int64(12 * time.Second))
	for _, f := range failures {
		t.Error(f)
	}
	rm := s.Handler(r).(*Node).m.Counters
	t.Logf("commit at %v; R's recoveries: %d committed, %d aborted; L1 collected %d versions; C's commits recovered: %d",
		time.Duration(commitAt), rm["recovery/committed"], rm["recovery/aborted"],
		s.Handler(l1).(*Node).m.Counters["gc/versions-removed"], s.Handler(c).(*Node).m.Counters["commit/recovered"])
	if rm["recovery/committed"] == 0 {
		t.Fatal("R did not recover X: the test's timing no longer sets the scene")
	}
	if !committed {
		t.Fatal("X's commit never returned")
	}
	if commitErr != nil {
		t.Fatalf("X, which R's recovery committed, was answered %v", commitErr)
	}
}
