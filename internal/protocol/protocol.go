// Package protocol is the registry of Meridian's transaction protocols. Each protocol package
// registers a Protocol in its init function; runtimes (the simulator, real servers) look
// protocols up by name and build one Handler per node.
package protocol

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/meridiandb/meridian/internal/node"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/wire"
)

// Protocol builds the per-node logic of one transaction protocol.
type Protocol interface {
	// Name is the protocol id used on the command line (k2, spanner, crdb, serial, …).
	Name() string
	// Model is the consistency model the protocol promises, as a checker model name.
	Model() string
	// Options lists the option keys the protocol understands, with a one-line description.
	Options() map[string]string
	// Layout adjusts a topology layout to what the protocol needs (e.g. replication mode).
	Layout(l topo.Layout) topo.Layout
	// NewNode builds the handler of one node. It returns an error for bad options.
	NewNode(cfg node.Config) (node.Handler, error)
}

var registry = map[string]Protocol{}

// Register adds a protocol. Registering a name twice is a programming error.
func Register(p Protocol) {
	if _, dup := registry[p.Name()]; dup {
		panic("protocol: duplicate registration of " + p.Name())
	}
	registry[p.Name()] = p
}

// Lookup finds a protocol by name.
func Lookup(name string) (Protocol, error) {
	p, ok := registry[name]
	if !ok {
		return nil, fmt.Errorf("unknown protocol %q (known: %s)", name, strings.Join(Names(), ", "))
	}
	return p, nil
}

// Names lists registered protocols, sorted.
func Names() []string {
	out := make([]string, 0, len(registry))
	for n := range registry {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// DeploymentChecker is implemented by protocols with option values that can only be judged
// against the deployment they run on: K2-TB's batch life, for one, must outlast the oracle
// round trip that fetches a batch, or no transaction ever gets a timestamp.
type DeploymentChecker interface {
	CheckDeployment(opts map[string]string, d DeploymentFacts) error
}

// DeploymentFacts are what a DeploymentChecker judges options against.
type DeploymentFacts struct {
	IntraRTT time.Duration // round trip between two nodes of one region
	// Jitter is the most a message's delay may gain beyond its one-way latency (uniform from
	// 0; the simulator's --jitter), 0 where it is not known.
	Jitter            time.Duration
	OracleServiceTime time.Duration // CPU time an oracle node spends on a request
	// MaxClockOffset bounds each node's local clock's offset from true time at the start (two
	// clocks may then be twice it apart); 0 where it is not known (real clusters).
	MaxClockOffset time.Duration
	// Epsilon bounds how far a TrueTime reading (an oracle's clock, a node's TT.now()) strays
	// from true time, and MaxDrift the rate at which local clocks drift; 0 where not known.
	Epsilon  time.Duration
	MaxDrift float64
}

// OptionChecker is implemented by protocols that can judge their options' values without
// building a node, so that a bad value is refused before anything runs (a cluster's servers
// would otherwise each fail on start with it).
type OptionChecker interface {
	CheckOptionValues(opts map[string]string) error
}

// CheckOptions rejects option keys a protocol does not know and, where the protocol can judge
// them alone, bad values.
func CheckOptions(p Protocol, opts map[string]string) error {
	known := p.Options()
	keys := make([]string, 0, len(opts))
	for k := range opts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if _, ok := known[k]; !ok {
			var names []string
			for n := range known {
				names = append(names, n)
			}
			sort.Strings(names)
			return fmt.Errorf("protocol %s: unknown option %q (known: %s)", p.Name(), k, strings.Join(names, ", "))
		}
	}
	if oc, ok := p.(OptionChecker); ok {
		return oc.CheckOptionValues(opts)
	}
	return nil
}

// OptionError reports a protocol option with a bad value.
type OptionError struct {
	Protocol, Key, Value, Want string
}

func (e *OptionError) Error() string {
	return "protocol " + e.Protocol + ": option " + e.Key + "=" + e.Value + ": want " + e.Want
}

// TimestampOrdered is implemented by protocols that serialize committed transactions in the
// order of the commit timestamps they report (wire.ClientReply.CommitTS): every dependency between
// two committed transactions runs from the lower timestamp to the higher, no two transactions
// that wrote share one, and, where the promised model orders real time, a transaction that
// completed before another was invoked has the lower timestamp. It is stronger than the model:
// a history can be serializable while the timestamps contradict it, and the protocol is then
// broken all the same. Runs of such protocols record the timestamps in their histories and
// declare the order there (history.Recorder.DeclareTimestampOrder), and the checker holds
// them to it.
type TimestampOrdered interface {
	SerializesByCommitTimestamp()
}

// ClockBounded is implemented by protocols whose promise rests on the nodes' local clocks staying
// within a bound of each other: ClockBound returns the most two data nodes' clocks may be apart
// under opts (crdb's max-offset), or 0 if the options put no such bound. A real node measures
// its clock against its peers' and stops once it is off by more than that from most of them,
// as a CockroachDB node does, rather than serve with a clock its protocol cannot trust.
type ClockBounded interface {
	ClockBound(opts map[string]string) time.Duration
}

// OptionModel is implemented by protocols whose promised model depends on their options (e.g.
// spanner without commit wait is only serializable).
type OptionModel interface {
	ModelFor(opts map[string]string) string
}

// PromisedModel is the consistency model p promises under opts.
func PromisedModel(p Protocol, opts map[string]string) string {
	if om, ok := p.(OptionModel); ok {
		return om.ModelFor(opts)
	}
	return p.Model()
}

// Preloader is implemented by handlers that can install a workload's initial rows directly, as
// committed data older than every transaction, instead of loading them through transactions
// (which costs millions of simulated events at TPC-C scale). The runtime calls Preload on every
// replica of each row's shard before any client starts, and again right after the node restarts
// from a crash: preloaded rows are the node's initial image, so the handler need not persist them
// (a restarted node gets them back; what it persisted itself overrides them).
type Preloader interface {
	Preload(rows []wire.KV) error
}
