package main

import (
	"fmt"

	"github.com/meridiandb/meridian/client"

	"github.com/spf13/pflag"

	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/workload"
	"github.com/meridiandb/meridian/internal/workload/listappend"
	"github.com/meridiandb/meridian/internal/workload/tpcc"
	"github.com/meridiandb/meridian/internal/workload/ycsbt"
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
	full       bool
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
	fs.BoolVar(&f.full, "tpcc-full", false, "TPC-C at the specification's scale (3000 customers per district, 100k items) instead of the simulation-sized default")
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
	case "ycsbt":
		preset := f.preset
		if preset == "" {
			preset = "k2"
		}
		cfg, err := ycsbt.Preset(preset)
		if err != nil {
			return nil, err
		}
		if f.keys > 0 {
			cfg.Keys = f.keys
		} else if cfg.Keys > 100_000 {
			// Paper key counts cost O(keys) memory and set-up; simulations default to 100k keys
			// (--keys restores any size).
			cfg.Keys = 100_000
		}
		if f.ops > 0 {
			cfg.OpsPerTxn = f.ops
		}
		if f.writeRatio >= 0 {
			cfg.WriteRatio = f.writeRatio
		}
		if f.zipf >= 0 {
			cfg.Theta = f.zipf
		}
		if f.crtRatio >= 0 {
			cfg.RegionLocal, cfg.CrossRegionRatio = true, f.crtRatio
		}
		w, err := ycsbt.New(t, cfg)
		if err != nil {
			return nil, err
		}
		// Missing keys read as counter 0, so loading a million rows through transactions is
		// skipped: the first write of a key creates it.
		return noLoad{w}, nil
	case "tpcc":
		n := f.warehouses
		if n == 0 {
			n = len(t.Regions)
		}
		if n < 0 || n > 10000 {
			return nil, fmt.Errorf("--warehouses must be 1..10000, got %d", n)
		}
		cfg := tpcc.Small(n)
		if f.full {
			cfg = tpcc.Spec(n)
		}
		return tpcc.New(t, cfg)
	}
	return nil, fmt.Errorf("unknown workload %q (known: list-append, rw-register, ycsbt, tpcc)", f.name)
}

// noLoad runs a workload without its load phase.
type noLoad struct{ workload.Workload }

func (noLoad) Load(*client.DB) error { return nil }
