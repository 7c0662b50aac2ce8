package prototest

import (
	"strings"
	"testing"

	"github.com/meridiandb/meridian/internal/node/nodetest"
	"github.com/meridiandb/meridian/internal/storage"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/wire"
)

// IDLedger remembers the transaction ids a node handed out across its lives and renewals, so
// that a test of txnkit.Incarnation's use fails on an id handed out twice or carrying the wrong
// incarnation.
type IDLedger struct{ seen map[storage.TxnID]bool }

// Add records id, which must be new and carry incarnation inc.
func (l *IDLedger) Add(t testing.TB, id storage.TxnID, inc uint64) {
	t.Helper()
	if l.seen == nil {
		l.seen = map[storage.TxnID]bool{}
	}
	if l.seen[id] {
		t.Fatalf("%v handed out again", id)
	}
	l.seen[id] = true
	if id.Seq()>>32 != inc {
		t.Fatalf("%v: want incarnation %d", id, inc)
	}
}

// RequireIDSpaceExhausted fails unless sent holds a one-line refusal to client saying the id
// space is used up (past the last incarnation).
func RequireIDSpaceExhausted(t testing.TB, sent []nodetest.Sent, client topo.NodeID) {
	t.Helper()
	var refused *wire.ClientReply
	for _, s := range sent {
		if r, ok := s.M.(*wire.ClientReply); ok && s.To == client {
			refused = r
		}
	}
	if refused == nil || refused.Code != wire.CodeUnavailable || !strings.Contains(refused.Error, "exhausted") || strings.Contains(refused.Error, "\n") {
		t.Fatalf("a transaction past the last incarnation got %+v, want unavailable: id space exhausted", refused)
	}
}
