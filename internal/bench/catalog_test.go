package bench_test

import (
	"math"
	"strings"
	"testing"

	"github.com/meridiandb/meridian/internal/bench"
	"github.com/meridiandb/meridian/internal/topo"
)

// A TPC-C mix whose weights overflow their sum was built, and the first client panicked
// drawing a transaction type below a negative sum.
func TestTPCCMixWeightsBounded(t *testing.T) {
	tp, err := topo.FromPreset("k2-3region", topo.DefaultLayout())
	if err != nil {
		t.Fatal(err)
	}
	p := bench.DefaultWorkloadParams("tpcc")
	p.TPCCMix = [5]int{math.MaxInt, 1, 0, 0, 0}
	if _, err := bench.BuildWorkload(tp, p); err == nil || !strings.Contains(err.Error(), "TPC-C mix weights must be 0..1000000") {
		t.Fatalf("mix %v: got %v, want the weights refused", p.TPCCMix, err)
	}
	p.TPCCMix = [5]int{bench.MaxTPCCMixWeight, 0, 0, 0, 1}
	if _, err := bench.BuildWorkload(tp, p); err != nil {
		t.Fatalf("mix %v: %v", p.TPCCMix, err)
	}
}
