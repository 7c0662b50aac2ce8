package sim

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	mclock "github.com/meridiandb/meridian/internal/clock"
	"github.com/meridiandb/meridian/internal/node"
	"github.com/meridiandb/meridian/internal/protocol"
	"github.com/meridiandb/meridian/internal/storage/durable"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/ts"
	"github.com/meridiandb/meridian/internal/wire"
)

// Config describes one simulated deployment.
type Config struct {
	Topology *topo.Topology
	Protocol protocol.Protocol
	Options  map[string]string // protocol options
	Seed     uint64

	// Network.
	Jitter  time.Duration // each message's delay gains uniform [0, Jitter)
	Reorder bool          // allow messages on one link to overtake each other

	// CPU and disk.
	Cores       int           // cores per node (0: 1)
	ServiceTime time.Duration // CPU cost of each message, timer or persist completion (0: free)
	// OracleServiceTime, if set, is the service time of oracle nodes instead (K2 measured one
	// TTC oracle server at ~60k timestamps per second).
	OracleServiceTime time.Duration
	FlushLatency      time.Duration // one disk flush
	// ParallelFlushes makes each persist its own flush, started at once, so that none waits for
	// another: writes to a storage service of several SSD servers, as K2's shared storage is.
	// Off, a node's disk is one log: persists queued while a flush is under way wait for it and
	// go together in the next (group commit). A flush takes FlushLatency either way.
	ParallelFlushes bool

	// Clocks.
	MaxOffset     time.Duration // local oscillators start within ±MaxOffset of true time
	MaxDrift      float64       // local oscillators drift within ±MaxDrift (200e-6 = 200 ppm)
	Epsilon       time.Duration // TrueTime uncertainty ε; synced sources stay within it
	SyncPeriod    time.Duration // TrueTime sources resync this often (0: 62.5 ms, K2's 1/2^4 s)
	ClientTimeout time.Duration // a client gives up on a reply after this (0: 60 s)
	// FullTrueTimeError draws each synced source's error at a resync anywhere in ±(ε − D·period),
	// so that with its drift over the period it reaches the edge of ε, instead of within ±ε/2
	// (where errors stay within about 0.6ε). Off by default: it changes every trace.
	FullTrueTimeError bool

	// DiscardPersisted, for a run that never restarts a node, keeps none of what nodes persist:
	// each persist is still queued, group-committed, timed and counted, and its completion runs
	// as before, so the trace is the same, but its writes are dropped instead of applied to the
	// node's durable store, which only a restart ever reads. A paper-scale TPC-C run (100
	// warehouses, 5 nodes per region) held 330 MB of such writes, 15% of its heap, and spent 6%
	// of its CPU applying them. Restart then fails: there is nothing to restart from.
	DiscardPersisted bool

	// DigestContents also folds every delivered message's full contents (its wire encoding,
	// wire.Encode: canonical CBOR, map keys sorted) into a second digest, ContentDigest. The
	// trace digest (Digest) sees only each event's time, kind, endpoints and message kind, so
	// a nondeterminism that changes what a message carries but not when it arrives (keys listed
	// in map order, a value picked from a map) escapes it. Off by default: it encodes every
	// message, and a run's trace digest is the same either way.
	DigestContents bool
}

// DefaultConfig returns K2's clock parameters (ε = 100 µs, D = 200 ppm), 5 µs per message on one
// core, and a 0.5 ms disk flush (K2 Table 2's commit phase).
func DefaultConfig() Config {
	return Config{
		Jitter:       20 * time.Microsecond,
		Cores:        1,
		ServiceTime:  5 * time.Microsecond,
		FlushLatency: 500 * time.Microsecond,
		MaxOffset:    time.Millisecond,
		MaxDrift:     200e-6,
		Epsilon:      100 * time.Microsecond,
	}
}

// Validate rejects configurations the model cannot run.
func (c *Config) Validate() error {
	switch {
	case c.Topology == nil:
		return errors.New("sim: no topology")
	case c.Protocol == nil:
		return errors.New("sim: no protocol")
	case c.Jitter < 0, c.ServiceTime < 0, c.OracleServiceTime < 0, c.FlushLatency < 0, c.MaxOffset < 0, c.Epsilon < 0, c.SyncPeriod < 0, c.ClientTimeout < 0:
		return errors.New("sim: durations must not be negative")
	case c.Cores < 0 || c.Cores > 1024:
		return fmt.Errorf("sim: cores must be 1..1024, got %d", c.Cores)
	case !(c.MaxDrift >= 0 && c.MaxDrift <= 0.01): // also rejects NaN
		return fmt.Errorf("sim: drift must be within 0..0.01, got %g", c.MaxDrift)
	}
	return protocol.CheckOptions(c.Protocol, c.Options)
}

// Stats counts what a run did.
type Stats struct {
	Events        uint64
	Messages      uint64
	Dropped       uint64
	Flushes       uint64
	PersistedKeys uint64
}

// Sim is one simulation. It is not safe for concurrent use; it is single-threaded by design.
type Sim struct {
	cfg    Config
	now    int64
	seq    uint64
	q      eventQueue
	rng    *rand.Rand
	nodes  []*simNode
	cls    []*Client
	digest uint64
	stats  Stats
	// diskErr is the first write a node's store refused; that node stopped for good.
	diskErr error

	// eps maps each client endpoint id ever handed out (less len(nodes)) to its client; a
	// client that connected again has several, and only its current one (Client.id) is live.
	eps []*Client

	linkLast  map[uint64]int64 // last delivery time per directed link (FIFO)
	cut       map[uint64]bool  // blocked directed node pairs
	cutReg    [][]bool         // blocked region pairs
	slowReg   [][]int64        // extra one-way delay between region pairs (SlowRegions)
	loss      float64
	dup       float64
	stopping  bool
	onRestart []func(topo.NodeID)
	stale     int // events in the queue known to be dead (cancelled timers, answered timeouts)

	dupDelay int64 // a copy's extra delay is uniform in [0, dupDelay]
	// clientsReliable spares client connections from loss and duplication (see
	// SetClientLinksReliable).
	clientsReliable bool

	// content is the content digest (Config.DigestContents); contentErr the first message it
	// could not encode.
	content    uint64
	contentErr error
}

// OnRestart registers fn to run right after a crashed node restarts (before it handles anything),
// e.g. to install its initial image again.
func (s *Sim) OnRestart(fn func(topo.NodeID)) { s.onRestart = append(s.onRestart, fn) }

const fnvOffset = 14695981039346656037
const fnvPrime = 1099511628211

// New builds a simulation and starts every node.
func New(cfg Config) (*Sim, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Cores == 0 {
		cfg.Cores = 1
	}
	if cfg.SyncPeriod == 0 {
		cfg.SyncPeriod = 62500 * time.Microsecond
	}
	if cfg.ClientTimeout == 0 {
		cfg.ClientTimeout = 60 * time.Second
	}
	t := cfg.Topology
	s := &Sim{
		cfg:      cfg,
		rng:      rand.New(rand.NewPCG(cfg.Seed, 0x6d6572696469616e)),
		digest:   fnvOffset,
		content:  fnvOffset,
		linkLast: map[uint64]int64{},
		cut:      map[uint64]bool{},
		dupDelay: int64(DefaultDuplicateDelay),
	}
	s.cutReg = make([][]bool, len(t.Regions))
	s.slowReg = make([][]int64, len(t.Regions))
	for i := range s.cutReg {
		s.cutReg[i] = make([]bool, len(t.Regions))
		s.slowReg[i] = make([]int64, len(t.Regions))
	}
	for _, n := range t.Nodes {
		sn := &simNode{
			sim:       s,
			id:        n.ID,
			region:    n.Region,
			roles:     n.Roles,
			disk:      durable.NewMem(),
			rng:       rand.New(rand.NewPCG(cfg.Seed, uint64(n.ID)+1)),
			busyUntil: make([]int64, cfg.Cores),
			timers:    map[node.TimerID]func(){},
		}
		sn.clock = newClock(s.rng, cfg)
		s.nodes = append(s.nodes, sn)
	}
	for _, sn := range s.nodes {
		if err := sn.start(); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Now is the current virtual (true) time in nanoseconds.
func (s *Sim) Now() int64 { return s.now }

// Topology returns the simulated deployment.
func (s *Sim) Topology() *topo.Topology { return s.cfg.Topology }

// Config returns the configuration the simulation runs with (defaults filled in).
func (s *Sim) Config() Config { return s.cfg }

// Digest is the trace digest so far: a hash over every executed event.
func (s *Sim) Digest() uint64 { return s.digest }

// ErrNoContentDigest is ContentDigest's error when the run does not digest contents: two such
// runs would otherwise compare equal whatever their messages carried.
var ErrNoContentDigest = errors.New("sim: content digest is off (Config.DigestContents)")

// ContentDigest is the content digest so far (Config.DigestContents): a hash over every
// delivered message, its arrival time, endpoints and full wire encoding. It fails if the run
// does not digest contents, or if a message could not be encoded (that message could not travel
// between real servers either); the error names the first such message.
func (s *Sim) ContentDigest() (uint64, error) {
	if !s.cfg.DigestContents {
		return 0, ErrNoContentDigest
	}
	return s.content, s.contentErr
}

// mixContent folds a delivered message into the content digest.
func (s *Sim) mixContent(e *event) {
	frame, err := wire.Encode(e.msg)
	if err != nil {
		if s.contentErr == nil {
			s.contentErr = fmt.Errorf("sim: content digest: message %T from %d to %d at %d: %w", e.msg, e.from, e.to, e.at, err)
		}
		frame = nil
	}
	h := uint64(fnvOffset)
	for _, b := range frame {
		h ^= uint64(b)
		h *= fnvPrime
	}
	c := s.content
	for _, v := range [...]uint64{uint64(e.at), uint64(uint32(e.to)), uint64(uint32(e.from)), uint64(len(frame)), h} {
		c ^= v
		c *= fnvPrime
	}
	s.content = c
}

// Stats returns counters of the run so far.
func (s *Sim) Stats() Stats { return s.stats }

// Rand is the simulation's own seeded source (for scripted faults and workload seeding).
func (s *Sim) Rand() *rand.Rand { return s.rng }

// noteStale records that one queued event became dead, and compacts the queue when dead events
// outnumber live ones: clients schedule a timeout for every request and protocols a timer for
// every operation, and nearly all of them are cancelled long before they would fire.
func (s *Sim) noteStale() {
	s.stale++
	if s.stale > 4096 && s.stale > s.q.len()/2 {
		s.q.filter(s.live)
		s.stale = 0
	}
}

// live reports whether a queued event will still do something when it fires.
func (s *Sim) live(e *event) bool {
	switch e.kind {
	case evTimer:
		n := s.nodes[e.to]
		if n.inc != e.inc {
			return false
		}
		_, ok := n.timers[node.TimerID(e.token)]
		return ok
	case evClientWake:
		return s.eps[int(e.to)-len(s.nodes)].waitToken == e.token
	}
	return true
}

func (s *Sim) schedule(e event) {
	s.seq++
	e.seq = s.seq
	if e.at < s.now {
		e.at = s.now
	}
	s.q.push(e)
}

// At schedules fn to run at virtual time t (or now, if t is past).
func (s *Sim) At(t int64, fn func()) { s.schedule(event{at: t, kind: evFunc, fn: fn}) }

func (s *Sim) mix(vals ...uint64) {
	h := s.digest
	for _, v := range vals {
		h ^= v
		h *= fnvPrime
	}
	s.digest = h
}

// RunUntil executes events until virtual time t or until no events remain.
func (s *Sim) RunUntil(t int64) {
	for s.q.len() > 0 && s.q.h[0].at <= t {
		s.step()
	}
	if s.now < t {
		s.now = t
	}
}

// RunFor advances virtual time by d.
func (s *Sim) RunFor(d time.Duration) { s.RunUntil(s.now + int64(d)) }

func (s *Sim) step() {
	e := s.q.pop()
	s.now = e.at
	s.stats.Events++
	var k uint64
	if e.msg != nil {
		k = uint64(e.msg.Kind())
	}
	s.mix(uint64(e.at), uint64(e.kind), uint64(uint32(e.to)), uint64(uint32(e.from)), k)
	switch e.kind {
	case evDeliver:
		if s.cfg.DigestContents {
			s.mixContent(&e)
		}
		if int(e.to) < len(s.nodes) {
			n := s.nodes[e.to]
			if int(e.from) >= len(s.nodes) && e.inc != n.inc {
				// Sent by a client over its connection to the node's previous life, which died
				// with it: the new life never reads it.
				s.stats.Dropped++
				return
			}
			n.enqueue(work{from: topo.NodeID(e.from), msg: e.msg})
		} else if c := s.eps[int(e.to)-len(s.nodes)]; c.id == e.to {
			c.deliver(e.msg)
		} else {
			// Addressed to a connection the client has since replaced: it went nowhere.
			s.stats.Dropped++
		}
	case evCoreFree:
		s.nodes[e.to].coreFree(int(e.token), e.inc)
	case evTimer:
		n := s.nodes[e.to]
		if n.inc != e.inc || n.down {
			return
		}
		fn, ok := n.timers[node.TimerID(e.token)]
		if !ok {
			return
		}
		delete(n.timers, node.TimerID(e.token))
		n.enqueue(work{fn: fn})
	case evFlushDone:
		s.nodes[e.to].flushDone(e.inc)
	case evClientWake:
		s.eps[int(e.to)-len(s.nodes)].wake(e.token)
	case evClientStart:
		s.eps[int(e.to)-len(s.nodes)].begin()
	case evFunc:
		e.fn()
	}
}

func linkKey(from, to int32) uint64 { return uint64(uint32(from))<<32 | uint64(uint32(to)) }

func (s *Sim) regionOf(ep int32) topo.RegionID {
	if int(ep) < len(s.nodes) {
		return s.nodes[ep].region
	}
	return s.eps[int(ep)-len(s.nodes)].region
}

// send moves a message from one endpoint to another, departing at time depart.
func (s *Sim) send(from, to int32, m wire.Msg, depart int64) {
	if to < 0 || int(to) >= len(s.nodes)+len(s.eps) {
		s.stats.Dropped++
		return
	}
	s.stats.Messages++
	ra, rb := s.regionOf(from), s.regionOf(to)
	if s.cutReg[ra][rb] || s.cut[linkKey(from, to)] {
		s.stats.Dropped++
		return
	}
	if s.loss > 0 && s.unreliable(from, to) && s.rng.Float64() < s.loss {
		s.stats.Dropped++
		return
	}
	// A message a node sends to itself never touches the network (a local call in a real
	// server); it still queues for the node's CPU.
	var delay int64
	if from != to {
		delay = int64(s.cfg.Topology.OneWay(ra, rb))
		if s.cfg.Jitter > 0 {
			delay += s.rng.Int64N(int64(s.cfg.Jitter))
		}
		delay += s.slowReg[ra][rb]
	}
	at := depart + delay
	if !s.cfg.Reorder {
		lk := linkKey(from, to)
		if last := s.linkLast[lk]; at < last {
			at = last
		}
		s.linkLast[lk] = at
	}
	// A client's message rides its connection to one life of the node (see Client).
	var inc uint32
	if int(to) < len(s.nodes) && int(from) >= len(s.nodes) {
		inc = s.nodes[to].inc
	}
	s.schedule(event{at: at, kind: evDeliver, to: to, from: from, msg: m, inc: inc})
	if s.dup > 0 && s.unreliable(from, to) && s.rng.Float64() < s.dup {
		// The copy is a stray (a resend whose original was not lost after all): it keeps no
		// place in the link's order, so it may arrive after messages sent later, and the
		// link's FIFO order is not held back behind it.
		s.schedule(event{at: at + s.rng.Int64N(s.dupDelay+1), kind: evDeliver, to: to, from: from, msg: m, inc: inc})
	}
}

// unreliable reports whether loss and duplication apply to messages from one endpoint to
// another: a node's messages to itself never touch the network.
func (s *Sim) unreliable(from, to int32) bool {
	if from == to {
		return false
	}
	return !s.clientsReliable || (int(from) < len(s.nodes) && int(to) < len(s.nodes))
}

// blocked reports whether a partition stops messages from one endpoint to another.
func (s *Sim) blocked(from, to int32) bool {
	return s.cutReg[s.regionOf(from)][s.regionOf(to)] || s.cut[linkKey(from, to)]
}

// DefaultDuplicateDelay bounds how late a duplicated message's copy arrives after its original
// unless SetDuplicateDelay says otherwise: long enough for the copy of a request to reach its
// node after the transaction it belonged to has ended (a transaction over the WAN takes a few
// tens of milliseconds), as a resend that raced its original would.
const DefaultDuplicateDelay = 100 * time.Millisecond

// SetLoss sets the probability that a message is dropped (client connections included unless
// SetClientLinksReliable spares them).
func (s *Sim) SetLoss(p float64) { s.loss = p }

// SetDuplication sets the probability that a message is delivered twice (client connections
// included unless SetClientLinksReliable spares them). The copy arrives after the original, by
// an extra delay drawn uniformly from [0, SetDuplicateDelay's bound].
func (s *Sim) SetDuplication(p float64) { s.dup = p }

// SetDuplicateDelay bounds the extra delay of a duplicated message's copy (default
// DefaultDuplicateDelay; 0 delivers it right behind its original).
func (s *Sim) SetDuplicateDelay(d time.Duration) { s.dupDelay = max(int64(d), 0) }

// SetClientLinksReliable, on, spares the messages between clients and nodes from loss and
// duplication, which then hit only node-to-node messages. A real client talks to its node over
// TCP: its messages are never lost or duplicated, only cut off with the connection (a crash, a
// partition). Off (the default) is harsher than any real client sees, and is what protocol tests
// of duplicate handling use.
func (s *Sim) SetClientLinksReliable(on bool) { s.clientsReliable = on }

// PartitionRegions stops all traffic between regions a and b (both directions). Messages
// already on their way still arrive; those sent while the regions are cut are lost.
func (s *Sim) PartitionRegions(a, b topo.RegionID) {
	s.cutReg[a][b] = true
	s.cutReg[b][a] = true
}

// SlowRegions adds by to the one-way delay of every message between regions a and b, both ways,
// sent from now until it is called again (with 0 to end it), as a congested or rerouted WAN
// link slows them. Each link stays FIFO: a message sent after the slowdown ends still arrives
// after those sent during it.
func (s *Sim) SlowRegions(a, b topo.RegionID, by time.Duration) {
	s.slowReg[a][b] = int64(by)
	s.slowReg[b][a] = int64(by)
}

// HealRegions ends a partition between regions a and b, leaving any other in place.
func (s *Sim) HealRegions(a, b topo.RegionID) {
	s.cutReg[a][b] = false
	s.cutReg[b][a] = false
}

// PartitionNodes stops traffic between two endpoints (both directions). A client endpoint is one
// connection: the client's next one (see Client) is not cut.
func (s *Sim) PartitionNodes(a, b topo.NodeID) {
	s.cut[linkKey(int32(a), int32(b))] = true
	s.cut[linkKey(int32(b), int32(a))] = true
}

// Heal removes every partition.
func (s *Sim) Heal() {
	for i := range s.cutReg {
		for j := range s.cutReg[i] {
			s.cutReg[i][j] = false
		}
	}
	s.cut = map[uint64]bool{}
}

// Crash stops a node: it loses its queued work, timers and unflushed writes; what it persisted
// survives for Restart. Its clients lose their connections to it (see Client).
func (s *Sim) Crash(id topo.NodeID) {
	if s.nodes[id].down {
		return
	}
	s.nodes[id].crash()
	for _, c := range s.cls {
		if c.coord == id && c.connected && !c.finished {
			c.coordCrashed()
		}
	}
}

// diskRefused stops node id for good, as a real node stops when its store refuses a write: it
// crashes, and Restart refuses it from then on. DiskError reports the first such refusal.
func (s *Sim) diskRefused(id topo.NodeID, err error) {
	if s.diskErr == nil {
		s.diskErr = fmt.Errorf("node %d stopped: its store refused a write: %w", id, err)
	}
	s.nodes[id].failed = true
	s.Crash(id)
}

// DiskError is the first write a node's store refused (which stopped that node), or nil.
func (s *Sim) DiskError() error { return s.diskErr }

// Restart brings a crashed node back with a fresh handler built from its durable state.
func (s *Sim) Restart(id topo.NodeID) error {
	if s.nodes[id].failed {
		return fmt.Errorf("sim: node %d cannot restart: it stopped when its store refused a write (DiskError)", id)
	}
	if s.cfg.DiscardPersisted {
		return fmt.Errorf("sim: node %d cannot restart: the simulation discards what nodes persist (Config.DiscardPersisted)", id)
	}
	if err := s.nodes[id].restart(); err != nil {
		return err
	}
	for _, fn := range s.onRestart {
		fn(id)
	}
	return nil
}

// Handler returns a node's current protocol handler (for tests that inspect state).
func (s *Sim) Handler(id topo.NodeID) node.Handler { return s.nodes[id].h }

// Durable returns a node's durable state (for tests).
func (s *Sim) Durable(id topo.NodeID) *durable.Mem { return s.nodes[id].disk }

// SkewClock adds extra to a node's TrueTime source and local oscillator from now on: a clock
// fault that may push the node's TrueTime interval off true time (beyond ε).
func (s *Sim) SkewClock(id topo.NodeID, extra time.Duration) { s.nodes[id].clock.fault += int64(extra) }

// ClockReads counts the readings node id's handler has taken of its clocks (Now and TrueTime),
// so that a skew of a clock no protocol reads can be told apart from one that had no effect.
func (s *Sim) ClockReads(id topo.NodeID) uint64 { return s.nodes[id].clock.reads }

// TrueTimeOf returns node id's TrueTime reading now (for tests of the clock model).
func (s *Sim) TrueTimeOf(id topo.NodeID) ts.Interval { return s.nodes[id].clock.trueTime(s.now) }

// LocalClockOf returns node id's local clock reading now.
func (s *Sim) LocalClockOf(id topo.NodeID) int64 { return s.nodes[id].clock.local(s.now) }

// clock is one node's pair of clocks: a free-running local oscillator (clock.Physical) and a
// synchronized TrueTime source.
type clock struct {
	osc     mclock.Physical
	ttErr0  int64   // synced source error right after a sync
	ttDrift float64 // synced source drift between syncs
	phase   int64   // this node's sync phase
	period  int64
	eps     int64
	fault   int64  // injected skew (clock-fault experiments)
	last    int64  // highest synced reading returned: TrueTime never steps back at a resync
	reads   uint64 // readings the node's handler took (Now, TrueTime), not its timers
}

func newClock(r *rand.Rand, c Config) *clock {
	uni := func(max float64) float64 { return (r.Float64()*2 - 1) * max }
	ck := &clock{
		osc:    mclock.Physical{Offset: time.Duration(uni(float64(c.MaxOffset))), Drift: uni(c.MaxDrift)},
		period: int64(c.SyncPeriod),
		eps:    int64(c.Epsilon),
	}
	// The synced source starts each period within ±ε/2 (or, with FullTrueTimeError, within
	// ±(ε − D·period)) and drifts by at most D per period, clamped so its error never exceeds ε:
	// an honest TrueTime.
	start := float64(c.Epsilon) / 2
	if c.FullTrueTimeError {
		start = max(0, float64(c.Epsilon)-c.MaxDrift*float64(c.SyncPeriod))
	}
	ck.ttErr0 = int64(uni(start))
	ck.ttDrift = uni(c.MaxDrift)
	if ck.period > 0 {
		ck.phase = r.Int64N(ck.period)
	}
	return ck
}

func (c *clock) local(t int64) int64 { c.reads++; return c.osc.Read(t) + c.fault }

// elapsed is local without the injected faults: with none, the same reading.
func (c *clock) elapsed(t int64) int64 { c.reads++; return c.osc.Read(t) }

// timerAt is the true time at which a timer set now (true time t) for local duration d fires:
// the first instant the local clock has advanced by d, so a timer never fires early by the
// node's own clock.
func (c *clock) timerAt(t int64, d time.Duration) int64 {
	if d <= 0 {
		return t
	}
	at := c.osc.TrueAt(c.osc.Read(t) + int64(d))
	if at < t {
		at = t
	}
	return at
}

func (c *clock) syncedErr(t int64) int64 {
	since := (t + c.phase) % c.period
	e := c.ttErr0 + int64(float64(since)*c.ttDrift)
	if e > c.eps {
		e = c.eps
	} else if e < -c.eps {
		e = -c.eps
	}
	return e
}

// synced reads the synchronized source. A resync may move its error down; like a real TrueTime
// daemon the reading then holds still rather than going back. Holding keeps it honest: it was
// within ε of an earlier true time, and true time has only moved on since.
func (c *clock) synced(t int64) int64 {
	c.reads++
	v := t + c.syncedErr(t) + c.fault
	if v < c.last {
		return c.last
	}
	c.last = v
	return v
}

func (c *clock) trueTime(t int64) ts.Interval {
	s := c.synced(t)
	return ts.Interval{Earliest: s - c.eps, Latest: s + c.eps}
}
