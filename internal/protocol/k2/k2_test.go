package k2

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/meridiandb/meridian/internal/bench"
	"github.com/meridiandb/meridian/internal/check"
	"github.com/meridiandb/meridian/internal/protocol"
	"github.com/meridiandb/meridian/internal/sim"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/workload"
	"github.com/meridiandb/meridian/internal/workload/listappend"
	"github.com/meridiandb/meridian/internal/workload/ycsbt"
)

type runSpec struct {
	seed     uint64
	opts     map[string]string
	clients  int // per region
	duration time.Duration
	faults   func(s *sim.Sim, w bench.Window)
	mkWL     func(t *topo.Topology) (workload.Workload, error)
}

func simConfig(t *testing.T, seed uint64, opts map[string]string) sim.Config {
	t.Helper()
	p, err := protocol.Lookup("k2")
	if err != nil {
		t.Fatal(err)
	}
	tp, err := topo.FromPreset("k2-5region", p.Layout(topo.DefaultLayout()))
	if err != nil {
		t.Fatal(err)
	}
	cfg := sim.DefaultConfig()
	cfg.Topology, cfg.Protocol, cfg.Options, cfg.Seed = tp, p, opts, seed
	return cfg
}

// listAppend is the checkable workload: keys keys (few keys: high contention), with a share
// local of transactions whose keys all live in the client's region.
func listAppend(keys int, local float64) func(t *topo.Topology) (workload.Workload, error) {
	return func(t *topo.Topology) (workload.Workload, error) {
		return listappend.New(t, listappend.Config{Keys: keys, RegionLocalRatio: local})
	}
}

func run(t *testing.T, r runSpec) *bench.Result {
	t.Helper()
	cfg := simConfig(t, r.seed, r.opts)
	wl, err := r.mkWL(cfg.Topology)
	if err != nil {
		t.Fatal(err)
	}
	if r.clients == 0 {
		r.clients = 4
	}
	if r.duration == 0 {
		r.duration = 2 * time.Second
	}
	res, err := bench.SimRun(cfg, bench.Spec{Workload: wl, ClientsPerRegion: r.clients, Warmup: 200 * time.Millisecond,
		Duration: r.duration, Record: true, Faults: r.faults})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func checkRun(t *testing.T, res *bench.Result) *check.Report {
	t.Helper()
	rep, err := check.Check(res.History, "strict-serializable")
	if err != nil {
		t.Fatal(err)
	}
	return rep
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

func skewOracle(region topo.RegionID, by time.Duration) func(s *sim.Sim, w bench.Window) {
	return func(s *sim.Sim, w bench.Window) {
		s.SkewClock(s.Topology().Oracle(region), by)
	}
}

// crashes crashes each node at MeasureFrom+at and restarts it down later.
func crashes(down time.Duration, plan map[topo.NodeID]time.Duration) func(s *sim.Sim, w bench.Window) {
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

// TestStrictSerializable runs checkable histories under contention from extreme (10 keys, every
// transaction crossing the WAN) to local hot spots, over several seeds, with the simulator's
// clock offsets and drift within the declared bounds.
func TestStrictSerializable(t *testing.T) {
	cases := []struct {
		name   string
		mkWL   func(t *topo.Topology) (workload.Workload, error)
		opts   map[string]string
		minOK  int
		faults func(s *sim.Sim, w bench.Window)
	}{
		{name: "10-keys-wan", mkWL: listAppend(10, 0), minOK: 10},
		{name: "20-keys-local", mkWL: listAppend(20, 0.8), minOK: 100},
		{name: "register", mkWL: func(t *topo.Topology) (workload.Workload, error) {
			return listappend.New(t, listappend.Config{Keys: 20, Register: true, RegionLocalRatio: 0.8})
		}, minOK: 100},
		{name: "strawman-timestamps", mkWL: listAppend(20, 0.8), opts: map[string]string{"ts-batching": "off"}, minOK: 100},
		{name: "no-mv-reads", mkWL: listAppend(20, 0.8), opts: map[string]string{"mv-reads": "off"}, minOK: 50},
		{name: "one-intent-per-key", mkWL: listAppend(20, 0.8), opts: map[string]string{"mv-writes": "off"}, minOK: 50},
		{name: "sync-finalize", mkWL: listAppend(20, 0.8), opts: map[string]string{"async-finalize": "off"}, minOK: 100},
		{name: "crashes", mkWL: listAppend(20, 0.8), minOK: 50, faults: crashes(400*time.Millisecond,
			map[topo.NodeID]time.Duration{0: 300 * time.Millisecond, 2: 700 * time.Millisecond, 4: 1200 * time.Millisecond})},
	}
	for _, c := range cases {
		for _, seed := range []uint64{1, 2, 3} {
			t.Run(fmt.Sprintf("%s/seed-%d", c.name, seed), func(t *testing.T) {
				res := run(t, runSpec{seed: seed, opts: c.opts, mkWL: c.mkWL, faults: c.faults})
				rep := checkRun(t, res)
				if rep.Verdict != check.Valid {
					t.Fatalf("verdict %s:\n%v", rep.Verdict, rep)
				}
				if rep.Counts.OK < c.minOK {
					t.Fatalf("only %d committed transactions (want ≥ %d): the run checks too little", rep.Counts.OK, c.minOK)
				}
			})
		}
	}
}

// TestMutantCaught shows the checker catches a missing commit wait. The missing wait is only
// observable when a timestamp runs ahead of true time by more than the transaction's own
// duration, so region 0's oracle is skewed 20 ms ahead: a region-0 writer then ends before true
// time reaches its timestamp, and a client elsewhere that starts after it ends takes a smaller
// timestamp and misses its write. With ε declared as 25 ms the skew is within the bound: the
// correct protocol's commit wait (2·(TTL+ε)·(1+D) ≈ 51 ms) absorbs it and the history is valid,
// while the mutant, which skips the wait, is caught. With the default ε (100 µs) the skew is
// beyond the bound and even the correct protocol is caught, which shows that the checker sees
// clock faults the protocol cannot be expected to survive.
func TestMutantCaught(t *testing.T) {
	cases := []struct {
		name    string
		opts    map[string]string
		verdict string
	}{
		{"correct-within-epsilon", map[string]string{"epsilon": "25ms"}, check.Valid},
		{"mutant-within-epsilon", map[string]string{"epsilon": "25ms", "mutant": "no-commit-wait"}, check.Invalid},
		{"mutant-beyond-epsilon", map[string]string{"mutant": "no-commit-wait"}, check.Invalid},
		{"correct-beyond-epsilon", map[string]string{}, check.Invalid},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := run(t, runSpec{seed: 2, opts: c.opts, mkWL: listAppend(20, 0.8), clients: 6,
				faults: skewOracle(0, 20*time.Millisecond)})
			rep := checkRun(t, res)
			if rep.Verdict != c.verdict {
				t.Fatalf("verdict %s, want %s:\n%v", rep.Verdict, c.verdict, rep)
			}
			if c.verdict == check.Invalid && !slices.Contains(rep.AnomalyTypes, "G-single-realtime") {
				t.Errorf("anomalies %v: want a real-time violation", rep.AnomalyTypes)
			}
		})
	}
}

// TestCoordinatorFailure crashes every coordinator of region 1 mid-run. Their recorders stop
// hearing heartbeats and abort the undecided transactions, and readers meeting the dead
// transactions' intents are released through PUSHWS.
func TestCoordinatorFailure(t *testing.T) {
	faults := func(s *sim.Sim, w bench.Window) {
		crashes(1500*time.Millisecond, map[topo.NodeID]time.Duration{s.Topology().DataNodes(1)[0]: 300 * time.Millisecond})(s, w)
	}
	// Whether the crash catches a transaction after its first write (so that a recorder holds
	// an undecided record) depends on the seed; over these seeds it does several times.
	var leaseAborts int64
	for seed := uint64(1); seed <= 6; seed++ {
		res := run(t, runSpec{seed: seed, mkWL: listAppend(20, 0.8), clients: 8, faults: faults, duration: 3 * time.Second})
		rep := checkRun(t, res)
		if rep.Verdict != check.Valid {
			t.Fatalf("seed %d: verdict %s:\n%v", seed, rep.Verdict, rep)
		}
		if rep.Counts.OK < 100 {
			t.Fatalf("seed %d: only %d committed transactions: blocked readers were not released", seed, rep.Counts.OK)
		}
		leaseAborts += res.ProtocolMetrics.Counters["recorder.lease-abort"]
	}
	if leaseAborts == 0 {
		t.Errorf("no transaction was aborted by a recorder's lease")
	}
}

// TestDeterministic runs one seed twice and compares the simulator's trace digests.
func TestDeterministic(t *testing.T) {
	spec := runSpec{seed: 7, mkWL: listAppend(20, 0.8), faults: crashes(200*time.Millisecond, map[topo.NodeID]time.Duration{1: 300 * time.Millisecond})}
	a, b := run(t, spec), run(t, spec)
	if a.TraceDigest != b.TraceDigest {
		t.Fatalf("same seed, different traces: %s vs %s", a.TraceDigest, b.TraceDigest)
	}
	spec.seed = 8
	if c := run(t, spec); c.TraceDigest == a.TraceDigest {
		t.Fatalf("seeds 7 and 8 gave the same trace %s", c.TraceDigest)
	}
}

// TestYCSBT runs YCSB-T from mild (θ 0.5) to heavy (θ 0.99) skew and checks that transactions
// commit, aborts come only from the read watermark, and every phase of K2's Table 2 is measured.
func TestYCSBT(t *testing.T) {
	for _, theta := range []float64{0.5, 0.99} {
		t.Run(fmt.Sprint(theta), func(t *testing.T) {
			res := run(t, runSpec{seed: 1, mkWL: ycsbT(theta), duration: time.Second})
			if res.Committed < 100 || res.Failed > 0 || res.Unknown > 0 {
				t.Fatalf("committed %d, failed %d, unknown %d", res.Committed, res.Failed, res.Unknown)
			}
			for cause := range res.AbortsByCause {
				if cause != "read-watermark" {
					t.Errorf("abort cause %q: K2-MVTO's only conflict abort is the read watermark", cause)
				}
			}
			for _, phase := range []string{"phase.get-ts", "phase.read", "phase.write", "phase.commit", "commit-wait"} {
				if res.ProtocolMetrics.Distributions[phase].Count == 0 {
					t.Errorf("phase %s not measured", phase)
				}
			}
		})
	}
}

func TestBadOptions(t *testing.T) {
	for _, opts := range []map[string]string{
		{"ttl": "soon"}, {"ttl": "0s"}, {"step": "1ms", "ttl": "500us"}, {"lease": "-1s"},
		{"mv-reads": "maybe"}, {"max-drift": "2"}, {"mutant": "no-locks"}, {"no-such-option": "1"},
	} {
		cfg := simConfig(t, 1, opts)
		if _, err := sim.New(cfg); err == nil {
			t.Errorf("options %v accepted", opts)
		}
	}
}
