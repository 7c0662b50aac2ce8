package bench_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/meridiandb/meridian/internal/bench"
	_ "github.com/meridiandb/meridian/internal/protocol/k2" // registers k2
	"github.com/meridiandb/meridian/internal/protocol/prototest"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/workload"
)

// A data node that crashes in a TPC-C run must get its preloaded rows back when it restarts:
// they are not in its durable log, so without them its reads of stock, customers and orders
// fail and the workload's consistency conditions do not hold.
func TestRestartedNodeGetsPreloadedRowsBack(t *testing.T) {
	tpcc := func(tp *topo.Topology) (workload.Workload, error) {
		p := bench.DefaultWorkloadParams("tpcc")
		p.Warehouses = 5
		return bench.BuildWorkload(tp, p)
	}
	cfg, err := prototest.SimConfig(prototest.Case{Protocol: "k2", Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	wl, err := tpcc(cfg.Topology)
	if err != nil {
		t.Fatal(err)
	}
	res, err := bench.SimRun(cfg, bench.Spec{Workload: wl, ClientsPerRegion: 2, Warmup: prototest.Warmup,
		Duration: 2 * time.Second, Faults: prototest.CrashDataNode(0, 200*time.Millisecond, 300*time.Millisecond)})
	if err != nil {
		t.Fatal(err)
	}
	if res.Consistency != "ok" {
		t.Fatalf("TPC-C consistency after a restart: %s", res.Consistency)
	}
	if res.Summary.Committed == 0 {
		t.Fatal("nothing committed")
	}
}

// failingReload is TPC-C whose rows cannot be generated a second time.
type failingReload struct {
	workload.Workload
	calls int
}

func (f *failingReload) Rows(emit func(string, []byte) error) error {
	f.calls++
	if f.calls > 1 {
		return errors.New("row source gone")
	}
	return f.Workload.(bench.RowLister).Rows(emit)
}

// A restarted node whose rows cannot be reinstalled fails the run with the reason, instead of
// surfacing later as rows missing at verification.
func TestRestartReloadFailureFailsTheRun(t *testing.T) {
	cfg, err := prototest.SimConfig(prototest.Case{Protocol: "k2", Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	p := bench.DefaultWorkloadParams("tpcc")
	p.Warehouses = 5
	wl, err := bench.BuildWorkload(cfg.Topology, p)
	if err != nil {
		t.Fatal(err)
	}
	_, err = bench.SimRun(cfg, bench.Spec{Workload: &failingReload{Workload: wl}, ClientsPerRegion: 2, Warmup: prototest.Warmup,
		Duration: time.Second, SkipVerify: true, Faults: prototest.CrashDataNode(0, 200*time.Millisecond, 300*time.Millisecond)})
	if err == nil || !strings.Contains(err.Error(), "row source gone") {
		t.Fatalf("got %v, want the reload's failure", err)
	}
}
