package crdb

import (
	"testing"

	"github.com/meridiandb/meridian/internal/storage"
	"github.com/meridiandb/meridian/internal/storage/txnrec"
	"github.com/meridiandb/meridian/internal/ts"
)

// TestSelfRecoveryIsNotTheCoordinatorsAnswer: the record holder is also the transaction's
// coordinator (its first write went to a key the gateway leads). The holder recovers the
// silent STAGING record (its clock jumped forward, within max-offset, past the staging
// silence of two heartbeat intervals) while the coordinator still waits for a proof, commits
// it and resolves its own key with a ResolveReq it sends itself: from the coordinator's node,
// with Commit set and Record the holder. That is not the coordinator's resolution on the answer
// to a commit it waited for, and must not end the transaction: forgotten, the record can no
// longer tell the coordinator's awaited abort (its proof, sent again, found the write GC had
// removed) that it committed, and the client is told a committed transaction aborted.
func TestSelfRecoveryIsNotTheCoordinatorsAnswer(t *testing.T) {
	g := newGCScript(t, false)
	g.c = g.n.self
	g.txn = storage.MakeTxnID(int32(g.c), 1)
	g.at = ts.Timestamp{Wall: g.env.Clock, Origin: uint32(g.c)}
	meta := TxnMeta{ID: g.txn, Age: g.at, RecordNode: g.n.self, Coord: g.c}
	g.n.byID[g.txn] = &coordTxn{meta: meta} // the node, as coordinator, still runs it (awaits a proof)
	g.stageAndRecover()
	if g.n.m.Counters["recovery/committed"] != 1 {
		t.Fatal("the holder did not recover the record as committed: the scene is not set")
	}
	if g.n.recordsKept() != 1 {
		t.Errorf("%d records kept after the holder's own recovery, want 1: the coordinator still runs the transaction", g.n.recordsKept())
	}
	abort := &EndTxnReq{Req: 3, Txn: g.txn, Status: EndAbort}
	var outcome uint8
	for _, s := range g.deliver(g.c, abort) {
		if r, ok := s.M.(*EndTxnResp); ok && r.Req == abort.Req {
			outcome = r.Outcome
		}
	}
	if outcome != EndCommitted {
		t.Errorf("the coordinator's awaited abort of the transaction its holder recovered as committed was answered %d, want committed (%d)", outcome, EndCommitted)
	}
	if r, ok := g.n.recs.Get(g.txn); ok && r.Status != txnrec.Committed {
		t.Errorf("the record is %v, want committed", r.Status)
	}
}
