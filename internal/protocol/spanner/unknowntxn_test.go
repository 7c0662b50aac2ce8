package spanner

import (
	"testing"

	"github.com/meridiandb/meridian/internal/node"
	"github.com/meridiandb/meridian/internal/storage/locks"
	"github.com/meridiandb/meridian/internal/wire"
)

// TestUnheldTxnAnswers: a request of a transaction the coordinator does not hold is answered
// by txnkit.AnswerUnheld, as in k2 and crdb: a later one (Seq > 0) aborts, retryably, cause
// unknown-transaction, counted under aborts/unknown-transaction and beginning nothing; a
// first commit or abort (nothing was done) is answered OK and counted nowhere.
func TestUnheldTxnAnswers(t *testing.T) {
	c := newTestCluster(t, locks.WoundWait, false)
	const client node.ID = 100
	k := c.key(1, 0, "k")
	for _, m := range []*wire.ClientRequest{
		{Txn: 1, Seq: 1, Op: wire.OpPut, Key: k, Value: []byte("v")},
		{Txn: 2, Seq: 3, Op: wire.OpCommit},
	} {
		r := c.request(client, m)
		if r == nil || r.Code != wire.CodeAborted || r.Cause != causeUnknownTxn || r.Txn != m.Txn || r.Seq != m.Seq {
			t.Errorf("%v of unheld txn %d seq %d: %+v, want aborted, cause %s", m.Op, m.Txn, m.Seq, r, causeUnknownTxn)
		}
	}
	for _, m := range []*wire.ClientRequest{{Txn: 3, Op: wire.OpCommit}, {Txn: 4, Op: wire.OpAbort}} {
		if r := c.request(client, m); r == nil || r.Code != wire.CodeOK {
			t.Errorf("first-request %v: %+v, want OK", m.Op, r)
		}
	}
	if n := c.nodes[0].metrics.Counters["aborts/"+causeUnknownTxn]; n != 2 {
		t.Errorf("aborts/%s = %d, want 2", causeUnknownTxn, n)
	}
	if n := len(c.nodes[0].Coord.txns); n != 0 {
		t.Errorf("the coordinator holds %d transactions, want none", n)
	}
	checkQuiet(t, c)
}
