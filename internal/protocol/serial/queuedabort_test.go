package serial

import (
	"testing"

	"github.com/meridiandb/meridian/internal/wire"
)

// TestAbortWhileQueuedAnswersBoth: a client's abort of a transaction whose first request waits
// for the lock takes that request out of the queue and answers both: the abort OK and the
// queued request aborted. Unanswered, the request left a client that sent the abort without
// waiting for it waiting for ever. The lock then passes on as if the transaction never came.
func TestAbortWhileQueuedAnswersBoth(t *testing.T) {
	s := newScript(t)
	s.send(s.bob, &wire.ClientRequest{Txn: 1, Seq: 0, Op: wire.OpPut, Key: "k", Value: []byte("b")})
	s.send(s.client, &wire.ClientRequest{Txn: 7, Seq: 0, Op: wire.OpPut, Key: "k", Value: []byte("c")})
	codes := map[uint32]wire.Code{}
	for _, r := range s.send(s.client, &wire.ClientRequest{Txn: 7, Seq: 1, Op: wire.OpAbort}) {
		if r.Txn == 7 {
			codes[r.Seq] = r.Code
		}
	}
	if codes[1] != wire.CodeOK || codes[0] != wire.CodeAborted {
		t.Fatalf("answers by request %v, want the abort OK and the queued put aborted", codes)
	}
	if len(s.n.waiting) != 0 || len(s.n.queued) != 0 {
		t.Fatalf("the aborted transaction is still queued (%d waiting)", len(s.n.waiting))
	}
}
