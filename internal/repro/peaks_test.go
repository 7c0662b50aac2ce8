package repro

import (
	"strings"
	"testing"
	"time"

	"github.com/meridiandb/meridian/internal/bench"
	"github.com/meridiandb/meridian/internal/protocol"
)

// A series whose curve peaks at either end of the sweep is named, and one that peaks inside it
// is not: its peak is a real one, the others only bounds.
func TestPeakEdges(t *testing.T) {
	curve := func(series string, tputs ...float64) []*Run {
		var rs []*Run
		for i, v := range tputs {
			rs = append(rs, &Run{Series: series, X: float64(5 * (i + 1)), Result: &bench.Result{Summary: bench.Summary{Throughput: v}}})
		}
		return rs
	}
	var runs []*Run
	runs = append(runs, curve("falling", 9, 5, 1)...)
	runs = append(runs, curve("inside", 1, 9, 5)...)
	runs = append(runs, curve("rising", 1, 5, 9)...)
	got := peakEdges(runs)
	if !strings.Contains(got, "lowest load swept, so fewer clients might do better still and their peaks here are lower bounds: falling (5 clients per region).") {
		t.Errorf("the series peaking at the lowest load is not named:\n%s", got)
	}
	if !strings.Contains(got, "highest load swept, so more clients might do better still and their peaks here are lower bounds: rising (15 clients per region).") {
		t.Errorf("the series peaking at the highest load is not named:\n%s", got)
	}
	if strings.Contains(got, "inside") {
		t.Errorf("a series peaking inside the sweep is flagged:\n%s", got)
	}
	if got := peakEdges(curve("inside", 1, 9, 5)); got != "" {
		t.Errorf("nothing at an edge, yet: %q", got)
	}
	// Series swept to different loads each name their own edge (the report named the last
	// series' load for all of them).
	shifted := curve("shifted", 9, 5, 1)
	for _, r := range shifted {
		r.X *= 2
	}
	got = peakEdges(append(curve("falling", 9, 5, 1), shifted...))
	if !strings.Contains(got, "falling (5 clients per region), shifted (10 clients per region).") {
		t.Errorf("each series' own lowest load is not named:\n%s", got)
	}
}

// A baseline is compared with the named series at the same X: pairing points by position
// credited K2 with a point the baseline lacked and compared the rest at different loads.
func TestShapeChecksPairPointsByX(t *testing.T) {
	pt := func(series string, x, tput, abort float64) *Run {
		return &Run{Series: series, X: x, Result: &bench.Result{Summary: bench.Summary{Throughput: tput, AbortRate: abort}}}
	}
	runs := []*Run{
		pt("K2", 0.5, 100, 0.1), pt("K2", 0.6, 90, 0.2),
		pt("base", 0.6, 95, 0.1), // no point at 0.5, and higher throughput and fewer aborts at 0.6
	}
	if got := shapeChecks(runs, "K2"); !strings.Contains(got, "| base | 0 of 1 | 0 of 1 |") {
		t.Errorf("want K2 ahead at 0 of the 1 shared point:\n%s", got)
	}
}

// Over several seeds a counter is the mean of each seed's count, not the averaged result's
// count rounded to an integer: deadlocks of 0, 0 and 1 in a 2 s window are 5 per 30 s, not 0.
func TestCounterMeanOverSeeds(t *testing.T) {
	withDeadlocks := func(n int64) *bench.Result {
		return &bench.Result{ProtocolMetrics: &protocol.Snapshot{Counters: map[string]int64{"deadlocks": n}}}
	}
	seeds := []*bench.Result{withDeadlocks(0), withDeadlocks(0), withDeadlocks(1)}
	mean, err := bench.MeanResult(seeds)
	if err != nil {
		t.Fatal(err)
	}
	r := &Run{Result: mean, PerSeed: seeds, Spec: bench.Spec{Duration: 2 * time.Second}}
	if got := per30s(r, counter(r, "deadlocks")); got != 5 {
		t.Errorf("deadlocks per 30 s = %g, want 5", got)
	}
}

// A load sweep grows past the edge where a series is still at its best, from the seed's own
// plan, and not past a peak inside it or below one client per region.
func TestExtendLoadSweep(t *testing.T) {
	curve := func(series string, clients []int, tputs ...float64) []*Run {
		var rs []*Run
		for i, v := range tputs {
			rs = append(rs, &Run{Series: series, X: float64(clients[i]), Spec: bench.Spec{ClientsPerRegion: clients[i]},
				Deploy: bench.Deployment{Protocol: series, Seed: 7}, Result: &bench.Result{Summary: bench.Summary{Throughput: v}}})
		}
		return rs
	}
	loads := []int{2, 5, 10}
	var means []*Run
	means = append(means, curve("rising", loads, 1, 5, 9)...)
	means = append(means, curve("falling", loads, 9, 5, 1)...)
	means = append(means, curve("inside", loads, 1, 9, 5)...)
	means = append(means, curve("floor", []int{1, 5, 10}, 9, 5, 1)...)
	// The seed's plan: same points, its own deployment and results.
	var plan []*Run
	for _, r := range means {
		p := *r
		p.Deploy.Seed = 8
		p.Result = &bench.Result{}
		plan = append(plan, &p)
	}
	more := extendLoadSweep(Quick, means, plan)
	got := map[string]int{}
	for _, r := range more {
		got[r.Series] = r.Spec.ClientsPerRegion
		if r.X != float64(r.Spec.ClientsPerRegion) || r.Result != nil || r.Deploy.Seed != 8 {
			t.Errorf("%s: extension at X=%g, clients %d, result %v, seed %d: want X = clients, no result, the plan's seed 8",
				r.Series, r.X, r.Spec.ClientsPerRegion, r.Result, r.Deploy.Seed)
		}
	}
	if want := map[string]int{"rising": 20, "falling": 1}; len(got) != len(want) || got["rising"] != 20 || got["falling"] != 1 {
		t.Errorf("extensions %v, want %v", got, want)
	}
	if plan[0].X != 2 || plan[2].Result == nil {
		t.Error("extending changed the plan's own runs")
	}
}

// Means over seeds can be taken again after the plans grow: the first seed's runs keep their
// own results.
func TestMeanOverSeedsRepeatable(t *testing.T) {
	plan := func(tput float64) []*Run {
		return []*Run{{Series: "s", X: 1, Result: &bench.Result{Summary: bench.Summary{Throughput: tput}}}}
	}
	plans := [][]*Run{plan(10), plan(20)}
	for i := 0; i < 2; i++ {
		runs, err := meanOverSeeds(plans)
		if err != nil {
			t.Fatal(err)
		}
		if got := runs[0].Result.Throughput; got != 15 {
			t.Fatalf("call %d: mean throughput %g, want 15", i+1, got)
		}
	}
}

// Fig. 18's ratios are given over the whole (possibly extended) sweep and over the loads up to
// the paper's 20 clients per warehouse.
func TestTPCCRatiosWithinPaperLoad(t *testing.T) {
	point := func(series string, clientsPerRegion int, tput float64) *Run {
		return &Run{Series: series, X: float64(clientsPerRegion), Spec: bench.Spec{ClientsPerRegion: clientsPerRegion},
			Params: bench.WorkloadParams{Warehouses: 10}, Result: &bench.Result{Summary: bench.Summary{Throughput: tput}}}
	}
	// 10 warehouses over 5 regions: 40 clients per region is 20 per warehouse.
	runs := []*Run{point("K2-MVTO", 40, 1000), point("K2-MVTO", 80, 2000), point("MVTO-HLC", 40, 500), point("MVTO-HLC", 80, 400)}
	body, err := tpccSweepReport(runs, t.TempDir(), "")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(body, "| K2-MVTO / MVTO-HLC | 2.32× | 4.00× | 2.00× |") {
		t.Errorf("want 4.00× over the sweep and 2.00× within the paper's load:\n%s", body)
	}
}

// The lock-timeout report sets each timeout's peak beside K2's over the sweep and up to the
// paper's load.
func TestLockTimeoutRatiosWithinPaperLoad(t *testing.T) {
	point := func(series string, clientsPerRegion int, tput float64) *Run {
		return &Run{Series: series, X: float64(clientsPerRegion), Spec: bench.Spec{ClientsPerRegion: clientsPerRegion},
			Params: bench.WorkloadParams{Warehouses: 10}, Result: &bench.Result{Summary: bench.Summary{Throughput: tput}}}
	}
	label := d2plTimeoutLabel(lockTimeouts[0])
	runs := []*Run{point("K2-MVTO", 40, 1000), point("K2-MVTO", 80, 2000), point(label, 40, 500), point(label, 80, 400)}
	body, err := lockTimeoutReport(runs, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(body, "| "+lockTimeouts[0].String()+" | 500 | 40.000 | 4.00× | 2.00× | 2.00× | 5.00× |") {
		t.Errorf("want 4.00× over the sweep, 2.00× up to the paper's load, then 2.00× and 5.00× load by load:\n%s", body)
	}
}

// A point whose seeds' p90 NewOrder are of both kinds (local and remote) is named; one whose
// seeds agree is not.
func TestSplitP90sNamed(t *testing.T) {
	pt := func(series string, x float64, p90s ...float64) *Run {
		r := &Run{Series: series, X: x}
		for _, v := range p90s {
			r.PerSeed = append(r.PerSeed, &bench.Result{Summary: bench.Summary{PerType: map[string]bench.TypeStats{"new-order": {Latency: bench.Latency{P90: v}}}}})
		}
		return r
	}
	got := splitP90s([]*Run{pt("MVTO-HLC", 2, 2.0, 2.0, 85.1), pt("K2-MVTO", 2, 2.7, 2.7, 2.7), pt("K2-MVTO", 5, 81, 86, 89)})
	if !strings.Contains(got, "MVTO-HLC at 2 (2.0–85.1 ms)") || strings.Contains(got, "K2-MVTO") {
		t.Errorf("want only MVTO-HLC at 2 named:\n%s", got)
	}
	if got := splitP90s([]*Run{pt("K2-MVTO", 2, 2.7, 2.7, 2.7)}); got != "" {
		t.Errorf("seeds that agree are named: %q", got)
	}
}
