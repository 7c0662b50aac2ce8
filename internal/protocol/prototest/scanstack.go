package prototest

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/meridiandb/meridian/client"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/wire"
)

// limitStackRun: rows form a stack at the front of the range (newest sorts first): pushers add
// row n+1, poppers delete row n (leaving a tombstone that sorts before every live row), and
// limited scanners must see exactly rows c, c-1, ... for the counter c they read.
func limitStackRun(t *testing.T, protocol string, seed uint64, opts map[string]string, faults bool, rs rowSpace, limit int) (mismatches, scans, writes int) {
	t.Helper()
	s, tp := newScanSim(t, protocol, seed, opts)
	if faults {
		s.SetClientLinksReliable(true)
		s.SetLoss(0.02)
		s.SetDuplication(0.1)
		var data []topo.NodeID
		for r := range tp.Regions {
			data = append(data, tp.DataNodes(topo.RegionID(r))...)
		}
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
	rowOf := func(seq int) string { return rs.row(fmt.Sprintf("%09d", 999_999_999-seq)) }
	for r := range tp.Regions {
		region := topo.RegionID(r)
		coord := tp.DataNodes(region)[0]
		for c := range 3 {
			s.AddClient(region, coord, int64(100*time.Millisecond), func(db *client.DB) {
				for i := 0; db.Transport().Now() < int64(3*time.Second); i++ {
					switch {
					case c == 0 || (c == 1 && i%3 != 0):
						if client.RunTxn(db, client.TxnOptions{}, func(tx *client.Txn) error {
							n, err := readCounter(tx)
							if err != nil {
								return err
							}
							if err := tx.Put(phantomCounter, []byte(strconv.Itoa(n+1))); err != nil {
								return err
							}
							return tx.Put(rowOf(n+1), []byte(strconv.Itoa(n+1)))
						}) == nil {
							writes++
						}
					case c == 1:
						if client.RunTxn(db, client.TxnOptions{}, func(tx *client.Txn) error {
							n, err := readCounter(tx)
							if err != nil || n == 0 {
								return err
							}
							if err := tx.Put(phantomCounter, []byte(strconv.Itoa(n-1))); err != nil {
								return err
							}
							return tx.Delete(rowOf(n))
						}) == nil {
							writes++
						}
					default:
						var rows []wire.KV
						var count int
						err := client.RunTxn(db, client.TxnOptions{}, func(tx *client.Txn) error {
							var err error
							if i%2 == 0 {
								if rows, err = tx.Scan(rs.start(), rs.end(), limit); err != nil {
									return err
								}
								count, err = readCounter(tx)
								return err
							}
							if count, err = readCounter(tx); err != nil {
								return err
							}
							rows, err = tx.Scan(rs.start(), rs.end(), limit)
							return err
						})
						if err != nil {
							if errors.Is(err, client.ErrBadArgument) {
								t.Errorf("scan refused: %v", err)
							}
							continue
						}
						scans++
						var want []string
						for seq := count; seq > 0 && len(want) < limit; seq-- {
							want = append(want, rowOf(seq)+"="+strconv.Itoa(seq))
						}
						if got := rowKeys(rows); !slices.Equal(got, want) {
							mismatches++
							if len(failures) < 3 {
								failures = append(failures, fmt.Sprintf("counter %d, scan saw %v", count, got))
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

// ScanLimitStackUnderFaults: limited scans (1 and 3 rows, before and after reading the counter)
// of a stack of rows that pushes and pops at the front of the range, so deleted rows sort before
// every live one and a limited scan steps over them, under loss, duplicates and three crashes,
// with the rows spread over the shards and under one prefix: every committed scan sees exactly
// the newest rows its counter says exist, for SCAN_SEEDS seeds (default 2); under mutant the
// same runs (seeds 1-3) find a mismatch, so the check can fail.
func ScanLimitStackUnderFaults(t *testing.T, protocol string, mutant map[string]string) {
	t.Helper()
	seeds := uint64(2)
	if v, err := strconv.Atoi(os.Getenv("SCAN_SEEDS")); err == nil {
		seeds = uint64(v)
	}
	for _, rs := range rowSpaces {
		totalScans, totalWrites := 0, 0
		for seed := uint64(1); seed <= seeds; seed++ {
			for _, limit := range []int{1, 3} {
				mm, scans, writes := limitStackRun(t, protocol, seed, nil, true, rs, limit)
				t.Logf("%v seed %d limit %d: %d scans, %d writes, %d mismatches", rs, seed, limit, scans, writes, mm)
				totalScans, totalWrites = totalScans+scans, totalWrites+writes
				if mm != 0 {
					t.Errorf("%v seed %d limit %d: %d of %d limited scans disagree with the counter", rs, seed, limit, mm, scans)
				}
			}
		}
		if totalScans < 20 || totalWrites < 20 {
			t.Fatalf("%v: %d scans and %d writes committed in all: too few to test anything", rs, totalScans, totalWrites)
		}
		bad := 0
		for seed := uint64(1); seed <= 3 && bad == 0; seed++ {
			bad, _, _ = limitStackRun(t, protocol, seed, mutant, true, rs, 3)
			t.Logf("%v, mutant %v seed %d: %d mismatches", rs, mutant, seed, bad)
		}
		if bad == 0 {
			t.Errorf("%v: no mismatch with mutant %v: the check cannot fail", rs, mutant)
		}
	}
}
