package main

import (
	"fmt"
	"strings"

	"github.com/spf13/pflag"

	"github.com/meridiandb/meridian/internal/bench"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/workload"
)

// workloadFlags are the flags that choose and shape a workload.
type workloadFlags struct {
	p     bench.WorkloadParams
	mix   []int
	oneOp bool           // clients send batched operations one at a time
	fs    *pflag.FlagSet // to tell flags given from defaults
}

func (f *workloadFlags) register(fs *pflag.FlagSet) {
	f.fs = fs
	fs.StringVar(&f.p.Name, "workload", "list-append", "workload: "+strings.Join(bench.Workloads(), ", "))
	fs.IntVar(&f.p.Keys, "keys", 0, "key count (0: the workload's default)")
	fs.IntVar(&f.p.Ops, "ops", 0, "operations per transaction (0: the workload's default)")
	fs.Float64Var(&f.p.WriteRatio, "write-ratio", -1, "share of operations that write (-1: the workload's default)")
	fs.Float64Var(&f.p.Zipf, "zipf", -1, "Zipf θ of key choice (-1: the workload's default)")
	fs.Float64Var(&f.p.CRTRatio, "crt-ratio", -1, "share of cross-region transactions (-1: the workload's default)")
	fs.IntVar(&f.p.Warehouses, "warehouses", 0, "TPC-C warehouses (0: one per region)")
	fs.StringVar(&f.p.Preset, "preset", "", "YCSB-T preset: k2, rls, wren, fwkv")
	fs.BoolVar(&f.p.TPCCFull, "tpcc-full", false, "TPC-C at the specification's scale (3000 customers per district, 100k items) instead of the simulation-sized default")
	fs.IntSliceVar(&f.mix, "tpcc-mix", nil, "TPC-C weights of new-order,payment,order-status,delivery,stock-level (default 45,43,4,4,4)")
	fs.IntVar(&f.p.TPCCItems, "tpcc-items", 0, "TPC-C items (and stock rows per warehouse), 100..100000 (0: 100000 with --tpcc-full, else 1000)")
	fs.Float64Var(&f.p.RemoteItemRatio, "remote-item-ratio", -1, "TPC-C share of remote order lines (-1: the spec's 1%)")
	fs.BoolVar(&f.oneOp, "one-op-at-a-time", false, "clients send a transaction's independent reads and writes one at a time instead of as one batch (GetMany/PutMany)")
	fs.Float64Var(&f.p.ScanRatio, "scan-ratio", -1, "YCSB-T share of reads that are range scans of up to --scan-length rows within the key's shard, like YCSB's workload E (-1: none); the keys are loaded first")
	fs.BoolVar(&f.p.RMW, "rmw", false, "YCSB-T writes are read-modify-writes (read the key's counter, then write it plus one) instead of blind writes (the k2 preset's default); such a run is checked after it ends (--verify): every key written must hold a counter between its committed increments and those plus the increments whose outcome is unknown")
	fs.BoolVar(&f.p.BlindWrites, "blind-writes", false, "rw-register writes registers it has not read without reading them first, so several writers' intents meet on a key")
	fs.IntVar(&f.p.MaxWritesPerKey, "max-writes-per-key", 0, "list-append and rw-register draw a fresh key in place of one written this many times (0: never), as Elle does, so that lists stay short and a long run's history grows with its length, not its square")
	fs.BoolVar(&f.p.ReadBack, "read-back", false, "list-append and rw-register transactions read the keys they wrote back from the store at their end, so a write lost or hidden from its own transaction is caught")
	fs.IntVar(&f.p.ScanLength, "scan-length", 0, "YCSB-T rows per scan at most, drawn uniformly from 1 (0: 100)")
	fs.BoolVar(&f.p.TPCCFamilies, "tpcc-families", false, "TPC-C with hot columns (W_YTD, D_YTD, D_NEXT_O_ID) in their own keys, like CockroachDB's --families")
}

// build constructs the workload over topology t.
func (f *workloadFlags) build(t *topo.Topology) (workload.Workload, error) {
	if err := f.validate(); err != nil {
		return nil, err
	}
	if f.fs != nil && f.fs.Changed("crt-ratio") && f.p.CRTRatio > 0 && len(t.Regions) < 2 {
		return nil, fmt.Errorf("--crt-ratio %g: topology %s has one region, so no transaction can cross regions", f.p.CRTRatio, t.Name)
	}
	if f.mix != nil {
		copy(f.p.TPCCMix[:], f.mix)
	}
	return bench.BuildWorkload(t, f.p)
}
