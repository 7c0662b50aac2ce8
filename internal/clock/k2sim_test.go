package clock

import (
	"container/heap"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/meridiandb/meridian/internal/ts"
)

// testSeeds is the fixed seed list every property test draws from, so runs are deterministic.
func testSeeds(n int) []uint64 {
	out := make([]uint64, n)
	for i := range out {
		out[i] = uint64(i+1) * 0x9E3779B97F4A7C15
	}
	return out
}

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, seed^0xD1B54A32D192ED03)) }

// k2Scenario describes one family of simulated K2-TB deployments: coordinators with drifting
// clocks sharing one or more oracles over a network with random delays and loss.
type k2Scenario struct {
	name         string
	ttl, step    time.Duration
	eps          time.Duration // the oracles' true skew bound
	epsReported  time.Duration // what oracles and coordinators believe ε is (0: = eps)
	maxDrift     float64
	batching     bool
	mutation     BatcherMutation
	coordinators int
	oracles      int
	delayMin     time.Duration // one-way delay to and from the oracle, uniform in [min, max]
	delayMax     time.Duration
	loss         float64       // probability a reply is lost
	execMax      time.Duration // transaction body, uniform in [0, execMax] after the timestamp
	arrivalMean  time.Duration // mean gap between transaction starts at one coordinator
	horizon      time.Duration // transactions start in [0, horizon)
}

// k2Result is what one seed of a scenario produced.
type k2Result struct {
	taken      int
	violations []string
	stamps     []ts.Timestamp
	stats      BatcherStats
}

type simEvent struct {
	at  int64
	seq uint64
	fn  func(now int64)
}

type eventQueue []simEvent

func (q eventQueue) Len() int { return len(q) }
func (q eventQueue) Less(i, j int) bool {
	return q[i].at < q[j].at || (q[i].at == q[j].at && q[i].seq < q[j].seq)
}
func (q eventQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *eventQueue) Push(x any)   { *q = append(*q, x.(simEvent)) }
func (q *eventQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

// k2Sim is one run of a scenario: a discrete-event simulation over true time in nanoseconds.
type k2Sim struct {
	t            *testing.T
	sc           k2Scenario
	r            *rand.Rand
	q            eventQueue
	seq          uint64
	oracleClocks []Physical
	oracles      []Oracle
	coords       []*k2Coord
	res          k2Result
}

type k2Coord struct {
	id    uint32
	clk   Physical
	b     *Batcher
	queue []simTxn // transactions waiting for a timestamp, oldest first
	last  ts.Timestamp
}

type simTxn struct {
	startTrue, startLocal int64
	exec                  int64 // true duration of the body after the timestamp is taken
}

func (s *k2Sim) at(when int64, fn func(now int64)) {
	s.seq++
	heap.Push(&s.q, simEvent{at: when, seq: s.seq, fn: fn})
}

func (s *k2Sim) delay() int64 {
	return int64(s.sc.delayMin) + s.r.Int64N(int64(s.sc.delayMax-s.sc.delayMin)+1)
}

// runK2 simulates sc under one seed and checks K2's Property 4.1, abs(start) < ts < abs(end), for
// every transaction, where end is when both the commit wait (measured on the coordinator's own
// clock from the moment the timestamp was taken) and the transaction body have finished.
func runK2(t *testing.T, sc k2Scenario, seed uint64) k2Result {
	t.Helper()
	s := &k2Sim{t: t, sc: sc, r: newRand(seed)}
	epsRep := sc.epsReported
	if epsRep == 0 {
		epsRep = sc.eps
	}
	for i := range sc.oracles {
		var c Physical
		var err error
		if s.r.IntN(2) == 0 {
			c, err = RandomWithin(s.r, sc.eps, sc.horizon+10*time.Millisecond, sc.maxDrift)
		} else {
			// A drift-free clock anywhere in [−ε, ε], so skews at the very edge get exercised.
			c, err = RandomPhysical(s.r, sc.eps, 0)
		}
		if err != nil {
			t.Fatal(err)
		}
		s.oracleClocks = append(s.oracleClocks, c)
		s.oracles = append(s.oracles, Oracle{ID: uint32(100 + i), Epsilon: epsRep})
	}
	for ci := range sc.coordinators {
		clk, err := RandomPhysical(s.r, time.Millisecond, sc.maxDrift)
		if err != nil {
			t.Fatal(err)
		}
		b, err := NewBatcher(BatcherConfig{
			TTL: sc.ttl, Step: sc.step, Epsilon: epsRep, MaxDrift: sc.maxDrift,
			CoordinatorID: uint32(ci + 1), Batching: sc.batching, Mutation: sc.mutation,
		})
		if err != nil {
			t.Fatal(err)
		}
		c := &k2Coord{id: uint32(ci + 1), clk: clk, b: b}
		s.coords = append(s.coords, c)
		for start := s.r.Int64N(int64(sc.arrivalMean)); start < int64(sc.horizon); start += 1 + s.r.Int64N(2*int64(sc.arrivalMean)) {
			tx := simTxn{startTrue: start, exec: s.r.Int64N(int64(sc.execMax) + 1)}
			s.at(start, func(now int64) { s.begin(c, tx, now) })
		}
	}
	// Every event is either a transaction start, a message, or a retry timer that is only set
	// while transactions wait, so the run ends; the bound guards against a harness bug.
	for steps := 0; s.q.Len() > 0; steps++ {
		if steps > 50_000_000 {
			t.Fatalf("%s seed %#x: simulation does not terminate", sc.name, seed)
		}
		e := heap.Pop(&s.q).(simEvent)
		e.fn(e.at)
	}
	for _, c := range s.coords {
		if len(c.queue) > 0 {
			t.Fatalf("%s seed %#x: coordinator %d ended with %d transactions still waiting", sc.name, seed, c.id, len(c.queue))
		}
		s.res.stats = addStats(s.res.stats, c.b.Stats())
	}
	return s.res
}

func (s *k2Sim) begin(c *k2Coord, tx simTxn, now int64) {
	tx.startLocal = c.clk.Read(now)
	c.queue = append(c.queue, tx)
	s.serve(c, now)
}

// serve hands timestamps to waiting transactions, oldest first, then asks for more if needed.
func (s *k2Sim) serve(c *k2Coord, now int64) {
	local := c.clk.Read(now)
	kept := c.queue[:0]
	for _, tx := range c.queue {
		if stamp, cwt, ok := c.b.Take(tx.startLocal, local); ok {
			s.finish(c, tx, now, local, stamp, cwt)
		} else {
			kept = append(kept, tx)
		}
	}
	c.queue = kept
	sent := false
	for c.b.NeedRequest(local, len(c.queue)) {
		req := c.b.StartRequest(local)
		sent = true
		oi := s.r.IntN(len(s.oracles))
		s.at(now+s.delay(), func(now int64) {
			reply := s.oracles[oi].Answer(s.oracleClocks[oi].Read(now), req)
			if s.r.Float64() < s.sc.loss {
				return
			}
			s.at(now+s.delay(), func(now int64) {
				c.b.OnReply(c.clk.Read(now), reply)
				s.serve(c, now)
			})
		})
	}
	if sent {
		// A lost or late reply would strand the waiters: look again once the request timed out.
		s.at(c.clk.TrueAt(local+int64(c.b.RequestTimeout())), func(now int64) {
			if len(c.queue) > 0 {
				s.serve(c, now)
			}
		})
	}
}

func (s *k2Sim) finish(c *k2Coord, tx simTxn, takeTrue, takeLocal int64, stamp ts.Timestamp, cwt time.Duration) {
	end := max(c.clk.TrueAt(takeLocal+int64(cwt)), takeTrue+tx.exec)
	s.res.taken++
	s.res.stamps = append(s.res.stamps, stamp)
	if !c.last.Less(stamp) || stamp.Origin != c.id {
		s.t.Fatalf("%s: coordinator %d handed out %v after %v", s.sc.name, c.id, stamp, c.last)
	}
	c.last = stamp
	if !(tx.startTrue < stamp.Wall && stamp.Wall < end) {
		s.res.violations = append(s.res.violations, fmt.Sprintf(
			"coordinator %d (drift %.6f): start %d, ts %v, end %d, taken at %d",
			c.id, c.clk.Drift, tx.startTrue, stamp, end, takeTrue))
	}
}

func addStats(a, b BatcherStats) BatcherStats {
	a.Taken += b.Taken
	a.Requests += b.Requests
	a.Installed += b.Installed
	a.ExpiredOnArrival += b.ExpiredOnArrival
	a.Ignored += b.Ignored
	a.Bumped += b.Bumped
	return a
}
