package main

import (
	"fmt"

	"github.com/spf13/pflag"

	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/workload"
	"github.com/meridiandb/meridian/internal/workload/listappend"
)

// workloadFlags are the flags that choose and shape a workload.
type workloadFlags struct {
	name       string
	keys       int
	ops        int
	writeRatio float64
	zipf       float64
	crtRatio   float64
	warehouses int
	preset     string
}

func (f *workloadFlags) register(fs *pflag.FlagSet) {
	fs.StringVar(&f.name, "workload", "list-append", "workload: list-append, rw-register, ycsbt, tpcc")
	fs.IntVar(&f.keys, "keys", 0, "key count (0: the workload's default)")
	fs.IntVar(&f.ops, "ops", 0, "operations per transaction (0: the workload's default)")
	fs.Float64Var(&f.writeRatio, "write-ratio", -1, "share of operations that write (-1: the workload's default)")
	fs.Float64Var(&f.zipf, "zipf", -1, "Zipf θ of key choice (-1: the workload's default)")
	fs.Float64Var(&f.crtRatio, "crt-ratio", -1, "share of cross-region transactions (-1: the workload's default)")
	fs.IntVar(&f.warehouses, "warehouses", 0, "TPC-C warehouses (0: one per region)")
	fs.StringVar(&f.preset, "preset", "", "YCSB-T preset: k2, rls, wren, fwkv")
}

// build constructs the workload over topology t.
func (f *workloadFlags) build(t *topo.Topology) (workload.Workload, error) {
	switch f.name {
	case "list-append", "rw-register":
		cfg := listappend.Config{Keys: f.keys, Register: f.name == "rw-register"}
		if f.ops > 0 {
			cfg.MinOps, cfg.MaxOps = 1, f.ops
		}
		if f.writeRatio >= 0 {
			cfg.ReadRatio = 1 - f.writeRatio
			if cfg.ReadRatio == 0 {
				cfg.ReadRatio = -1
			}
		}
		if f.crtRatio >= 0 {
			cfg.RegionLocalRatio = 1 - f.crtRatio
		}
		return listappend.New(t, cfg)
	}
	return nil, fmt.Errorf("unknown workload %q (known: list-append, rw-register, ycsbt, tpcc)", f.name)
}
