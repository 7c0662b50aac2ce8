package ycsbt

import (
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/meridiandb/meridian/client"
	"github.com/meridiandb/meridian/internal/workload"
	"github.com/meridiandb/meridian/internal/workload/memdb"
)

// runAttempts runs n transactions of one client against s, as the bench driver does: each
// attempt's Run, then its commit, then Done with the outcome outcome(i) names for transaction i.
// Unknown commits the attempt (its outcome unknown to the client); Aborted aborts it.
func runAttempts(t *testing.T, w *Workload, s *memdb.Store, seed uint64, n int, outcome func(i int) workload.Outcome) {
	t.Helper()
	db := client.Open(s.Transport())
	g := w.NewClient(1, 0, rand.New(rand.NewPCG(seed, seed)))
	for i := 0; i < n; i++ {
		txn := g.Next()
		tx := db.Begin(client.TxnOptions{ReadOnly: txn.ReadOnly})
		if err := txn.Run(tx); err != nil {
			t.Fatal(err)
		}
		o := outcome(i)
		if o == workload.Aborted {
			_ = tx.Abort()
		} else if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		if txn.Done != nil {
			txn.Done(o)
		}
	}
}

func counterOf(t *testing.T, s *memdb.Store, key string) uint64 {
	t.Helper()
	v, ok := s.Get(key)
	if !ok {
		return 0
	}
	return binary.LittleEndian.Uint64(v)
}

func rmwConfig() Config {
	return Config{Keys: 30, OpsPerTxn: 3, WriteRatio: 0.6, RMW: true, Distribution: "uniform", ValueBytes: 16}
}

// The counters of a run whose every attempt was tallied check out, whatever mix of committed,
// aborted and unknown attempts it had.
func TestCheckHoldsAfterRun(t *testing.T) {
	w := mustNew(t, rmwConfig())
	if !w.Verifies() {
		t.Fatal("a read-modify-write workload does not verify")
	}
	s := memdb.New()
	runAttempts(t, w, s, 1, 400, func(i int) workload.Outcome { return workload.Outcome(i % 3) })
	if err := w.Check(client.Open(s.Transport())); err != nil {
		t.Fatal(err)
	}
	if len(w.tally) < 20 {
		t.Fatalf("%d keys tallied after 400 transactions over 30 keys", len(w.tally))
	}
}

// A lost update (a counter below its acknowledged increments), an aborted attempt's write that
// took effect (above acknowledged + unknown) and a value too short each fail the check, and the
// error names the keys as the TPC-C check names its conditions.
func TestCheckCatchesBadCounters(t *testing.T) {
	w := mustNew(t, rmwConfig())
	s := memdb.New()
	runAttempts(t, w, s, 2, 300, func(int) workload.Outcome { return workload.Committed })
	if err := w.Check(client.Open(s.Transport())); err != nil {
		t.Fatal(err)
	}
	lost, extra, short := w.KeyName(3), w.KeyName(7), w.KeyName(11)
	for _, k := range []uint64{3, 7, 11} {
		if w.tally[k] == nil || w.tally[k].acked == 0 {
			t.Fatalf("key %d was not written by a committed attempt: pick another", k)
		}
	}
	c := counterOf(t, s, lost)
	s.Put(lost, w.value(c-1))
	s.Put(extra, w.value(counterOf(t, s, extra)+1))
	s.Put(short, []byte("1234"))
	err := w.Check(client.Open(s.Transport()))
	var ce *CheckError
	if !errors.As(err, &ce) || len(ce.Violations) != 3 {
		t.Fatalf("Check: %v, want a CheckError with 3 violations", err)
	}
	msg := err.Error()
	for _, want := range []string{
		"ycsbt: 3 of ",
		"key " + lost + ": counter ",
		"key " + extra + ": counter ",
		"key " + short + ": holds 4 bytes",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}
	if want := "acknowledged increments " + strconv.FormatUint(w.tally[3].acked, 10) + ", unknown 0"; !strings.Contains(msg, "counter "+strconv.FormatUint(c-1, 10)+", "+want) {
		t.Errorf("error %q does not give key 3's counter %d and %s", msg, c-1, want)
	}
}

// An attempt whose outcome is unknown may have committed or not: both pass. An aborted
// attempt counts nothing, so its write found in the store fails; so does a committed attempt
// the store lost.
func TestCheckUnknownAndAbortedAttempts(t *testing.T) {
	cases := []struct {
		name    string
		commit  bool // whether the store applies the attempt
		outcome workload.Outcome
		ok      bool
	}{
		{"unknown, applied", true, workload.Unknown, true},
		{"unknown, not applied", false, workload.Unknown, true},
		{"aborted, not applied", false, workload.Aborted, true},
		{"aborted, applied", true, workload.Aborted, false},
		{"committed, applied", true, workload.Committed, true},
		{"committed, lost", false, workload.Committed, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := mustNew(t, Config{Keys: 10, OpsPerTxn: 2, WriteRatio: 1, RMW: true, Distribution: "uniform"})
			s := memdb.New()
			db := client.Open(s.Transport())
			txn := w.NewClient(1, 0, rand.New(rand.NewPCG(3, 3))).Next()
			if txn.Done == nil || txn.ReadOnly {
				t.Fatalf("a read-modify-write transaction: Done %v, read-only %v", txn.Done != nil, txn.ReadOnly)
			}
			// A first attempt aborts (a retry is a new attempt of the same transaction).
			tx := db.Begin(client.TxnOptions{})
			if err := txn.Run(tx); err != nil {
				t.Fatal(err)
			}
			_ = tx.Abort()
			txn.Done(workload.Aborted)
			tx = db.Begin(client.TxnOptions{Attempt: 1})
			if err := txn.Run(tx); err != nil {
				t.Fatal(err)
			}
			if c.commit {
				if err := tx.Commit(); err != nil {
					t.Fatal(err)
				}
			} else {
				_ = tx.Abort()
			}
			txn.Done(c.outcome)
			err := w.Check(client.Open(s.Transport()))
			if (err == nil) != c.ok {
				t.Fatalf("Check: %v, want ok %v", err, c.ok)
			}
		})
	}
}

// Two read-modify-writes that read the same counters and both commit lose an update: the check
// catches it (this is what a protocol without its locks does). Each runs on its own copy of the
// empty database and commits there; the second's copy is what is left, as if its writes
// overwrote the first's.
func TestCheckCatchesLostUpdate(t *testing.T) {
	w := mustNew(t, Config{Keys: 2, OpsPerTxn: 2, WriteRatio: 1, RMW: true, Distribution: "uniform"})
	g := w.NewClient(1, 0, rand.New(rand.NewPCG(4, 4)))
	var last *memdb.Store
	for i := 0; i < 2; i++ {
		txn := g.Next()
		last = memdb.New()
		if err := client.RunTxn(client.Open(last.Transport()), client.TxnOptions{}, txn.Run); err != nil {
			t.Fatal(err)
		}
		txn.Done(workload.Committed)
	}
	err := w.Check(client.Open(last.Transport()))
	var ce *CheckError
	if !errors.As(err, &ce) || len(ce.Violations) != 2 {
		t.Fatalf("two committed increments of each key left each counter 1: Check %v, want 2 violations", err)
	}
	if want := "key " + w.KeyName(0) + ": counter 1, acknowledged increments 2, unknown 0"; !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q lacks %q", err, want)
	}
}

// Blind writes write counter 0: no tally, no Done, and nothing checked.
func TestBlindWritesAreNotChecked(t *testing.T) {
	cfg := rmwConfig()
	cfg.RMW = false
	w := mustNew(t, cfg)
	if w.Verifies() {
		t.Fatal("a blind-write workload verifies")
	}
	g := w.NewClient(1, 0, rand.New(rand.NewPCG(5, 5)))
	for i := 0; i < 50; i++ {
		if g.Next().Done != nil {
			t.Fatal("a blind-write transaction reports its outcome")
		}
	}
	s := memdb.New()
	s.Put(w.KeyName(0), w.value(99))
	if err := w.Check(client.Open(s.Transport())); err != nil {
		t.Fatal(err)
	}
}

// Check reads the tallied keys in batches of checkKeysPerTxn, one read-write transaction each.
func TestCheckReadsInBatches(t *testing.T) {
	w := mustNew(t, Config{Keys: 1000, OpsPerTxn: 10, WriteRatio: 1, RMW: true, Distribution: "uniform"})
	s := memdb.New()
	runAttempts(t, w, s, 6, 200, func(int) workload.Outcome { return workload.Committed })
	n := len(w.tally)
	if n <= 2*checkKeysPerTxn {
		t.Fatalf("only %d keys tallied", n)
	}
	before, _ := s.Stats()
	if err := w.Check(client.Open(s.Transport())); err != nil {
		t.Fatal(err)
	}
	after, _ := s.Stats()
	if got, want := after-before, (n+checkKeysPerTxn-1)/checkKeysPerTxn; got != want {
		t.Fatalf("Check of %d keys ran %d transactions, want %d", n, got, want)
	}
}

// A namespace keeps the keys apart from another run's; scans would cross it, so they exclude it.
func TestNamespace(t *testing.T) {
	cfg := rmwConfig()
	cfg.Namespace = "r1"
	w := mustNew(t, cfg)
	if k := w.KeyName(5); !strings.HasSuffix(k, "/ur1/5") {
		t.Fatalf("key 5 under namespace r1: %q", k)
	}
	if k := mustNew(t, rmwConfig()).KeyName(5); !strings.HasSuffix(k, "/u5") {
		t.Fatalf("key 5 without a namespace: %q", k)
	}
	cfg.ScanRatio = 0.5
	if _, err := New(testTopo(t), cfg); err == nil {
		t.Fatal("a namespace with scans was accepted")
	}
}
