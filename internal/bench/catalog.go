package bench

import (
	"fmt"

	"github.com/meridiandb/meridian/client"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/workload"
	"github.com/meridiandb/meridian/internal/workload/listappend"
	"github.com/meridiandb/meridian/internal/workload/tpcc"
	"github.com/meridiandb/meridian/internal/workload/ycsbt"
)

// WorkloadParams names a workload and overrides its defaults. Negative ratios and zero counts
// mean "the workload's default".
type WorkloadParams struct {
	Name       string // list-append, rw-register, ycsbt, tpcc
	Keys       int
	Ops        int
	WriteRatio float64
	Zipf       float64
	CRTRatio   float64
	Warehouses int
	Preset     string // YCSB-T preset: k2, rls, wren, fwkv
	TPCCFull   bool   // TPC-C at the specification's scale
	// TPCCItems overrides the ITEM (and per-warehouse STOCK) table size (0: the configuration's:
	// 100,000 with TPCCFull, else 1,000). Stock rows are read-modify-written by every
	// New-Order, so a small table makes them hotter than TPC-C's.
	TPCCItems int
	// RemoteItemRatio overrides TPC-C's share of remote order lines (negative: the spec's 1%).
	RemoteItemRatio float64
	// TPCCMix overrides the weights of New-Order, Payment, Order-Status, Delivery and Stock-Level
	// (all zero: the spec's 45/43/4/4/4).
	TPCCMix [5]int
	// OneRemoteLine makes exactly one line of every TPC-C New-Order remote.
	OneRemoteLine bool
	// TPCCFamilies stores TPC-C's hot columns (W_YTD, D_YTD, D_NEXT_O_ID) under keys of their
	// own (tpcc.Config.Families).
	TPCCFamilies bool
	// Namespace separates list-append/register keys, and YCSB-T's read-modify-write counters
	// (when it does not scan), of different runs on one cluster.
	Namespace string
	// ScanRatio is YCSB-T's share of reads that are range scans (negative: none); ScanLength
	// bounds their rows (0: ycsbt.DefaultScanLength).
	ScanRatio  float64
	ScanLength int
	// RMW makes YCSB-T's writes read-modify-writes: each reads its key, then writes a value
	// derived from it (presets that already do keep doing so without it).
	RMW bool
	// BlindWrites makes rw-register write registers it has not read without reading them first
	// (listappend.Config.BlindWrites).
	BlindWrites bool
	// ReadBack makes list-append and rw-register transactions read the keys they wrote back
	// from the store at their end (listappend.Config.ReadBack).
	ReadBack bool
	// MaxWritesPerKey retires a list-append or rw-register key written that many times for a
	// fresh one (0: never; listappend.Config.MaxWritesPerKey).
	MaxWritesPerKey int
}

// DefaultWorkloadParams returns params that keep every default of the named workload.
func DefaultWorkloadParams(name string) WorkloadParams {
	return WorkloadParams{Name: name, WriteRatio: -1, Zipf: -1, CRTRatio: -1, RemoteItemRatio: -1, ScanRatio: -1}
}

// Workloads lists the workload names BuildWorkload knows.
func Workloads() []string { return []string{"list-append", "rw-register", "ycsbt", "tpcc"} }

// MaxTPCCMixWeight bounds each TPC-C mix weight: the workload draws a transaction type below
// the weights' sum, which larger weights could overflow.
const MaxTPCCMixWeight = 1_000_000

// ratioOK accepts "default" (negative) or a share in [0, 1]; it rejects NaN.
func ratioOK(r float64) bool { return r < 0 || (r >= 0 && r <= 1) }

// BuildWorkload constructs a workload over topology t.
func BuildWorkload(t *topo.Topology, p WorkloadParams) (workload.Workload, error) {
	for _, r := range []struct {
		name string
		v    float64
	}{{"write ratio", p.WriteRatio}, {"cross-region ratio", p.CRTRatio}, {"remote item ratio", p.RemoteItemRatio}, {"scan ratio", p.ScanRatio}} {
		if !ratioOK(r.v) {
			return nil, fmt.Errorf("%s must be in [0, 1] (or negative for the default), got %g", r.name, r.v)
		}
	}
	if !(p.Zipf < 1) {
		return nil, fmt.Errorf("zipf θ must be below 1 (or negative for the default), got %g", p.Zipf)
	}
	for _, c := range []struct {
		name string
		v    int
	}{{"keys", p.Keys}, {"ops", p.Ops}, {"warehouses", p.Warehouses}, {"scan length", p.ScanLength}} {
		if c.v < 0 {
			return nil, fmt.Errorf("%s must not be negative (0 means the default), got %d", c.name, c.v)
		}
	}
	switch p.Name {
	case "list-append", "rw-register":
		cfg := listappend.Config{Keys: p.Keys, Register: p.Name == "rw-register", Namespace: p.Namespace, BlindWrites: p.BlindWrites, ReadBack: p.ReadBack,
			MaxWritesPerKey: p.MaxWritesPerKey}
		if p.Ops > 0 {
			cfg.MinOps, cfg.MaxOps = 1, p.Ops
		}
		if p.WriteRatio >= 0 {
			cfg.ReadRatio = 1 - p.WriteRatio
			if cfg.ReadRatio == 0 {
				cfg.ReadRatio = -1 // listappend reads 0 as "default"
			}
		}
		if p.CRTRatio >= 0 {
			cfg.RegionLocalRatio = 1 - p.CRTRatio
		}
		if p.Zipf > 0 {
			cfg.Theta = p.Zipf
		}
		return listappend.New(t, cfg)
	case "ycsbt":
		preset := p.Preset
		if preset == "" {
			preset = "k2"
		}
		cfg, err := ycsbt.Preset(preset)
		if err != nil {
			return nil, err
		}
		if p.Keys > 0 {
			cfg.Keys = p.Keys
		} else if cfg.Keys > 100_000 {
			// Paper key counts cost O(keys) set-up; simulations default to 100k keys (Keys
			// restores any size).
			cfg.Keys = 100_000
		}
		if p.Ops > 0 {
			cfg.OpsPerTxn = p.Ops
		}
		if p.WriteRatio >= 0 {
			cfg.WriteRatio = p.WriteRatio
		}
		if p.Zipf >= 0 {
			cfg.Theta = p.Zipf
		}
		if p.CRTRatio >= 0 {
			cfg.RegionLocal, cfg.CrossRegionRatio = true, p.CRTRatio
		}
		if p.ScanRatio > 0 {
			cfg.ScanRatio = p.ScanRatio
		}
		cfg.ScanLength = p.ScanLength
		cfg.RMW = cfg.RMW || p.RMW
		if cfg.RMW && cfg.ScanRatio == 0 {
			// The counter check (ycsbt.Workload.Check) needs every counter to start at 0: a run
			// against a long-lived cluster, which skips the load, keeps its keys under its own
			// namespace. (A run that scans loads every key with counter 0 first.)
			cfg.Namespace = p.Namespace
		}
		w, err := ycsbt.New(t, cfg)
		if err != nil {
			return nil, err
		}
		if cfg.ScanRatio > 0 {
			return w, nil // a scan sees only rows that exist: load them all first
		}
		// Missing keys read as counter 0, so loading every row through transactions is
		// skipped: the first write of a key creates it.
		return ycsbtNoLoad{noLoad{w}, w}, nil
	case "tpcc":
		n := p.Warehouses
		if n == 0 {
			n = len(t.Regions)
		}
		if n < 0 || n > 10000 {
			return nil, fmt.Errorf("warehouses must be 1..10000, got %d", n)
		}
		cfg := tpcc.Small(n)
		if p.TPCCFull {
			cfg = tpcc.Spec(n)
		}
		if p.TPCCMix != [5]int{} {
			for _, v := range p.TPCCMix {
				if v < 0 || v > MaxTPCCMixWeight {
					return nil, fmt.Errorf("TPC-C mix weights must be 0..%d, got %v", MaxTPCCMixWeight, p.TPCCMix)
				}
			}
			cfg.Mix = p.TPCCMix
		}
		if p.TPCCItems != 0 {
			if p.TPCCItems < 100 || p.TPCCItems > 100_000 {
				return nil, fmt.Errorf("TPC-C items must be 100..100000, got %d", p.TPCCItems)
			}
			cfg.Items = p.TPCCItems
		}
		cfg.OneRemoteLine = p.OneRemoteLine
		cfg.Families = p.TPCCFamilies
		if p.RemoteItemRatio >= 0 {
			if p.RemoteItemRatio > 1 {
				return nil, fmt.Errorf("remote item ratio must be in [0, 1], got %g", p.RemoteItemRatio)
			}
			cfg.RemoteItemRatio = p.RemoteItemRatio
		}
		return tpcc.New(t, cfg)
	}
	return nil, fmt.Errorf("unknown workload %q (known: list-append, rw-register, ycsbt, tpcc)", p.Name)
}

// noLoad runs a workload without its load phase.
type noLoad struct{ workload.Workload }

func (noLoad) Load(*client.DB) error { return nil }

// ycsbtNoLoad is a YCSB-T workload without its load phase that keeps its post-run check.
type ycsbtNoLoad struct {
	noLoad
	w *ycsbt.Workload
}

func (n ycsbtNoLoad) Check(db *client.DB) error { return n.w.Check(db) }

func (n ycsbtNoLoad) Verifies() bool { return n.w.Verifies() }
