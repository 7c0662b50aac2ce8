package bench_test

import (
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
