package crdb

import (
	"testing"

	"github.com/meridiandb/meridian/internal/storage/mvcc"
	"github.com/meridiandb/meridian/internal/storage/txnrec"
)

// abortedAndForgotten runs T (coordinator g.c, record on the holder, intent on g.kh) to a record
// a push aborted, a commit (not staged: parallel commits off) refused as aborted, the
// coordinator's rollback, and the record forgotten. resolveHolder says whether the rollback's
// resolution of the holder's own key arrives (false: the network lost it).
func abortedAndForgotten(t *testing.T, g *gcScript, resolveHolder bool) {
	t.Helper()
	meta := TxnMeta{ID: g.txn, Age: g.at, RecordNode: g.n.self, Coord: g.c}
	g.deliver(g.c, &WriteReq{Req: 1, Txn: meta, Key: g.kh, Value: []byte("v"), WriteTS: g.at, CreateRecord: true})
	for _, s := range g.deliver(g.l, &PushReq{Req: 9, Pushee: g.txn, Type: PushAbort}) { // an older writer on kl
		if r, ok := s.M.(*PushResp); ok && r.Outcome != PushAborted {
			t.Fatalf("push abort answered %d", r.Outcome)
		}
	}
	for _, s := range g.deliver(g.c, &EndTxnReq{Req: 3, Txn: g.txn, Status: EndCommit, TS: g.at, InFlight: []string{g.kh, g.kl}}) {
		if r, ok := s.M.(*EndTxnResp); ok && r.Outcome != EndAborted {
			t.Fatalf("commit of the aborted record answered %d", r.Outcome)
		}
	}
	g.deliver(g.c, &EndTxnReq{Txn: g.txn, Status: EndAbort})
	if resolveHolder {
		g.deliver(g.c, &ResolveReq{Txn: g.txn, Keys: []string{g.kh}, Commit: false, Record: g.n.self})
	}
	if n := g.n.recordsKept() + len(g.n.recState); n != 0 {
		t.Fatalf("%d records or states once aborted and ended, want none", n)
	}
}

// A late heartbeat copy re-created the forgotten record of a transaction rolled back here (its
// resolution of the holder's own key lost, so only an intent was left to say it had been
// there), and a late copy of its refused commit then committed it, and a re-sent resolution the
// rolled-back write (review: seed 220 of sim --protocol crdb --workload list-append --keys 5
// --zipf 0.99 --clients 8 --loss 0.15 --duplicate 0.5 --duplicate-delay 500ms --opt
// parallel-commits=off, G1a).
func TestLateCopiesDoNotCommitARolledBackTransaction(t *testing.T) {
	g := newGCScript(t, false)
	abortedAndForgotten(t, g, false)
	g.deliver(g.c, &HeartbeatReq{Txn: g.txn, Key: g.kh})
	g.deliver(g.c, &EndTxnReq{Req: 3, Txn: g.txn, Status: EndCommit, TS: g.at, InFlight: []string{g.kh, g.kl}})
	if r, ok := g.n.recs.Get(g.txn); ok && r.Status == txnrec.Committed {
		t.Errorf("late heartbeat and commit copies committed a transaction its coordinator rolled back")
	}
	g.env.Advance(2 * g.n.set.expiry)
	g.settle()
	for _, s := range g.env.Take() {
		if m, ok := s.M.(*ResolveReq); ok && s.To == g.n.self && m.Txn == g.txn {
			g.deliver(g.n.self, m)
		}
	}
	for _, v := range g.n.store.Versions(g.kh) {
		if v.Txn == g.txn && v.State == mvcc.Committed {
			t.Errorf("the rolled-back write on %q is committed", g.kh)
		}
	}
}

// The same through a pusher's placeholder: a push about the forgotten transaction from a
// leaseholder still holding its intent waits, a late heartbeat copy turned the placeholder into
// a record, and a late commit copy committed it, answering the push "committed".
func TestLateCopiesDoNotCommitAPlaceholder(t *testing.T) {
	g := newGCScript(t, false)
	abortedAndForgotten(t, g, true)
	g.deliver(g.l, &PushReq{Req: 7, Pushee: g.txn, Type: PushQuery})
	g.deliver(g.c, &HeartbeatReq{Txn: g.txn, Key: g.kh})
	var outcome uint8
	for _, s := range g.deliver(g.c, &EndTxnReq{Req: 3, Txn: g.txn, Status: EndCommit, TS: g.at, InFlight: []string{g.kh, g.kl}}) {
		if r, ok := s.M.(*PushResp); ok && s.To == g.l && r.Req == 7 {
			outcome = r.Outcome
		}
	}
	if r, ok := g.n.recs.Get(g.txn); ok && r.Status == txnrec.Committed {
		t.Errorf("late heartbeat and commit copies committed a forgotten, rolled-back transaction")
	}
	if outcome == PushCommitted {
		t.Errorf("the waiting push was answered committed: its leaseholder would commit the intent")
	}
}
