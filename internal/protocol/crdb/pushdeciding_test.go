package crdb

import (
	"testing"

	"github.com/meridiandb/meridian/internal/node/nodetest"
	"github.com/meridiandb/meridian/internal/protocol/txnkit/recordgctest"
	"github.com/meridiandb/meridian/internal/storage"
)

// TestPushWhileDecisionPersistsWaitsForIt: a push about a transaction the holder does not know
// waits for the decision its coordinator's answer brings (answerWaiting); a copy of that push
// (a retransmission) arriving before that answer, or while the abort decision is being
// persisted, must wait for it too. Each was answered "pending" at once: the pusher took that for its request's answer, dropped the
// decision when it came, and pushed again after the record was forgotten, to meet the same fate
// for as long as a persist took longer than its retransmission timeout (with 400 ms flushes and
// three crashes, 6 of 20 read-back runs ended with the final read blocked behind a dead
// coordinator's intent until it aborted, coordinator-timeout).
func TestPushWhileDecisionPersistsWaitsForIt(t *testing.T) {
	g := newGCScript(t, false)
	g.settle()
	g.env.Take()
	push := &PushReq{Req: 7, Pushee: g.txn, Type: PushQuery, PushTo: g.at.Next()}
	g.n.Handle(g.l, push)
	if !recordgctest.SentTo(g.env.Take(), g.c, func(m *EndedQuery) bool { return len(m.Txns) == 1 && m.Txns[0] == g.txn }) {
		t.Fatal("the holder did not ask the coordinator about a transaction it does not know")
	}
	g.n.Handle(g.l, push)                                 // a copy before the coordinator's answer
	g.n.Handle(g.c, &Ended{Txns: []storage.TxnID{g.txn}}) // the abort decision's persist starts
	g.n.Handle(g.l, push)                                 // a copy while it is persisted
	answers := func(sent []nodetest.Sent) []uint8 {
		var out []uint8
		for _, s := range sent {
			if r, ok := s.M.(*PushResp); ok && s.To == g.l && r.Req == push.Req {
				out = append(out, r.Outcome)
			}
		}
		return out
	}
	if got := answers(g.env.Take()); len(got) != 0 {
		t.Fatalf("copies answered %v before the abort decision was durable; want the answers held until it is", got)
	}
	g.settle()
	got := answers(g.env.Take())
	if len(got) == 0 {
		t.Fatal("no answer once the abort decision was durable")
	}
	for _, o := range got {
		if o != PushAborted {
			t.Fatalf("answers %v once the decision was durable; want every one aborted (%d)", got, PushAborted)
		}
	}
}
