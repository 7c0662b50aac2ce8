package runtime

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/meridiandb/meridian/internal/node"
	"github.com/meridiandb/meridian/internal/runtime/frame"
	"github.com/meridiandb/meridian/internal/storage/durable"
	"github.com/meridiandb/meridian/internal/topo"
)

// Client endpoint ids must not come back while anything may still be addressed to their last
// holder. Protocols key a client's transactions by endpoint (txnkit.ClientTxn; the serial
// protocol's server keeps each transaction's endpoint and answers it through its host), and a
// client matches a reply only by (Txn, Seq), which every client counts from 1: a new connection
// given an id that a held reply, an in-flight message or another node's transaction still names
// would be handed what was meant for the old one. A counter kept in memory started again at
// each restart, and gave the clients of a node's new life the ids of its last, which other
// nodes may still hold while the host is down and after.
//
// So a node numbers its connections by a sequence that survives restarts: before it hands out a
// number, the end of a block of endpointBlock numbers holding it is durable under endpointKey,
// and a new life starts at the end the last one persisted (numbers reserved but not handed out
// are skipped, so a crash never needs to persist anything). An id is its number modulo
// frame.ClientCounters: it comes back only after every other id has been handed out since, over
// all the node's lives, and is skipped while a connection still holds it.
var endpointKey = []byte("runtime/endpoints")

// endpointBlock is how many numbers one durable write reserves: a life that crashes at once
// spends a block, so a node cycles through its ids only after ClientCounters/endpointBlock
// (1,024) lives that served a client, while a burst of connections waits for one sync per
// endpointBlock of them.
const endpointBlock = 256

// maxEndpointSeq bounds a persisted sequence number: anything larger is a corrupt record (a node
// would need centuries of connections to reach it), and taking it would let the sequence wrap.
const maxEndpointSeq = 1 << 62

// endpointSeq is a node's connection sequence.
type endpointSeq struct {
	mu    sync.Mutex
	next  uint64 // number of the next connection
	limit uint64 // end of the reserved block: next must not reach it before another is durable
}

// loadEndpointSeq returns the first number the node's earlier lives did not reserve.
func loadEndpointSeq(d node.Durable) (uint64, error) {
	var val []byte
	found := false
	if err := d.Scan(endpointKey, append(append([]byte(nil), endpointKey...), 0), func(_, v []byte) bool {
		val, found = append([]byte(nil), v...), true
		return false
	}); err != nil {
		return 0, fmt.Errorf("read client endpoint sequence: %w", err)
	}
	if !found {
		return 0, nil
	}
	if len(val) != 8 {
		return 0, fmt.Errorf("bad client endpoint sequence record %q (%d bytes, want 8)", endpointKey, len(val))
	}
	seq := binary.BigEndian.Uint64(val)
	if seq > maxEndpointSeq {
		return 0, fmt.Errorf("bad client endpoint sequence record %q: %d exceeds %d", endpointKey, seq, uint64(maxEndpointSeq))
	}
	return seq, nil
}

// newClientID numbers a new client connection. It blocks while a block is being reserved, so it
// runs on the connection's goroutine, never on the event loop.
func (s *Server) newClientID() (topo.NodeID, error) {
	e := &s.endpoints
	e.mu.Lock()
	defer e.mu.Unlock()
	for range frame.ClientCounters {
		if e.next >= e.limit {
			if err := s.reserveEndpoints(e.next + endpointBlock); err != nil {
				return 0, err
			}
			e.limit = e.next + endpointBlock
		}
		id := frame.ClientID(s.id, uint32(e.next%frame.ClientCounters))
		e.next++
		if !s.hasClient(id) {
			return id, nil
		}
	}
	return 0, fmt.Errorf("node %s: all %d client endpoint ids are held by open connections", s.me.Name, frame.ClientCounters)
}

// reserveEndpoints makes end the first number the node's next life may hand out, and waits until
// that is durable.
func (s *Server) reserveEndpoints(end uint64) error {
	done := make(chan error, 1)
	s.committer.Submit([]node.Write{{Key: endpointKey, Value: binary.BigEndian.AppendUint64(nil, end)}},
		func(err error) { done <- err })
	if err := <-done; err != nil {
		if !errors.Is(err, durable.ErrClosed) {
			// As for any persist: durability is gone, so the node stops.
			s.fail(fmt.Errorf("persist client endpoint sequence: %w", err))
		}
		return fmt.Errorf("node %s cannot number a new client connection: %w", s.me.Name, err)
	}
	return nil
}

func (s *Server) hasClient(id topo.NodeID) bool {
	s.clientsMu.Lock()
	defer s.clientsMu.Unlock()
	return s.clients[id] != nil
}
