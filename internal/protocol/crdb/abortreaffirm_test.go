package crdb

import (
	"testing"

	"github.com/meridiandb/meridian/internal/protocol/prototest"
	"github.com/meridiandb/meridian/internal/protocol/txnkit"
	"github.com/meridiandb/meridian/internal/storage"
	"github.com/meridiandb/meridian/internal/storage/durable"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/ts"
	"github.com/meridiandb/meridian/internal/wire"
)

// TestHeartbeatOfAbortedTxnAbortsAgain: a record holder aborts X for an older writer's push and
// says so to X's coordinator in a heartbeat answer, then crashes before the abort is durable,
// and comes back with X's record PENDING. The coordinator, which keeps X only until its client's
// next request, goes on heartbeating; counted as signs of life, its heartbeats kept the record
// alive and every younger push on X's keys waiting (a crash run with 400 ms flushes: 2.7 s).
// Its heartbeats say it knows X aborted, and the holder aborts X again.
func TestHeartbeatOfAbortedTxnAbortsAgain(t *testing.T) {
	disk := durable.NewMem()
	n, env := startHoldNode(t, disk)
	tp := n.tp
	c, l, w := tp.DataNodes(1)[0], tp.DataNodes(2)[0], tp.DataNodes(3)[0]
	key := prototest.KeysOn(t, tp, n.self, "reaffirm", 1)[0]
	txn := storage.MakeTxnID(int32(c), 1)
	at := ts.Timestamp{Wall: env.Clock, Origin: uint32(c)}
	n.Handle(c, &WriteReq{Req: 1, Txn: TxnMeta{ID: txn, Age: at, RecordNode: n.self, Coord: c}, Key: key, Value: []byte("v"), WriteTS: at, CreateRecord: true})
	env.releaseAll()
	env.Take()

	// An older writer's push aborts X; the abort's persist is slow, and a heartbeat meanwhile
	// tells the coordinator.
	n.Handle(l, &PushReq{Req: 7, Pushee: txn, Type: PushAbort, PushTo: at.Next()})
	n.Handle(c, &HeartbeatReq{Txn: txn, Key: key})
	told := false
	for _, s := range env.Take() {
		if r, ok := s.M.(*HeartbeatResp); ok && s.To == c && r.Aborted {
			told = true
		}
	}
	if !told || len(env.held) == 0 {
		t.Fatalf("told the coordinator %v with %d persists in flight: the scenario tests nothing", told, len(env.held))
	}

	// The holder crashes before the abort is durable, and comes back with X PENDING.
	n, env = startHoldNode(t, disk)
	if r, _ := n.recs.Get(txn); r.Status.Final() {
		t.Fatalf("X's record came back %v: the scenario tests nothing", r.Status)
	}
	// The coordinator's heartbeats, as it keeps X until its client's next request.
	for range 3 {
		env.Advance(n.set.heartbeat)
		n.Handle(c, &HeartbeatReq{Txn: txn, Key: key, Aborted: true})
	}
	env.releaseAll()
	env.Take()
	// A younger writer's push, well within the record expiry of the coordinator's last word.
	n.Handle(w, &PushReq{Req: 9, Pushee: txn, Type: PushQuery, PushTo: at.Next()})
	env.releaseAll()
	outcome := -1
	for _, s := range env.Take() {
		if r, ok := s.M.(*PushResp); ok && s.To == w && r.Req == 9 {
			outcome = int(r.Outcome)
		}
	}
	if outcome != int(PushAborted) {
		t.Fatalf("the younger push was answered %d, want aborted (%d): the record's abort was lost and never made again", outcome, PushAborted)
	}
}

// TestCoordinatorHeartbeatsSayAbortKnown: once a heartbeat answer tells the coordinator that
// its transaction was aborted, its next heartbeats say so (the holder's side is
// TestHeartbeatOfAbortedTxnAbortsAgain).
func TestCoordinatorHeartbeatsSayAbortKnown(t *testing.T) {
	n, env := startHoldNode(t, durable.NewMem())
	tp := n.tp
	holder := tp.DataNodes(1)[0]
	tx := n.begin(txnkit.ClientTxn{Client: topo.NodeID(len(tp.Nodes)), Txn: 1}, &wire.ClientRequest{})
	tx.meta.RecordNode, tx.anchorKey = holder, "anchor"
	n.heartbeat(tx)
	beats := func() (sent, aborted int) {
		env.Advance(n.set.heartbeat)
		for _, s := range env.Take() {
			if m, ok := s.M.(*HeartbeatReq); ok && s.To == holder && m.Txn == tx.meta.ID {
				sent++
				if m.Aborted {
					aborted++
				}
			}
		}
		return sent, aborted
	}
	if sent, aborted := beats(); sent != 1 || aborted != 0 {
		t.Fatalf("before the abort: %d heartbeats, %d saying aborted; want 1 and 0", sent, aborted)
	}
	n.Handle(holder, &HeartbeatResp{Txn: tx.meta.ID, Aborted: true})
	if sent, aborted := beats(); sent != 1 || aborted != 1 {
		t.Fatalf("after the holder said aborted: %d heartbeats, %d saying aborted; want 1 and 1", sent, aborted)
	}
}
