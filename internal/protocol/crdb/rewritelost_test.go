package crdb

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/meridiandb/meridian/client"
)

// TestRewriteLostInCrashNotCommitted: a transaction writes k = v1 (its intent durable), then
// k = v2, and k's leaseholder X crashes before v2's intent is on disk and restarts. The
// commit's proof finds the transaction's intent on k, but v1's: with v2 acknowledged at once
// (pipelined), the transaction committed v1, a value its client had overwritten (list-append
// --read-back with crashes and slow flushes: an intermediate read, G1b). The transaction must
// commit v2, or not commit.
func TestRewriteLostInCrashNotCommitted(t *testing.T) {
	s, x, c, k, r := slowDiskSim(t, "rewrite")
	defer s.Stop()
	tp := s.Topology()
	var failures []string
	fail := func(format string, args ...any) { failures = append(failures, fmt.Sprintf(format, args...)) }
	var crashed, done bool
	var commitErr error
	s.AddClient(1, c, int64(time.Second), func(db *client.DB) {
		defer func() { done = true }()
		tx := db.Begin(client.TxnOptions{})
		for _, kv := range [][2]string{{r, "a"}, {k, "v1"}} {
			if err := tx.Put(kv[0], []byte(kv[1])); err != nil {
				fail("put %s: %v", kv[0], err)
				return
			}
		}
		db.Transport().Sleep(time.Second) // v1's intent is durable
		now := s.Now()
		s.At(now+int64(50*time.Millisecond), func() {
			crashed = true
			s.Crash(x) // v2's flush, if it went at once, is still under way
		})
		s.At(now+int64(350*time.Millisecond), func() {
			if err := s.Restart(x); err != nil {
				fail("restart: %v", err)
			}
		})
		if err := tx.Put(k, []byte("v2")); err != nil {
			t.Logf("put k = v2: %v (the transaction cannot go on: fine)", err)
			return
		}
		commitErr = tx.Commit()
	})
	var got string
	s.AddClient(2, tp.DataNodes(2)[0], int64(5*time.Second), func(db *client.DB) {
		if err := client.RunTxn(db, client.TxnOptions{}, func(tx *client.Txn) error {
			v, err := tx.Get(k)
			if errors.Is(err, client.ErrNotFound) {
				got = ""
				return nil
			}
			got = string(v)
			return err
		}); err != nil {
			fail("read k: %v", err)
		}
	})
	s.RunUntil(int64(20 * time.Second))
	if !done || !crashed {
		t.Fatalf("the scene was not set: client done %v, X crashed %v", done, crashed)
	}
	for _, f := range failures {
		t.Error(f)
	}
	if commitErr == nil && got != "v2" {
		t.Errorf("the transaction wrote k = v1 then v2 and committed, but k reads %q", got)
	}
	t.Logf("commit: %v; k = %q", commitErr, got)
}
