package bench_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/meridiandb/meridian/internal/bench"
	"github.com/meridiandb/meridian/internal/protocol/prototest"
	"github.com/meridiandb/meridian/internal/sim"
)

// A partition drops the messages between its two regions from its start to its heal, and none
// before or after (nothing else drops messages in this run: no loss, no crash). The run goes on
// long after the heal: k2 transactions whose messages the cut dropped hold their clients for
// about 2 s, and only then do SH and BJ talk again. Its report
// names the regions in topology order whichever order they were given in, and the run does not
// depend on that order.
func TestPartitionCutsOnlyItsWindow(t *testing.T) {
	const at, length = 300 * time.Millisecond, 200 * time.Millisecond
	run := func(a, b string) (*bench.Result, [3]uint64) {
		cfg, err := prototest.SimConfig(prototest.Case{Protocol: "k2", Seed: 2})
		if err != nil {
			t.Fatal(err)
		}
		tp := cfg.Topology
		wl, err := prototest.ListAppend(20, 0.5)(tp)
		if err != nil {
			t.Fatal(err)
		}
		ra, _ := tp.RegionByName(a)
		rb, _ := tp.RegionByName(b)
		var dropped [3]uint64 // by the cut, by the heal, by the window's end
		res, err := bench.SimRun(cfg, bench.Spec{Workload: wl, ClientsPerRegion: 2, Warmup: prototest.Warmup, Duration: 4 * time.Second,
			Network: bench.NetFaults{Partitions: []bench.Partition{{A: ra, B: rb, At: at, For: length}}},
			Faults: func(s *sim.Sim, w bench.Window) {
				// Scheduled after the partition's own events at the same instants.
				for i, when := range []int64{w.Start + int64(at), w.Start + int64(at+length), w.End} {
					s.At(when, func() { dropped[i] = s.Stats().Dropped })
				}
			}})
		if err != nil {
			t.Fatal(err)
		}
		return res, dropped
	}
	res, dropped := run("BJ", "sh")
	if dropped[0] != 0 || dropped[1] == 0 || dropped[2] != dropped[1] {
		t.Errorf("messages dropped by the cut, the heal and the end: %v; want 0, some, no more", dropped)
	}
	want := &bench.NetFaultsRecord{Partitions: []bench.PartitionRecord{{Regions: [2]string{"SH", "BJ"}, At: "300ms", For: "200ms"}}}
	if !reflect.DeepEqual(res.Network, want) {
		t.Errorf("network faults reported as %+v, want %+v", res.Network, want)
	}
	if res.Committed == 0 {
		t.Error("nothing committed")
	}
	if again, _ := run("SH", "BJ"); again.TraceDigest != res.TraceDigest {
		t.Errorf("BJ|SH and SH|BJ: digests %s and %s", res.TraceDigest, again.TraceDigest)
	}
}

// A slowdown is reported with its regions in topology order and its delay, and changes the run
// (its messages arrive later); `meridian sim` tests check such runs' histories.
func TestSlowdownReported(t *testing.T) {
	run := func(net bench.NetFaults) *bench.Result {
		cfg, err := prototest.SimConfig(prototest.Case{Protocol: "k2", Seed: 2})
		if err != nil {
			t.Fatal(err)
		}
		wl, err := prototest.ListAppend(20, 0.5)(cfg.Topology)
		if err != nil {
			t.Fatal(err)
		}
		res, err := bench.SimRun(cfg, bench.Spec{Workload: wl, ClientsPerRegion: 2, Warmup: prototest.Warmup, Duration: 2 * time.Second, Network: net})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	plain := run(bench.NetFaults{})
	slowed := run(bench.NetFaults{Slowdowns: []bench.Slowdown{{A: 1, B: 0, At: 200 * time.Millisecond, For: time.Second, By: 700 * time.Millisecond}}})
	want := &bench.NetFaultsRecord{Slowdowns: []bench.SlowdownRecord{{Regions: [2]string{"SH", "BJ"}, At: "200ms", For: "1s", By: "700ms"}}}
	if !reflect.DeepEqual(slowed.Network, want) {
		t.Errorf("network faults reported as %+v, want %+v", slowed.Network, want)
	}
	if slowed.TraceDigest == plain.TraceDigest {
		t.Error("the slowdown changed nothing in the run")
	}
	if slowed.Committed == 0 {
		t.Error("slowed run: nothing committed")
	}
}
