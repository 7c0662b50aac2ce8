package crdb

import (
	"errors"
	"testing"
	"time"

	"github.com/meridiandb/meridian/client"
	"github.com/meridiandb/meridian/internal/protocol/prototest"
	"github.com/meridiandb/meridian/internal/topo"
)

// TestRestartFloorAboveFutureReads: a restarted leaseholder's read floor, its clock +
// 2×max-offset, must lie above every read it served before the crash. Reads are not all at or
// below some clock: a write pushed to another restarted node's floor carries that floor into
// the HLCs its commit talks to, and a transaction begun at such a gateway reads there. Clocks
// here are within 150 ms of true time (max-offset is 500 ms): M restarts at 60 ms with its
// clock 150 ms ahead (floor 1.21 s), and R, begun at a gateway that learned that floor,
// reads l on L at 1.21 s or above; L, its clock 150 ms behind, restarts at 260 ms with floor
// 1.11 s. W2 then writes l (at L's floor, under R's read) and s, and R reads s: it saw W2's
// write of s but not of l.
//
// The second case steps L's clock back across its crash, as a clock within the bound may be:
// L runs 150 ms ahead while R's read reaches it, and is stepped to 150 ms behind just before it
// crashes, so it restarts with the same floor, 1.11 s. L served any read up to its clock +
// 2×max-offset at once, R's too (its clock then + 1 s, 1.35 s), and the floor lay under it; it
// now serves one only up to its clock + max-offset, as the next life's clock may be max-offset
// behind (review).
func TestRestartFloorAboveFutureReads(t *testing.T) {
	t.Run("behind", func(t *testing.T) { restartFloorAboveFutureReads(t, false) })
	t.Run("stepped-back", func(t *testing.T) { restartFloorAboveFutureReads(t, true) })
}

func restartFloorAboveFutureReads(t *testing.T, stepBack bool) {
	s := prototest.NewSim(t, prototest.Case{Protocol: name, Seed: 1})
	tp := s.Topology()
	keyOn := func(region int, k string) (string, topo.NodeID) {
		shard := tp.ShardsHomedIn(topo.RegionID(region))[0]
		return topo.PinnedKey(shard, k), tp.Shards[shard].Primary()
	}
	m, M := keyOn(2, "m")
	l, L := keyOn(3, "l")
	sKey, _ := keyOn(4, "s")
	s.SkewClock(M, 150*time.Millisecond)
	if stepBack {
		s.SkewClock(L, 150*time.Millisecond)
		s.At(int64(240*time.Millisecond), func() { s.SkewClock(L, -300*time.Millisecond) })
	} else {
		s.SkewClock(L, -150*time.Millisecond)
	}
	s.At(int64(50*time.Millisecond), func() { s.Crash(M) })
	s.At(int64(60*time.Millisecond), func() {
		if err := s.Restart(M); err != nil {
			t.Errorf("restart: %v", err)
		}
	})
	s.At(int64(250*time.Millisecond), func() { s.Crash(L) })
	s.At(int64(260*time.Millisecond), func() {
		if err := s.Restart(L); err != nil {
			t.Errorf("restart: %v", err)
		}
	})
	g := tp.DataNodes(0)[0]
	// W: a write pushed to M's floor; its commit brings the floor into g's HLC.
	s.AddClient(0, g, 0, func(db *client.DB) {
		db.Transport().Sleep(80 * time.Millisecond)
		if err := client.RunTxn(db, client.TxnOptions{}, func(tx *client.Txn) error { return tx.Put(m, []byte("w")) }); err != nil {
			t.Errorf("W: %v", err)
		}
	})
	var sawL, sawS bool
	var rErr error
	rDone := false
	s.AddClient(0, g, 0, func(db *client.DB) {
		db.Transport().Sleep(200 * time.Millisecond)
		tx := db.Begin(client.TxnOptions{ReadOnly: true})
		defer func() { rDone = true }()
		get := func(k string) (bool, error) {
			_, err := tx.Get(k)
			if errors.Is(err, client.ErrNotFound) {
				return false, nil
			}
			return err == nil, err
		}
		if sawL, rErr = get(l); rErr != nil {
			return
		}
		db.Transport().Sleep(400*time.Millisecond - time.Duration(db.Transport().Now()))
		if sawS, rErr = get(sKey); rErr != nil {
			return
		}
		rErr = tx.Commit()
	})
	s.AddClient(1, tp.DataNodes(1)[0], 0, func(db *client.DB) {
		db.Transport().Sleep(300 * time.Millisecond)
		err := client.RunTxn(db, client.TxnOptions{}, func(tx *client.Txn) error {
			if err := tx.Put(l, []byte("w2")); err != nil {
				return err
			}
			return tx.Put(sKey, []byte("w2"))
		})
		if err != nil {
			t.Errorf("W2: %v", err)
		}
	})
	s.RunUntil(int64(5 * time.Second))
	s.Stop()
	if !rDone || rErr != nil {
		t.Skipf("R did not commit (%v): nothing to check", rErr)
	}
	if sawS && !sawL {
		t.Errorf("R committed having seen W2's write of s but not its write of l")
	}
	t.Logf("R saw l %v, s %v", sawL, sawS)
}
