package crdb

import (
	"errors"
	"testing"
	"time"

	"github.com/meridiandb/meridian/client"
	"github.com/meridiandb/meridian/internal/protocol/prototest"
	"github.com/meridiandb/meridian/internal/topo"
)

// TestNoStaleReadAfterFutureRead: a write pushed to a restarted leaseholder's read floor has a
// timestamp no clock has reached. Its gateway waits that out (committed), but the timestamp
// also reaches the HLCs of the nodes the commit talks to (observe), and through their answers'
// clock readings the HLC of any gateway that reads from them. A read-only transaction begun
// there reads at that future timestamp and finds the write once its record is decided: without
// parallel commits the record is COMMITTED while the writer's gateway waits; with them, a
// recovery commits it once that gateway falls silent (here it crashes while waiting).
// Acknowledged at once, the read-only transaction let its client see the value, and a read begun
// afterwards through an untouched gateway, whose uncertainty interval ends max-offset above its
// clock, did not find it.
func TestNoStaleReadAfterFutureRead(t *testing.T) {
	for _, c := range []struct {
		name        string
		opts        map[string]string
		crashWriter bool
	}{
		{name: "no-parallel-commits", opts: map[string]string{"parallel-commits": "off"}},
		{name: "writer-gateway-crash", opts: map[string]string{"max-offset": "2s"}, crashWriter: true},
	} {
		t.Run(c.name, func(t *testing.T) { futureRead(t, c.opts, c.crashWriter) })
	}
}

func futureRead(t *testing.T, opts map[string]string, crashWriter bool) {
	s := prototest.NewSim(t, prototest.Case{Protocol: name, Seed: 1, Options: opts})
	tp := s.Topology()
	shard := tp.ShardsHomedIn(2)[0]
	key := topo.PinnedKey(shard, "k")
	holder := tp.Shards[shard].Primary()
	writerGW := tp.DataNodes(0)[0]
	s.At(int64(100*time.Millisecond), func() { s.Crash(holder) })
	s.At(int64(200*time.Millisecond), func() {
		if err := s.Restart(holder); err != nil {
			t.Errorf("restart: %v", err)
		}
	})
	if crashWriter {
		s.At(int64(700*time.Millisecond), func() { s.Crash(writerGW) })
	}
	const until = 3 * time.Second
	var committedAt, seenAt, staleAt int64 = -1, -1, -1
	s.AddClient(0, writerGW, 0, func(db *client.DB) {
		db.Transport().Sleep(300 * time.Millisecond)
		tx := db.Begin(client.TxnOptions{})
		if err := tx.Put(key, []byte("v")); err != nil {
			t.Errorf("put: %v", err)
			return
		}
		if err := tx.Commit(); err != nil {
			t.Logf("commit: %v", err)
			return
		}
		committedAt = db.Transport().Now()
	})
	get := func(db *client.DB) (bool, error) {
		var found bool
		err := client.RunTxn(db, client.TxnOptions{ReadOnly: true}, func(tx *client.Txn) error {
			_, err := tx.Get(key)
			found = err == nil
			if errors.Is(err, client.ErrNotFound) {
				return nil
			}
			return err
		})
		return found, err
	}
	// A client of region 1 reads the key until it finds it.
	s.AddClient(1, tp.DataNodes(1)[0], 0, func(db *client.DB) {
		db.Transport().Sleep(300 * time.Millisecond)
		for db.Transport().Now() < int64(until) {
			found, err := get(db)
			if err != nil {
				t.Errorf("get: %v", err)
				return
			}
			if found {
				seenAt = db.Transport().Now()
				return
			}
			db.Transport().Sleep(20 * time.Millisecond)
		}
	})
	// A client of region 3, whose gateway has talked to nobody, reads it once that read returned.
	s.AddClient(3, tp.DataNodes(3)[0], 0, func(db *client.DB) {
		for seenAt < 0 && db.Transport().Now() < int64(until) {
			db.Transport().Sleep(time.Millisecond)
		}
		if seenAt < 0 {
			return
		}
		found, err := get(db)
		if err != nil {
			t.Errorf("get: %v", err)
			return
		}
		if !found {
			staleAt = db.Transport().Now()
		}
	})
	s.RunUntil(int64(8 * time.Second))
	s.Stop()
	t.Logf("put acknowledged at %v; found through region 1 at %v", time.Duration(committedAt), time.Duration(seenAt))
	if seenAt < 0 {
		t.Fatalf("region 1 never found the put")
	}
	if staleAt >= 0 {
		t.Errorf("a read through region 1 returned the put at %v; a read begun after it through region 3 did not find it (returned %v)", time.Duration(seenAt), time.Duration(staleAt))
	}
}
