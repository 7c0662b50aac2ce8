// Package node defines the sans-IO contract between a protocol and the runtime that hosts it.
//
// A protocol's server logic is a Handler: it reacts to messages (Handle) and to the callbacks it
// registered (timers, persist completions). It never does I/O itself. Everything it needs from
// the outside world comes through Env: the node's own clock reading, sending, timers, durable
// persistence with a completion callback, and a seeded random source.
//
// The runtime promises, and protocols may rely on:
//   - all calls into a Handler and all callbacks run on one logical thread, one at a time;
//   - a persist callback runs only after the batch is durable (it survives a crash of the node);
//   - a timer set for d fires no earlier than d as measured by the node's own clock;
//   - messages between two endpoints are delivered at most once per send unless the
//     runtime's fault model duplicates them (protocols must tolerate duplicates and loss).
//
// The protocol promises, and the simulator checks through determinism of its trace digest:
// no time.Now, no goroutines, no dependence on Go map iteration order, randomness only from
// Env.Rand.
package node

import (
	"math/rand/v2"
	"time"

	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/ts"
	"github.com/meridiandb/meridian/internal/wire"
)

// ID names an endpoint (server node or client).
type ID = topo.NodeID

// TimerID identifies a pending timer so it can be cancelled.
type TimerID uint64

// Write is one entry of a persist batch: a key/value put, or a delete.
type Write struct {
	Key    []byte
	Value  []byte
	Delete bool
}

// Durable is the read side of a node's durable state, handed to a node when it (re)starts.
type Durable interface {
	// Scan calls fn for every key in [start, end) in ascending order, stopping early if fn
	// returns false. A nil end means "to the end".
	Scan(start, end []byte, fn func(key, value []byte) bool) error
}

// Env is what a node may ask of its runtime.
type Env interface {
	// Self is this node's id.
	Self() ID
	// Topology is the deployment this node belongs to.
	Topology() *topo.Topology
	// Now reads the node's local physical clock in nanoseconds. It may be offset from true time
	// and drift; protocols use it only as the papers allow.
	Now() int64
	// Elapsed reads a clock for measuring spans of time on this node: it drifts within the bound
	// as Now does, but is never stepped (the simulator's clock faults and the runtime's clock
	// steps move Now, and a real wall clock may be stepped by NTP). Its origin is arbitrary; use
	// it only for differences between its own readings. A protocol that times a commit wait or a
	// lease with Now lets a clock step within ε shorten it (review: K2's commit wait).
	Elapsed() int64
	// TrueTime returns an interval guaranteed (outside clock-fault experiments) to contain true
	// time: Spanner's TT.now(). K2 nodes instead ask their region's oracle over the network.
	TrueTime() ts.Interval
	// Send queues m for delivery to another endpoint.
	Send(to ID, m wire.Msg)
	// After calls fn once d has elapsed on the local clock.
	After(d time.Duration, fn func()) TimerID
	// Cancel stops a pending timer; cancelling a fired or unknown timer is a no-op.
	Cancel(id TimerID)
	// Persist durably applies a batch, then calls done. Batches complete in the order issued.
	// done may be nil.
	Persist(batch []Write, done func())
	// Rand is the node's seeded random source.
	Rand() *rand.Rand
	// Charge adds CPU time to the message being handled (beyond the runtime's per-message cost),
	// so expensive operations (scans, large batches) queue like they would on a real core.
	Charge(d time.Duration)
}

// Handler is a protocol's logic on one node.
type Handler interface {
	// Handle processes one message from another endpoint.
	Handle(from ID, m wire.Msg)
}

// Config carries a node's construction parameters.
type Config struct {
	Env     Env
	Durable Durable           // what was persisted before this (re)start; empty on first start
	Options map[string]string // protocol options, validated by the protocol
}
