package crdb

import "testing"

// TestCommitAnswerLostAfterForget: without parallel commits, the coordinator writes the record
// COMMITTED with the transaction's keys and resolves them once the holder answers. The answer
// is lost, and so are the coordinator's next tries (a partition); the holder, having committed,
// re-sends the resolution an expiry later, its leaseholders acknowledge, and it forgets the
// record. The coordinator's commit then gets through again: it must learn that the transaction
// committed. Answered "aborted", as any stage or commit of a forgotten transaction was, it told
// its client a committed transaction had aborted.
func TestCommitAnswerLostAfterForget(t *testing.T) {
	g := newGCScript(t, false)
	meta := TxnMeta{ID: g.txn, Age: g.at, RecordNode: g.n.self, Coord: g.c}
	w := g.writeAnswer(&WriteReq{Req: 1, Txn: meta, Key: g.kh, Value: []byte("v"), WriteTS: g.at, CreateRecord: true})
	commit := &EndTxnReq{Req: 2, Txn: g.txn, Status: EndCommit, TS: w.WrittenTS, InFlight: []string{g.kh}}
	g.deliver(g.c, commit) // its answer is lost
	g.env.Advance(2 * g.n.set.expiry)
	g.settle()
	for _, s := range g.env.Take() {
		if m, ok := s.M.(*ResolveReq); ok && s.To == g.n.self && m.Txn == g.txn && m.Commit {
			g.deliver(g.n.self, m)
		}
	}
	if n := g.n.recordsKept() + len(g.n.recState); n != 0 {
		t.Fatalf("%d records or states once the holder resolved the commit itself, want none (forgotten)", n)
	}
	var outcome uint8
	for _, s := range g.deliver(g.c, commit) {
		if r, ok := s.M.(*EndTxnResp); ok && r.Req == commit.Req {
			outcome = r.Outcome
		}
	}
	if outcome != EndOK {
		t.Fatalf("the commit sent again after the record was forgotten: outcome %d, want committed (%d)", outcome, EndOK)
	}
}
