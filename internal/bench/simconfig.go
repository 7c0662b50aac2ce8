package bench

import (
	"fmt"
	"time"

	"github.com/meridiandb/meridian/internal/protocol"
	"github.com/meridiandb/meridian/internal/sim"
	"github.com/meridiandb/meridian/internal/topo"
)

// Deployment names a simulated deployment: protocol, topology and layout. Base supplies the
// network, CPU, disk and clock model (sim.DefaultConfig() if zero).
type Deployment struct {
	Protocol       string
	Options        map[string]string
	Topology       string // preset name or .toml file
	NodesPerRegion int
	ShardsPerNode  int
	Seed           uint64
	Base           *sim.Config
	// IntraRTT, if positive, replaces the topology's round trip inside a region.
	IntraRTT time.Duration
}

// SimConfig builds the simulator configuration of a deployment.
func SimConfig(d Deployment) (sim.Config, error) {
	p, err := protocol.Lookup(d.Protocol)
	if err != nil {
		return sim.Config{}, err
	}
	if d.NodesPerRegion <= 0 {
		return sim.Config{}, fmt.Errorf("nodes per region must be positive, got %d", d.NodesPerRegion)
	}
	if d.ShardsPerNode <= 0 || d.ShardsPerNode > 1024 {
		return sim.Config{}, fmt.Errorf("shards per node must be 1..1024, got %d", d.ShardsPerNode)
	}
	l := topo.DefaultLayout()
	l.NodesPerRegion, l.ShardsPerNode = d.NodesPerRegion, d.ShardsPerNode
	l = p.Layout(l)
	tp, err := topo.Resolve(d.Topology, l)
	if err != nil {
		return sim.Config{}, err
	}
	if d.IntraRTT < 0 {
		return sim.Config{}, fmt.Errorf("intra-region round trip must not be negative, got %v", d.IntraRTT)
	}
	if d.IntraRTT > 0 {
		tp.IntraRTT = d.IntraRTT
	}
	cfg := sim.DefaultConfig()
	if d.Base != nil {
		cfg = *d.Base
	}
	cfg.Topology, cfg.Protocol, cfg.Options, cfg.Seed = tp, p, d.Options, d.Seed
	if err := cfg.Validate(); err != nil {
		return sim.Config{}, err
	}
	if dc, ok := p.(protocol.DeploymentChecker); ok {
		oracle := cfg.OracleServiceTime
		if oracle == 0 {
			oracle = cfg.ServiceTime
		}
		if err := dc.CheckDeployment(d.Options, protocol.DeploymentFacts{IntraRTT: tp.IntraRTT, Jitter: cfg.Jitter, OracleServiceTime: oracle, MaxClockOffset: cfg.MaxOffset,
			Epsilon: cfg.Epsilon, MaxDrift: cfg.MaxDrift}); err != nil {
			return sim.Config{}, err
		}
	}
	return cfg, nil
}
