package k2

import (
	"errors"
	"testing"
	"time"

	"github.com/meridiandb/meridian/client"
	"github.com/meridiandb/meridian/internal/protocol/prototest"
	"github.com/meridiandb/meridian/internal/storage"
	"github.com/meridiandb/meridian/internal/topo"
)

// readerBehindRestartedCoordinator runs X, coordinated by node c, which writes a key recorder
// leads (so recorder records X) and a key on h, and holds its intents; c crashes at crashAt and
// comes back at restartAt with nothing of X, so no heartbeat or commit of X can come. A reader
// of X's key on h, from readAt, parks on PUSHWS at the recorder. It returns when the reader
// read (X aborted: nothing there), and the recorder's lease.
func readerBehindRestartedCoordinator(t *testing.T, c, recorder, h topo.NodeID, crashAt, restartAt, readAt int64) (readDone int64, lease time.Duration) {
	t.Helper()
	s := newScript(t, nil, nil)
	tp := s.Topology()
	own, hot := prototest.KeysOn(t, tp, recorder, "restart/own", 1)[0], prototest.KeysOn(t, tp, h, "restart/hot", 1)[0]
	var fail failures
	holdIntents(s, tp.Nodes[c].Region, c, 100*ms, 10*time.Second, []string{own, hot}, &fail) // own first: recorder records X
	s.AddClient(0, tp.DataNodes(0)[0], readAt, func(db *client.DB) {
		tx := db.Begin(client.TxnOptions{})
		if _, err := tx.Get(hot); !errors.Is(err, client.ErrNotFound) {
			fail.add("reader: %v, want not found", err)
			return
		}
		readDone = s.Now()
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
	n := s.Handler(recorder).(*Node)
	t.Logf("the reader read %v after the restart; at the recorder: lease aborts %d, leases ended by a restart notice %d",
		time.Duration(readDone-restartAt), n.m.Snapshot().Counters["recorder.lease-abort"], n.m.Snapshot().Counters["recorder.coordinator-restarted"])
	if readDone == 0 {
		t.Fatal("the reader never read")
	}
	return readDone, n.cfg.lease
}

// TestRestartedCoordinatorsRecordsLeaseOutAtOnce: X's coordinator is its own recorder. Leased
// from the restart, the record kept the reader waiting a full lease (1 s) after it; now the
// first tick after recovery aborts X.
func TestRestartedCoordinatorsRecordsLeaseOutAtOnce(t *testing.T) {
	tp := newScript(t, nil, nil).Topology()
	y, h := tp.DataNodes(1)[0], tp.DataNodes(2)[0]
	const restartAt = 700 * ms
	readDone, lease := readerBehindRestartedCoordinator(t, y, y, h, 600*ms, restartAt, 1000*ms)
	if readDone-restartAt >= int64(lease) {
		t.Errorf("the reader waited %v after the restart, a lease (%v) or more: X's coordinator died with the recorder's earlier life",
			time.Duration(readDone-restartAt), lease)
	}
}

// TestRecordsOfRestartedCoordinatorLeaseOut: X's recorder is another node, which, told of the
// coordinator's restart, ends X's lease; left to the lease, the reader waited a second after
// the crash for a coordinator that no longer existed.
func TestRecordsOfRestartedCoordinatorLeaseOut(t *testing.T) {
	tp := newScript(t, nil, nil).Topology()
	c, y, h := tp.DataNodes(1)[0], tp.DataNodes(2)[0], tp.DataNodes(3)[0]
	const crashAt, restartAt = 600 * ms, 700 * ms
	readDone, lease := readerBehindRestartedCoordinator(t, c, y, h, crashAt, restartAt, 800*ms)
	if readDone-crashAt >= int64(lease) {
		t.Errorf("the reader waited %v after the crash, a lease (%v) or more: the recorder was told of the restart %v after the crash",
			time.Duration(readDone-crashAt), lease, time.Duration(restartAt-crashAt))
	}
}

// A restart notice ends only the leases of the sender's earlier lives' transactions, and never
// a decided one's: a late copy of the notice of life L must leave life L's transactions alone.
func TestRestartNoticeSparesItsOwnLife(t *testing.T) {
	n, env := newScriptNode(t, nil)
	c := n.tp.DataNodes(1)[0]
	const life = 3
	own, earlier := storage.MakeTxnID(int32(c), life<<32|1), storage.MakeTxnID(int32(c), (life-1)<<32|1)
	now := env.Clock
	n.leases[own], n.leases[earlier] = now, now
	n.Handle(c, &Restarted{Life: life})
	if n.leases[own] != now || n.leases[earlier] >= now-int64(n.cfg.lease) {
		t.Fatalf("after the notice of life %d: own lease at %d, earlier life's at %d (now %d); want the first kept, the second ended",
			life, n.leases[own], n.leases[earlier], now)
	}
}
