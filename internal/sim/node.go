package sim

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/meridiandb/meridian/internal/node"
	"github.com/meridiandb/meridian/internal/storage/durable"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/ts"
	"github.com/meridiandb/meridian/internal/wire"
)

// work is one item on a node's CPU queue: a message or a callback.
type work struct {
	from topo.NodeID
	msg  wire.Msg
	fn   func()
}

type outMsg struct {
	to  int32
	msg wire.Msg
}

type pendingPersist struct {
	batch []node.Write
	done  func()
}

// simNode hosts one protocol handler and implements node.Env for it.
type simNode struct {
	sim    *Sim
	id     topo.NodeID
	region topo.RegionID
	roles  topo.Role
	h      node.Handler
	clock  *clock
	rng    *rand.Rand
	disk   *durable.Mem
	inc    uint32 // incarnation: bumped on crash so stale timers and flushes are ignored
	down   bool
	failed bool // stopped for good: its store refused a write (Sim.diskRefused)

	queue       []work
	qhead       int
	busyUntil   []int64 // per core: virtual time its current work ends
	wakePending bool    // an evCoreFree is scheduled
	running     bool    // inside a handler: sends are buffered until its work ends
	charge      int64
	outbox      []outMsg

	timers    map[node.TimerID]func()
	nextTimer node.TimerID

	diskQueue []pendingPersist
	// inFlight holds the flushes under way (one, unless ParallelFlushes), oldest first, each
	// the batches queued when it started. Every flush takes FlushLatency, so they complete in
	// the order they started.
	inFlight [][]pendingPersist
}

func (n *simNode) start() error {
	h, err := n.sim.cfg.Protocol.NewNode(node.Config{Env: n, Durable: n.disk, Options: n.sim.cfg.Options})
	if err != nil {
		return fmt.Errorf("node %d: %w", n.id, err)
	}
	n.h = h
	return nil
}

func (n *simNode) crash() {
	if n.down {
		return
	}
	n.down = true
	n.inc++
	n.queue, n.qhead = nil, 0
	n.timers = map[node.TimerID]func(){}
	n.diskQueue, n.inFlight = nil, nil
	for i := range n.busyUntil {
		n.busyUntil[i] = 0
	}
	n.wakePending = false
}

func (n *simNode) restart() error {
	if !n.down {
		return fmt.Errorf("sim: node %d is not down", n.id)
	}
	n.down = false
	if err := n.start(); err != nil {
		// A node that cannot rebuild itself stays down: up, it would run its crashed life's
		// handler, and whatever the failed start set in motion (timers, persists) must not
		// reach the next one.
		n.crash()
		return err
	}
	return nil
}

func (n *simNode) enqueue(w work) {
	if n.down {
		n.sim.stats.Dropped++
		return
	}
	if n.serviceTime() == 0 && !n.running {
		// No CPU model: run at once, sends leave now.
		n.run(w)
		n.flushOutbox(n.sim.now)
		return
	}
	n.queue = append(n.queue, w)
	n.dispatch()
}

// dispatch starts queued work on cores that are free now. A core's busy time is a number, not
// an event: an event is scheduled only when work is left waiting, for the moment the first core
// frees up. Lightly loaded nodes (most of them, most of the time) thus cost one event per
// message instead of two.
func (n *simNode) dispatch() {
	now := n.sim.now
	for n.qhead < len(n.queue) {
		c := n.freeCore(now)
		if c < 0 {
			n.wakeAtFreeCore()
			return
		}
		w := n.queue[n.qhead]
		n.queue[n.qhead] = work{}
		n.qhead++
		if n.qhead == len(n.queue) {
			n.queue, n.qhead = n.queue[:0], 0
		}
		n.charge = 0
		n.run(w)
		end := now + int64(n.serviceTime()) + n.charge
		n.flushOutbox(end)
		n.busyUntil[c] = end
	}
}

// serviceTime is the CPU cost of one piece of work on this node.
func (n *simNode) serviceTime() time.Duration {
	if n.roles&topo.RoleOracle != 0 && n.sim.cfg.OracleServiceTime > 0 {
		return n.sim.cfg.OracleServiceTime
	}
	return n.sim.cfg.ServiceTime
}

// freeCore returns a core idle at now, or -1.
func (n *simNode) freeCore(now int64) int {
	for c, b := range n.busyUntil {
		if b <= now {
			return c
		}
	}
	return -1
}

// wakeAtFreeCore schedules one wake-up for when the earliest core frees, unless one is pending.
func (n *simNode) wakeAtFreeCore() {
	if n.wakePending {
		return
	}
	at := n.busyUntil[0]
	for _, b := range n.busyUntil[1:] {
		at = min(at, b)
	}
	n.wakePending = true
	n.sim.schedule(event{at: at, kind: evCoreFree, to: int32(n.id), inc: n.inc})
}

func (n *simNode) coreFree(_ int, inc uint32) {
	if inc != n.inc || n.down {
		return
	}
	n.wakePending = false
	n.dispatch()
}

func (n *simNode) run(w work) {
	n.running = true
	if w.fn != nil {
		w.fn()
	} else {
		n.h.Handle(w.from, w.msg)
	}
	n.running = false
}

func (n *simNode) flushOutbox(depart int64) {
	for _, o := range n.outbox {
		n.sim.send(int32(n.id), o.to, o.msg, depart)
	}
	for i := range n.outbox {
		n.outbox[i] = outMsg{}
	}
	n.outbox = n.outbox[:0]
}

// --- node.Env ---

func (n *simNode) Self() topo.NodeID        { return n.id }
func (n *simNode) Topology() *topo.Topology { return n.sim.cfg.Topology }
func (n *simNode) Rand() *rand.Rand         { return n.rng }
func (n *simNode) TrueTime() ts.Interval    { return n.clock.trueTime(n.sim.now) }
func (n *simNode) Charge(d time.Duration)   { n.charge += int64(d) }
func (n *simNode) Cancel(id node.TimerID) {
	if _, ok := n.timers[id]; ok {
		delete(n.timers, id)
		n.sim.noteStale()
	}
}
func (n *simNode) Send(to node.ID, m wire.Msg) {
	if n.running {
		n.outbox = append(n.outbox, outMsg{to: int32(to), msg: m})
		return
	}
	n.sim.send(int32(n.id), int32(to), m, n.sim.now)
}

// Now reads the local oscillator; TTC oracle nodes read their synchronized source instead.
func (n *simNode) Now() int64 {
	if n.roles&topo.RoleOracle != 0 {
		return n.clock.synced(n.sim.now)
	}
	return n.clock.local(n.sim.now)
}

// Elapsed reads the local oscillator without the injected clock faults (SkewClock), which model
// a clock stepped: timers run on it too.
func (n *simNode) Elapsed() int64 { return n.clock.elapsed(n.sim.now) }

func (n *simNode) After(d time.Duration, fn func()) node.TimerID {
	n.nextTimer++
	id := n.nextTimer
	n.timers[id] = fn
	n.sim.schedule(event{at: n.clock.timerAt(n.sim.now, d), kind: evTimer, to: int32(n.id), token: uint64(id), inc: n.inc})
	return id
}

func (n *simNode) Persist(batch []node.Write, done func()) {
	n.diskQueue = append(n.diskQueue, pendingPersist{batch: batch, done: done})
	if n.canFlush() {
		n.startFlush()
	}
}

// canFlush reports whether another flush may start: with ParallelFlushes always, else only
// when none is under way.
func (n *simNode) canFlush() bool {
	return n.sim.cfg.ParallelFlushes || len(n.inFlight) == 0
}

// startFlush group-commits everything queued so far.
func (n *simNode) startFlush() {
	n.inFlight = append(n.inFlight, n.diskQueue)
	n.diskQueue = nil
	n.sim.stats.Flushes++
	n.sim.schedule(event{at: n.sim.now + int64(n.sim.cfg.FlushLatency), kind: evFlushDone, to: int32(n.id), inc: n.inc})
}

func (n *simNode) flushDone(inc uint32) {
	if inc != n.inc || n.down {
		return
	}
	done := n.inFlight[0]
	n.inFlight[0] = nil
	n.inFlight = n.inFlight[1:]
	for _, p := range done {
		// A batch the store refuses (a key or value over its bounds) stops a real node, before
		// any answer that depends on it goes out; so it stops this one, crashed for good, and
		// the run reports it (DiskError). Acknowledged as if stored, it was lost to the next
		// crash (review: a spanner read vote of 2.4 MB).
		err := durable.ValidateBatch(p.batch)
		if err == nil && !n.sim.cfg.DiscardPersisted {
			err = n.disk.Apply(p.batch)
		}
		if err != nil {
			n.sim.diskRefused(n.id, err)
			return
		}
		n.sim.stats.PersistedKeys += uint64(len(p.batch))
	}
	// One flush completes once: its callbacks run, in issue order, as one piece of work (one
	// completion to handle), not as one queued item each.
	var fns []func()
	for _, p := range done {
		if p.done != nil {
			fns = append(fns, p.done)
		}
	}
	if len(fns) > 0 {
		n.enqueue(work{fn: func() {
			for _, fn := range fns {
				fn()
			}
		}})
	}
	// The completions may have run already (a free core runs them at once) and persisted,
	// starting the next flush themselves; starting another here would run a second flush at once on a disk that runs one.
	if n.canFlush() && len(n.diskQueue) > 0 {
		n.startFlush()
	}
}
