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

var _ = fmt.Sprint
