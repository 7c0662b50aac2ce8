package crdb

import (
	"fmt"
	"testing"
	"time"

	"github.com/meridiandb/meridian/client"
)

// TestWriteTooOldAbortsAtOnce: A reads k, B then commits a new value of k, and A writes k. A
// can never commit (its refresh of k past B's value must fail), so the write is refused and A
// aborts there with cause write-too-old, without laying an intent. Before, the write was pushed
// above B's value and A went on to its commit, whose refresh failed, holding an intent on k all
// the while: on list-append's hot keys most intents were such doomed ones, blocking every
// reader and writer behind them (crdb committed 27 txn/s over seeds 1-5, 50 with the refusal).
// C, which never read its key, is only pushed above B's value and commits, as before.
func TestWriteTooOldAbortsAtOnce(t *testing.T) {
	b := newBatchSim(t, map[string]string{"idle-timeout": "20s"})
	q := b.tp.DataNodes(1)[0] // across the WAN, so a doomed intent would stand for a round trip
	k, blind := b.keyOn(t, q, "wto/read"), b.keyOn(t, q, "wto/blind")
	const ms = int64(time.Millisecond)
	var failures []string
	fail := func(format string, args ...any) { failures = append(failures, fmt.Sprintf(format, args...)) }
	var aPutErr error
	aDone, bDone, cDone := false, false, false
	b.s.AddClient(0, b.coord, 100*ms, func(db *client.DB) { // A: read-modify-write of k
		defer func() { aDone = true }()
		tx := db.Begin(client.TxnOptions{})
		if _, err := tx.GetMany([]string{k}); err != nil {
			fail("A read: %v", err)
			return
		}
		db.Transport().Sleep(500 * time.Millisecond) // B commits k meanwhile
		if aPutErr = tx.Put(k, []byte("a")); aPutErr != nil {
			return
		}
		if err := tx.Commit(); err != nil {
			fail("A's write was accepted, and its commit then failed: %v", err)
		} else {
			fail("A committed over B's value of a key it read")
		}
	})
	b.s.AddClient(0, b.coord, 120*ms, func(db *client.DB) { // C: blind write of blind
		defer func() { cDone = true }()
		tx := db.Begin(client.TxnOptions{})
		db.Transport().Sleep(500 * time.Millisecond)
		if err := tx.Put(blind, []byte("c")); err != nil {
			fail("C write: %v", err)
			return
		}
		if err := tx.Commit(); err != nil {
			fail("C commit: %v", err)
		}
	})
	b.s.AddClient(0, b.coord, 200*ms, func(db *client.DB) { // B: younger, commits both keys
		defer func() { bDone = true }()
		tx := db.Begin(client.TxnOptions{})
		for _, key := range []string{k, blind} {
			if err := tx.Put(key, []byte("b")); err != nil {
				fail("B write: %v", err)
				return
			}
		}
		if err := tx.Commit(); err != nil {
			fail("B commit: %v", err)
		}
	})
	b.s.RunUntil(int64(5 * time.Second))
	var after []client.Read
	b.s.AddClient(0, b.coord, b.s.Now(), func(db *client.DB) {
		err := client.RunTxn(db, client.TxnOptions{ReadOnly: true}, func(tx *client.Txn) error {
			var err error
			after, err = tx.GetMany([]string{k, blind})
			return err
		})
		if err != nil {
			fail("read-back: %v", err)
		}
	})
	b.s.RunUntil(int64(10 * time.Second))
	b.s.Stop()
	for _, f := range failures {
		t.Error(f)
	}
	if !aDone || !bDone || !cDone {
		t.Fatalf("clients unfinished (A %v, B %v, C %v)", aDone, bDone, cDone)
	}
	if cause := client.AbortCause(aPutErr); cause != "write-too-old" {
		t.Errorf("A's write of k: %v, want an abort with cause write-too-old", aPutErr)
	}
	if got := b.counter("abort/refresh-failed"); got != 0 {
		t.Errorf("abort/refresh-failed = %d, want 0: the doomed write went on to its commit", got)
	}
	if len(after) != 2 || string(after[0].Value) != "b" || string(after[1].Value) != "c" {
		t.Errorf("after: %+v, want k=b (A never wrote) and blind=c (C above B)", after)
	}
}
