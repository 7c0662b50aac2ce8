package txnkit

import (
	"fmt"
	"time"

	"github.com/meridiandb/meridian/internal/node"
	"github.com/meridiandb/meridian/internal/protocol"
	"github.com/meridiandb/meridian/internal/storage/mvcc"
	"github.com/meridiandb/meridian/internal/ts"
)

// Version garbage collection, as every multi-version protocol runs it.
//
// A node keeps every version a transaction younger than gc-ttl may read, and no older ones: a
// pass at clock reading now collects with horizon now−ttl (mvcc gc.go), and the protocol then
// refuses any read or write below the store's horizon, aborting the transaction with cause
// AbortTooOld. A transaction therefore has gc-ttl to finish; CockroachDB makes the same trade
// with its GC TTL.
//
// Passes run only when there is garbage old enough to collect: the timer is armed for when the
// oldest queued decision falls behind the horizon, never sooner than a tenth of the TTL after
// the last pass, so a busy node collects about ten times per TTL and an idle one never. A pass
// visits at most gcBudget keys and charges the node CPU for each, like any other work; a node
// that decides more than that per pass catches up with passes a hundredth of the TTL apart, and
// never more than gcCatchUpGap apart: with a long TTL, a hundredth of it would cap collection
// at gcBudget keys per TTL/100 (227 keys/s at 1h), below what a busy node decides, and its
// garbage would grow for ever.

// GCTTLOption is the protocol option that sets how long a node keeps superseded versions.
const GCTTLOption = "gc-ttl"

// DefaultGCTTL is gc-ttl's default: far longer than any transaction the workloads run, so
// aborts for it mean a transaction hung, and short enough that a node's versions stay a few
// seconds of writes.
const DefaultGCTTL = 10 * time.Second

// AbortTooOld is the abort cause of an operation below the garbage-collection horizon.
const AbortTooOld = "too-old"

const (
	gcBudget     = 8192                  // keys visited per pass
	gcCostPerKey = 200 * time.Nanosecond // CPU charged per key visited
	// gcCatchUpGap bounds the gap between passes while the last ran out of budget: at least
	// gcBudget keys per 100ms (81,920 keys/s) whatever the TTL, at under 2% of a core.
	gcCatchUpGap = 100 * time.Millisecond
)

// VersionGC runs a node's version garbage collection. Create it with NewVersionGC; call Kick
// whenever the protocol has decided versions (its persist path is the natural place) and
// TooOld before serving an operation.
type VersionGC struct {
	env     node.Env
	store   *mvcc.Store
	ttl     time.Duration
	persist func() // hands the store's recorded writes (the pass's deletes) to the disk
	m       *protocol.Metrics
	armed   bool
	behind  bool  // the last pass ran out of budget
	last    int64 // clock reading at the last pass
}

// NewVersionGC returns the collector of store, whose deletes persist hands to the protocol's
// persistence.
func NewVersionGC(env node.Env, store *mvcc.Store, ttl time.Duration, persist func(), m *protocol.Metrics) *VersionGC {
	return &VersionGC{env: env, store: store, ttl: ttl, persist: persist, m: m, last: env.Now()}
}

// TooOld reports whether an operation at t must be refused: versions it may need are gone.
func (g *VersionGC) TooOld(t ts.Timestamp) bool { return t.Less(g.store.GCHorizon()) }

// Kick arms the pass timer if garbage is queued and no pass is scheduled.
func (g *VersionGC) Kick() {
	if g.armed {
		return
	}
	oldest, ok := g.store.OldestGarbage()
	if !ok {
		return
	}
	now := g.env.Now()
	gap := g.ttl / 10
	if g.behind {
		gap = min(g.ttl/100, gcCatchUpGap)
	}
	at := max(oldest.Wall+int64(g.ttl), g.last+int64(gap))
	g.armed = true
	g.env.After(time.Duration(max(at-now, 0)), g.pass)
}

func (g *VersionGC) pass() {
	g.armed = false
	g.last = g.env.Now()
	st := g.store.CollectGarbage(ts.New(g.last-int64(g.ttl)), gcBudget)
	g.behind = st.More
	g.env.Charge(time.Duration(st.KeysVisited) * gcCostPerKey)
	g.m.Add("gc/passes", 1)
	g.m.Add("gc/versions-removed", int64(st.VersionsRemoved))
	g.m.Add("gc/keys-removed", int64(st.KeysRemoved))
	if st.VersionsRemoved > 0 {
		g.persist()
	}
	g.Kick()
}

// minGCTTL bounds gc-ttl from below: a horizon closer than this to the present would refuse
// transactions that are merely waiting for a WAN round trip.
const minGCTTL = 10 * time.Millisecond

// GCTTL reads the gc-ttl option, in [10ms, MaxDuration].
func (o *Options) GCTTL() time.Duration {
	v, ok := o.M[GCTTLOption]
	if !ok {
		return DefaultGCTTL
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < minGCTTL || d > MaxDuration {
		o.fail(GCTTLOption, v, fmt.Sprintf("a duration from %v to %dh such as 10s", minGCTTL, MaxDuration/time.Hour))
		return DefaultGCTTL
	}
	return d
}
