package spanner

import (
	"testing"
	"time"

	"github.com/meridiandb/meridian/internal/node"
	"github.com/meridiandb/meridian/internal/node/nodetest"
	"github.com/meridiandb/meridian/internal/protocol"
	"github.com/meridiandb/meridian/internal/storage"
	"github.com/meridiandb/meridian/internal/storage/durable"
	"github.com/meridiandb/meridian/internal/storage/locks"
	"github.com/meridiandb/meridian/internal/storage/mvcc"
	"github.com/meridiandb/meridian/internal/ts"
)

// TestLatePrepareCopyAfterRestartOfCommittedTxn: T (buffered write k=v1, nothing read here, so
// its PrepareReq has Seen 0) prepares and commits at this participant, which acknowledges. The
// participant restarts (its decidedTxns, volatile, are gone) while T's commit record is still
// kept at its coordinator (another participant has not acknowledged yet). A network copy of T's
// PrepareReq then reaches the new life: nothing tells it T was decided, so it prepares T again,
// laying a fresh intent on k at a new prepare timestamp. Its poll learns "committed at c", and
// installing the fresh intent at c clashes with the version T already committed there
// (mvcc.ErrConflict, only logged): the intent stays for good, so k cannot be written any more
// (every later prepare fails on it) and a snapshot read above it parks forever (review: `sim
// --protocol spanner --topology k2-3region --epsilon 25ms --workload rw-register --blind-writes
// --read-back --keys 10 --zipf 0.99 --clients 8 --flush-latency 30ms --random-crashes
// 300ms-1s/400ms --duplicate 0.3 --duplicate-delay 1500ms --duration 8s --seed 6` hung clients).
// A prepare of an unknown transaction that already committed a version here is now dropped.
func TestLatePrepareCopyAfterRestartOfCommittedTxn(t *testing.T) {
	disk := durable.NewMem()
	env := &nodetest.ScriptEnv{ID: 1, Clock: int64(time.Second), Epsilon: time.Millisecond, Disk: disk}
	c := Config{Policy: locks.WoundWait, CommitWait: true, IdleTimeout: 5 * time.Second, DecisionTimeout: 500 * time.Millisecond}
	p := newParticipant(env, c, protocol.NewMetrics(), mvcc.New(mvcc.Options{SingleIntent: true}))
	const coord node.ID = 4
	id := storage.MakeTxnID(int32(coord), 1)
	age := ts.Timestamp{Wall: 100}
	prep := &PrepareReq{Txn: id, Age: age, Writes: []Write{{Key: "k", Value: []byte("v1")}}}
	p.onPrepare(coord, prep)
	env.Flush()
	v := votes(env.Take())[id]
	if v == nil || !v.OK {
		t.Fatalf("no yes vote: %+v", v)
	}
	commitTS := ts.Timestamp{Wall: v.TS.Wall + 1, Origin: uint32(coord)}
	p.onDecide(coord, &DecideReq{Txn: id, Commit: true, TS: commitTS})
	env.Flush()
	env.Take()

	// Restart (a short outage).
	env2 := &nodetest.ScriptEnv{ID: 1, Clock: env.Clock + int64(100*time.Millisecond), Epsilon: time.Millisecond, Disk: disk}
	store, err := mvcc.Recover(disk, mvcc.Options{SingleIntent: true})
	if err != nil {
		t.Fatal(err)
	}
	p2 := newParticipant(env2, c, protocol.NewMetrics(), store)
	if err := p2.recover(disk); err != nil {
		t.Fatal(err)
	}
	// The late copy of T's prepare.
	p2.onPrepare(coord, &PrepareReq{Txn: id, Age: age, Writes: []Write{{Key: "k", Value: []byte("v1")}}})
	env2.Flush()
	env2.Take()
	// T's poll (or a resent DecideReq): the coordinator still holds the commit record.
	p2.onStatusResp(coord, &StatusResp{Txn: id, Status: statusCommitted, TS: commitTS})
	env2.Flush()
	env2.Take()
	if keys := p2.store.IntentKeys(id); len(keys) != 0 {
		t.Errorf("after T's commit was applied again, its intents on %v are left pending", keys)
	}
	// A snapshot read above everything is answered.
	p2.onSnapRead(3, &SnapReadReq{Txn: storage.MakeTxnID(3, 1), Key: "k", At: ts.Timestamp{Wall: env2.Clock + int64(10*time.Millisecond)}})
	answered := false
	for _, s := range env2.Take() {
		if _, ok := s.M.(*SnapReadResp); ok {
			answered = true
		}
	}
	if !answered {
		t.Errorf("a snapshot read of k parks behind the stuck intent")
	}
	// A later writer of k must be able to prepare.
	w := storage.MakeTxnID(2, 1)
	p2.onPrepare(2, &PrepareReq{Txn: w, Age: ts.Timestamp{Wall: 300}, Writes: []Write{{Key: "k", Value: []byte("v2")}}})
	env2.Flush()
	if v := votes(env2.Take())[w]; v == nil || !v.OK {
		t.Errorf("a later writer of k cannot prepare: %+v", v)
	}
}
