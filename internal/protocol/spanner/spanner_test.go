package spanner

import (
	"fmt"
	"testing"
	"time"

	"github.com/meridiandb/meridian/internal/bench"
	"github.com/meridiandb/meridian/internal/check"
	"github.com/meridiandb/meridian/internal/history"
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
	epsilon  time.Duration // 0: the simulator's default
	faults   func(s *sim.Sim, w bench.Window)
	mkWL     func(t *topo.Topology) (workload.Workload, error)
}

func simConfig(t *testing.T, r runSpec) sim.Config {
	t.Helper()
	p, err := protocol.Lookup(Name)
	if err != nil {
		t.Fatal(err)
	}
	tp, err := topo.FromPreset("k2-5region", p.Layout(topo.DefaultLayout()))
	if err != nil {
		t.Fatal(err)
	}
	cfg := sim.DefaultConfig()
	cfg.Topology, cfg.Protocol, cfg.Options, cfg.Seed = tp, p, r.opts, r.seed
	if r.epsilon > 0 {
		cfg.Epsilon = r.epsilon
	}
	return cfg
}

func listAppend(keys int) func(t *topo.Topology) (workload.Workload, error) {
	return func(t *topo.Topology) (workload.Workload, error) {
		return listappend.New(t, listappend.Config{Keys: keys})
	}
}

func ycsb(theta float64) func(t *topo.Topology) (workload.Workload, error) {
	return func(t *topo.Topology) (workload.Workload, error) {
		c, err := ycsbt.Preset("k2")
		if err != nil {
			return nil, err
		}
		c.Keys, c.Theta, c.ValueBytes = 2000, theta, 16
		return ycsbt.New(t, c)
	}
}

func run(t *testing.T, r runSpec) *bench.Result {
	t.Helper()
	cfg := simConfig(t, r)
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

// withoutFailed drops the attempts that completed "fail" (a definite abort) and renumbers the
// rest. The bench driver retries a list-append transaction with the same values it appended in
// the aborted attempt, which the checker would otherwise report as duplicate appends and as reads
// of aborted writes.
func withoutFailed(ops []history.Op) []history.Op {
	open := map[int]int{} // process -> index in out of its pending invoke
	var out []history.Op
	for _, op := range ops {
		switch op.Type {
		case history.Invoke:
			open[op.Process] = len(out)
			out = append(out, op)
		case history.Fail:
			if i, ok := open[op.Process]; ok {
				out = append(out[:i], out[i+1:]...)
				for p, j := range open {
					if j > i {
						open[p] = j - 1
					}
				}
				delete(open, op.Process)
			}
		default:
			delete(open, op.Process)
			out = append(out, op)
		}
	}
	for i := range out {
		out[i].Index = int64(i)
	}
	return out
}

func verdict(t *testing.T, res *bench.Result, model string) *check.Report {
	t.Helper()
	rep, err := check.Check(withoutFailed(res.History), model)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func TestSmoke(t *testing.T) {
	res := run(t, runSpec{seed: 1, mkWL: listAppend(10)})
	rep := verdict(t, res, "strict-serializable")
	t.Logf("commits=%d aborts=%v tput=%.1f verdict=%s counts=%+v metrics=%+v", res.Committed, res.AbortsByCause, res.Throughput, rep.Verdict, rep.Counts, res.ProtocolMetrics)
	if rep.Verdict != check.Valid {
		t.Fatalf("verdict %s: %v", rep.Verdict, rep)
	}
}

// crashOne crashes region 1's data node during the window and restarts it 400 ms later: its
// unprepared transactions are lost, its prepared ones recovered from intents.
func crashOne(s *sim.Sim, w bench.Window) {
	victim := s.Topology().DataNodes(1)[0]
	at := w.MeasureFrom + int64(300*time.Millisecond)
	s.At(at, func() { s.Crash(victim) })
	s.At(at+int64(400*time.Millisecond), func() {
		if err := s.Restart(victim); err != nil {
			panic(err)
		}
	})
}

// TestStrictSerializable runs list-append at high contention under every lock policy, several
// seeds, the default drifting clocks (within bounds) and a node crash, and checks each history.
func TestStrictSerializable(t *testing.T) {
	for _, policy := range []string{"no-wait", "wait-die", "wound-wait"} {
		for _, seed := range []uint64{1, 2, 3} {
			for _, keys := range []int{5, 20} {
				name := fmt.Sprintf("%s/seed%d/keys%d", policy, seed, keys)
				t.Run(name, func(t *testing.T) {
					r := runSpec{seed: seed, opts: map[string]string{"lock-policy": policy}, mkWL: listAppend(keys), duration: 5 * time.Second}
					if seed == 2 {
						r.faults = crashOne
					}
					res := run(t, r)
					rep := verdict(t, res, "strict-serializable")
					if rep.Verdict != check.Valid {
						t.Fatalf("verdict %s:\n%v", rep.Verdict, rep)
					}
					if rep.Counts.OK < 5 {
						t.Fatalf("only %d transactions committed: the run proves little", rep.Counts.OK)
					}
					t.Logf("ok=%d info=%d deadlocks=%d", rep.Counts.OK, rep.Counts.Info, res.ProtocolMetrics.Counters["deadlocks"])
				})
			}
		}
	}
}

// TestCommitWaitOffSerializable: K2's configuration (commit wait off) keeps conflict order and
// timestamp order aligned, so histories with snapshot reads are still serializable.
func TestCommitWaitOffSerializable(t *testing.T) {
	for _, seed := range []uint64{1, 2} {
		res := run(t, runSpec{seed: seed, opts: map[string]string{"commit-wait": "off"}, mkWL: listAppend(10), duration: 4 * time.Second})
		if rep := verdict(t, res, "serializable"); rep.Verdict != check.Valid {
			t.Fatalf("seed %d: verdict %s:\n%v", seed, rep.Verdict, rep)
		}
	}
}

// TestMutantsCaught: each deliberately broken variant yields an invalid history for a seed
// committed here. early-release answers before commit wait; with ε = 10 ms (RLS's emulated
// TrueTime) a snapshot read that starts after the reply can pick a timestamp below the commit
// timestamp and miss the write: a real-time cycle. no-read-lock reads without shared locks.
func TestMutantsCaught(t *testing.T) {
	cases := []struct {
		mutant, model string
		epsilon       time.Duration
		keys          int
		seed          uint64
	}{
		{MutantEarlyRelease, "strict-serializable", 10 * time.Millisecond, 5, 1},
		{MutantNoReadLock, "serializable", 0, 5, 1},
	}
	for _, c := range cases {
		t.Run(c.mutant, func(t *testing.T) {
			res := run(t, runSpec{seed: c.seed, opts: map[string]string{"mutant": c.mutant}, epsilon: c.epsilon,
				mkWL: listAppend(c.keys), clients: 6, duration: 5 * time.Second})
			rep := verdict(t, res, c.model)
			if rep.Verdict != check.Invalid {
				t.Fatalf("mutant %s not caught: verdict %s (%d ok)", c.mutant, rep.Verdict, rep.Counts.OK)
			}
			t.Logf("caught: %v", rep.AnomalyTypes)
			// The same run without the mutant is valid: the checker is not crying wolf.
			clean := run(t, runSpec{seed: c.seed, epsilon: c.epsilon, mkWL: listAppend(c.keys), clients: 6, duration: 5 * time.Second})
			if rep := verdict(t, clean, c.model); rep.Verdict != check.Valid {
				t.Fatalf("clean run invalid: %v", rep)
			}
		})
	}
}

// TestDeterministic: one seed, one trace.
func TestDeterministic(t *testing.T) {
	r := runSpec{seed: 7, mkWL: listAppend(8), faults: crashOne}
	a, b := run(t, r), run(t, r)
	if a.TraceDigest != b.TraceDigest || a.Committed != b.Committed {
		t.Fatalf("digests %s vs %s, commits %d vs %d", a.TraceDigest, b.TraceDigest, a.Committed, b.Committed)
	}
}

// TestYCSBDeadlocksReported: YCSB-T from Zipf 0.5 to 0.99 under each policy commits, reports
// lock-policy aborts as deadlocks, and more skew means more of them.
func TestYCSBDeadlocksReported(t *testing.T) {
	for _, policy := range []string{"no-wait", "wait-die", "wound-wait"} {
		var prev int64 = -1
		for _, theta := range []float64{0.5, 0.99} {
			res := run(t, runSpec{seed: 1, opts: map[string]string{"lock-policy": policy}, mkWL: ycsb(theta), clients: 10, duration: 3 * time.Second})
			if res.Committed == 0 || res.ProtocolMetrics == nil {
				t.Fatalf("%s θ=%.2f: nothing committed", policy, theta)
			}
			d := res.ProtocolMetrics.Counters["deadlocks"]
			t.Logf("%s θ=%.2f: commits=%d tput=%.1f deadlocks=%d aborts=%v", policy, theta, res.Committed, res.Throughput, d, res.AbortsByCause)
			if d <= prev {
				t.Errorf("%s: deadlocks did not grow with skew: %d then %d", policy, prev, d)
			}
			prev = d
		}
	}
}

func TestBadOptions(t *testing.T) {
	for _, opts := range []map[string]string{
		{"lock-policy": "sometimes"}, {"commit-wait": "maybe"}, {"mutant": "gremlin"}, {"idle-timeout": "0s"},
	} {
		if _, err := ParseOptions(opts); err == nil {
			t.Errorf("%v accepted", opts)
		}
	}
	c, err := ParseOptions(nil)
	if err != nil || c.Policy.String() != "wound-wait" || !c.CommitWait {
		t.Fatalf("defaults: %+v, %v", c, err)
	}
}
