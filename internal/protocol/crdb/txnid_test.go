package crdb

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/meridiandb/meridian/internal/node"
	"github.com/meridiandb/meridian/internal/node/nodetest"
	"github.com/meridiandb/meridian/internal/protocol/prototest"
	"github.com/meridiandb/meridian/internal/protocol/txnkit"
	"github.com/meridiandb/meridian/internal/storage"
	"github.com/meridiandb/meridian/internal/storage/durable"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/wire"
)

// TestTxnIDsNotReusedAcrossRestarts: a coordinator hands out transaction ids, crashes, and comes
// back with its clock reading what it read at its first start (stepped back by NTP, or a restart
// within the microseconds its ids ran ahead of the clock). Its new ids must not repeat the old
// ones, which records, intents and timestamp-cache entries elsewhere still carry: a record holder
// would apply the old transaction's record (its decision, its push floor) to the new one, and
// a leaseholder would take the old transaction's read for the new one's own and let it write
// below it. Ids numbered from the clock repeated them; a persisted incarnation does not. A life
// that crashes before its incarnation is durable hands out no id (its client requests wait),
// so the next life, which reads the same incarnation from disk, cannot repeat one of its ids.
func TestTxnIDsNotReusedAcrossRestarts(t *testing.T) {
	cfg, err := prototest.SimConfig(prototest.Case{Protocol: name, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	tp := cfg.Topology
	self, client := tp.DataNodes(0)[0], topo.NodeID(len(tp.Nodes)+1)
	key := prototest.KeysOn(t, tp, self, "id", 1)[0]
	disk := durable.NewMem()
	start := int64(time.Second)

	// life builds the node from disk with a fresh environment: whatever the previous life had
	// not persisted is gone, as in a crash.
	life := func() (*Node, *nodetest.ScriptEnv) { return scriptedLife(t, self, tp, disk, start) }
	// begin starts client transaction txn and returns the id it got, if any.
	begin := func(n *Node, env *nodetest.ScriptEnv, txn uint64) (storage.TxnID, bool) {
		n.Handle(client, &wire.ClientRequest{Txn: txn, Op: wire.OpGet, Key: key})
		for _, s := range env.Take() {
			if r, ok := s.M.(*ReadReq); ok {
				return r.Txn.ID, true
			}
		}
		return 0, false
	}

	seen := map[storage.TxnID]int{} // id -> the life that handed it out
	// run has life l begin three transactions and checks their ids against every earlier life's.
	run := func(n *Node, env *nodetest.ScriptEnv, l int, sent ...storage.TxnID) {
		t.Helper()
		for i := range 3 {
			id, ok := begin(n, env, uint64(10*l+i))
			if !ok {
				t.Fatalf("life %d, transaction %d got no id", l, i)
			}
			sent = append(sent, id)
		}
		for _, id := range sent {
			if prev, ok := seen[id]; ok {
				t.Fatalf("life %d (clock back at the first start) handed out %v again, an id of life %d", l, id, prev)
			}
			seen[id] = l
			if c := id.Coordinator(); c != int32(self) {
				t.Fatalf("id %v names coordinator %d, want %d", id, c, self)
			}
		}
		// onEndedQuery answers "ended" for exactly the earlier lives' transactions.
		for id, from := range seen {
			if running := n.byID[id] != nil; running != (from == l) {
				t.Fatalf("life %d: %v of life %d counts as running: %v", l, id, from, running)
			}
		}
	}

	n, env := life()
	env.Flush()
	run(n, env, 1)
	n, env = life()
	env.Flush()
	run(n, env, 2)

	// A life that crashes before its incarnation is durable.
	n, env = life()
	if id, ok := begin(n, env, 39); ok {
		t.Fatalf("a transaction got id %v before the incarnation was durable", id)
	}

	n, env = life()
	if id, ok := begin(n, env, 49); ok {
		t.Fatalf("a transaction got id %v before the incarnation was durable", id)
	}
	env.Flush() // the incarnation is durable: the queued request is served
	var queued []storage.TxnID
	for _, s := range env.Take() {
		if r, ok := s.M.(*ReadReq); ok {
			queued = append(queued, r.Txn.ID)
		}
	}
	if len(queued) != 1 {
		t.Fatalf("the request queued before the incarnation was durable sent %d reads, want 1", len(queued))
	}
	run(n, env, 4, queued...)
}

// TestTxnIDsRenewedWhenCounterSpent: a life that has handed out its counter's last id (2^32 of
// them, skipped here) must not count on into its first ids, which records, intents, push floors
// and timestamp-cache entries may still carry. It takes the next incarnation for its ids and
// queues client requests until that is durable, as at a start; a crash before then leaves the
// number to the next life, and a life after the renewal starts above it.
func TestTxnIDsRenewedWhenCounterSpent(t *testing.T) {
	cfg, err := prototest.SimConfig(prototest.Case{Protocol: name, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	tp := cfg.Topology
	self, client := tp.DataNodes(0)[0], topo.NodeID(len(tp.Nodes)+1)
	key := prototest.KeysOn(t, tp, self, "id", 1)[0]
	disk := durable.NewMem()
	life := func() (*Node, *nodetest.ScriptEnv) { return scriptedLife(t, self, tp, disk, int64(time.Second)) }
	// ids returns the ids of the transactions whose first read went out since the last call.
	ids := func(env *nodetest.ScriptEnv) []storage.TxnID {
		var out []storage.TxnID
		for _, s := range env.Take() {
			if r, ok := s.M.(*ReadReq); ok {
				out = append(out, r.Txn.ID)
			}
		}
		return out
	}
	txn := uint64(0)
	begin := func(n *Node) {
		txn++
		n.Handle(client, &wire.ClientRequest{Txn: txn, Op: wire.OpGet, Key: key})
	}
	var ledger prototest.IDLedger
	check := func(got []storage.TxnID, want int, inc uint64) {
		t.Helper()
		if len(got) != want {
			t.Fatalf("%d transactions got ids, want %d", len(got), want)
		}
		for _, id := range got {
			ledger.Add(t, id, inc)
		}
	}

	n, env := life()
	env.Flush()
	for range 3 {
		begin(n)
	}
	check(ids(env), 3, 1)
	n.inc.SpendForTest(2)
	for range 4 {
		begin(n)
	}
	// The counter's last two ids; the next two transactions wait for incarnation 2, and the
	// node crashes before it is durable.
	check(ids(env), 2, 1)
	n, env = life()
	env.Flush()
	begin(n)
	check(ids(env), 1, 2) // the next life takes number 2: none of its ids was handed out

	n.inc.SpendForTest(1)
	begin(n)
	begin(n)
	check(ids(env), 1, 2)
	env.Flush()
	check(ids(env), 1, 3)
	n, env = life()
	env.Flush()
	if n.inc.N != 4 {
		t.Fatalf("the life after a renewal to incarnation 3 started as %d", n.inc.N)
	}

	// Past the last incarnation the id space is used up: the client hears so, in one line.
	if err := disk.Apply([]node.Write{{Key: incarnationKey, Value: binary.BigEndian.AppendUint64(nil, txnkit.MaxIncarnation-2)}}); err != nil {
		t.Fatal(err)
	}
	n, env = life()
	env.Flush()
	n.inc.SpendForTest(0)
	txn++
	n.Handle(client, &wire.ClientRequest{Txn: txn, Op: wire.OpGet, Key: key})
	prototest.RequireIDSpaceExhausted(t, env.Take(), client)
}
