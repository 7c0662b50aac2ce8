package spanner

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/meridiandb/meridian/internal/node"
	"github.com/meridiandb/meridian/internal/node/nodetest"
	"github.com/meridiandb/meridian/internal/protocol/prototest"
	"github.com/meridiandb/meridian/internal/protocol/txnkit"
	"github.com/meridiandb/meridian/internal/storage/durable"
	"github.com/meridiandb/meridian/internal/storage/locks"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/wire"
)

// TestTxnIDsRenewedWhenCounterSpent: a coordinator whose life has handed out its counter's last
// id (2^32 of them, skipped here) must not count on into its first ids, which locks, intents
// and decision records may still carry. It takes the next incarnation for its ids and queues
// client requests until that is durable, as at a start; a crash before then leaves the number
// to the next life, and a life after the renewal starts above it. The participant's
// incarnation, which the deadlock detector compares, stays the life's.
func TestTxnIDsRenewedWhenCounterSpent(t *testing.T) {
	tp, err := topo.Build("txnid-test", []string{"r"}, [][]time.Duration{{0}}, time.Millisecond,
		topo.Layout{NodesPerRegion: 3, ShardsPerNode: 2})
	if err != nil {
		t.Fatal(err)
	}
	const client node.ID = 10
	disk := durable.NewMem()
	life := func() (*Node, *nodetest.ScriptEnv) {
		t.Helper()
		env := &nodetest.ScriptEnv{ID: 0, Topo: tp, Clock: int64(time.Second), Epsilon: time.Millisecond, Disk: disk}
		n, err := NewNode(env, disk, Config{Policy: locks.Wait, DetectDeadlocks: true, IdleTimeout: 5 * time.Second, DecisionTimeout: 500 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		return n, env
	}
	txn := uint64(0)
	var begun []uint64 // client transactions not yet seen with an id
	begin := func(n *Node) {
		txn++
		begun = append(begun, txn)
		n.Coord.Request(client, &wire.ClientRequest{Txn: txn, Op: wire.OpGet, Key: topo.PinnedKey(0, "id")})
	}
	var ledger prototest.IDLedger
	// check takes the ids of the begun transactions that have one, in order: want of them,
	// under incarnation inc.
	check := func(n *Node, want int, inc uint64) {
		t.Helper()
		got := 0
		for len(begun) > 0 {
			ct := n.Coord.txns[txnkit.ClientTxn{Client: client, Txn: begun[0]}]
			if ct == nil {
				break
			}
			begun = begun[1:]
			got++
			ledger.Add(t, ct.id, inc)
		}
		if got != want {
			t.Fatalf("%d transactions got ids, want %d", got, want)
		}
	}

	n, env := life()
	env.Flush()
	for range 3 {
		begin(n)
	}
	check(n, 3, 1)
	n.Coord.inc.SpendForTest(2)
	for range 4 {
		begin(n)
	}
	// The counter's last two ids; the next two transactions wait for incarnation 2, and the
	// node crashes before it is durable.
	check(n, 2, 1)
	n, env = life()
	begun = nil
	env.Flush()
	begin(n)
	check(n, 1, 2) // the next life takes number 2: none of its ids was handed out

	n.Coord.inc.SpendForTest(1)
	begin(n)
	begin(n)
	check(n, 1, 2)
	env.Flush()
	check(n, 1, 3)
	if n.Part.incarnation != 2 {
		t.Fatalf("the participant's incarnation moved to %d with the ids; want 2, the life's", n.Part.incarnation)
	}
	n, _ = life()
	if n.Part.incarnation != 4 {
		t.Fatalf("the life after a renewal to incarnation 3 started as %d", n.Part.incarnation)
	}

	// Past the last incarnation the id space is used up: the client hears so, in one line.
	if err := disk.Apply([]node.Write{{Key: incarnationKey, Value: binary.BigEndian.AppendUint64(nil, txnkit.MaxIncarnation-2)}}); err != nil {
		t.Fatal(err)
	}
	n, env = life()
	env.Flush()
	n.Coord.inc.SpendForTest(0)
	txn++
	n.Coord.Request(client, &wire.ClientRequest{Txn: txn, Op: wire.OpGet, Key: topo.PinnedKey(0, "id")})
	prototest.RequireIDSpaceExhausted(t, env.Take(), client)
}
