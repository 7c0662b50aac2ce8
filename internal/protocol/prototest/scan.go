package prototest

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/meridiandb/meridian/client"
	"github.com/meridiandb/meridian/internal/bench"
	"github.com/meridiandb/meridian/internal/protocol"
	"github.com/meridiandb/meridian/internal/sim"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/wire"
)

// Range scans, shared by the protocols that serve them.

func newScanSim(t *testing.T, protocol string, seed uint64, opts map[string]string) (*sim.Sim, *topo.Topology) {
	t.Helper()
	s := NewSim(t, Case{Protocol: protocol, Options: opts, Seed: seed})
	return s, s.Topology()
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
	scanBasics(t, protocol, opts, true)
}

// ScanBasicsReadOnly is ScanBasics for a protocol that scans in read-only transactions only:
// the same scans of committed rows, and a scan in a read-write transaction refused as a bad
// argument.
func ScanBasicsReadOnly(t *testing.T, protocol string, opts map[string]string) {
	t.Helper()
	scanBasics(t, protocol, opts, false)
}

func scanBasics(t *testing.T, protocol string, opts map[string]string, readWrite bool) {
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
	runClient(t, s, 20*time.Second, func(db *client.DB) {
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
		if !readWrite {
			tx := db.Begin(client.TxnOptions{})
			if _, err := tx.Scan("s-", "s.", 0); !errors.Is(err, client.ErrBadArgument) {
				fail("scan in a read-write transaction: %v, want a bad-argument refusal", err)
			}
			_ = tx.Abort()
		}
		err = client.RunTxn(db, client.TxnOptions{ReadOnly: !readWrite}, func(tx *client.Txn) error {
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
			if !readWrite {
				if rows, err = tx.Scan("s-", "s.", 2); err != nil {
					return err
				}
				if got, want := rowKeys(rows), []string{"s-a=v-a", "s-b=v-b"}; !slices.Equal(got, want) {
					fail("limit 2: %v, want %v", got, want)
				}
				if rows, err = tx.Scan("s-", "", 0); err != nil {
					return err
				}
				if n := len(rows); n != 7 || rows[n-1].Key != "t-outside" {
					fail("open-ended scan: %v, want 6 rows of s- and t-outside last", rowKeys(rows))
				}
				return nil
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
		if !readWrite {
			return
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
	for _, f := range failures {
		t.Error(f)
	}
}

// phantomCounter counts the rows of range "row-" in the phantom scenarios: every
// transaction that adds or removes a row there moves it by one, so in any serializable history
// a scan of the range and the counter read in one transaction agree.
const phantomCounter = "phantom-count"

// rowSpace is where a phantom scenario keeps its counted rows: spread over every shard (no
// routing prefix, so a scan goes to every primary), or under one routing prefix, where a scan
// goes to that shard's primary alone (txnkit.ScanNodes) and its phantom protection must hold
// all the same.
type rowSpace struct{ prefix string }

var rowSpaces = []rowSpace{{""}, {"#1/"}}

func (rs rowSpace) String() string {
	if rs.prefix == "" {
		return "rows on every shard"
	}
	return "rows under " + rs.prefix
}

func (rs rowSpace) row(name string) string { return rs.prefix + "row-" + name }
func (rs rowSpace) start() string          { return rs.prefix + "row-" }
func (rs rowSpace) end() string            { return rs.prefix + "row." }

// readCounter reads phantomCounter (absent: 0).
func readCounter(tx *client.Txn) (int, error) {
	v, err := tx.Get(phantomCounter)
	switch {
	case errors.Is(err, client.ErrNotFound):
		return 0, nil
	case err != nil:
		return 0, err
	}
	return strconv.Atoi(string(v))
}

// insertCounted adds row to the range and moves the counter with it: the counter first, so
// that a phantom (the row landing under a scan that already read past it) is possible.
func insertCounted(tx *client.Txn, row string) error {
	n, err := readCounter(tx)
	if err != nil {
		return err
	}
	if err := tx.Put(phantomCounter, []byte(strconv.Itoa(n+1))); err != nil {
		return err
	}
	return tx.Put(row, []byte("x"))
}

// phantomRun runs inserters and scanners against one counted range and returns how many
// committed scans saw a row count different from the counter they read in the same
// transaction. Each inserter increments the counter and then adds a row to the range, in one
// transaction; each scanner scans the range and then reads the counter. Serializable
// histories never differ. The phantom the range watermark prevents: a scan at S sees no row, an
// inserter below S whose counter intent the scan's later read waits for then writes its row
// into the range under the finished scan, and commits.
func phantomRun(t *testing.T, protocol string, seed uint64, opts map[string]string, readOnlyScans bool, rs rowSpace) (mismatches, scans, inserts int) {
	t.Helper()
	return counterRun(t, protocol, seed, opts, readOnlyScans,
		func(tx *client.Txn, id string, i int) error {
			return insertCounted(tx, rs.row(fmt.Sprintf("%s-%d", id, i)))
		},
		func() (func(*client.Txn) error, func() string) {
			var rows []wire.KV
			var count int
			body := func(tx *client.Txn) (err error) {
				if rows, err = tx.Scan(rs.start(), rs.end(), 0); err != nil {
					return err
				}
				count, err = readCounter(tx)
				return err
			}
			verdict := func() string {
				if len(rows) != count {
					return fmt.Sprintf("scan saw %d rows, counter %d", len(rows), count)
				}
				return ""
			}
			return body, verdict
		})
}

// counterRun runs, in every region, one client that inserts counted rows (insert, its i-th
// transaction) and one that scans them (each scan's body, and the verdict on what its committed
// run saw: "" or the mismatch), from 0 to 3 s of virtual time, and counts the committed scans
// whose verdict is a mismatch.
func counterRun(t *testing.T, protocol string, seed uint64, opts map[string]string, readOnlyScans bool,
	insert func(tx *client.Txn, id string, i int) error, scanner func() (func(*client.Txn) error, func() string)) (mismatches, scans, inserts int) {
	t.Helper()
	s, tp := newScanSim(t, protocol, seed, opts)
	var failures []string
	for r := range tp.Regions {
		region := topo.RegionID(r)
		coord := tp.DataNodes(region)[0]
		for c := range 2 {
			id := fmt.Sprintf("%d-%d", r, c)
			s.AddClient(region, coord, int64(100*time.Millisecond), func(db *client.DB) {
				for i := 0; db.Transport().Now() < int64(3*time.Second); i++ {
					if c == 0 {
						if client.RunTxn(db, client.TxnOptions{}, func(tx *client.Txn) error { return insert(tx, id, i) }) == nil {
							inserts++
						}
						continue
					}
					body, verdict := scanner()
					if client.RunTxn(db, client.TxnOptions{ReadOnly: readOnlyScans}, body) != nil {
						continue
					}
					scans++
					if v := verdict(); v != "" {
						mismatches++
						if len(failures) < 3 {
							failures = append(failures, v)
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
	scanNoPhantoms(t, protocol, opts, mutant, false)
}

// ScanNoPhantomsReadOnly is ScanNoPhantoms with the scanners in read-only transactions, for a
// protocol that scans only there: the scan and the counter are read at one snapshot.
func ScanNoPhantomsReadOnly(t *testing.T, protocol string, opts, mutant map[string]string) {
	t.Helper()
	scanNoPhantoms(t, protocol, opts, mutant, true)
}

func scanNoPhantoms(t *testing.T, protocol string, opts, mutant map[string]string, readOnlyScans bool) {
	t.Helper()
	for _, rs := range rowSpaces {
		var mutantMismatches int
		for seed := uint64(1); seed <= 3; seed++ {
			mm, scans, inserts := phantomRun(t, protocol, seed, opts, readOnlyScans, rs)
			t.Logf("%v, seed %d: %d scans, %d inserts, %d mismatches", rs, seed, scans, inserts, mm)
			if scans < 10 || inserts < 10 {
				t.Fatalf("%v, seed %d: %d scans and %d inserts committed: too few to test anything", rs, seed, scans, inserts)
			}
			if mm != 0 {
				t.Errorf("%v, seed %d: %d of %d scans saw a row count other than the counter", rs, seed, mm, scans)
			}
			if mutant == nil || mutantMismatches > 0 {
				continue // one seed that shows the mutant's phantom is enough
			}
			bad, _, _ := phantomRun(t, protocol, seed, mutant, readOnlyScans, rs)
			t.Logf("%v, seed %d, mutant %v: %d mismatches", rs, seed, mutant, bad)
			mutantMismatches += bad
		}
		if mutant != nil && mutantMismatches == 0 {
			t.Errorf("%v: mutant %v produced no phantom: the check cannot fail", rs, mutant)
		}
	}
}

// limitRun is phantomRun with limited scans: each inserter's row is numbered by the counter
// value it sets and named so that newer rows sort first, so every insert lands at the front of
// the range, where a scan limited to limit rows reads. A serializable scan that read counter c
// returns exactly the rows numbered c, c-1, ... (limit of them, or all c); a phantom, a row
// that lands under the finished scan's reads, leaves a gap in that sequence.
func limitRun(t *testing.T, protocol string, seed uint64, opts map[string]string, readOnlyScans bool, rs rowSpace, limit int) (mismatches, scans, inserts int) {
	t.Helper()
	rowOf := func(seq int) string { return rs.row(fmt.Sprintf("%09d", 999_999_999-seq)) }
	return counterRun(t, protocol, seed, opts, readOnlyScans,
		func(tx *client.Txn, _ string, _ int) error {
			n, err := readCounter(tx)
			if err != nil {
				return err
			}
			if err := tx.Put(phantomCounter, []byte(strconv.Itoa(n+1))); err != nil {
				return err
			}
			return tx.Put(rowOf(n+1), []byte(strconv.Itoa(n+1)))
		},
		func() (func(*client.Txn) error, func() string) {
			var rows []wire.KV
			var count int
			body := func(tx *client.Txn) (err error) {
				if rows, err = tx.Scan(rs.start(), rs.end(), limit); err != nil {
					return err
				}
				count, err = readCounter(tx)
				return err
			}
			verdict := func() string {
				var want []string
				for seq := count; seq > 0 && len(want) < limit; seq-- {
					want = append(want, rowOf(seq)+"="+strconv.Itoa(seq))
				}
				if got := rowKeys(rows); !slices.Equal(got, want) {
					return fmt.Sprintf("counter %d, scan saw %v", count, got)
				}
				return ""
			}
			return body, verdict
		})
}

// ScanLimitNoPhantoms: scans limited to a few rows, at the front of a range every insert
// lands in, return exactly the newest rows the counter they read says exist (limitRun), for
// rows spread over the shards and under one prefix; under mutant the same runs find a gap.
// readOnlyScans puts the scans in read-only transactions.
func ScanLimitNoPhantoms(t *testing.T, protocol string, opts, mutant map[string]string, readOnlyScans bool) {
	t.Helper()
	for _, rs := range rowSpaces {
		bad := 0
		for seed := uint64(1); seed <= 3; seed++ {
			mm, scans, inserts := limitRun(t, protocol, seed, opts, readOnlyScans, rs, 3)
			t.Logf("%v, seed %d: %d scans, %d inserts, %d mismatches", rs, seed, scans, inserts, mm)
			if scans < 10 || inserts < 10 {
				t.Fatalf("%v, seed %d: %d scans and %d inserts committed: too few to test anything", rs, seed, scans, inserts)
			}
			if mm != 0 {
				t.Errorf("%v, seed %d: %d of %d limited scans missed a row the counter says exists", rs, seed, mm, scans)
			}
			if mutant != nil && bad == 0 {
				bad, _, _ = limitRun(t, protocol, seed, mutant, readOnlyScans, rs, 3)
				t.Logf("%v, seed %d, mutant %v: %d mismatches", rs, seed, mutant, bad)
			}
		}
		if mutant != nil && bad == 0 {
			t.Errorf("%v: mutant %v produced no gap: the check cannot fail", rs, mutant)
		}
	}
}

// ScanReplicatedLayout: on a layout with shard replicas (wren-3dc replicates every shard in
// every region), the preload puts a shard's rows on every replica, as bench's preload does. A
// protocol that reads and writes primaries only never updates a replica's copy, so a scan must
// answer each key once, from its primary. A protocol whose layout keeps no replicas has nothing
// to show here and skips.
func ScanReplicatedLayout(t *testing.T, proto string) {
	t.Helper()
	base := sim.DefaultConfig()
	cfg, err := bench.SimConfig(bench.Deployment{Protocol: proto, Topology: "wren-3dc",
		NodesPerRegion: 1, ShardsPerNode: 4, Seed: 1, Base: &base, IntraRTT: 200 * time.Microsecond})
	if err != nil {
		t.Fatal(err)
	}
	tp := cfg.Topology
	s, err := sim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	keys := []string{"p-a", "p-b", "p-c", "p-d"}
	for _, k := range keys {
		for _, r := range tp.Shards[tp.ShardOf(k)].Replicas {
			if err := s.Handler(r).(protocol.Preloader).Preload([]wire.KV{{Key: k, Value: []byte("old")}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(tp.Shards[tp.ShardOf("p-a")].Replicas) < 2 {
		t.Skipf("%s keeps no replicas on wren-3dc", proto)
	}
	var got []string
	var scanErr error
	done := false
	s.AddClient(0, tp.DataNodes(0)[0], int64(100*time.Millisecond), func(db *client.DB) {
		defer func() { done = true }()
		scanErr = client.RunTxn(db, client.TxnOptions{}, func(tx *client.Txn) error {
			return tx.Put("p-a", []byte("new"))
		})
		if scanErr != nil {
			return
		}
		scanErr = client.RunTxn(db, client.TxnOptions{ReadOnly: true}, func(tx *client.Txn) error {
			rows, err := tx.Scan("p-", "p.", 0)
			got = rowKeys(rows)
			return err
		})
	})
	s.RunUntil(int64(20 * time.Second))
	s.Stop()
	if !done || scanErr != nil {
		t.Fatalf("done %v, err %v", done, scanErr)
	}
	if want := []string{"p-a=new", "p-b=old", "p-c=old", "p-d=old"}; !slices.Equal(got, want) {
		t.Errorf("scan: %v, want %v", got, want)
	}
}

// phantomFaultRun is phantomRun under faults (loss, duplicates, crashes), with more shapes of
// transactions. The invariant, in every serializable history: the rows of range "row-" number
// exactly the counter. Inserters add a row and bump the counter, deleters remove a row they
// find and lower it; scanners check a scan against the counter (scan first, counter first,
// twice, and after their own insert).
func phantomFaultRun(t *testing.T, protocol string, seed uint64, opts map[string]string, crashes, readOnlyScans bool, rs rowSpace) (mismatches, scans, writes int) {
	t.Helper()
	s, tp := newScanSim(t, protocol, seed, opts)
	s.SetClientLinksReliable(true)
	s.SetLoss(0.02)
	s.SetDuplication(0.1)
	data := []topo.NodeID{}
	for r := range tp.Regions {
		data = append(data, tp.DataNodes(topo.RegionID(r))...)
	}
	if crashes {
		for i, at := range []time.Duration{900 * time.Millisecond, 1900 * time.Millisecond, 2600 * time.Millisecond} {
			id := data[(int(seed)+3*i)%len(data)]
			s.At(int64(at), func() { s.Crash(id) })
			s.At(int64(at+250*time.Millisecond), func() {
				if err := s.Restart(id); err != nil {
					t.Errorf("restart %d: %v", id, err)
				}
			})
		}
	}
	var failures []string
	bad := func(format string, args ...any) {
		mismatches++
		if len(failures) < 5 {
			failures = append(failures, fmt.Sprintf(format, args...))
		}
	}
	for r := range tp.Regions {
		region := topo.RegionID(r)
		coord := tp.DataNodes(region)[0]
		for c := range 5 {
			id := fmt.Sprintf("%d-%d", r, c)
			kind := c
			if readOnlyScans && kind == 4 {
				kind = 0 // scans only in read-only transactions: one more inserter instead
			}
			s.AddClient(region, coord, int64(100*time.Millisecond), func(db *client.DB) {
				for i := 0; db.Transport().Now() < int64(3*time.Second); i++ {
					switch kind {
					case 0: // insert
						row := rs.row(fmt.Sprintf("%s-%d", id, i))
						if client.RunTxn(db, client.TxnOptions{}, func(tx *client.Txn) error { return insertCounted(tx, row) }) == nil {
							writes++
						}
					case 1: // delete a row of this region's inserter, if there
						row := rs.row(fmt.Sprintf("%d-0-%d", r, i/2))
						err := client.RunTxn(db, client.TxnOptions{}, func(tx *client.Txn) error {
							if _, err := tx.Get(row); errors.Is(err, client.ErrNotFound) {
								return nil
							} else if err != nil {
								return err
							}
							n, err := readCounter(tx)
							if err != nil {
								return err
							}
							if err := tx.Delete(row); err != nil {
								return err
							}
							return tx.Put(phantomCounter, []byte(strconv.Itoa(n-1)))
						})
						if err == nil {
							writes++
						}
					case 2: // scan, then the counter
						var rows []wire.KV
						var n int
						err := client.RunTxn(db, client.TxnOptions{ReadOnly: readOnlyScans}, func(tx *client.Txn) (err error) {
							if rows, err = tx.Scan(rs.start(), rs.end(), 0); err != nil {
								return err
							}
							n, err = readCounter(tx)
							return err
						})
						if err == nil {
							scans++
							if len(rows) != n {
								bad("scan-then-count: %d rows, counter %d", len(rows), n)
							}
						}
					case 3: // the counter, then two scans (read-only)
						var a, b []wire.KV
						var n int
						err := client.RunTxn(db, client.TxnOptions{ReadOnly: true}, func(tx *client.Txn) (err error) {
							if n, err = readCounter(tx); err != nil {
								return err
							}
							if a, err = tx.Scan(rs.start(), rs.end(), 0); err != nil {
								return err
							}
							b, err = tx.Scan(rs.start(), "", 0)
							return err
						})
						if err == nil {
							scans++
							inB := 0
							for _, kv := range b {
								if strings.HasPrefix(kv.Key, rs.start()) {
									inB++
								}
							}
							if len(a) != n || inB != n {
								bad("count-then-scans: counter %d, rows %d then %d", n, len(a), inB)
							}
						}
					case 4: // own insert, then scan
						row := rs.row(fmt.Sprintf("%s-%d", id, i))
						var rows []wire.KV
						var n int
						err := client.RunTxn(db, client.TxnOptions{}, func(tx *client.Txn) (err error) {
							if n, err = readCounter(tx); err != nil {
								return err
							}
							if err := tx.Put(phantomCounter, []byte(strconv.Itoa(n+1))); err != nil {
								return err
							}
							if err := tx.Put(row, []byte("own")); err != nil {
								return err
							}
							rows, err = tx.Scan(rs.start(), rs.end(), 0)
							return err
						})
						if err == nil {
							scans++
							writes++
							if len(rows) != n+1 {
								bad("own-insert-then-scan: %d rows, counter %d", len(rows), n+1)
							}
						}
					}
				}
			})
		}
	}
	s.RunUntil(int64(20 * time.Second))
	s.Stop()
	for _, f := range failures {
		t.Log(f)
	}
	return mismatches, scans, writes
}

// ScanNoPhantomsUnderFaults: no committed scan disagrees with the counter under loss,
// duplicates and crashes, for each of optionSets (SCAN_SEEDS seeds each, default 4); and the
// same run under mutant finds a disagreement in seeds 1-3, so the check can fail.
func ScanNoPhantomsUnderFaults(t *testing.T, protocol string, optionSets []map[string]string, mutant map[string]string) {
	t.Helper()
	scanNoPhantomsUnderFaults(t, protocol, optionSets, mutant, false)
}

// ScanNoPhantomsUnderFaultsReadOnly is ScanNoPhantomsUnderFaults with every scan in a read-only
// transaction (the own-insert-then-scan shape becomes one more inserter).
func ScanNoPhantomsUnderFaultsReadOnly(t *testing.T, protocol string, optionSets []map[string]string, mutant map[string]string) {
	t.Helper()
	scanNoPhantomsUnderFaults(t, protocol, optionSets, mutant, true)
}

func scanNoPhantomsUnderFaults(t *testing.T, protocol string, optionSets []map[string]string, mutant map[string]string, readOnlyScans bool) {
	t.Helper()
	seeds := uint64(4)
	if v, err := strconv.Atoi(os.Getenv("SCAN_SEEDS")); err == nil {
		seeds = uint64(v)
	}
	for _, rs := range rowSpaces {
		for _, o := range optionSets {
			for seed := uint64(1); seed <= seeds; seed++ {
				mm, scans, writes := phantomFaultRun(t, protocol, seed, o, true, readOnlyScans, rs)
				t.Logf("%v, %v seed %d: %d scans, %d writes, %d mismatches", rs, o, seed, scans, writes, mm)
				if mm != 0 {
					t.Errorf("%v, %v seed %d: %d of %d scans disagree with the counter", rs, o, seed, mm, scans)
				}
			}
		}
		total := 0
		for seed := uint64(1); seed <= 3 && total == 0; seed++ {
			mm, scans, _ := phantomFaultRun(t, protocol, seed, mutant, true, readOnlyScans, rs)
			t.Logf("%v, mutant %v seed %d: %d scans, %d mismatches", rs, mutant, seed, scans, mm)
			total += mm
		}
		if total == 0 {
			t.Errorf("%v: no mismatch with mutant %v: the check cannot fail", rs, mutant)
		}
	}
}

// ScanTooLarge: a scan whose rows exceed wire.MaxScanBytes is refused as a bad argument, both
// when one node's share does (rows under one routing prefix live together) and when only the
// merged answer does (rows spread over the shards), while the same scans with a limit that
// fits are answered. An answer that large would not fit a frame between real nodes.
func ScanTooLarge(t *testing.T, proto string, readOnlyScans bool) {
	t.Helper()
	s, _ := newScanSim(t, proto, 1, nil)
	big := make([]byte, client.MaxValueBytes)
	var failures []string
	fail := func(format string, args ...any) { failures = append(failures, fmt.Sprintf(format, args...)) }
	runClient(t, s, 30*time.Second, func(db *client.DB) {
		for i := range 5 {
			err := client.RunTxn(db, client.TxnOptions{}, func(tx *client.Txn) error {
				if err := tx.Put(fmt.Sprintf("one/%d", i), big); err != nil { // one shard
					return err
				}
				return tx.Put(fmt.Sprintf("spread-%d", i), big) // shards apart
			})
			if err != nil {
				fail("load %d: %v", i, err)
				return
			}
		}
		for _, r := range []struct{ start, end string }{{"one/", "one0"}, {"spread-", "spread."}} {
			tx := db.Begin(client.TxnOptions{ReadOnly: readOnlyScans})
			if _, err := tx.Scan(r.start, r.end, 0); !errors.Is(err, client.ErrBadArgument) || !strings.Contains(err.Error(), "4 MiB") {
				fail("scan %s: %v, want a bad-argument refusal naming 4 MiB", r.start, err)
			}
			rows, err := tx.Scan(r.start, r.end, 3)
			if err != nil || len(rows) != 3 {
				fail("scan %s, limit 3: %d rows, %v; want 3", r.start, len(rows), err)
			}
			_ = tx.Abort()
		}
	})
	for _, f := range failures {
		t.Error(f)
	}
}

// ScanOneShardIsLocal: a scan within one routing prefix goes to that prefix's shard alone
// (txnkit.ScanNodes), so from the shard's home region it costs no round trip between regions,
// while a scan of keys spread over the shards waits for the farthest primary. Both answer
// their rows. readOnly scans in a read-only transaction (for a protocol that scans only there).
func ScanOneShardIsLocal(t *testing.T, protocol string, readOnly bool) {
	t.Helper()
	s, tp := newScanSim(t, protocol, 1, nil)
	minWAN := time.Duration(-1)
	for a := range tp.Regions {
		for b := range tp.Regions {
			if a != b && (minWAN < 0 || tp.RTT[a][b] < minWAN) {
				minWAN = tp.RTT[a][b]
			}
		}
	}
	if minWAN <= 0 {
		t.Fatal("topology has one region: nothing to compare")
	}
	shard := tp.ShardsHomedIn(0)[0]
	prefix := topo.PinnedKey(shard, "")
	local := []string{topo.PinnedKey(shard, "a"), topo.PinnedKey(shard, "b"), topo.PinnedKey(shard, "c")}
	spread := []string{"sp-a", "sp-b", "sp-c", "sp-d", "sp-e", "sp-f"}
	var failures []string
	fail := func(format string, args ...any) { failures = append(failures, fmt.Sprintf(format, args...)) }
	runClient(t, s, 10*time.Second, func(db *client.DB) {
		err := client.RunTxn(db, client.TxnOptions{}, func(tx *client.Txn) error {
			for _, k := range append(slices.Clone(local), spread...) {
				if err := tx.Put(k, []byte("v")); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			fail("load: %v", err)
			return
		}
		timed := func(start, end string, want []string) time.Duration {
			var took time.Duration
			err := client.RunTxn(db, client.TxnOptions{ReadOnly: readOnly}, func(tx *client.Txn) error {
				at := db.Transport().Now()
				rows, err := tx.Scan(start, end, 0)
				took = time.Duration(db.Transport().Now() - at)
				if err == nil && !slices.Equal(rowKeys(rows), want) {
					fail("scan [%q, %q) = %v, want %v", start, end, rowKeys(rows), want)
				}
				return err
			})
			if err != nil {
				fail("scan [%q, %q): %v", start, end, err)
			}
			return took
		}
		withValues := func(keys []string) []string {
			out := make([]string, len(keys))
			for i, k := range keys {
				out[i] = k + "=v"
			}
			return out
		}
		if took := timed(prefix+"/", topo.PrefixEnd(prefix+"/"), withValues(local)); took >= minWAN/2 {
			fail("scan of shard %d's prefix from its home region took %v, at least half the shortest round trip between regions (%v): it left the region", shard, took, minWAN)
		}
		if took := timed("sp-", "sp.", withValues(spread)); took < minWAN {
			fail("scan of keys on every shard took %v, under the shortest round trip between regions (%v): the comparison shows nothing", took, minWAN)
		}
	})
	for _, f := range failures {
		t.Error(f)
	}
}
