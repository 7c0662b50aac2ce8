package crdb

import (
	"testing"
	"time"

	"github.com/meridiandb/meridian/client"
	"github.com/meridiandb/meridian/internal/protocol/prototest"
	"github.com/meridiandb/meridian/internal/storage"
	"github.com/meridiandb/meridian/internal/storage/durable"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/ts"
)

// writerBehindRestartedCoordinator runs X, on gateway g, which writes a key holder leads (so its
// record is holder's) and then a hot key on h, and waits; a younger writer W queues behind X's
// intent on hot, its pushes finding X's record heartbeated. g crashes at crashAt and comes back
// at restartAt with nothing of X: no heartbeat, stage or commit of X can come any more. It
// returns when W's write of hot committed, and the record expiry.
func writerBehindRestartedCoordinator(t *testing.T, g, holder, h topo.NodeID, crashAt, restartAt int64) (doneAt int64, expiry time.Duration) {
	t.Helper()
	b := newBatchSim(t, nil)
	s := b.s
	var err error
	anchor, hot := b.keyOn(t, holder, "restart/anchor"), b.keyOn(t, h, "restart/hot")
	s.AddClient(b.tp.Nodes[g].Region, g, 100*ms, func(db *client.DB) {
		tx := db.Begin(client.TxnOptions{})
		for _, k := range []string{anchor, hot} { // anchor first: the record goes to holder
			if err := tx.Put(k, []byte("x")); err != nil {
				t.Errorf("X: put %s: %v", k, err)
				return
			}
		}
		db.Transport().Sleep(10 * time.Second) // g crashes meanwhile
	})
	s.AddClient(0, b.coord, 500*ms, func(db *client.DB) {
		err = client.RunTxnWith(db, client.TxnOptions{}, client.RetryPolicy{MaxAttempts: 100}, func(tx *client.Txn) error {
			return tx.Put(hot, []byte("w"))
		})
		doneAt = s.Now()
	})
	s.At(crashAt, func() { s.Crash(g) })
	s.At(restartAt, func() {
		if err := s.Restart(g); err != nil {
			t.Errorf("restart %d: %v", g, err)
		}
	})
	s.RunUntil(int64(10 * time.Second))
	s.Stop()
	t.Logf("W's write of hot finished %v after the restart: %v; record/coordinator-restarted %d, push/expired %d",
		time.Duration(doneAt-restartAt), err, b.counter("record/coordinator-restarted"), b.counter("push/expired"))
	if doneAt == 0 || err != nil {
		t.Fatalf("W: done at %v, %v; want committed", time.Duration(doneAt), err)
	}
	return doneAt, s.Handler(h).(*Node).set.expiry
}

// TestRestartedCoordinatorsRecordsExpireAtOnce: X's gateway holds X's record itself. Counted
// alive from the restart, the record kept W waiting a full expiry (1 s) after it; now the push
// the holder of hot sends again on the restart finds it expired, aborts X, and W writes at once.
func TestRestartedCoordinatorsRecordsExpireAtOnce(t *testing.T) {
	tp := newBatchSim(t, nil).tp
	y, h := tp.DataNodes(1)[0], tp.DataNodes(2)[0]
	const restartAt = 1000 * ms
	doneAt, expiry := writerBehindRestartedCoordinator(t, y, y, h, 800*ms, restartAt)
	if doneAt-restartAt >= int64(expiry)/2 {
		t.Errorf("W finished %v after the restart; want well within the record expiry (%v): the record's coordinator died with the holder's earlier life",
			time.Duration(doneAt-restartAt), expiry)
	}
}

// TestRecordsOfRestartedCoordinatorExpire: X's record is on another node, which, told of the
// gateway's restart, counts it silent at once; left to its expiry, W waited a second after the
// crash (most of it after the gateway was back) for a coordinator that no longer existed.
func TestRecordsOfRestartedCoordinatorExpire(t *testing.T) {
	tp := newBatchSim(t, nil).tp
	c, y, h := tp.DataNodes(1)[0], tp.DataNodes(2)[0], tp.DataNodes(3)[0]
	const crashAt, restartAt = 800 * ms, 900 * ms
	doneAt, expiry := writerBehindRestartedCoordinator(t, c, y, h, crashAt, restartAt)
	if doneAt-crashAt >= int64(expiry) {
		t.Errorf("W finished %v after the crash, its record expiry (%v) or more: the holder was told of the restart %v after the crash",
			time.Duration(doneAt-crashAt), expiry, time.Duration(restartAt-crashAt))
	}
}

// A restart notice expires only the records of the sender's earlier lives: a late copy of the
// notice of life L must leave life L's own transactions alive.
func TestRestartNoticeSparesItsOwnLife(t *testing.T) {
	n, env := startHoldNode(t, durable.NewMem())
	tp := n.tp
	c := tp.DataNodes(1)[0]
	const life = 3
	txn := storage.MakeTxnID(int32(c), life<<32|1)
	key := prototest.KeysOn(t, tp, n.self, "life", 1)[0]
	at := ts.Timestamp{Wall: env.Clock, Origin: uint32(c)}
	n.Handle(c, &WriteReq{Req: 1, Txn: TxnMeta{ID: txn, Age: at, RecordNode: n.self, Coord: c}, Key: key, Value: []byte("v"), WriteTS: at, CreateRecord: true})
	env.releaseAll()
	alive := n.recState[txn].lastHB
	n.Handle(c, &Restarted{Life: life})
	if got := n.recState[txn].lastHB; got != alive {
		t.Fatalf("the notice of life %d moved the last sign of life of its own transaction from %d to %d", life, alive, got)
	}
	n.Handle(c, &Restarted{Life: life + 1})
	if got := n.recState[txn].lastHB; env.Clock-got <= int64(n.set.expiry) {
		t.Fatalf("the notice of life %d left life %d's record alive (last sign of life %v ago)", life+1, life, time.Duration(env.Clock-got))
	}
}
