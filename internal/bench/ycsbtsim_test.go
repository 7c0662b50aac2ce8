package bench_test

import (
	"strings"
	"testing"
	"time"

	"github.com/meridiandb/meridian/internal/bench"
	"github.com/meridiandb/meridian/internal/protocol/prototest"
	_ "github.com/meridiandb/meridian/internal/protocol/serial" // registers serial
)

// A YCSB-T run with read-modify-writes is checked after its clients stop, as TPC-C is: serial
// passes, serial without its lock (which loses updates) fails, and blind writes report no
// consistency at all (their counter is always 0). Before the check, the mutant's run passed
// without a word.
func TestSimRunChecksYCSBTCounters(t *testing.T) {
	run := func(opts map[string]string, rmw bool) *bench.Result {
		t.Helper()
		cfg, err := prototest.SimConfig(prototest.Case{Protocol: "serial", Seed: 1, Options: opts})
		if err != nil {
			t.Fatal(err)
		}
		p := bench.DefaultWorkloadParams("ycsbt")
		p.Keys, p.RMW = 20, rmw
		wl, err := bench.BuildWorkload(cfg.Topology, p)
		if err != nil {
			t.Fatal(err)
		}
		res, err := bench.SimRun(cfg, bench.Spec{Workload: wl, ClientsPerRegion: 8, Warmup: prototest.Warmup, Duration: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if res.Committed == 0 {
			t.Fatal("nothing committed")
		}
		return res
	}
	if res := run(nil, true); res.Consistency != "ok" {
		t.Errorf("serial: consistency %q, want ok", res.Consistency)
	}
	res := run(map[string]string{"mutant": "no-lock"}, true)
	if !strings.HasPrefix(res.Consistency, "ycsbt: ") || !strings.Contains(res.Consistency, "acknowledged increments") {
		t.Errorf("serial without its lock: consistency %q, want the ycsbt check's violations", res.Consistency)
	}
	if res := run(nil, false); res.Consistency != "" {
		t.Errorf("blind writes: consistency %q, want none", res.Consistency)
	}
}
