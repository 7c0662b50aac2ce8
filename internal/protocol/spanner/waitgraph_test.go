package spanner

import (
	"slices"
	"testing"
	"time"

	"github.com/meridiandb/meridian/internal/node"
	"github.com/meridiandb/meridian/internal/node/nodetest"
	"github.com/meridiandb/meridian/internal/protocol"
	"github.com/meridiandb/meridian/internal/storage"
	"github.com/meridiandb/meridian/internal/storage/durable"
	"github.com/meridiandb/meridian/internal/storage/locks"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/ts"
)

// TestWaitReportsOnlyFromDurableLife: the detector keeps each participant's newest report by
// (incarnation, sequence number), the sequence counted from 1 in every life. A life that
// crashes before its incarnation is durable leaves its number to the next life, so two lives
// share it. Had the lost one reported its waits, the detector would hold them (edges whose
// locks died with it) and drop the next life's reports until their sequence numbers passed the
// lost life's: a deadlock through the participant would go unseen meanwhile, its transactions
// blocked for about as many decision-timeouts as the lost life sent reports (one here: 500 ms).
// So a participant reports nothing but its life's first, empty report until its incarnation
// is durable, and then the waits it held back.
func TestWaitReportsOnlyFromDurableLife(t *testing.T) {
	tp, err := topo.Build("waitgraph-test", []string{"r"}, [][]time.Duration{{0}}, time.Millisecond,
		topo.Layout{NodesPerRegion: 3, ShardsPerNode: 2})
	if err != nil {
		t.Fatal(err)
	}
	const self, other node.ID = 1, 2
	disk := durable.NewMem()
	v := &victims{}
	det := newDetector(v.send, func() int64 { return 0 }, time.Second, protocol.NewMetrics())
	life := func() (*Node, *nodetest.ScriptEnv) {
		t.Helper()
		env := &nodetest.ScriptEnv{ID: self, Topo: tp, Clock: int64(time.Second), Epsilon: time.Millisecond, Disk: disk}
		n, err := NewNode(env, disk, Config{Policy: locks.Wait, DetectDeadlocks: true, EagerWrites: true,
			IdleTimeout: 5 * time.Second, DecisionTimeout: 500 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		return n, env
	}
	// deliver hands the detector the wait-for reports the participant sent.
	deliver := func(env *nodetest.ScriptEnv) {
		for _, s := range env.Take() {
			if m, ok := s.M.(*WaitGraph); ok {
				det.onWaitGraph(self, m)
			}
		}
	}
	// conflict has waiter wait at n for holder's shared lock on key.
	conflict := func(n *Node, key string, holder, waiter Wait) {
		n.Handle(node.ID(holder.Waiter.Coordinator()), &ReadReq{Txn: holder.Waiter, Age: holder.Age, Key: key})
		n.Handle(node.ID(waiter.Waiter.Coordinator()), &WriteReq{Txn: waiter.Waiter, Age: waiter.Age, Key: key, Value: []byte("w")})
	}
	a, b, c, d := txnAt(2, 1), txnAt(2, 2), txnAt(0, 3), txnAt(2, 4) // ages in this order

	// Life 1 serves before its incarnation is durable: b waits for a. It crashes before the
	// flush, so the next life is numbered 1 too.
	n, env := life()
	conflict(n, topo.PinnedKey(2, "x"), Wait{Waiter: a, Age: ts.Timestamp{Wall: 1}}, Wait{Waiter: b, Age: ts.Timestamp{Wall: 2}})
	deliver(env)

	n, env = life()
	if n.Part.incarnation != 1 {
		t.Fatalf("the life after a crash before the flush is numbered %d, want 1", n.Part.incarnation)
	}
	// A deadlock: d waits for c here, before this life's incarnation is durable too, and c for
	// d at another participant.
	conflict(n, topo.PinnedKey(2, "y"), Wait{Waiter: c, Age: ts.Timestamp{Wall: 3}}, Wait{Waiter: d, Age: ts.Timestamp{Wall: 4}})
	deliver(env)
	env.Flush()
	deliver(env)
	det.onWaitGraph(other, &WaitGraph{Inc: 1, Seq: 1, Waits: []Wait{wait(c, 3, d)}})
	if !slices.Equal(v.got, []storage.TxnID{d}) {
		t.Errorf("detector chose victims %v, want the deadlock's youngest %v", v.got, d)
	}
	if det.waitsFor[b] != nil {
		t.Errorf("detector still holds the lost life's wait %v -> %v", b, det.waitsFor[b])
	}
}
