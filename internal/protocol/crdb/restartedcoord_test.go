package crdb

import (
	"testing"
	"time"

	"github.com/meridiandb/meridian/client"
)

// TestRecordsOfRestartedCoordinatorExpire: X, on gateway C, writes a key Y leads (so its record
// is Y's) and then a hot key on H, and waits. A younger writer W queues behind X's intent on
// hot: its pushes find X's record heartbeated. C crashes and comes back 100 ms later, with
// nothing of X: no heartbeat, stage or commit of X can come any more. Y, told of the restart,
// counts X's record silent at once; left to its expiry, W waited a second after C's crash
// (most of it after C was back) for a coordinator that no longer existed.
func TestRecordsOfRestartedCoordinatorExpire(t *testing.T) {
	b := newBatchSim(t, nil)
	s, tp := b.s, b.tp
	c, y, h := tp.DataNodes(1)[0], tp.DataNodes(2)[0], tp.DataNodes(3)[0]
	anchor, hot := b.keyOn(t, y, "restarted-coord/anchor"), b.keyOn(t, h, "restarted-coord/hot")
	const crashAt, restartAt = 800 * ms, 900 * ms
	s.AddClient(1, c, 100*ms, func(db *client.DB) {
		tx := db.Begin(client.TxnOptions{})
		for _, k := range []string{anchor, hot} { // anchor first: the record goes to Y
			if err := tx.Put(k, []byte("x")); err != nil {
				t.Errorf("X: put %s: %v", k, err)
				return
			}
		}
		db.Transport().Sleep(10 * time.Second) // C crashes meanwhile
	})
	var doneAt int64
	var writerErr error
	s.AddClient(0, b.coord, 500*ms, func(db *client.DB) {
		writerErr = client.RunTxnWith(db, client.TxnOptions{}, client.RetryPolicy{MaxAttempts: 100}, func(tx *client.Txn) error {
			return tx.Put(hot, []byte("w"))
		})
		doneAt = s.Now()
	})
	s.At(crashAt, func() { s.Crash(c) })
	s.At(restartAt, func() {
		if err := s.Restart(c); err != nil {
			t.Errorf("restart C: %v", err)
		}
	})
	s.RunUntil(int64(10 * time.Second))
	s.Stop()
	expiry := s.Handler(h).(*Node).set.expiry
	t.Logf("W's write of hot finished %v after C's restart (expiry %v): %v; record/coordinator-restarted %d",
		time.Duration(doneAt-restartAt), expiry, writerErr, b.counter("record/coordinator-restarted"))
	if doneAt == 0 || writerErr != nil {
		t.Fatalf("W: done at %v, %v; want committed", time.Duration(doneAt), writerErr)
	}
	if doneAt-crashAt >= int64(expiry) {
		t.Errorf("W finished %v after C's crash, its record expiry (%v) or more: the holder was told C had restarted %v after the crash",
			time.Duration(doneAt-crashAt), expiry, time.Duration(restartAt-crashAt))
	}
}
