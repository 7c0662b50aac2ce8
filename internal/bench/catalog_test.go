package bench_test

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/meridiandb/meridian/client"
	"github.com/meridiandb/meridian/internal/bench"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/workload/memdb"
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

// WorkloadParams.RMW makes YCSB-T's writes read-modify-writes: each increments its key's
// counter, so after n writes the counters sum to n; blind writes leave them unrelated to it.
func TestYCSBTReadModifyWrite(t *testing.T) {
	tp, err := topo.FromPreset("k2-5region", topo.DefaultLayout())
	if err != nil {
		t.Fatal(err)
	}
	for _, rmw := range []bool{false, true} {
		p := bench.DefaultWorkloadParams("ycsbt")
		p.Preset, p.Keys, p.WriteRatio, p.RMW = "k2", 20, 1, rmw
		wl, err := bench.BuildWorkload(tp, p)
		if err != nil {
			t.Fatal(err)
		}
		store := memdb.New()
		db := client.Open(store.Transport())
		gen := wl.NewClient(0, 0, rand.New(rand.NewPCG(1, 2)))
		const txns, ops = 50, 3 // the k2 preset's operations per transaction
		for range txns {
			tx := gen.Next()
			if err := client.RunTxn(db, client.TxnOptions{ReadOnly: tx.ReadOnly}, tx.Run); err != nil {
				t.Fatal(err)
			}
		}
		var sum uint64
		for _, k := range store.Keys() {
			v, _ := store.Get(k)
			sum += binary.LittleEndian.Uint64(v)
		}
		if got := sum == txns*ops; got != rmw {
			t.Errorf("rmw %v: the counters sum to %d after %d writes", rmw, sum, txns*ops)
		}
	}
}
