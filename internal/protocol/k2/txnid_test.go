package k2

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/meridiandb/meridian/internal/clock"
	"github.com/meridiandb/meridian/internal/node"
	"github.com/meridiandb/meridian/internal/node/nodetest"
	"github.com/meridiandb/meridian/internal/protocol/prototest"
	"github.com/meridiandb/meridian/internal/protocol/txnkit"
	"github.com/meridiandb/meridian/internal/storage/durable"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/wire"
)

// TestTxnIDsRenewedWhenCounterSpent: a coordinator whose life has handed out its counter's last
// id (2^32 of them, skipped here) must not count on into its first ids, which write streams and
// records may still carry. It takes the next incarnation for its ids and hands out none until
// that is durable, as at a start; a crash before then leaves the number to the next life, and a
// life after the renewal starts above it. The incarnation its answers as a data node carry stays
// the life's: a coordinator takes a change of it for a restart that lost writes.
func TestTxnIDsRenewedWhenCounterSpent(t *testing.T) {
	tp, c := scriptDeployment(t, nil)
	self, client := tp.DataNodes(0)[0], topo.NodeID(len(tp.Nodes)+1)
	key := prototest.KeysOn(t, tp, self, "id", 1)[0]
	disk := durable.NewMem()
	life := func() (*Node, *nodetest.ScriptEnv) {
		t.Helper()
		return nodeOnDisk(t, tp, self, c, disk, int64(time.Second))
	}
	// answer answers the node's oracle requests (a batch of timestamps around now) until it
	// sends none: its persists stay pending unless the test flushes them.
	answer := func(n *Node, env *nodetest.ScriptEnv) {
		t.Helper()
		for range 10 {
			asked := false
			for _, s := range env.Take() {
				if r, ok := s.M.(*clock.TSBatchRequest); ok {
					asked = true
					n.Handle(s.To, &clock.TSBatchReply{ReqID: r.ReqID, Low: env.Clock, Up: env.Clock})
				}
			}
			if !asked {
				return
			}
		}
		t.Fatal("the node kept asking its oracle")
	}
	txn := uint64(0)
	var begun []uint64 // client transactions not yet seen with an id
	begin := func(n *Node, env *nodetest.ScriptEnv, count int) {
		for range count {
			txn++
			begun = append(begun, txn)
			n.Handle(client, &wire.ClientRequest{Txn: txn, Op: wire.OpGet, Key: key})
		}
		answer(n, env)
	}
	flush := func(n *Node, env *nodetest.ScriptEnv) {
		env.Flush()
		answer(n, env)
	}
	var ledger prototest.IDLedger
	// check takes the ids of the begun transactions that have one, in order: want of them,
	// under incarnation inc.
	check := func(n *Node, want int, inc uint64) {
		t.Helper()
		got := 0
		for len(begun) > 0 {
			ct := n.txns[txnkit.ClientTxn{Client: client, Txn: begun[0]}]
			if ct == nil || ct.id == 0 {
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
	flush(n, env)
	begin(n, env, 3)
	check(n, 3, 1)
	n.inc.SpendForTest(2)
	begin(n, env, 4)
	// The counter's last two ids; the next two transactions wait for incarnation 2, and the
	// node crashes before it is durable.
	check(n, 2, 1)
	n, env = life()
	begun = nil
	flush(n, env)
	begin(n, env, 1)
	check(n, 1, 2) // the next life takes number 2: none of its ids was handed out

	n.inc.SpendForTest(1)
	begin(n, env, 2)
	check(n, 1, 2)
	flush(n, env)
	check(n, 1, 3)
	if n.inc.N != 2 {
		t.Fatalf("the life's incarnation moved to %d with the ids; want 2", n.inc.N)
	}
	if n, _ = life(); n.inc.N != 4 {
		t.Fatalf("the life after a renewal to incarnation 3 started as %d", n.inc.N)
	}

	// Past the last incarnation the id space is used up: the client hears so, in one line.
	if err := disk.Apply([]node.Write{{Key: incarnationKey, Value: binary.BigEndian.AppendUint64(nil, txnkit.MaxIncarnation-2)}}); err != nil {
		t.Fatal(err)
	}
	n, env = life()
	flush(n, env)
	n.inc.SpendForTest(0)
	txn++
	n.Handle(client, &wire.ClientRequest{Txn: txn, Op: wire.OpGet, Key: key})
	prototest.RequireIDSpaceExhausted(t, env.Take(), client)
}
