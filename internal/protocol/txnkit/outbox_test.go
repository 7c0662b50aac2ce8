package txnkit

import (
	"testing"

	"github.com/meridiandb/meridian/internal/node/nodetest"
	"github.com/meridiandb/meridian/internal/storage"
	"github.com/meridiandb/meridian/internal/wire"
)

// testNotes is a message of storage.TxnID notes, as k2's Finalized and crdb's Resolved.
type testNotes struct{ Txns []storage.TxnID }

func (*testNotes) Kind() wire.Kind { return 65000 }

// TestOutboxCutsLongRuns: notes added while one piece of work runs go out in messages of at most
// OutboxMaxNotes, every note once and in order.
func TestOutboxCutsLongRuns(t *testing.T) {
	env := &nodetest.ScriptEnv{}
	o := NewOutbox(env, func(txns []storage.TxnID) wire.Msg { return &testNotes{Txns: txns} })
	const total = 2*OutboxMaxNotes + 5
	for i := range total {
		o.Add(3, storage.MakeTxnID(1, uint64(i)))
	}
	env.Advance(0)
	var got []storage.TxnID
	sent := env.Take()
	for _, s := range sent {
		m := s.M.(*testNotes)
		if len(m.Txns) > OutboxMaxNotes {
			t.Fatalf("a message of %d notes, more than %d", len(m.Txns), OutboxMaxNotes)
		}
		got = append(got, m.Txns...)
	}
	if len(sent) != 3 || len(got) != total {
		t.Fatalf("%d notes in %d messages, want %d in 3", len(got), len(sent), total)
	}
	for i, txn := range got {
		if txn != storage.MakeTxnID(1, uint64(i)) {
			t.Fatalf("note %d is %v, out of order", i, txn)
		}
	}
}
