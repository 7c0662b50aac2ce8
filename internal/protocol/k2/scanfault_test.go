package k2

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/meridiandb/meridian/client"
	"github.com/meridiandb/meridian/internal/protocol/prototest"
	"github.com/meridiandb/meridian/internal/sim"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/wire"
)

// phantomFaultRun is phantomRun under faults (loss, duplicates, crashes), with more shapes of
// transactions. The invariant, in every serializable history: the rows of range "row-" number
// exactly the counter. Inserters add a row and bump the counter, deleters remove a row they
// find and lower it; scanners check a scan against the counter (scan first, counter first,
// twice, and after their own insert).
func phantomFaultRun(t *testing.T, seed uint64, opts map[string]string, crashes bool) (mismatches, scans, writes int) {
	t.Helper()
	s, tp := k2ScanSim(t, seed, opts)
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
	const counter = "phantom-count"
	readCount := func(tx *client.Txn) (int, error) {
		v, err := tx.Get(counter)
		switch {
		case errors.Is(err, client.ErrNotFound):
			return 0, nil
		case err != nil:
			return 0, err
		}
		return strconv.Atoi(string(v))
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
			s.AddClient(region, coord, int64(100*time.Millisecond), func(db *client.DB) {
				for i := 0; db.Transport().Now() < int64(3*time.Second); i++ {
					switch c {
					case 0: // insert
						row := fmt.Sprintf("row-%s-%d", id, i)
						err := client.RunTxn(db, client.TxnOptions{}, func(tx *client.Txn) error {
							n, err := readCount(tx)
							if err != nil {
								return err
							}
							if err := tx.Put(counter, []byte(strconv.Itoa(n+1))); err != nil {
								return err
							}
							return tx.Put(row, []byte("x"))
						})
						if err == nil {
							writes++
						}
					case 1: // delete a row of this region's inserter, if there
						row := fmt.Sprintf("row-%d-0-%d", r, i/2)
						err := client.RunTxn(db, client.TxnOptions{}, func(tx *client.Txn) error {
							if _, err := tx.Get(row); errors.Is(err, client.ErrNotFound) {
								return nil
							} else if err != nil {
								return err
							}
							n, err := readCount(tx)
							if err != nil {
								return err
							}
							if err := tx.Delete(row); err != nil {
								return err
							}
							return tx.Put(counter, []byte(strconv.Itoa(n-1)))
						})
						if err == nil {
							writes++
						}
					case 2: // scan, then the counter
						var rows []wire.KV
						var n int
						err := client.RunTxn(db, client.TxnOptions{}, func(tx *client.Txn) (err error) {
							if rows, err = tx.Scan("row-", "row.", 0); err != nil {
								return err
							}
							n, err = readCount(tx)
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
							if n, err = readCount(tx); err != nil {
								return err
							}
							if a, err = tx.Scan("row-", "row.", 0); err != nil {
								return err
							}
							b, err = tx.Scan("row-", "", 0)
							return err
						})
						if err == nil {
							scans++
							inB := 0
							for _, kv := range b {
								if len(kv.Key) >= 4 && kv.Key[:4] == "row-" {
									inB++
								}
							}
							if len(a) != n || inB != n {
								bad("count-then-scans: counter %d, rows %d then %d", n, len(a), inB)
							}
						}
					case 4: // own insert, then scan
						row := fmt.Sprintf("row-%s-%d", id, i)
						var rows []wire.KV
						var n int
						err := client.RunTxn(db, client.TxnOptions{}, func(tx *client.Txn) (err error) {
							if n, err = readCount(tx); err != nil {
								return err
							}
							if err := tx.Put(counter, []byte(strconv.Itoa(n+1))); err != nil {
								return err
							}
							if err := tx.Put(row, []byte("own")); err != nil {
								return err
							}
							rows, err = tx.Scan("row-", "row.", 0)
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

// TestScanNoPhantomsUnderFaults: no committed scan disagrees with the counter under loss,
// duplicates and crashes, for several option sets.
func TestScanNoPhantomsUnderFaults(t *testing.T) {
	seeds := uint64(4)
	if v, err := strconv.Atoi(os.Getenv("SCAN_SEEDS")); err == nil {
		seeds = uint64(v)
	}
	for _, o := range []map[string]string{nil, {"mv-reads": "off"}, {"write-pipelining": "off"}, {"mv-writes": "off"}} {
		for seed := uint64(1); seed <= seeds; seed++ {
			mm, scans, writes := phantomFaultRun(t, seed, o, true)
			t.Logf("%v seed %d: %d scans, %d writes, %d mismatches", o, seed, scans, writes, mm)
			if mm != 0 {
				t.Errorf("%v seed %d: %d of %d scans disagree with the counter", o, seed, mm, scans)
			}
		}
	}
}

// TestScanFaultRunCatchesMutant: the run above can fail.
func TestScanFaultRunCatchesMutant(t *testing.T) {
	total := 0
	for seed := uint64(1); seed <= 3; seed++ {
		mm, scans, _ := phantomFaultRun(t, seed, map[string]string{"mutant": "no-scan-watermark"}, true)
		t.Logf("mutant seed %d: %d scans, %d mismatches", seed, scans, mm)
		total += mm
	}
	if total == 0 {
		t.Error("no mismatch with the mutant")
	}
}

func k2ScanSim(t *testing.T, seed uint64, opts map[string]string) (*sim.Sim, *topo.Topology) {
	t.Helper()
	cfg, err := prototest.SimConfig(prototest.Case{Protocol: "k2", Options: opts, Seed: seed})
	if err != nil {
		t.Fatal(err)
	}
	s, err := sim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s, cfg.Topology
}
