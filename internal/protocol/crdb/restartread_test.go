package crdb

import (
	"errors"
	"testing"
	"time"

	"github.com/meridiandb/meridian/client"
	"github.com/meridiandb/meridian/internal/protocol/prototest"
	"github.com/meridiandb/meridian/internal/topo"
)

// TestReadAfterRestartSeesEarlierCommits: clocks 480 ms apart, inside the 500 ms max-offset. A
// transaction through a gateway 240 ms ahead writes a key whose leaseholder is 240 ms behind,
// and is acknowledged; the leaseholder crashes and restarts at once, and a read-only
// transaction begun after that must see the write. The restarted leaseholder's clock was below
// the write's timestamp, and its observed timestamp cut the reader's uncertainty interval short
// of it: the read found nothing (review). The observed timestamp is now at least the restart's
// read floor. Whether the reader's gateway is the leaseholder or a third node, and whether it
// gets the key or scans it, it must find it (a scan narrowed the limit to the clock alone until
// the crash review of real clusters). And so must a reader that visited the leaseholder before,
// by a get or a scan of another key: the coordinator kept that visit's clock reading, without
// the floor, as the leaseholder's observed timestamp, and the next visit's limit fell below
// the write (review; `sim --protocol crdb --workload list-append --one-op-at-a-time --read-back
// --keys 10 --zipf 0.5 --clients 6 --flush-latency 2ms --random-crashes 300ms-1s/30ms
// --random-skews 100ms-300ms/5s --skew-by 245ms --duration 10s --seed 11` read stale).
func TestReadAfterRestartSeesEarlierCommits(t *testing.T) {
	for _, first := range []visit{none, getOther, scanOther} {
		for _, scan := range []bool{false, true} {
			for _, readerRegion := range []topo.RegionID{2, 1} {
				readAfterRestart(t, first, scan, readerRegion)
			}
		}
	}
}

// visit is what the reader does on the restarted leaseholder before it reads the key.
type visit int

const (
	none      visit = iota
	getOther        // gets another key the leaseholder holds
	scanOther       // scans another key the leaseholder holds
)

func readAfterRestart(t *testing.T, first visit, scan bool, readerRegion topo.RegionID) {
	s := prototest.NewSim(t, prototest.Case{Protocol: name, Seed: 1, MaxOffset: 250 * time.Millisecond})
	tp := s.Topology()
	writer, leaseholder, reader := tp.DataNodes(0)[0], tp.DataNodes(2)[0], tp.DataNodes(readerRegion)[0]
	const off = int64(240 * time.Millisecond)
	s.SkewClock(writer, time.Duration(s.Now()+off-s.LocalClockOf(writer)))
	s.SkewClock(leaseholder, time.Duration(s.Now()-off-s.LocalClockOf(leaseholder)))
	if reader != leaseholder {
		s.SkewClock(reader, time.Duration(s.Now()-off-s.LocalClockOf(reader)))
	}
	local := prototest.KeysOn(t, tp, writer, "k0", 1)[0]
	keys := prototest.KeysOn(t, tp, leaseholder, "k", 2)
	key, other := keys[0], keys[1]
	restartedAt := int64(-1)
	s.AddClient(0, writer, 0, func(db *client.DB) {
		db.Transport().Sleep(time.Second)
		if err := client.RunTxn(db, client.TxnOptions{}, func(tx *client.Txn) error {
			if err := tx.Put(local, []byte("v")); err != nil {
				return err
			}
			return tx.Put(key, []byte("v"))
		}); err != nil {
			t.Errorf("put: %v", err)
			return
		}
		acked := db.Transport().Now()
		s.At(acked+int64(time.Millisecond), func() { s.Crash(leaseholder) })
		s.At(acked+int64(11*time.Millisecond), func() {
			if err := s.Restart(leaseholder); err != nil {
				t.Errorf("restart: %v", err)
			}
			restartedAt = s.Now()
		})
	})
	found, done := false, false
	s.AddClient(readerRegion, reader, 0, func(db *client.DB) {
		for restartedAt < 0 {
			db.Transport().Sleep(time.Millisecond)
		}
		db.Transport().Sleep(time.Millisecond)
		err := client.RunTxn(db, client.TxnOptions{ReadOnly: true}, func(tx *client.Txn) error {
			switch first {
			case getOther:
				if _, err := tx.Get(other); err != nil && !errors.Is(err, client.ErrNotFound) {
					return err
				}
			case scanOther:
				if _, err := tx.Scan(other, other+"\x00", 0); err != nil {
					return err
				}
			}
			if scan {
				rows, err := tx.Scan(key, key+"\x00", 0)
				found = err == nil && len(rows) > 0
				return err
			}
			_, err := tx.Get(key)
			found = err == nil
			if errors.Is(err, client.ErrNotFound) {
				return nil
			}
			return err
		})
		if err != nil {
			t.Errorf("read through node %d: %v", reader, err)
		}
		done = true
	})
	s.RunUntil(int64(5 * time.Second))
	s.Stop()
	if !done || !found {
		t.Errorf("read (scan %v, first visit %d) through node %d after the leaseholder's restart: done %v, found %v; want the acknowledged write", scan, first, reader, done, found)
	}
}
