package crdb

import (
	"testing"
)

// TestCommitAnswerLostKeepsRecord: without parallel commits, the coordinator writes the record
// COMMITTED with the transaction's keys and resolves them once the holder answers. The answer
// is lost, and so are the coordinator's next tries (a partition). The holder used to count the
// commit as the coordinator's last word, re-send the resolution itself an expiry later, and
// forget the record once its leaseholders acknowledged; the coordinator's commit, getting
// through again, then found no record, and the committed version it was to be recognised by
// had been garbage-collected once superseded: answered "aborted", the client was told a
// committed transaction had aborted (sim --protocol crdb --opt parallel-commits=off
// --opt gc-ttl=10ms under loss). The record must stay while the coordinator waits, answer the
// commit sent again, and go once the coordinator's resolution of the holder's key shows it
// has the answer.
func TestCommitAnswerLostKeepsRecord(t *testing.T) {
	g := newGCScript(t, false)
	meta := TxnMeta{ID: g.txn, Age: g.at, RecordNode: g.n.self, Coord: g.c}
	w := g.writeAnswer(&WriteReq{Req: 1, Txn: meta, Key: g.kh, Value: []byte("v"), WriteTS: g.at, CreateRecord: true})
	commit := &EndTxnReq{Req: 2, Txn: g.txn, Status: EndCommit, TS: w.WrittenTS, InFlight: []string{g.kh}}
	g.deliver(g.c, commit) // its answer is lost
	g.env.Take()
	g.env.Advance(2 * g.n.set.expiry)
	g.settle()
	if !g.askedCoordinator() {
		t.Fatal("the holder did not ask the silent coordinator whether it ended the transaction")
	}
	if g.n.recordsKept() != 1 {
		t.Fatalf("%d records kept while the coordinator still waits for its commit's answer, want 1", g.n.recordsKept())
	}
	var outcome uint8
	for _, s := range g.deliver(g.c, commit) {
		if r, ok := s.M.(*EndTxnResp); ok && r.Req == commit.Req {
			outcome = r.Outcome
		}
	}
	if outcome != EndOK {
		t.Fatalf("the commit sent again: outcome %d, want committed (%d)", outcome, EndOK)
	}
	g.deliver(g.c, &ResolveReq{Txn: g.txn, Keys: []string{g.kh}, Commit: true, TS: w.WrittenTS, Record: g.n.self})
	if n := g.n.recordsKept() + len(g.n.recState); n != 0 {
		t.Fatalf("%d records or states once the coordinator resolved the commit, want none (forgotten)", n)
	}
}
