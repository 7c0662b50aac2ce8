package crdb

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/meridiandb/meridian/internal/bench"
	"github.com/meridiandb/meridian/internal/check"
	"github.com/meridiandb/meridian/internal/history"
	"github.com/meridiandb/meridian/internal/node"
	"github.com/meridiandb/meridian/internal/protocol"
	"github.com/meridiandb/meridian/internal/sim"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/workload"
	"github.com/meridiandb/meridian/internal/workload/listappend"
	"github.com/meridiandb/meridian/internal/workload/ycsbt"
)

type scenario struct {
	seed      uint64
	opts      map[string]string
	clients   int           // per region (default 4)
	duration  time.Duration // measured window (default 2s)
	clockSkew time.Duration // simulator's local clock offset bound (default: sim's 1ms)
	faults    func(s *sim.Sim, w bench.Window)
	workload  func(t *topo.Topology) (workload.Workload, error)
}

func runScenario(t *testing.T, sc scenario) *bench.Result {
	t.Helper()
	p, err := protocol.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	tp, err := topo.FromPreset("k2-5region", p.Layout(topo.DefaultLayout()))
	if err != nil {
		t.Fatal(err)
	}
	cfg := sim.DefaultConfig()
	cfg.Topology, cfg.Protocol, cfg.Options, cfg.Seed = tp, p, sc.opts, sc.seed
	if sc.clockSkew > 0 {
		cfg.MaxOffset = sc.clockSkew
	}
	wl, err := sc.workload(tp)
	if err != nil {
		t.Fatal(err)
	}
	if sc.clients == 0 {
		sc.clients = 4
	}
	if sc.duration == 0 {
		sc.duration = 2 * time.Second
	}
	res, err := bench.SimRun(cfg, bench.Spec{Workload: wl, ClientsPerRegion: sc.clients, Warmup: 200 * time.Millisecond,
		Duration: sc.duration, Record: true, Faults: sc.faults})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func listAppend(keys int, local float64, register bool) func(t *topo.Topology) (workload.Workload, error) {
	return func(t *topo.Topology) (workload.Workload, error) {
		return listappend.New(t, listappend.Config{Keys: keys, RegionLocalRatio: local, Register: register})
	}
}

func ycsbT(theta float64) func(t *topo.Topology) (workload.Workload, error) {
	return func(t *topo.Topology) (workload.Workload, error) {
		cfg, err := ycsbt.Preset("k2")
		if err != nil {
			return nil, err
		}
		cfg.Keys, cfg.Theta, cfg.RegionLocal, cfg.CrossRegionRatio = 2000, theta, true, 0.1
		return ycsbt.New(t, cfg)
	}
}

// freshFailedValues gives the appends and writes of failed attempts values no one else uses.
// The list-append workload retries an aborted transaction with the same values, which the
// checker would read as two transactions appending one value. A failed attempt's value can
// then only appear in a read if the protocol exposed an aborted write, and such a read still
// names no committed writer, so the checker still objects.
func freshFailedValues(ops []history.Op) []history.Op {
	out := slices.Clone(ops)
	open := map[int]int{}
	next := int64(-1)
	for i := range out {
		op := &out[i]
		switch op.Type {
		case history.Invoke:
			open[op.Process] = i
		case history.Fail:
			inv, ok := open[op.Process]
			if !ok {
				continue
			}
			delete(open, op.Process)
			out[inv].Value = slices.Clone(out[inv].Value)
			op.Value = slices.Clone(op.Value)
			for j := range out[inv].Value {
				if f := out[inv].Value[j].F; f == history.FAppend || f == history.FWrite {
					out[inv].Value[j].Value = history.IntValue(next)
					if j < len(op.Value) {
						op.Value[j].Value = history.IntValue(next)
					}
					next--
				}
			}
		default:
			delete(open, op.Process)
		}
	}
	return out
}

func checkSerializable(t *testing.T, res *bench.Result) *check.Report {
	t.Helper()
	rep, err := check.Check(freshFailedValues(res.History), "serializable")
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// crashAt crashes each listed node at MeasureFrom+offset and restarts it down later.
func crashAt(down time.Duration, plan map[topo.NodeID]time.Duration) func(s *sim.Sim, w bench.Window) {
	return func(s *sim.Sim, w bench.Window) {
		ids := make([]topo.NodeID, 0, len(plan))
		for id := range plan {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		for _, id := range ids {
			at := w.MeasureFrom + int64(plan[id])
			s.At(at, func() { s.Crash(id) })
			s.At(at+int64(down), func() {
				if err := s.Restart(id); err != nil {
					panic(err)
				}
			})
		}
	}
}

// TestSerializable checks histories under contention from extreme (10 keys, every transaction
// crossing the WAN) to regional hot spots, over several seeds, with clock offsets up to 200 ms
// (inside the 500 ms max offset, so uncertainty restarts happen), with the optimizations off,
// and with node crashes.
func TestSerializable(t *testing.T) {
	crashes := crashAt(400*time.Millisecond, map[topo.NodeID]time.Duration{
		0: 300 * time.Millisecond, 2: 700 * time.Millisecond, 4: 1200 * time.Millisecond})
	rolling := map[topo.NodeID]time.Duration{}
	for i := 0; i < 5; i++ {
		rolling[topo.NodeID(i)] = time.Duration(200+i*250) * time.Millisecond
	}
	cases := []struct {
		name   string
		sc     scenario
		minOK  int
		counts []string // counters that must be non-zero: the mechanism was exercised
	}{
		{name: "10-keys-wan", sc: scenario{workload: listAppend(10, 0, false)}, minOK: 10,
			counts: []string{"refresh/ok", "push/wait"}},
		{name: "20-keys-local", sc: scenario{workload: listAppend(20, 0.8, false)}, minOK: 100,
			counts: []string{"write/pushed"}},
		{name: "register", sc: scenario{workload: listAppend(20, 0.8, true)}, minOK: 100},
		{name: "skewed-clocks", sc: scenario{workload: listAppend(20, 0.8, false), clockSkew: 200 * time.Millisecond},
			minOK: 50, counts: []string{"uncertainty/hit"}},
		{name: "no-pipelining-no-parallel-commits", sc: scenario{workload: listAppend(20, 0.8, false),
			opts: map[string]string{"write-pipelining": "off", "parallel-commits": "off"}}, minOK: 100},
		{name: "crashes", sc: scenario{workload: listAppend(20, 0.8, false), faults: crashes}, minOK: 50},
		{name: "rolling-crashes", sc: scenario{workload: listAppend(20, 0.2, false), faults: crashAt(300*time.Millisecond, rolling)},
			minOK: 20},
	}
	for _, c := range cases {
		for _, seed := range []uint64{1, 2, 3} {
			t.Run(fmt.Sprintf("%s/seed-%d", c.name, seed), func(t *testing.T) {
				sc := c.sc
				sc.seed = seed
				res := runScenario(t, sc)
				rep := checkSerializable(t, res)
				t.Logf("%d ok, %d failed, %d unknown; counters %v", rep.Counts.OK, rep.Counts.Fail, rep.Counts.Info, res.ProtocolMetrics.Counters)
				if rep.Verdict != check.Valid {
					t.Fatalf("verdict %s:\n%v", rep.Verdict, rep)
				}
				if rep.Counts.OK < c.minOK {
					t.Fatalf("only %d committed transactions (want ≥ %d): the run checks too little", rep.Counts.OK, c.minOK)
				}
				if seed == 1 {
					for _, k := range c.counts {
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
			res := runScenario(t, scenario{seed: 1, workload: ycsbT(theta), clients: 8, duration: time.Second})
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
func TestMutantNoRefresh(t *testing.T) {
	res := runScenario(t, scenario{seed: 1, workload: listAppend(10, 0, false), opts: map[string]string{"mutant": "no-refresh"}})
	rep := checkSerializable(t, res)
	t.Logf("mutant: %s, %d ok, anomalies %v", rep.Verdict, rep.Counts.OK, rep.AnomalyTypes)
	if rep.Verdict != check.Invalid {
		t.Fatalf("mutant no-refresh not caught: verdict %s (%d committed)", rep.Verdict, rep.Counts.OK)
	}
	// The same seed without the mutant is valid: the refresh is what makes the difference.
	good := checkSerializable(t, runScenario(t, scenario{seed: 1, workload: listAppend(10, 0, false)}))
	if good.Verdict != check.Valid {
		t.Fatalf("baseline verdict %s", good.Verdict)
	}
}

func TestDeterministic(t *testing.T) {
	sc := scenario{seed: 7, workload: listAppend(10, 0.5, false), duration: time.Second}
	a, b := runScenario(t, sc), runScenario(t, sc)
	if a.TraceDigest != b.TraceDigest {
		t.Fatalf("same seed, different traces: %s vs %s", a.TraceDigest, b.TraceDigest)
	}
	sc.seed = 8
	if c := runScenario(t, sc); c.TraceDigest == a.TraceDigest {
		t.Fatalf("seeds 7 and 8 gave the same trace %s", c.TraceDigest)
	}
}

func TestBadOptions(t *testing.T) {
	for _, opts := range []map[string]string{
		{"max-offset": "soon"},
		{"heartbeat-interval": "0s"},
		{"idle-timeout": "-1s"},
		{"write-pipelining": "maybe"},
		{"mutant": "no-such-mutant"},
	} {
		if _, err := (proto{}).NewNode(node.Config{Options: opts}); err == nil {
			t.Errorf("options %v accepted", opts)
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
