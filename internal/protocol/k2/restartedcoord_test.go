package k2

import (
	"errors"
	"testing"
	"time"

	"github.com/meridiandb/meridian/client"
	"github.com/meridiandb/meridian/internal/protocol/prototest"
)

// TestRecordsOfRestartedCoordinatorLeaseOut: X, coordinated by node c, writes a key y leads (so
// y records X) and a key on h, and holds its intents. c crashes and comes back 100 ms later
// with nothing of X. A reader of X's key on h parks on PUSHWS at y. Told of c's restart, y ends
// X's lease and its next tick aborts X; left to the lease, the reader waited a second after
// c's crash for a coordinator that no longer existed.
func TestRecordsOfRestartedCoordinatorLeaseOut(t *testing.T) {
	s := newScript(t, nil, nil)
	tp := s.Topology()
	c, y, h := tp.DataNodes(1)[0], tp.DataNodes(2)[0], tp.DataNodes(3)[0]
	own, hot := prototest.KeysOn(t, tp, y, "restarted-coord/own", 1)[0], prototest.KeysOn(t, tp, h, "restarted-coord/hot", 1)[0]
	const crashAt, restartAt = 600 * ms, 700 * ms
	var fail failures
	holdIntents(s, 1, c, 100*ms, 10*time.Second, []string{own, hot}, &fail) // own first: y records X
	var readAt int64
	s.AddClient(0, tp.DataNodes(0)[0], 800*ms, func(db *client.DB) {
		tx := db.Begin(client.TxnOptions{})
		if _, err := tx.Get(hot); !errors.Is(err, client.ErrNotFound) { // X aborted: nothing there
			fail.add("reader: %v, want not found", err)
			return
		}
		readAt = s.Now()
		_ = tx.Commit()
	})
	s.At(crashAt, func() { s.Crash(c) })
	s.At(restartAt, func() {
		if err := s.Restart(c); err != nil {
			fail.add("restart: %v", err)
		}
	})
	s.RunUntil(int64(5 * time.Second))
	fail.report(t)
	lease := s.Handler(y).(*Node).cfg.lease
	told := s.Handler(y).(*Node).m.Snapshot().Counters["recorder.coordinator-restarted"]
	t.Logf("the reader read %v after c's crash (lease %v); leases ended by the notice at y: %d", time.Duration(readAt-crashAt), lease, told)
	if readAt == 0 {
		t.Fatal("the reader never read")
	}
	if readAt-crashAt >= int64(lease) {
		t.Errorf("the reader waited %v after c's crash, a lease (%v) or more: y was told c had restarted %v after it",
			time.Duration(readAt-crashAt), lease, time.Duration(restartAt-crashAt))
	}
}
