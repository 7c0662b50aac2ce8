package prototest

import (
	"slices"
	"testing"
	"time"

	"github.com/meridiandb/meridian/internal/bench"
	_ "github.com/meridiandb/meridian/internal/protocol/serial" // the reference protocol the helpers are tried on
	"github.com/meridiandb/meridian/internal/sim"
	"github.com/meridiandb/meridian/internal/topo"
)

// TestRunValid runs the one-at-a-time reference protocol, which is strictly serializable by
// construction, and checks that the scaffolding records a history the checker accepts.
func TestRunValid(t *testing.T) {
	for _, wl := range []struct {
		name string
		w    Workload
	}{{"list-append", ListAppend(10, 0)}, {"rw-register", Register(10, 0.8)}} {
		t.Run(wl.name, func(t *testing.T) {
			res := Run(t, Case{Protocol: "serial", Seed: 1, Workload: wl.w, Duration: 500 * time.Millisecond})
			if res.Workload != wl.name {
				t.Fatalf("ran workload %q, want %q", res.Workload, wl.name)
			}
			ExpectValid(t, MustCheck(t, res, "strict-serializable"), 20)
		})
	}
}

// TestCrashes checks that fault plans crash and restart the planned nodes at the planned times,
// in node order.
func TestCrashes(t *testing.T) {
	type restart struct {
		node topo.NodeID
		at   int64 // after MeasureFrom
	}
	cases := []struct {
		name   string
		faults func(s *sim.Sim, w bench.Window)
		want   []restart
	}{
		{"plan", Crashes(100*time.Millisecond, map[topo.NodeID]time.Duration{3: 50 * time.Millisecond, 1: 200 * time.Millisecond}),
			[]restart{{3, int64(150 * time.Millisecond)}, {1, int64(300 * time.Millisecond)}}},
		{"data-node", CrashDataNode(2, 10*time.Millisecond, 40*time.Millisecond), []restart{{2, int64(50 * time.Millisecond)}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var got []restart
			record := func(s *sim.Sim, w bench.Window) {
				s.OnRestart(func(id topo.NodeID) { got = append(got, restart{id, s.Now() - w.MeasureFrom}) })
				c.faults(s, w)
			}
			Run(t, Case{Protocol: "serial", Seed: 1, Workload: ListAppend(10, 0), Duration: 500 * time.Millisecond, Faults: record})
			if !slices.Equal(got, c.want) {
				t.Fatalf("restarts %v, want %v", got, c.want)
			}
		})
	}
}

func TestDeterministic(t *testing.T) {
	Deterministic(t, Case{Protocol: "serial", Seed: 1, Workload: ListAppend(10, 0), Duration: 500 * time.Millisecond}, 2)
}

// RunContent runs what Run runs: its switch and its hook on the simulation leave the trace as
// it was, with or without Faults of the case's own; and its content digest is the digest of a
// run, not a constant (the same for every seed).
func TestRunContentKeepsTheTrace(t *testing.T) {
	crash := Crashes(100*time.Millisecond, map[topo.NodeID]time.Duration{1: 100 * time.Millisecond})
	var contents []uint64
	for _, faults := range []func(*sim.Sim, bench.Window){nil, crash} {
		for seed := uint64(1); seed <= 2; seed++ {
			c := Case{Protocol: "serial", Seed: seed, Workload: ListAppend(10, 0), Duration: 500 * time.Millisecond, Faults: faults}
			plain := Run(t, c)
			res, content := RunContent(t, c)
			if plain.TraceDigest != res.TraceDigest || plain.Committed != res.Committed || plain.Committed == 0 {
				t.Fatalf("seed %d, faults %v: trace %s, %d commits with the content digest; %s, %d without",
					seed, faults != nil, res.TraceDigest, res.Committed, plain.TraceDigest, plain.Committed)
			}
			contents = append(contents, content)
		}
	}
	if slices.Contains(contents[1:], contents[0]) || contents[1] == contents[3] {
		t.Fatalf("content digests %016x: two different runs gave one", contents)
	}
}

func TestSimConfig(t *testing.T) {
	cfg, err := SimConfig(Case{Protocol: "serial", Seed: 9, Epsilon: 10 * time.Millisecond, MaxOffset: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Seed != 9 || cfg.Epsilon != 10*time.Millisecond || cfg.MaxOffset != 50*time.Millisecond || cfg.Topology.Name != Topology {
		t.Fatalf("config %+v", cfg)
	}
	def := sim.DefaultConfig()
	if cfg, _ = SimConfig(Case{Protocol: "serial"}); cfg.Epsilon != def.Epsilon || cfg.MaxOffset != def.MaxOffset {
		t.Fatalf("zero bounds did not keep the defaults: ε %v, max offset %v", cfg.Epsilon, cfg.MaxOffset)
	}
	if _, err := SimConfig(Case{Protocol: "no-such-protocol"}); err == nil {
		t.Fatal("unknown protocol accepted")
	}
}
