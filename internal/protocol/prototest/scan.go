package prototest

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/meridiandb/meridian/client"
	"github.com/meridiandb/meridian/internal/sim"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/wire"
)

// Range scans, shared by the protocols that serve them.

func newScanSim(t *testing.T, protocol string, seed uint64, opts map[string]string) (*sim.Sim, *topo.Topology) {
	t.Helper()
	cfg, err := SimConfig(Case{Protocol: protocol, Options: opts, Seed: seed})
	if err != nil {
		t.Fatal(err)
	}
	s, err := sim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s, cfg.Topology
}

func rowKeys(rows []wire.KV) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.Key + "=" + string(r.Value)
	}
	return out
}

// ScanBasics: a scan returns, in key order, the committed rows of its range on every shard as of
// its timestamp, with the transaction's own writes and deletes applied, cut to the limit.
func ScanBasics(t *testing.T, protocol string, opts map[string]string) {
	t.Helper()
	s, tp := newScanSim(t, protocol, 1, opts)
	// Keys on different shards (no '/': each key is its own routing prefix, hashed), all in "s-".
	keys := []string{"s-a", "s-b", "s-c", "s-d", "s-e", "s-f"}
	shards := map[topo.ShardID]bool{}
	for _, k := range keys {
		shards[tp.ShardOf(k)] = true
	}
	if len(shards) < 2 {
		t.Fatalf("keys %v all on one shard: the scan would cross no node", keys)
	}
	var failures []string
	fail := func(format string, args ...any) { failures = append(failures, fmt.Sprintf(format, args...)) }
	done := false
	s.AddClient(0, tp.DataNodes(0)[0], int64(100*time.Millisecond), func(db *client.DB) {
		defer func() { done = true }()
		err := client.RunTxn(db, client.TxnOptions{}, func(tx *client.Txn) error {
			for _, k := range keys {
				if err := tx.Put(k, []byte("v-"+k[2:])); err != nil {
					return err
				}
			}
			return tx.Put("t-outside", []byte("x")) // past the range's end
		})
		if err != nil {
			fail("load: %v", err)
			return
		}
		err = client.RunTxn(db, client.TxnOptions{}, func(tx *client.Txn) error {
			rows, err := tx.Scan("s-", "s.", 0)
			if err != nil {
				return err
			}
			if got, want := rowKeys(rows), []string{"s-a=v-a", "s-b=v-b", "s-c=v-c", "s-d=v-d", "s-e=v-e", "s-f=v-f"}; !slices.Equal(got, want) {
				fail("whole range: %v, want %v", got, want)
			}
			if rows, err = tx.Scan("s-b", "s-e", 0); err != nil {
				return err
			}
			if got, want := rowKeys(rows), []string{"s-b=v-b", "s-c=v-c", "s-d=v-d"}; !slices.Equal(got, want) {
				fail("[s-b, s-e): %v, want %v", got, want)
			}
			// The transaction's own writes: an update, a delete and an insert.
			if err := tx.Put("s-b", []byte("own")); err != nil {
				return err
			}
			if err := tx.Delete("s-c"); err != nil {
				return err
			}
			if err := tx.Put("s-bb", []byte("new")); err != nil {
				return err
			}
			if rows, err = tx.Scan("s-", "s.", 4); err != nil {
				return err
			}
			if got, want := rowKeys(rows), []string{"s-a=v-a", "s-b=own", "s-bb=new", "s-d=v-d"}; !slices.Equal(got, want) {
				fail("own writes, limit 4: %v, want %v", got, want)
			}
			if rows, err = tx.Scan("s-", "", 0); err != nil {
				return err
			}
			if n := len(rows); n != 7 || rows[n-1].Key != "t-outside" {
				fail("open-ended scan: %v, want 6 rows of s- and t-outside last", rowKeys(rows))
			}
			return nil
		})
		if err != nil {
			fail("scans: %v", err)
		}
		// Read-only, from another transaction: the committed state.
		err = client.RunTxn(db, client.TxnOptions{ReadOnly: true}, func(tx *client.Txn) error {
			rows, err := tx.Scan("s-", "s.", 0)
			if err != nil {
				return err
			}
			if got, want := rowKeys(rows), []string{"s-a=v-a", "s-b=own", "s-bb=new", "s-d=v-d", "s-e=v-e", "s-f=v-f"}; !slices.Equal(got, want) {
				fail("after commit: %v, want %v", got, want)
			}
			return nil
		})
		if err != nil {
			fail("read-only scan: %v", err)
		}
	})
	s.RunUntil(int64(20 * time.Second))
	s.Stop()
	if !done {
		t.Fatal("the client did not finish in 20 virtual seconds")
	}
	for _, f := range failures {
		t.Error(f)
	}
}

// phantomRun runs inserters and scanners against one counted range and returns how many
// committed scans saw a row count different from the counter they read in the same
// transaction. Each inserter increments the counter and then adds a row to the range, in one
// transaction; each scanner scans the range and then reads the counter. Serializable
// histories never differ. The phantom the range watermark prevents: a scan at S sees no row, an
// inserter below S whose counter intent the scan's later read waits for then writes its row
// into the range under the finished scan, and commits.
func phantomRun(t *testing.T, protocol string, seed uint64, opts map[string]string) (mismatches, scans, inserts int) {
	t.Helper()
	s, tp := newScanSim(t, protocol, seed, opts)
	const counter = "phantom-count"
	var failures []string
	for r := range tp.Regions {
		region := topo.RegionID(r)
		coord := tp.DataNodes(region)[0]
		for c := range 2 {
			id := fmt.Sprintf("%d-%d", r, c)
			s.AddClient(region, coord, int64(100*time.Millisecond), func(db *client.DB) {
				for i := 0; db.Transport().Now() < int64(3*time.Second); i++ {
					if c == 0 {
						row := fmt.Sprintf("row-%s-%d", id, i) // no '/': rows spread over the shards
						err := client.RunTxn(db, client.TxnOptions{}, func(tx *client.Txn) error {
							n := 0
							v, err := tx.Get(counter)
							switch {
							case errors.Is(err, client.ErrNotFound):
							case err != nil:
								return err
							default:
								if n, err = strconv.Atoi(string(v)); err != nil {
									return err
								}
							}
							if err := tx.Put(counter, []byte(strconv.Itoa(n+1))); err != nil {
								return err
							}
							return tx.Put(row, []byte("x"))
						})
						if err == nil {
							inserts++
						}
						continue
					}
					var rows []wire.KV
					var count int
					err := client.RunTxn(db, client.TxnOptions{}, func(tx *client.Txn) error {
						var err error
						if rows, err = tx.Scan("row-", "row.", 0); err != nil {
							return err
						}
						v, err := tx.Get(counter)
						switch {
						case errors.Is(err, client.ErrNotFound):
							count = 0
						case err != nil:
							return err
						default:
							count, err = strconv.Atoi(string(v))
						}
						return err
					})
					if err != nil {
						continue
					}
					scans++
					if len(rows) != count {
						mismatches++
						if len(failures) < 3 {
							failures = append(failures, fmt.Sprintf("scan saw %d rows, counter %d", len(rows), count))
						}
					}
				}
			})
		}
	}
	s.RunUntil(int64(8 * time.Second))
	s.Stop()
	for _, f := range failures {
		t.Log(f)
	}
	return mismatches, scans, inserts
}

// ScanNoPhantoms runs phantomRun for seeds 1-3 under opts, where no committed scan may
// miss a row whose counter increment it saw, and under mutant, which breaks the protocol's
// phantom protection, where the same runs must find one (nil mutant: the protocol has none
// to break, like serial's one-at-a-time execution).
func ScanNoPhantoms(t *testing.T, protocol string, opts, mutant map[string]string) {
	t.Helper()
	var mutantMismatches int
	for seed := uint64(1); seed <= 3; seed++ {
		mm, scans, inserts := phantomRun(t, protocol, seed, opts)
		t.Logf("seed %d: %d scans, %d inserts, %d mismatches", seed, scans, inserts, mm)
		if scans < 10 || inserts < 10 {
			t.Fatalf("seed %d: %d scans and %d inserts committed: too few to test anything", seed, scans, inserts)
		}
		if mm != 0 {
			t.Errorf("seed %d: %d of %d scans saw a row count other than the counter", seed, mm, scans)
		}
		if mutant == nil || mutantMismatches > 0 {
			continue // one seed that shows the mutant's phantom is enough
		}
		bad, _, _ := phantomRun(t, protocol, seed, mutant)
		t.Logf("seed %d, mutant %v: %d mismatches", seed, mutant, bad)
		mutantMismatches += bad
	}
	if mutant != nil && mutantMismatches == 0 {
		t.Errorf("mutant %v produced no phantom: the check cannot fail", mutant)
	}
}
