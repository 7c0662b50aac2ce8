package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/meridiandb/meridian/internal/bench"
	"github.com/meridiandb/meridian/internal/history"
	"github.com/meridiandb/meridian/internal/protocol"
	"github.com/meridiandb/meridian/internal/sim"
	"github.com/meridiandb/meridian/internal/topo"
)

// simFlags are the flags that describe a simulated deployment, shared by sim and repro.
type simFlags struct {
	protocol       string
	topology       string
	nodesPerRegion int
	shardsPerNode  int
	seed           uint64
	opts           []string
	jitter         time.Duration
	serviceTime    time.Duration
	oracleService  time.Duration
	flushLatency   time.Duration
	cores          int
	disk           string
	epsilon        time.Duration
	maxDrift       float64
	maxOffset      time.Duration
	intraRTT       time.Duration
	trueTimeError  string
	fs             *pflag.FlagSet // to tell flags given from defaults
}

func (f *simFlags) register(fs *pflag.FlagSet) {
	d := sim.DefaultConfig()
	f.fs = fs
	fs.StringVar(&f.protocol, "protocol", "k2", "transaction protocol ("+strings.Join(protocol.Names(), ", ")+")")
	fs.StringVar(&f.topology, "topology", "k2-5region", "latency preset or .toml file (see: meridian topologies)")
	fs.IntVar(&f.nodesPerRegion, "nodes-per-region", 1, "data nodes per region")
	fs.IntVar(&f.shardsPerNode, "shards-per-node", 4, "primary shards per data node")
	fs.Uint64Var(&f.seed, "seed", 1, "random seed: the same seed gives the same trace")
	fs.StringArrayVar(&f.opts, "opt", nil, "protocol option key=value (repeatable; meridian protocols lists them)")
	fs.DurationVar(&f.jitter, "jitter", d.Jitter, "extra one-way network delay, uniform in [0, jitter)")
	fs.DurationVar(&f.serviceTime, "service-time", d.ServiceTime, "CPU time per message on a node")
	fs.DurationVar(&f.oracleService, "oracle-service-time", 0, "CPU time per request on a TrueTime oracle node (0: --service-time)")
	fs.DurationVar(&f.flushLatency, "flush-latency", d.FlushLatency, "disk flush latency")
	fs.IntVar(&f.cores, "cores", d.Cores, "cores per node")
	fs.StringVar(&f.disk, "disk", "local", "what a node persists to: local (one log; persists queued during a flush wait for it and go together in the next) or shared (a storage service of several SSD servers, as K2's shared storage: each persist its own flush, waiting for none)")
	fs.DurationVar(&f.epsilon, "epsilon", d.Epsilon, "TrueTime uncertainty ε")
	fs.Float64Var(&f.maxDrift, "max-drift", d.MaxDrift, "maximum clock drift rate (200e-6 = 200 ppm)")
	fs.DurationVar(&f.maxOffset, "max-offset", d.MaxOffset, "maximum local clock offset")
	fs.DurationVar(&f.intraRTT, "intra-rtt", 0, "round trip inside a region (0: the topology's)")
	fs.StringVar(&f.trueTimeError, "truetime-error", "half", "how far TrueTime readings stray within ε: half (each resync within ±ε/2, errors up to ~0.6ε) or full (up to the edge of ε; a harsher test of commit waits: a trace changes where two nodes' timestamps decide an order)")
}

func parseOpts(kvs []string) (map[string]string, error) {
	m := map[string]string{}
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--opt %q: want key=value", kv)
		}
		if old, dup := m[k]; dup {
			return nil, fmt.Errorf("--opt %s given twice (%s=%s and %s): give each option once", k, k, old, kv)
		}
		m[k] = v
	}
	return m, nil
}

// config builds the simulator configuration the flags describe.
func (f *simFlags) config() (sim.Config, error) {
	if err := f.validate(); err != nil {
		return sim.Config{}, err
	}
	opts, err := parseOpts(f.opts)
	if err != nil {
		return sim.Config{}, err
	}
	if err := checkOptionDurations(opts); err != nil {
		return sim.Config{}, fmt.Errorf("--opt %w", err)
	}
	base := sim.DefaultConfig()
	base.Jitter, base.ServiceTime, base.FlushLatency, base.Cores = f.jitter, f.serviceTime, f.flushLatency, f.cores
	base.OracleServiceTime, base.ParallelFlushes = f.oracleService, f.disk == "shared"
	base.Epsilon, base.MaxDrift, base.MaxOffset = f.epsilon, f.maxDrift, f.maxOffset
	base.FullTrueTimeError = f.trueTimeError == "full"
	cfg, err := bench.SimConfig(bench.Deployment{Protocol: f.protocol, Options: opts, Topology: f.topology,
		NodesPerRegion: f.nodesPerRegion, ShardsPerNode: f.shardsPerNode, Seed: f.seed, Base: &base, IntraRTT: f.intraRTT})
	if err != nil {
		return sim.Config{}, optionError(err)
	}
	// A topology file's [layout] wins over the flags; a flag given explicitly and overruled
	// would otherwise be ignored without a word.
	for _, c := range []struct {
		flag, key string
		want, got int
	}{{"nodes-per-region", "nodes_per_region", f.nodesPerRegion, cfg.Topology.Layout.NodesPerRegion},
		{"shards-per-node", "shards_per_node", f.shardsPerNode, cfg.Topology.Layout.ShardsPerNode}} {
		if f.fs != nil && f.fs.Changed(c.flag) && c.want != c.got && strings.HasSuffix(f.topology, ".toml") {
			return sim.Config{}, fmt.Errorf("--%s %d conflicts with %s = %d in %s: give it in one place", c.flag, c.want, c.key, c.got, f.topology)
		}
	}
	return cfg, nil
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func writeHistory(path string, ops []history.Op) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("history: %w", err)
	}
	if err := history.Write(f, ops); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func sortedKeys[M ~map[string]V, V any](m M) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

var topologiesCmd = &cobra.Command{
	Use:   "topologies",
	Short: "List the built-in topology presets",
	Args:  cobra.NoArgs,
	RunE: func(cmd *cobra.Command, _ []string) error {
		for _, p := range topo.Presets() {
			fmt.Fprintln(cmd.OutOrStdout(), p)
		}
		return nil
	},
}

func init() { rootCmd.AddCommand(topologiesCmd) }

func newFlagSet() *pflag.FlagSet { return pflag.NewFlagSet("defaults", pflag.ContinueOnError) }
