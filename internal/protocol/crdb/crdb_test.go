package crdb

import (
	"fmt"
	"testing"
	"time"

	"github.com/meridiandb/meridian/internal/check"
	"github.com/meridiandb/meridian/internal/node"
	"github.com/meridiandb/meridian/internal/protocol/prototest"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/workload/ycsbt"
)

const model = "serializable-no-stale-reads"

// TestSerializable checks histories under contention from extreme (10 keys, every transaction
// crossing the WAN) to regional hot spots, over several seeds, with clock offsets up to 200 ms
// (inside the 500 ms max offset, so uncertainty restarts happen), with the optimizations off,
// and with node crashes.
func TestSerializable(t *testing.T) {
	crashes := prototest.Crashes(400*time.Millisecond, map[topo.NodeID]time.Duration{
		0: 300 * time.Millisecond, 2: 700 * time.Millisecond, 4: 1200 * time.Millisecond})
	rolling := map[topo.NodeID]time.Duration{}
	for i := 0; i < 5; i++ {
		rolling[topo.NodeID(i)] = time.Duration(200+i*250) * time.Millisecond
	}
	cases := []struct {
		name   string
		c      prototest.Case
		minOK  int
		counts []string // counters that must be non-zero: the mechanism was exercised
	}{
		{name: "10-keys-wan", c: prototest.Case{Workload: prototest.ListAppend(10, 0)}, minOK: 10,
			counts: []string{"refresh/ok", "push/wait"}},
		{name: "20-keys-local", c: prototest.Case{Workload: prototest.ListAppend(20, 0.8)}, minOK: 100,
			counts: []string{"write/pushed"}},
		{name: "register", c: prototest.Case{Workload: prototest.Register(20, 0.8)}, minOK: 100},
		{name: "skewed-clocks", c: prototest.Case{Workload: prototest.ListAppend(20, 0.8), MaxOffset: 200 * time.Millisecond},
			minOK: 50, counts: []string{"uncertainty/hit"}},
		{name: "no-pipelining-no-parallel-commits", c: prototest.Case{Workload: prototest.ListAppend(20, 0.8),
			Options: map[string]string{"write-pipelining": "off", "parallel-commits": "off"}}, minOK: 100},
		{name: "crashes", c: prototest.Case{Workload: prototest.ListAppend(20, 0.8), Faults: crashes}, minOK: 50},
		{name: "rolling-crashes", c: prototest.Case{Workload: prototest.ListAppend(20, 0.2),
			Faults: prototest.Crashes(300*time.Millisecond, rolling)}, minOK: 20},
	}
	for _, tc := range cases {
		for _, seed := range []uint64{1, 2, 3} {
			t.Run(fmt.Sprintf("%s/seed-%d", tc.name, seed), func(t *testing.T) {
				c := tc.c
				c.Protocol, c.Seed = name, seed
				res := prototest.Run(t, c)
				rep := prototest.MustCheck(t, res, model)
				t.Logf("%d ok, %d failed, %d unknown; counters %v", rep.Counts.OK, rep.Counts.Fail, rep.Counts.Info, res.ProtocolMetrics.Counters)
				prototest.ExpectValid(t, rep, tc.minOK)
				if seed == 1 {
					for _, k := range tc.counts {
						if res.ProtocolMetrics == nil || res.ProtocolMetrics.Counters[k] == 0 {
							t.Errorf("counter %s is zero: the scenario did not exercise it", k)
						}
					}
				}
			})
		}
	}
}

// TestYCSBT runs YCSB-T from low (Zipf 0.5) to high (0.99) contention: transactions commit,
// none has an unknown outcome, and aborts stay a minority.
func TestYCSBT(t *testing.T) {
	for _, theta := range []float64{0.5, 0.99} {
		t.Run(fmt.Sprintf("zipf-%.2f", theta), func(t *testing.T) {
			res := prototest.Run(t, prototest.Case{Protocol: name, Seed: 1, Clients: 8, Duration: time.Second,
				Workload: prototest.YCSBT(theta, func(c *ycsbt.Config) { c.RegionLocal, c.CrossRegionRatio = true, 0.1 })})
			if res.Committed < 100 {
				t.Fatalf("only %d commits", res.Committed)
			}
			if res.Unknown > 0 {
				t.Fatalf("%d unknown outcomes without faults", res.Unknown)
			}
			if res.AbortRate > 0.5 {
				t.Fatalf("abort rate %.2f", res.AbortRate)
			}
		})
	}
}

// TestMutantNoRefresh: committing at a pushed timestamp without re-validating the reads lets a
// read-modify-write overwrite a concurrent append (lost update) or two transactions each miss
// the other's write (write skew). The checker must see it on a contended run.
// Both with list-append's mix of single operations and batches and with every transaction
// batched.
func TestMutantNoRefresh(t *testing.T) {
	for _, wl := range []struct {
		name string
		wl   prototest.Workload
	}{{"mixed", prototest.ListAppend(10, 0)}, {"batched", batchListAppend(10, 0)}} {
		t.Run(wl.name, func(t *testing.T) {
			c := prototest.Case{Protocol: name, Seed: 1, Workload: wl.wl, Options: map[string]string{"mutant": "no-refresh"}}
			rep := prototest.MustCheck(t, prototest.Run(t, c), model)
			t.Logf("mutant: %s, %d ok, anomalies %v", rep.Verdict, rep.Counts.OK, rep.AnomalyTypes)
			prototest.ExpectVerdict(t, rep, check.Invalid)
			// The same seed without the mutant is valid: the refresh is what makes the difference.
			c.Options = nil
			prototest.ExpectValid(t, prototest.MustCheck(t, prototest.Run(t, c), model), 0)
		})
	}
}

// TestReadRefreshOff: with read-refresh=off a pushed transaction that has read aborts instead
// of refreshing (MVTO without refresh): still serializable, and no refresh ever runs, where the
// same contended run with refresh on refreshes successfully.
func TestReadRefreshOff(t *testing.T) {
	c := prototest.Case{Protocol: name, Seed: 1, Workload: prototest.ListAppend(10, 0)}
	res := prototest.Run(t, c)
	if got := res.ProtocolMetrics.Counters["refresh/ok"]; got == 0 {
		t.Fatalf("with refresh on, no refresh succeeded: the run is not contended enough to show the option")
	}
	c.Options = map[string]string{"read-refresh": "off"}
	res = prototest.Run(t, c)
	prototest.ExpectValid(t, prototest.MustCheck(t, res, model), 0)
	cnt := res.ProtocolMetrics.Counters
	if cnt["refresh/ok"]+cnt["refresh/failed"] != 0 || cnt["refresh/off"] == 0 {
		t.Fatalf("read-refresh=off: %d refreshes ran (%d ok), %d refused; want none run and some refused",
			cnt["refresh/ok"]+cnt["refresh/failed"], cnt["refresh/ok"], cnt["refresh/off"])
	}
}

func TestDeterministic(t *testing.T) {
	prototest.Deterministic(t, prototest.Case{Protocol: name, Seed: 7, Workload: prototest.ListAppend(10, 0.5), Duration: time.Second}, 8)
}

func TestBadOptions(t *testing.T) {
	for _, opts := range []map[string]string{
		{"max-offset": "soon"},
		{"heartbeat-interval": "0s"},
		{"idle-timeout": "-1s"},
		{"write-pipelining": "maybe"},
		{"read-refresh": "sometimes"},
		{"mutant": "no-such-mutant"},
		{"gc-ttl": "bogus"},
		{"gc-ttl": "5ms"},
		{"gc-ttl": "1001h"},
		{"gc-ttl": "-1s"},
	} {
		if _, err := (proto{}).NewNode(node.Config{Options: opts}); err == nil {
			t.Errorf("options %v accepted", opts)
		}
		if err := (proto{}).CheckOptionValues(opts); err == nil {
			t.Errorf("options %v passed the option check", opts)
		}
	}
	// 10ms, the shortest gc-ttl, needs a max-offset of at most half of it (checkGCTTL).
	for _, ttl := range []string{"10ms", "10s", "1000h"} {
		if err := (proto{}).CheckOptionValues(map[string]string{"gc-ttl": ttl, "max-offset": "5ms"}); err != nil {
			t.Errorf("gc-ttl=%s refused: %v", ttl, err)
		}
	}
}

func TestKeyListRoundTrip(t *testing.T) {
	for _, keys := range [][]string{nil, {"a"}, {"#3/la/1", "", "x\x00y"}} {
		got, err := decodeKeys(encodeKeys(keys))
		if err != nil || len(got) != len(keys) {
			t.Fatalf("%q: got %q, %v", keys, got, err)
		}
		for i := range keys {
			if got[i] != keys[i] {
				t.Fatalf("%q: got %q", keys, got)
			}
		}
	}
	if _, err := decodeKeys([]byte{5, 1}); err == nil {
		t.Fatal("truncated list accepted")
	}
}

// TestSkewSweep: serializable from Zipf 0.5 to 0.99, with drift and a crash; the no-refresh
// mutant, on the same runs, is caught.
func TestSkewSweep(t *testing.T) {
	prototest.SkewSweep(t, name, nil, map[string]string{"mutant": "no-refresh"}, model, 3)
}
