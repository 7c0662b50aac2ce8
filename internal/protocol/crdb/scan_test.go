package crdb

import (
	"errors"
	"testing"
	"time"

	"github.com/meridiandb/meridian/client"
	"github.com/meridiandb/meridian/internal/protocol/prototest"
	"github.com/meridiandb/meridian/internal/wire"
)

func TestScan(t *testing.T) { prototest.ScanBasics(t, name, nil) }

// TestScanReplicatedLayout: each key once, from its primary, on a layout with replicas.
func TestScanReplicatedLayout(t *testing.T) { prototest.ScanReplicatedLayout(t, name) }

// TestScanNoPhantoms: with scanned spans in the timestamp cache no committed scan misses a row
// whose counter increment it saw; without them (mutant no-span-tscache) the same runs find
// phantoms.
func TestScanNoPhantoms(t *testing.T) {
	prototest.ScanNoPhantoms(t, name, nil, map[string]string{"mutant": "no-span-tscache"})
}

// TestScanRefreshSeesNewRows: a transaction whose timestamp is pushed after it scanned a span
// must refresh the span too: another transaction committed a row in it since, so the refresh
// fails and it aborts (refresh-failed) rather than commit at a timestamp where its scan would
// have seen that row.
func TestScanRefreshSeesNewRows(t *testing.T) {
	b := newBatchSim(t, nil)
	const ms = int64(time.Millisecond)
	var scanErr, insertErr, readErr error
	var scanned []wire.KV
	scanDone := false
	b.s.AddClient(0, b.coord, 100*ms, func(db *client.DB) { // T1: scan, then a pushed write
		defer func() { scanDone = true }()
		tx := db.Begin(client.TxnOptions{})
		if scanned, scanErr = tx.Scan("p-", "p.", 0); scanErr != nil {
			return
		}
		db.Transport().Sleep(2400 * time.Millisecond) // T2 inserts into the span, T3 reads w
		if scanErr = tx.Put("w", []byte("t1")); scanErr != nil {
			return
		}
		scanErr = tx.Commit()
	})
	b.s.AddClient(0, b.coord, 600*ms, func(db *client.DB) { // T2: a row in T1's span
		insertErr = client.RunTxn(db, client.TxnOptions{}, func(tx *client.Txn) error { return tx.Put("p-x", []byte("t2")) })
	})
	b.s.AddClient(0, b.coord, 1500*ms, func(db *client.DB) { // T3: w read above T1's timestamp
		readErr = client.RunTxn(db, client.TxnOptions{}, func(tx *client.Txn) error {
			if _, err := tx.Get("w"); err != nil && !errors.Is(err, client.ErrNotFound) {
				return err
			}
			return nil
		})
	})
	b.s.RunUntil(int64(10 * time.Second))
	b.s.Stop()
	if !scanDone || insertErr != nil || readErr != nil {
		t.Fatalf("scanner done %v, insert %v, read %v", scanDone, insertErr, readErr)
	}
	if len(scanned) != 0 {
		t.Fatalf("T1 scanned %v before any row existed", scanned)
	}
	if cause := client.AbortCause(scanErr); cause != "refresh-failed" {
		t.Errorf("T1: %v, want an abort with cause refresh-failed (its span gained p-x)", scanErr)
	}
}

// TestScanNoPhantomsUnderFaults: no committed scan disagrees with the counter under loss,
// duplicates and crashes; the no-span-tscache mutant does.
func TestScanNoPhantomsUnderFaults(t *testing.T) {
	prototest.ScanNoPhantomsUnderFaults(t, name, []map[string]string{nil, {"write-pipelining": "off", "parallel-commits": "off"}},
		map[string]string{"mutant": "no-span-tscache"})
}

// TestScanTooLarge: a scan answer over wire.MaxScanBytes is refused, one that fits is served.
func TestScanTooLarge(t *testing.T) { prototest.ScanTooLarge(t, name, false) }

// TestScanOneShardIsLocal: a scan within one routing prefix goes to its shard alone.
func TestScanOneShardIsLocal(t *testing.T) { prototest.ScanOneShardIsLocal(t, name, false) }

// TestScanLimitNoPhantoms: a scan that stops at its row limit keeps phantoms out of what it read.
func TestScanLimitNoPhantoms(t *testing.T) {
	prototest.ScanLimitNoPhantoms(t, name, nil, map[string]string{"mutant": "no-span-tscache"}, false)
}

// TestScanLimitStackUnderFaults: limited scans that step over deleted rows at the front of the
// range keep phantoms out under loss, duplicates and crashes.
func TestScanLimitStackUnderFaults(t *testing.T) {
	prototest.ScanLimitStackUnderFaults(t, name, map[string]string{"mutant": "no-span-tscache"})
}
