package txnkit

import (
	"slices"

	"github.com/meridiandb/meridian/internal/node"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/wire"
)

// Outbox batches notes to other nodes (a flush's durability reports, acknowledgements): what is
// added while one piece of work runs goes out once it ends, as one message per destination, in
// ascending destination order so that the send order is deterministic. A flush that makes a
// hundred writes durable thus costs each coordinator one message, not a hundred.
type Outbox[T any] struct {
	env     node.Env
	compose func(notes []T) wire.Msg
	pending map[topo.NodeID][]T
	armed   bool
}

// NewOutbox returns an outbox whose messages compose builds from one destination's notes.
func NewOutbox[T any](env node.Env, compose func(notes []T) wire.Msg) *Outbox[T] {
	return &Outbox[T]{env: env, compose: compose, pending: map[topo.NodeID][]T{}}
}

// Add queues note for to.
func (o *Outbox[T]) Add(to topo.NodeID, note T) {
	o.pending[to] = append(o.pending[to], note)
	if !o.armed {
		o.armed = true
		o.env.After(0, o.send)
	}
}

func (o *Outbox[T]) send() {
	o.armed = false
	dests := make([]topo.NodeID, 0, len(o.pending))
	for d := range o.pending {
		dests = append(dests, d)
	}
	slices.Sort(dests)
	for _, d := range dests {
		o.env.Send(d, o.compose(o.pending[d]))
		delete(o.pending, d)
	}
}
