package crdb

import (
	"testing"
	"time"

	"github.com/meridiandb/meridian/client"
)

// TestRestartedCoordinatorsRecordsExpireAtOnce: X, on gateway Y, writes a key Y leads (so its
// record is Y's) and then a hot key on H, and waits. A younger writer W, through another gateway,
// queues behind X's intent on hot: its pushes (PushQuery) find X's record heartbeated. Y crashes
// and comes back 200 ms later with X's PENDING record on disk but nothing else of X: Y's earlier
// life was X's coordinator, so no heartbeat, stage or commit of X can come. The record counted
// alive from the restart kept W waiting a full expiry (1 s) after it; now the push H sends
// again on Y's restart finds it expired, aborts X, and W writes hot at once.
func TestRestartedCoordinatorsRecordsExpireAtOnce(t *testing.T) {
	b := newBatchSim(t, nil)
	s, tp := b.s, b.tp
	y, h := tp.DataNodes(1)[0], tp.DataNodes(2)[0]
	anchor, hot := b.keyOn(t, y, "restart-expiry/anchor"), b.keyOn(t, h, "restart-expiry/hot")
	const crashAt, restartAt = 800 * ms, 1000 * ms
	s.AddClient(1, y, 100*ms, func(db *client.DB) {
		tx := db.Begin(client.TxnOptions{})
		for _, k := range []string{anchor, hot} { // anchor first: the record goes to Y
			if err := tx.Put(k, []byte("x")); err != nil {
				t.Errorf("X: put %s: %v", k, err)
				return
			}
		}
		db.Transport().Sleep(10 * time.Second) // Y crashes meanwhile
	})
	var doneAt int64
	var writerErr error
	s.AddClient(0, b.coord, 500*ms, func(db *client.DB) {
		writerErr = client.RunTxnWith(db, client.TxnOptions{}, client.RetryPolicy{MaxAttempts: 100}, func(tx *client.Txn) error {
			return tx.Put(hot, []byte("w"))
		})
		doneAt = s.Now()
	})
	s.At(crashAt, func() { s.Crash(y) })
	s.At(restartAt, func() {
		if err := s.Restart(y); err != nil {
			t.Errorf("restart Y: %v", err)
		}
	})
	s.RunUntil(int64(10 * time.Second))
	s.Stop()
	expiry := s.Handler(h).(*Node).set.expiry
	t.Logf("W's write of hot finished %v after Y's restart (expiry %v): %v; push/expired %d",
		time.Duration(doneAt-restartAt), expiry, writerErr, b.counter("push/expired"))
	if doneAt == 0 || writerErr != nil {
		t.Fatalf("W: done at %v, %v; want committed", time.Duration(doneAt), writerErr)
	}
	if doneAt-restartAt >= int64(expiry)/2 {
		t.Errorf("W finished %v after Y's restart; want well within the record expiry (%v): the record's coordinator died with Y's earlier life",
			time.Duration(doneAt-restartAt), expiry)
	}
}
