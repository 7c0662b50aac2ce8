package k2

import (
	"testing"

	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/wire"
)

// TestAbortWhileRequestOut: a client's abort of a transaction whose request is still out (here
// its first, waiting for a K2-TB timestamp the oracle never sends) ends it at once: the abort
// is answered OK, the request in flight aborted, and a later request of the transaction finds
// it gone. Refused, the transaction went on and held its intents until the idle timeout; a
// commit in flight is still not aborted.
func TestAbortWhileRequestOut(t *testing.T) {
	n, env := newScriptNode(t, nil)
	client := topo.NodeID(1 << 20)
	env.Take()
	n.Handle(client, &wire.ClientRequest{Txn: 1, Seq: 0, Op: wire.OpPut, Key: "k", Value: []byte("v")})
	n.Handle(client, &wire.ClientRequest{Txn: 1, Seq: 1, Op: wire.OpAbort})
	codes := map[uint32]wire.Code{}
	for _, s := range env.Take() {
		if r, ok := s.M.(*wire.ClientReply); ok && s.To == client {
			codes[r.Seq] = r.Code
		}
	}
	if codes[1] != wire.CodeOK || codes[0] != wire.CodeAborted {
		t.Fatalf("answers by request %v, want the abort OK and the put aborted", codes)
	}
	if len(n.txns) != 0 {
		t.Fatalf("%d transactions still held after the abort", len(n.txns))
	}
}
