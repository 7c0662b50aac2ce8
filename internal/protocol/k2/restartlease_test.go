package k2

import (
	"errors"
	"testing"
	"time"

	"github.com/meridiandb/meridian/client"
	"github.com/meridiandb/meridian/internal/protocol/prototest"
)

// TestRestartedCoordinatorsRecordsLeaseOutAtOnce: X, coordinated by node y, writes a key y
// leads (so y records X) and a key on h, and holds its intents. y crashes and comes back with
// X's undecided record on disk and nothing else of X: y's earlier life was X's coordinator, so
// no heartbeat or commit of X can come. A reader of X's key on h parks on PUSHWS at y. Leased
// from the restart, the record kept the reader waiting a full lease (1 s) after it; now the
// first tick after recovery aborts X and the reader goes on.
func TestRestartedCoordinatorsRecordsLeaseOutAtOnce(t *testing.T) {
	s := newScript(t, nil, nil)
	tp := s.Topology()
	y, h := tp.DataNodes(1)[0], tp.DataNodes(2)[0]
	own, hot := prototest.KeysOn(t, tp, y, "restart-lease/own", 1)[0], prototest.KeysOn(t, tp, h, "restart-lease/hot", 1)[0]
	const crashAt, restartAt = 600 * ms, 700 * ms
	var fail failures
	holdIntents(s, 1, y, 100*ms, 10*time.Second, []string{own, hot}, &fail) // own first: y records X
	var readAt int64
	s.AddClient(0, tp.DataNodes(0)[0], 1000*ms, func(db *client.DB) {
		tx := db.Begin(client.TxnOptions{})
		if _, err := tx.Get(hot); !errors.Is(err, client.ErrNotFound) { // X aborted: nothing there
			fail.add("reader: %v, want not found", err)
			return
		}
		readAt = s.Now()
		_ = tx.Commit()
	})
	s.At(crashAt, func() { s.Crash(y) })
	s.At(restartAt, func() {
		if err := s.Restart(y); err != nil {
			fail.add("restart: %v", err)
		}
	})
	s.RunUntil(int64(5 * time.Second))
	fail.report(t)
	lease := s.Handler(y).(*Node).cfg.lease
	aborts := s.Handler(y).(*Node).m.Snapshot().Counters["recorder.lease-abort"]
	t.Logf("the reader read %v after y's restart (lease %v); lease aborts at y: %d", time.Duration(readAt-restartAt), lease, aborts)
	if readAt == 0 || aborts != 1 {
		t.Fatalf("reader done at %v, %d lease aborts at y: the scenario did not run", time.Duration(readAt), aborts)
	}
	if readAt-restartAt >= int64(lease) {
		t.Errorf("the reader waited %v after y's restart, a lease (%v) or more: X's coordinator died with y's earlier life",
			time.Duration(readAt-restartAt), lease)
	}
}
