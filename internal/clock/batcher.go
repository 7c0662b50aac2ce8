package clock

import (
	"fmt"
	"math"
	"time"

	"github.com/meridiandb/meridian/internal/ts"
)

// BatcherMutation deliberately breaks one K2-TB proof obligation, so that tests of the protocol
// and of the history checker can show that the breakage is caught. Production uses MutationNone.
type BatcherMutation uint8

const (
	// MutationNone is the correct batcher.
	MutationNone BatcherMutation = iota
	// MutationNoCommitWait makes Take return a zero commit wait (obligation 4 of the package doc).
	MutationNoCommitWait
	// MutationTTLWrongDrift lets a batch live TTL·(1+D) on the local clock instead of TTL·(1−D):
	// the drift applied in the wrong direction, so a slow clock overstays the TTL (obligation 2).
	MutationTTLWrongDrift
)

func (m BatcherMutation) String() string {
	switch m {
	case MutationNone:
		return "none"
	case MutationNoCommitWait:
		return "no-commit-wait"
	case MutationTTLWrongDrift:
		return "ttl-wrong-drift"
	}
	return fmt.Sprintf("mutation(%d)", uint8(m))
}

// BatcherConfig configures a K2-TB client (notes/k2.md §2.4, §3.2).
type BatcherConfig struct {
	TTL           time.Duration // batch life, counted on the local clock from the request's send; also the batch's span
	Step          time.Duration // TBNanoSecStep: gap between consecutive timestamps of a batch
	Epsilon       time.Duration // the oracle's ε (half-width of its interval)
	MaxDrift      float64       // D: bound on the local clock's drift rate
	CoordinatorID uint32        // Origin of every timestamp; unique among all K2-TB issuers, a restarted coordinator's new life included
	Batching      bool          // false: the strawman, one oracle request per timestamp
	Mutation      BatcherMutation
}

// K2BatcherConfig returns the paper's setting: TTL = batch span = 100 µs, step 10 ns (10,000
// timestamps per batch), ε = 100 µs, D = 200 ppm, batching on.
func K2BatcherConfig(coordinatorID uint32) BatcherConfig {
	return BatcherConfig{
		TTL:           100 * time.Microsecond,
		Step:          10 * time.Nanosecond,
		Epsilon:       K2TrueTime.Epsilon,
		MaxDrift:      K2TrueTime.MaxDrift,
		CoordinatorID: coordinatorID,
		Batching:      true,
	}
}

// Validate reports a configuration under which K2-TB cannot hand out a timestamp.
func (c BatcherConfig) Validate() error {
	if err := (TrueTimeParams{Epsilon: c.Epsilon, MaxDrift: c.MaxDrift}).Validate(); err != nil {
		return err
	}
	if c.TTL <= 0 {
		return fmt.Errorf("clock: batcher TTL %v must be positive", c.TTL)
	}
	if c.Step <= 0 || c.Step > c.TTL {
		return fmt.Errorf("clock: batcher step %v must be in (0, TTL=%v]", c.Step, c.TTL)
	}
	if c.Mutation > MutationTTLWrongDrift {
		return fmt.Errorf("clock: unknown batcher mutation %d", c.Mutation)
	}
	if LocalExpiry(c.TTL, c.MaxDrift) <= 0 {
		return fmt.Errorf("clock: batcher TTL %v too short for drift %v: no batch would ever be valid", c.TTL, c.MaxDrift)
	}
	return nil
}

// maxInFlight bounds the requests a Batcher remembers, so a coordinator whose oracle never answers
// cannot grow it without limit. A reply to a forgotten request is ignored.
const maxInFlight = 1024

type pendingRequest struct {
	id        uint64
	sentLocal int64
}

// oracleReading is one usable reply: in batching mode the current batch, in the strawman one
// not-yet-used timestamp.
type oracleReading struct {
	up        int64 // T_oracle^up
	sentLocal int64 // local clock when the request was sent
}

// BatcherStats counts what a Batcher did, for metrics.
type BatcherStats struct {
	Taken            uint64 // timestamps handed out
	Requests         uint64 // oracle requests started
	Installed        uint64 // replies turned into a batch (or, in the strawman, a usable timestamp)
	ExpiredOnArrival uint64 // replies that arrived after their TTL: the fetch took too long
	Ignored          uint64 // replies to unknown, forgotten or duplicated requests, or older than the batch in use
	Bumped           uint64 // timestamps whose Logical was raised to stay above the previous one
}

// Batcher is a K2-TB client (notes/k2.md §3.2) inside one coordinator: it turns oracle replies
// into batches of timestamps and hands them out with the commit wait each one needs. It is
// sans-IO: the caller sends the requests it starts, delivers the replies, keeps the queue of
// transactions waiting for a timestamp, and waits out the commit wait on its own clock.
//
// Typical use in a coordinator whose clock reads now:
//
//	t, cwt, ok := b.Take(txnStart, now)
//	if !ok {
//	    queue = append(queue, txn)
//	    for b.NeedRequest(now, len(queue)) {
//	        env.Send(oracle, b.StartRequest(now))
//	    }
//	    // if nothing arrives, call NeedRequest again after b.RequestTimeout()
//	}
//	// on a *TSBatchReply: b.OnReply(now, reply), then Take for each queued transaction in order.
//
// A transaction that took t must not end (reply to its client) until cwt has elapsed on the
// local clock since Take.
//
// Uniqueness: every timestamp has Origin = CoordinatorID, and one Batcher's timestamps strictly
// increase (Logical is bumped when batches overlap), so timestamps of distinct coordinators
// differ in Origin and those of one coordinator differ in (Wall, Logical). A Batcher lives as
// long as its coordinator's memory: a restarted coordinator needs an id its earlier life did not
// use (k2 puts the life's number beside the node's), since its new Batcher may be handed a
// reading no higher than the old one's. The oracle id is not
// part of the timestamp: the paper says it does not influence correctness, and with the
// coordinator id in Origin it would add nothing to uniqueness or to the order, while folding it
// into Origin would halve the id space of both. This is the notes' recommended key
// (ts, oracle_id, coordinator_id, seq) with oracle_id dropped and seq carried by Logical.
type Batcher struct {
	cfg         BatcherConfig
	expiryLocal int64         // a batch is usable while local elapsed since its send is below this
	commitWait  time.Duration // local wait from Take to the transaction's end
	count       int64         // TSCount = TTL / Step
	step        int64

	nextID  uint64
	pending []pendingRequest // ascending by id and by sentLocal, at most maxInFlight
	lastRTT int64            // local time from the latest answered request to its reply

	cur     oracleReading   // batching: the batch in use (valid iff haveCur)
	haveCur bool            //
	used    int64           // batching: timestamps taken from cur
	unused  []oracleReading // strawman: replies not yet handed out, ascending by sentLocal

	last  ts.Timestamp // the previous timestamp handed out; all later ones are above it
	stats BatcherStats
}

// NewBatcher returns a Batcher for cfg.
func NewBatcher(cfg BatcherConfig) (*Batcher, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	b := &Batcher{
		cfg:         cfg,
		expiryLocal: int64(LocalExpiry(cfg.TTL, cfg.MaxDrift)),
		count:       int64(cfg.TTL / cfg.Step),
		step:        int64(cfg.Step),
	}
	if cfg.Batching {
		b.commitWait = LocalWait(2*(cfg.TTL+cfg.Epsilon), cfg.MaxDrift)
	} else {
		b.commitWait = LocalWait(2*cfg.Epsilon, cfg.MaxDrift)
	}
	switch cfg.Mutation {
	case MutationNoCommitWait:
		b.commitWait = 0
	case MutationTTLWrongDrift:
		b.expiryLocal = int64(math.Ceil(float64(cfg.TTL) * (1 + cfg.MaxDrift)))
	}
	return b, nil
}

// Config returns the batcher's configuration.
func (b *Batcher) Config() BatcherConfig { return b.cfg }

// CommitWait returns the local-clock wait every timestamp needs: 2·(TTL+ε)·(1+D) when batching,
// 2ε·(1+D) for the strawman (plus 2 ns of rounding, see LocalWait).
func (b *Batcher) CommitWait() time.Duration { return b.commitWait }

// RequestTimeout is how long, on the local clock, a request counts as in flight. In batching mode
// a reply arriving later is already expired, so waiting longer is pointless.
func (b *Batcher) RequestTimeout() time.Duration { return time.Duration(b.inFlightWindow()) }

// Stats returns the counters.
func (b *Batcher) Stats() BatcherStats { return b.stats }

// Last returns the most recent timestamp handed out (Zero before the first).
func (b *Batcher) Last() ts.Timestamp { return b.last }

// Take returns a timestamp for a transaction that began at local time txnStartLocal, with the
// local commit wait it needs, or ok = false when none can be given yet (queue the transaction).
//
// Batching: the current batch must still be usable (local elapsed since its request was sent
// below LocalExpiry(TTL, D), and not exhausted); txnStartLocal only has to be ≤ localNow.
// Strawman: it takes the oldest unused reply whose request was sent no earlier than
// txnStartLocal, since the strawman's proof needs the transaction to precede the oracle's reading;
// older replies are useless to this and every younger transaction and are dropped, so call Take
// for waiting transactions oldest first (calling out of order costs extra requests, never safety).
func (b *Batcher) Take(txnStartLocal, localNow int64) (t ts.Timestamp, commitWait time.Duration, ok bool) {
	if txnStartLocal > localNow {
		return ts.Zero, 0, false
	}
	var wall int64
	if b.cfg.Batching {
		if !b.batchUsable(localNow) {
			return ts.Zero, 0, false
		}
		wall = b.cur.up + int64(b.cfg.TTL) + b.used*b.step
		b.used++
	} else {
		// A reply whose request was sent before this transaction began cannot serve it, nor
		// any transaction that began later; callers serve waiters oldest first, so drop it.
		i := 0
		for i < len(b.unused) && b.unused[i].sentLocal < txnStartLocal {
			i++
		}
		b.unused = append(b.unused[:0], b.unused[i:]...)
		if len(b.unused) == 0 {
			return ts.Zero, 0, false
		}
		wall = b.unused[0].up
		b.unused = append(b.unused[:0], b.unused[1:]...)
	}
	t = ts.Timestamp{Wall: wall, Origin: b.cfg.CoordinatorID}
	if !b.last.Less(t) {
		if b.last.Logical == math.MaxUint32 {
			// Bumping would carry into Wall, which obligation 3 does not cover. Four billion
			// timestamps on one wall value cannot happen with Step ≥ 1 ns; refuse rather than lie.
			b.haveCur = false
			return ts.Zero, 0, false
		}
		t = ts.Timestamp{Wall: b.last.Wall, Logical: b.last.Logical + 1, Origin: b.cfg.CoordinatorID}
		b.stats.Bumped++
	}
	b.last = t
	b.stats.Taken++
	return t, b.commitWait, true
}

// batchUsable reports whether the current batch may hand out a timestamp at localNow.
func (b *Batcher) batchUsable(localNow int64) bool {
	return b.haveCur && b.used < b.count && b.fresh(b.cur.sentLocal, localNow)
}

// fresh reports whether a request sent at sentLocal is still within its TTL at localNow. A clock
// reading before the send can only come from a caller bug; treat it as expired.
func (b *Batcher) fresh(sentLocal, localNow int64) bool {
	return localNow >= sentLocal && localNow-sentLocal < b.expiryLocal
}

// strawmanRequestTimeout is how long the strawman counts a request as in flight before asking
// again (a guard against lost replies), at least: twice the latest reply's round trip when that
// is longer. A strawman reply is valid whenever it arrives (its timestamp is T_up and the commit
// wait runs from receipt), so unlike a batch it does not expire after TTL; counting it lost after
// TTL made an oracle slower than TTL receive a new request per waiter every TTL, a retry storm
// that collapsed it. A fixed 50 ms did the same once an oracle's queue took longer than that:
// five coordinators of 1,000 waiting transactions each queued 83 ms of requests at their
// region's oracle (8 cores at ~60k requests per second), re-sent them all at 50 ms, and no
// transaction got a timestamp for the next 30 s (repro k2-fig16 --scale paper, the strawman at
// 6,400 clients per region). The window stops at strawmanMaxRequestTimeout: one reply delayed by
// seconds (an oracle paused, or restarted with its queue) would otherwise leave a request lost
// after it unasked-for twice as long, every waiter behind it stalled.
const (
	strawmanRequestTimeout    = 50 * time.Millisecond
	strawmanMaxRequestTimeout = time.Second
)

// inFlightWindow is how long a request counts as in flight.
func (b *Batcher) inFlightWindow() int64 {
	if b.cfg.Batching {
		return b.expiryLocal
	}
	return min(max(int64(strawmanRequestTimeout), 2*b.lastRTT), int64(strawmanMaxRequestTimeout))
}

// InFlight reports how many requests sent within RequestTimeout are still unanswered.
func (b *Batcher) InFlight(localNow int64) int {
	n := 0
	w := b.inFlightWindow()
	for _, p := range b.pending {
		if localNow >= p.sentLocal && localNow-p.sentLocal < w {
			n++
		}
	}
	return n
}

// NeedRequest reports whether, with waiting transactions queued for a timestamp, the caller should
// start one more oracle request now. Call it in a loop (it turns false once enough are in flight):
// in batching mode one request serves every waiter, in the strawman each waiter needs its own.
func (b *Batcher) NeedRequest(localNow int64, waiting int) bool {
	if waiting <= 0 {
		return false
	}
	inFlight := b.InFlight(localNow)
	if inFlight >= maxInFlight {
		return false
	}
	if b.cfg.Batching {
		return inFlight == 0 && !b.batchUsable(localNow)
	}
	return waiting > inFlight+len(b.unused)
}

// NeedPrefetch reports whether the caller should ask for the next batch now, before the current
// one runs out: once half of its TTL has passed (or half of it is used) with no request in
// flight. The new batch's TTL starts at its own request, so asking early costs one request per
// half TTL and keeps timestamps local while the reply travels (K2: ">99.9%" served locally).
func (b *Batcher) NeedPrefetch(localNow int64) bool {
	if !b.cfg.Batching || !b.batchUsable(localNow) || b.InFlight(localNow) > 0 {
		return false
	}
	return localNow-b.cur.sentLocal >= b.expiryLocal/2 || b.used >= b.count/2
}

// NumberRequestsFrom makes the next request's id base+1. A requester that restarts numbers each
// life's requests from a base of its own (its incarnation in the high bits), so that an oracle
// reply to a request of the previous life, arriving after the restart, matches no request of
// this one: taken for a new request's reply, its reading would predate the transactions it
// would stamp, and their timestamps could fall below their start.
func (b *Batcher) NumberRequestsFrom(base uint64) { b.nextID = base }

// StartRequest records that a request is being sent at localNow and returns it. The TTL of the
// batch it brings back runs from this moment (Fig. 5 of K2: TTL starts before the request).
func (b *Batcher) StartRequest(localNow int64) *TSBatchRequest {
	b.nextID++
	if len(b.pending) == maxInFlight {
		b.pending = append(b.pending[:0], b.pending[1:]...)
	}
	b.pending = append(b.pending, pendingRequest{id: b.nextID, sentLocal: localNow})
	b.stats.Requests++
	return &TSBatchRequest{ReqID: b.nextID}
}

// OnReply delivers an oracle reply received at localNow and reports whether it became usable.
// A reply is dropped if its request is unknown or already answered, if it arrived after its TTL
// (batching), or if the batch in use came from a later request.
func (b *Batcher) OnReply(localNow int64, r *TSBatchReply) bool {
	if r == nil {
		b.stats.Ignored++
		return false
	}
	i := 0
	for i < len(b.pending) && b.pending[i].id != r.ReqID {
		i++
	}
	if i == len(b.pending) {
		b.stats.Ignored++
		return false
	}
	sent := b.pending[i].sentLocal
	b.pending = append(b.pending[:i], b.pending[i+1:]...)
	b.lastRTT = max(localNow-sent, 0)
	reading := oracleReading{up: r.Up, sentLocal: sent}
	if !b.cfg.Batching {
		j := len(b.unused)
		for j > 0 && b.unused[j-1].sentLocal > sent {
			j--
		}
		if len(b.unused) == maxInFlight {
			// The caller started far more requests than it takes; forget the oldest reply.
			b.unused = append(b.unused[:0], b.unused[1:]...)
			j = max(j-1, 0)
		}
		b.unused = append(b.unused, oracleReading{})
		copy(b.unused[j+1:], b.unused[j:])
		b.unused[j] = reading
		b.stats.Installed++
		return true
	}
	if !b.fresh(sent, localNow) {
		b.stats.ExpiredOnArrival++
		return false
	}
	if b.batchUsable(localNow) && b.cur.sentLocal >= sent {
		b.stats.Ignored++
		return false
	}
	b.cur, b.haveCur, b.used = reading, true, 0
	b.stats.Installed++
	return true
}
