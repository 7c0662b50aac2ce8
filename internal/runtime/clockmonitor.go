package runtime

import (
	"fmt"
	"sync"
	"time"

	"github.com/meridiandb/meridian/internal/protocol"
	"github.com/meridiandb/meridian/internal/runtime/frame"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/wire"
)

// A protocol that trusts the nodes' clocks to stay within a bound of each other
// (protocol.ClockBounded: crdb's max-offset) breaks its promise silently when one leaves it: a
// read whose uncertainty interval misses a write goes stale, and nothing in the protocol can
// tell. So each data node measures its clock against every other data node's, as a CockroachDB
// node does, and stops once its clock is off by more than clockTolerance of the bound from
// more than half of its peers: a node down is the failure the protocols tolerate, a node
// serving with a clock they cannot trust is not.
//
// A measurement is a ping carrying the sender's monotonic time and a pong carrying the peer's
// clock reading (env.Now, so configured offsets and clock steps count). The peer read its clock
// somewhere within the round trip, so the offset is known to within half of it: a peer counts
// as beyond the bound only if it is beyond it by more than that.

const (
	// clockPingEvery is how often a node measures each peer.
	clockPingEvery = time.Second
	// clockSampleLife is how long a measurement counts: a peer that has not answered since (down,
	// or cut off) is left out of the vote.
	clockSampleLife = 10 * time.Second
	// clockTolerance is the share of the protocol's bound a node may be off before it stops, so
	// that it stops before the bound is crossed (CockroachDB stops at 80% of max-offset).
	clockTolerance = 0.8
)

// clockMonitor holds a node's latest measurement of each peer's clock.
type clockMonitor struct {
	bound     time.Duration // the protocol's
	tolerated time.Duration // clockTolerance of bound
	names     func(topo.NodeID) string
	// peers is how many other data nodes the cluster has. The vote is over all of them, not
	// only those measured so far: a node that had heard from one peer, whose clock was the bad
	// one, would otherwise stop for it. With one peer there is no majority to tell whose clock
	// is off (whichever node measured first would stop, often the good one, and the other then
	// has no one left to measure), so the node says so in its log and keeps serving.
	peers int
	// warned is set once the node has logged that it cannot tell whose clock is off, until its
	// peer's clock is within the bound again.
	warned  bool
	mu      sync.Mutex
	samples map[topo.NodeID]clockSample
	asked   map[topo.NodeID]clockPing // each peer's unanswered ping
}

// clockPing is a ping awaiting its pong. The pong must echo its sent: one that answers a ping
// of another life of this node (held in a slowed link past a restart) or a ping given up on
// measures a round trip other than the one its Sent suggests, and is ignored.
type clockPing struct {
	at   time.Time // when it went out
	sent int64     // its Sent
}

type clockSample struct {
	offset      time.Duration // the peer's clock minus ours
	uncertainty time.Duration // half the round trip
	at          time.Time
}

// clockBound is the bound cfg's protocol puts on how far apart the nodes' clocks may be, or 0
// when it puts none.
func clockBound(cfg *Config) time.Duration {
	cb, ok := cfg.Protocol.(protocol.ClockBounded)
	if !ok {
		return 0
	}
	return cb.ClockBound(cfg.Options)
}

func newClockMonitor(bound time.Duration, peers int, names func(topo.NodeID) string) *clockMonitor {
	return &clockMonitor{bound: bound, tolerated: time.Duration(float64(bound) * clockTolerance), peers: peers, names: names,
		samples: map[topo.NodeID]clockSample{}, asked: map[topo.NodeID]clockPing{}}
}

// dataPeers counts the data nodes of cfg other than self.
func dataPeers(cfg *Config, self topo.NodeID) int {
	n := 0
	for _, nc := range cfg.Nodes {
		if nc.ID != self && nc.Roles&topo.RoleData != 0 {
			n++
		}
	}
	return n
}

// monitorClock pings every other data node each clockPingEvery until the node stops.
func (s *Server) monitorClock() {
	s.every(clockPingEvery, func() bool { s.pingPeers(); return true })
}

func (s *Server) pingPeers() {
	now := time.Now()
	for _, n := range s.cfg.Nodes {
		if n.ID == s.id || n.Roles&topo.RoleData == 0 || s.cutFrom(n.ID) || s.peers[n.ID].unreachable.Load() {
			continue // a peer that is down is measured again once it is back and has pinged us
		}
		s.clocks.mu.Lock()
		if p, waiting := s.clocks.asked[n.ID]; waiting && now.Sub(p.at) < clockSampleLife {
			s.clocks.mu.Unlock()
			continue // one ping at a time to a peer that is slow to answer, or down
		}
		sent := int64(time.Since(s.startMono))
		s.clocks.asked[n.ID] = clockPing{at: now, sent: sent}
		s.clocks.mu.Unlock()
		if payload, err := wire.Encode(&frame.ClockPing{Sent: sent}); err == nil {
			s.peers[n.ID].enqueue(n.ID, payload)
		}
	}
}

// onClockPing answers a peer's ping with this node's clock.
func (s *Server) onClockPing(from topo.NodeID, m *frame.ClockPing) {
	if payload, err := wire.Encode(&frame.ClockPong{Sent: m.Sent, Clock: (*env)(s).Now()}); err == nil {
		s.peers[from].enqueue(from, payload)
	}
}

// onClockPong records a peer's clock and stops the node if its clock is beyond the bound from
// most of its peers.
func (s *Server) onClockPong(from topo.NodeID, m *frame.ClockPong) {
	ours := (*env)(s).Now()
	rtt := time.Since(s.startMono) - time.Duration(m.Sent)
	if s.clocks == nil || rtt < 0 || s.stopping() {
		return // stopping: one "node stopping" line, not one per pong still in flight
	}
	s.clocks.mu.Lock()
	p, waiting := s.clocks.asked[from]
	s.clocks.mu.Unlock()
	if !waiting || p.sent != m.Sent {
		return // not the answer to this life's outstanding ping
	}
	half := rtt / 2
	sample := clockSample{offset: time.Duration(m.Clock - (ours - int64(half))), uncertainty: half, at: time.Now()}
	switch stop, err := s.clocks.record(from, sample); {
	case stop:
		s.fail(err)
	case err != nil:
		s.log.Error("clock offset beyond the protocol's bound", "err", err)
	}
}

// record adds a measurement. It returns an error when this node's clock is now beyond the
// tolerated offset from more than half of its peers, each measured within clockSampleLife, and
// stop when the node must stop for it: with one peer it cannot tell whose clock is off, and the
// error is only said, once an episode. With peers down or cut off, a node may not hear enough
// of them to stop: it stays up, as it would without the monitor.
func (c *clockMonitor) record(from topo.NodeID, sample clockSample) (stop bool, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.asked, from)
	c.samples[from] = sample
	beyond := 0
	var worst time.Duration
	var worstPeer topo.NodeID
	for peer, smp := range c.samples {
		if sample.at.Sub(smp.at) > clockSampleLife {
			continue
		}
		off := smp.offset.Abs()
		if off-smp.uncertainty > c.tolerated {
			beyond++
		}
		if off > worst || (off == worst && peer < worstPeer) {
			worst, worstPeer = off, peer
		}
	}
	if 2*beyond <= c.peers {
		c.warned = false
		return false, nil
	}
	if c.peers < 2 {
		if c.warned {
			return false, nil
		}
		c.warned = true
		return false, fmt.Errorf("clock: this node's clock and its only peer's (%s) are %v apart, more than %v (%.0f%% of the protocol's bound, %v); with two data nodes neither can tell whose clock is wrong, so both keep serving and the protocol could serve stale reads: fix the clocks",
			c.names(worstPeer), worst.Round(time.Microsecond), c.tolerated, 100*clockTolerance, c.bound)
	}
	return true, fmt.Errorf("clock: this node's clock is more than %v (%.0f%% of the protocol's bound, %v) off from %d of its %d peers (furthest: %s, by %v); the protocol could serve stale reads, so the node stops: fix its clock (or raise the bound) and restart it",
		c.tolerated, 100*clockTolerance, c.bound, beyond, c.peers, c.names(worstPeer), worst.Round(time.Microsecond))
}

// ClockOffsets returns the latest measured offset of each peer's clock from this node's (the
// peer's minus ours), for the peers measured within clockSampleLife; nil if the node does not
// measure clocks (its protocol puts no bound on them).
func (s *Server) ClockOffsets() map[topo.NodeID]time.Duration {
	if s.clocks == nil {
		return nil
	}
	s.clocks.mu.Lock()
	defer s.clocks.mu.Unlock()
	out := map[topo.NodeID]time.Duration{}
	for peer, smp := range s.clocks.samples {
		if time.Since(smp.at) <= clockSampleLife {
			out[peer] = smp.offset
		}
	}
	return out
}
