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
		for notes := o.pending[d]; len(notes) > 0; {
			n := min(len(notes), OutboxMaxNotes)
			o.env.Send(d, o.compose(notes[:n:n]))
			notes = notes[n:]
		}
		delete(o.pending, d)
	}
}

// OutboxMaxNotes bounds the notes of one message: the notes are small and fixed-size (ids and
// sequence numbers), but their number per piece of work is not bounded, and a message must stay
// within a frame (wire.MaxFrameBytes) and the codec's array limit (2^20 elements).
const OutboxMaxNotes = 1 << 16
