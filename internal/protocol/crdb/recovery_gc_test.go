package crdb

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/meridiandb/meridian/client"
	"github.com/meridiandb/meridian/internal/protocol/prototest"
	"github.com/meridiandb/meridian/internal/protocol/txnkit"
)

// TestRecoveryAfterGCKeepsCommit: transaction X writes kR (whose leaseholder R holds X's
// record) and k1 (on L1), and commits by parallel commit; its client is told. R crashes before
// the explicit commit and kR's resolution reach it, and stays down longer than gc-ttl. Meanwhile
// k1 is overwritten, and L1 collects X's version of it. R comes back with X's record STAGING and
// recovers it: every write must be found at or below the staging timestamp. When the
// coordinator resolved k1 at once, X's resolved version was the only evidence of k1's write, and
// GC had removed it: recovery found k1 missing, aborted X, and discarded kR's intent, losing a
// write the client was told committed. Intents are resolved as committed only once the record
// is durably COMMITTED (by its holder), so a STAGING record's writes are all still intents,
// which GC never removes.
func TestRecoveryAfterGCKeepsCommit(t *testing.T) {
	b := newBatchSim(t, map[string]string{txnkit.GCTTLOption: "200ms", "max-offset": "20ms"})
	s, tp := b.s, b.tp
	defer s.Stop()
	r, c, l1 := tp.DataNodes(0)[0], tp.DataNodes(1)[0], tp.DataNodes(2)[0]
	kR := prototest.KeysOn(t, tp, r, "rec", 1)[0]
	k1 := prototest.KeysOn(t, tp, l1, "rec", 1)[0]
	var failures []string
	fail := func(format string, args ...any) { failures = append(failures, fmt.Sprintf(format, args...)) }
	var restartAt int64
	var got map[string]string
	s.AddClient(1, c, 100*ms, func(db *client.DB) {
		tx := db.Begin(client.TxnOptions{})
		for _, k := range []string{kR, k1} { // kR first: the record goes to R
			if err := tx.Put(k, []byte("x")); err != nil {
				fail("X: put %s: %v", k, err)
				return
			}
		}
		if err := tx.Commit(); err != nil {
			fail("X: commit: %v", err)
			return
		}
		// The explicit commit and kR's resolution are on their way to R (a WAN away); the
		// client heard first, from its own region.
		s.Crash(r)
		restartAt = s.Now() + int64(1500*time.Millisecond)
		s.At(restartAt, func() {
			if err := s.Restart(r); err != nil {
				fail("restart: %v", err)
			}
		})
		if err := client.RunTxn(db, client.TxnOptions{}, func(tx *client.Txn) error { return tx.Put(k1, []byte("y")) }); err != nil {
			fail("overwrite of k1: %v", err)
		}
		db.Transport().Sleep(4 * time.Second) // R is back, and has recovered X
		got = map[string]string{}
		if err := client.RunTxn(db, client.TxnOptions{ReadOnly: true}, func(tx *client.Txn) error {
			for _, k := range []string{kR, k1} {
				v, err := tx.Get(k)
				if err != nil && !errors.Is(err, client.ErrNotFound) {
					return err
				}
				got[k] = string(v)
			}
			return nil
		}); err != nil {
			fail("final read: %v", err)
		}
	})
	s.RunUntil(int64(12 * time.Second))
	for _, f := range failures {
		t.Error(f)
	}
	m := s.Handler(r).(*Node).m.Counters
	removed := s.Handler(l1).(*Node).m.Counters["gc/versions-removed"]
	t.Logf("R restarted at %v; L1 collected %d versions; R's recoveries: %d committed, %d aborted; read %q", time.Duration(restartAt),
		removed, m["recovery/committed"], m["recovery/aborted"], got)
	if got == nil {
		t.Fatal("the final read did not run")
	}
	if got[kR] != "x" || got[k1] != "y" {
		t.Fatalf("after R's recovery: kR=%q k1=%q, want x (X committed, and its client was told) and y", got[kR], got[k1])
	}
}
