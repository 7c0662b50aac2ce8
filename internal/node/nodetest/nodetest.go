// Package nodetest provides a node.Env that a test drives by hand, to hand one protocol node an
// exact sequence of messages and see every answer: the clock moves only when the test sets it,
// sends are recorded, timers fire only when the test advances the clock past them, and persists
// complete (in issue order, onto Disk if set) only when the test flushes them.
package nodetest

import (
	"math/rand/v2"
	"slices"
	"time"

	"github.com/meridiandb/meridian/internal/node"
	"github.com/meridiandb/meridian/internal/storage/durable"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/ts"
	"github.com/meridiandb/meridian/internal/wire"
)

// Sent is a message the node sent.
type Sent struct {
	To node.ID
	M  wire.Msg
}

// ScriptEnv is the node.Env. The zero value works: node 0, no topology, time 0.
type ScriptEnv struct {
	ID      node.ID
	Topo    *topo.Topology
	Clock   int64         // what Now returns
	Epsilon time.Duration // TrueTime's half-width around Clock
	Disk    *durable.Mem  // if set, persisted batches land here when flushed

	sent     []Sent
	persists []func()
	lastID   node.TimerID
	timers   []timer // pending, in creation order
}

type timer struct {
	id node.TimerID
	at int64
	fn func()
}

func (e *ScriptEnv) Self() node.ID            { return e.ID }
func (e *ScriptEnv) Topology() *topo.Topology { return e.Topo }
func (e *ScriptEnv) Now() int64               { return e.Clock }
func (e *ScriptEnv) Elapsed() int64           { return e.Clock }
func (e *ScriptEnv) TrueTime() ts.Interval {
	return ts.Interval{Earliest: e.Clock - int64(e.Epsilon), Latest: e.Clock + int64(e.Epsilon)}
}
func (e *ScriptEnv) Send(to node.ID, m wire.Msg) { e.sent = append(e.sent, Sent{to, m}) }

// After fires fn once Advance moves the clock d past now; a test that never advances never sees
// a timer fire.
func (e *ScriptEnv) After(d time.Duration, fn func()) node.TimerID {
	e.lastID++
	e.timers = append(e.timers, timer{id: e.lastID, at: e.Clock + int64(d), fn: fn})
	return e.lastID
}
func (e *ScriptEnv) Cancel(id node.TimerID) {
	e.timers = slices.DeleteFunc(e.timers, func(t timer) bool { return t.id == id })
}

// Advance moves the clock forward by d, firing every timer due on the way (also those the fired
// ones set) in deadline order, ties in creation order, with the clock at each one's deadline.
func (e *ScriptEnv) Advance(d time.Duration) {
	end := e.Clock + int64(d)
	for {
		next := -1
		for i, t := range e.timers {
			if t.at <= end && (next < 0 || t.at < e.timers[next].at) {
				next = i
			}
		}
		if next < 0 {
			break
		}
		t := e.timers[next]
		e.timers = slices.Delete(e.timers, next, next+1)
		e.Clock = max(e.Clock, t.at)
		t.fn()
	}
	e.Clock = end
}
func (e *ScriptEnv) Persist(batch []node.Write, done func()) {
	e.persists = append(e.persists, func() {
		if e.Disk != nil {
			if err := e.Disk.Apply(batch); err != nil {
				panic(err) // a test's own in-memory disk: nothing to report it to
			}
		}
		if done != nil {
			done()
		}
	})
}
func (e *ScriptEnv) Rand() *rand.Rand     { return rand.New(rand.NewPCG(1, 2)) }
func (e *ScriptEnv) Charge(time.Duration) {}

// Flush completes every persist issued so far, and those their completions issue, in order.
func (e *ScriptEnv) Flush() {
	for len(e.persists) > 0 {
		f := e.persists[0]
		e.persists = e.persists[1:]
		f()
	}
}

// Take returns and forgets what was sent since the last call.
func (e *ScriptEnv) Take() []Sent {
	s := e.sent
	e.sent = nil
	return s
}
