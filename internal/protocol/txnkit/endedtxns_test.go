package txnkit

import (
	"testing"
	"time"

	"github.com/meridiandb/meridian/internal/node/nodetest"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/wire"
)

// TestEndedTxns: a first request (Seq 0) numbered at or below a transaction of the same client
// that ended is refused, with a retryable abort (unknown-transaction); one numbered above, a
// later request (Seq > 0, AnswerUnheld's), and another client's are left to the caller. A
// client's record keeps its highest ended transaction whatever order they end in, and goes an
// idle timeout after its last end. The zero value is ready to use.
func TestEndedTxns(t *testing.T) {
	const idle = 5 * time.Second
	env := &nodetest.ScriptEnv{}
	var e EndedTxns
	refused := func(client topo.NodeID, txn uint64, seq uint32) bool {
		t.Helper()
		req := &wire.ClientRequest{Txn: txn, Seq: seq, Op: wire.OpPut, Key: "k"}
		got := e.RefuseLateFirst(env, client, req)
		sent := env.Take()
		switch {
		case got && (len(sent) != 1 || sent[0].To != client):
			t.Fatalf("client %d txn %d seq %d refused, sent %+v, want one reply to the client", client, txn, seq, sent)
		case got:
			r := sent[0].M.(*wire.ClientReply)
			if r.Code != wire.CodeAborted || r.Cause != CauseUnknownTxn || r.Txn != txn || r.Seq != seq {
				t.Errorf("client %d txn %d seq %d refused with %+v, want aborted, cause %s", client, txn, seq, r, CauseUnknownTxn)
			}
		case len(sent) != 0:
			t.Errorf("client %d txn %d seq %d left to the caller, but sent %+v", client, txn, seq, sent)
		}
		return got
	}
	if refused(1, 1, 0) {
		t.Error("a first request refused with nothing remembered")
	}
	e.Expire(0, idle) // the zero value expires nothing and does not panic

	e.Ended(ClientTxn{Client: 1, Txn: 3}, 0, idle)
	e.Ended(ClientTxn{Client: 1, Txn: 2}, int64(time.Second), idle) // an earlier one ends later
	for _, tc := range []struct {
		client topo.NodeID
		txn    uint64
		seq    uint32
		want   bool
	}{
		{1, 3, 0, true},  // a copy of the highest that ended
		{1, 1, 0, true},  // of an earlier one
		{1, 4, 0, false}, // the client's next transaction
		{1, 3, 1, false}, // a later request: AnswerUnheld's
		{2, 1, 0, false}, // another client
	} {
		if got := refused(tc.client, tc.txn, tc.seq); got != tc.want {
			t.Errorf("client %d txn %d seq %d: refused %v, want %v", tc.client, tc.txn, tc.seq, got, tc.want)
		}
	}

	e.Expire(int64(time.Second+idle), idle) // exactly idle after the last end: still kept
	if e.Len() != 1 || !refused(1, 3, 0) {
		t.Errorf("the record went at idle after the client's last end (%d kept)", e.Len())
	}
	e.Expire(int64(time.Second+idle)+1, idle)
	if e.Len() != 0 || refused(1, 3, 0) {
		t.Errorf("the record stayed past idle after the client's last end (%d kept)", e.Len())
	}
}

// TestEndedTxnsSweptAsTheyGrow: a coordinator without a periodic tick never calls Expire, so
// Ended expires old records as they grow: 1000 clients, one every 100 ms, each ending one
// transaction, leave those of about the last idle timeout (51) and never twice as many.
func TestEndedTxnsSweptAsTheyGrow(t *testing.T) {
	const (
		idle     = 5 * time.Second
		interval = 100 * time.Millisecond
	)
	var e EndedTxns
	most := 0
	for i := range 1000 {
		e.Ended(ClientTxn{Client: topo.NodeID(i), Txn: 1}, int64(i)*int64(interval), idle)
		most = max(most, e.Len())
	}
	live := int(idle/interval) + 1
	t.Logf("at most %d records held, %d at the end", most, e.Len())
	if most > 2*live {
		t.Errorf("%d records held at once, want at most %d (twice the %d of one idle timeout)", most, 2*live, live)
	}
}
