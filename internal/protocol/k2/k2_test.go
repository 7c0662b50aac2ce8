package k2

import (
	"slices"
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

func listAppend(keys int) func(t *topo.Topology) (workload.Workload, error) {
	return func(t *topo.Topology) (workload.Workload, error) {
		return listappend.New(t, listappend.Config{Keys: keys})
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

// renameFailedWrites gives the appends and writes of failed (aborted) attempts fresh values.
// The list-append workload retries an aborted transaction with the same values, which the
// checker would take for two transactions appending one value (duplicate-append); an aborted
// attempt's values can only show up in a read if the protocol exposed an aborted write, which
// then still names no committed writer.
func renameFailedWrites(ops []history.Op) []history.Op {
	out := slices.Clone(ops)
	open := map[int]int{} // process -> index of its pending invoke
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

func checkRun(t *testing.T, res *bench.Result) *check.Report {
	t.Helper()
	rep, err := check.Check(renameFailedWrites(res.History), "strict-serializable")
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func TestSmoke(t *testing.T) {
	res := run(t, runSpec{seed: 1, mkWL: listAppend(10)})
	rep := checkRun(t, res)
	t.Logf("commits=%d aborts=%v tput=%.1f verdict=%s counts=%+v metrics=%+v", res.Committed, res.AbortsByCause, res.Throughput, rep.Verdict, rep.Counts, res.ProtocolMetrics)
	if rep.Verdict != check.Valid {
		t.Fatalf("verdict %s: %v", rep.Verdict, rep)
	}
}

var _ = ycsbt.Preset
