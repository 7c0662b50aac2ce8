package crdb

import (
	"testing"
	"time"

	"github.com/meridiandb/meridian/client"
	"github.com/meridiandb/meridian/internal/protocol/prototest"
	"github.com/meridiandb/meridian/internal/topo"
)

// TestFutureCommitWaitOutlastsIdleTimeout: a commit pushed to a restarted leaseholder's read
// floor waits until its gateway's clock passes the commit timestamp, up to 2×max-offset. The
// wait is not a hang: an idle timeout shorter than it must not turn the commit into an unknown
// outcome (and, with parallel commits, leave its record to a recovery).
func TestFutureCommitWaitOutlastsIdleTimeout(t *testing.T) {
	s := prototest.NewSim(t, prototest.Case{Protocol: name, Seed: 1, Options: map[string]string{"idle-timeout": "500ms"}})
	tp := s.Topology()
	shard := tp.ShardsHomedIn(2)[0]
	key := topo.PinnedKey(shard, "k")
	holder := tp.Shards[shard].Primary()
	s.At(int64(100*time.Millisecond), func() { s.Crash(holder) })
	s.At(int64(200*time.Millisecond), func() {
		if err := s.Restart(holder); err != nil {
			t.Errorf("restart: %v", err)
		}
	})
	var commitErr error
	done := false
	s.AddClient(0, tp.DataNodes(0)[0], 0, func(db *client.DB) {
		db.Transport().Sleep(300 * time.Millisecond)
		tx := db.Begin(client.TxnOptions{})
		if err := tx.Put(key, []byte("v")); err != nil {
			t.Errorf("put: %v", err)
			return
		}
		commitErr = tx.Commit()
		done = true
	})
	s.RunUntil(int64(5 * time.Second))
	s.Stop()
	if !done {
		t.Fatal("the commit was never answered")
	}
	if commitErr != nil {
		t.Errorf("commit after the leaseholder's restart: %v", commitErr)
	}
}
