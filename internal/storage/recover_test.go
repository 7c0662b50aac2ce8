package storage_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/meridiandb/meridian/internal/node"
	"github.com/meridiandb/meridian/internal/storage"
	"github.com/meridiandb/meridian/internal/storage/durable"
	"github.com/meridiandb/meridian/internal/storage/mvcc"
	"github.com/meridiandb/meridian/internal/storage/txnrec"
	"github.com/meridiandb/meridian/internal/ts"
)

// simNode is the storage side of a simulated node: the in-memory index and records, and a disk
// whose persist batches complete later, in order (the simulator's flush latency). A crash drops
// the in-memory state and every batch not yet flushed; the Mem survives, as in the simulator.
type simNode struct {
	opts  mvcc.Options
	disk  *durable.Mem
	store *mvcc.Store
	recs  *txnrec.Table
	// inflight are persisted-but-not-flushed batches, each with the state the node had when it
	// issued it: once the batch is flushed, that is exactly what a recovery must rebuild.
	inflight []flight
	flushed  string // dump of the state as of the last flushed batch
}

type flight struct {
	batch []node.Write
	state string
}

func (n *simNode) snapshot() string { return dump(n.store) + "--\n" + dumpRecords(n.recs) }

// persist plays node.Env.Persist: drain both write buffers into one batch, as a protocol does.
func (n *simNode) persist() {
	b := append(n.store.TakeWrites(), n.recs.TakeWrites()...)
	if len(b) > 0 {
		n.inflight = append(n.inflight, flight{batch: b, state: n.snapshot()})
	}
}

func (n *simNode) flush(t *testing.T, count int) {
	for ; count > 0 && len(n.inflight) > 0; count-- {
		f := n.inflight[0]
		n.inflight = n.inflight[1:]
		if err := n.disk.Apply(f.batch); err != nil {
			t.Fatal(err)
		}
		n.flushed = f.state
	}
}

func (n *simNode) crashAndRestart(t *testing.T) {
	n.store, n.recs, n.inflight = nil, nil, nil
	var err error
	if n.store, err = mvcc.Recover(n.disk, n.opts); err != nil {
		t.Fatal(err)
	}
	if n.recs, err = txnrec.Recover(n.disk); err != nil {
		t.Fatal(err)
	}
}

// TestSimulatedCrashRebuild drives a node with random protocol-like mutations, persists them in
// batches that flush with a lag, crashes it at random points and checks that the rebuilt state is
// exactly the state as of the last flushed batch: nothing acknowledged lost, nothing un-flushed
// resurrected.
func TestSimulatedCrashRebuild(t *testing.T) {
	for _, opts := range []mvcc.Options{{}, {SingleIntent: true}} {
		for seed := uint64(1); seed <= 20; seed++ {
			t.Run(fmt.Sprintf("single=%v/seed=%d", opts.SingleIntent, seed), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(seed, 99))
				n := &simNode{opts: opts, disk: durable.NewMem(), store: mvcc.New(opts), recs: txnrec.New()}
				n.flushed = n.snapshot()
				clock := int64(0)
				nextTxn := uint64(0)
				open := map[storage.TxnID]bool{}
				var openList []storage.TxnID
				for step := 0; step < 400; step++ {
					clock += int64(1 + rng.IntN(5))
					switch r := rng.IntN(100); {
					case r < 35: // a write by a new or open transaction
						var id storage.TxnID
						if len(openList) > 0 && rng.IntN(2) == 0 {
							id = openList[rng.IntN(len(openList))]
						} else {
							nextTxn++
							id = storage.MakeTxnID(1, nextTxn)
							open[id] = true
							openList = append(openList, id)
							if _, err := n.recs.Create(id, nil); err != nil {
								t.Fatal(err)
							}
						}
						key := fmt.Sprintf("k%02d", rng.IntN(12))
						_ = n.store.PutIntent(key, mvcc.Version{TS: ts.New(clock), Txn: id, Value: []byte(fmt.Sprint(clock)), Tombstone: rng.IntN(10) == 0})
					case r < 55 && len(openList) > 0: // decide a transaction
						i := rng.IntN(len(openList))
						id := openList[i]
						openList = append(openList[:i], openList[i+1:]...)
						delete(open, id)
						if rng.IntN(3) > 0 {
							commitTS := ts.New(clock)
							if err := n.recs.Decide(id, txnrec.Committed, commitTS, uint64(clock)); err != nil {
								t.Fatal(err)
							}
							if _, err := n.store.CommitTxn(id, commitTS); err != nil {
								t.Fatal(err)
							}
						} else {
							if err := n.recs.Decide(id, txnrec.Aborted, ts.Zero, 0); err != nil {
								t.Fatal(err)
							}
							n.store.AbortTxn(id)
						}
						n.recs.Decided(id, n.recs.Version(id))
					case r < 60:
						n.store.CollectGarbage(ts.New(clock-int64(rng.IntN(40))), math.MaxInt)
					case r < 80:
						n.persist()
					case r < 95:
						n.flush(t, 1+rng.IntN(2))
					default:
						n.crashAndRestart(t)
						if got := n.snapshot(); got != n.flushed {
							t.Fatalf("step %d: rebuilt state differs from the last flushed state:\n got:\n%s\nwant:\n%s", step, got, n.flushed)
						}
						// Transactions that were open are gone with the coordinator's memory here:
						// abort their recovered intents, as a recorder would after a timeout.
						openList = openList[:0]
						for id := range open {
							delete(open, id)
						}
						for _, id := range n.store.PendingTxns() {
							if err := n.recs.Decide(id, txnrec.Aborted, ts.Zero, 0); err != nil {
								t.Fatal(err)
							}
							n.recs.Decided(id, n.recs.Version(id))
							n.store.AbortTxn(id)
						}
					}
				}
			})
		}
	}
}
