package txnkit

import (
	"slices"
	"testing"

	"github.com/meridiandb/meridian/internal/node/nodetest"
	"github.com/meridiandb/meridian/internal/storage"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/wire"
)

// TestEndedQueries: a record holder's questions go one per coordinator, coordinators
// ascending, never to a node that is no data node (an oracle, or no node at all); the
// coordinator calls ended every transaction of its own it does not run, and none of another's.
func TestEndedQueries(t *testing.T) {
	tp, err := topo.FromPreset("k2-5region", topo.DefaultLayout())
	if err != nil {
		t.Fatal(err)
	}
	a, b := tp.DataNodes(2)[0], tp.DataNodes(0)[0]
	oracle := tp.Oracle(1)
	q := EndedQueries{}
	for _, txn := range []storage.TxnID{
		storage.MakeTxnID(int32(a), 1), storage.MakeTxnID(int32(b), 2), storage.MakeTxnID(int32(a), 3),
		storage.MakeTxnID(int32(oracle), 4), storage.MakeTxnID(int32(len(tp.Nodes)), 5),
	} {
		q.Add(tp, txn)
	}
	env := &nodetest.ScriptEnv{}
	asked := q.Send(env, func(txns []storage.TxnID) wire.Msg {
		return &wire.ClientReply{Txn: uint64(txns[0]), Seq: uint32(len(txns))}
	})
	sent := env.Take()
	if asked != 3 || len(sent) != 2 || sent[0].To != min(a, b) || sent[1].To != max(a, b) {
		t.Fatalf("asked about %d, sent %+v: want 3 transactions, one question to %d then one to %d", asked, sent, min(a, b), max(a, b))
	}
	if r := sent[slices.IndexFunc(sent, func(s nodetest.Sent) bool { return s.To == a })].M.(*wire.ClientReply); r.Seq != 2 || r.Txn != uint64(storage.MakeTxnID(int32(a), 1)) {
		t.Fatalf("question to %d carries %+v, want both its transactions, in the order added", a, r)
	}

	running := storage.MakeTxnID(int32(a), 3)
	got := EndedOf(a, []storage.TxnID{storage.MakeTxnID(int32(a), 1), running, storage.MakeTxnID(int32(b), 2), storage.MakeTxnID(int32(a), 1<<32|1)},
		func(txn storage.TxnID) bool { return txn == running })
	if want := []storage.TxnID{storage.MakeTxnID(int32(a), 1), storage.MakeTxnID(int32(a), 1<<32|1)}; !slices.Equal(got, want) {
		t.Fatalf("ended %v, want %v (its own, not running; another coordinator's are not its to say)", got, want)
	}
}
