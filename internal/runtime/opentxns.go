package runtime

import (
	"slices"
	"sync"

	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/wire"
)

// openTxns are the transactions of one client endpoint (a TCP connection, a gRPC stream) that
// are not finished: their last request was neither a commit nor an abort, or their commit was
// refused (answered bad-argument or unavailable: sent before the previous request's answer, or
// failing validation), which leaves the transaction open at its coordinator. When the endpoint
// goes, each is aborted at once (abortOpen): a client that hangs up cannot finish them, and
// they would otherwise hold their locks, intents and records until the coordinator's idle
// timeout. A transaction whose commit is out, or was answered, is left alone: its outcome is
// the protocol's to settle.
//
// saw runs on the endpoint's reading goroutine, answered on whichever goroutine hands the
// endpoint its replies, so the state is behind a mutex.
type openTxns struct {
	mu sync.Mutex
	// next is each unfinished transaction's number for its next request.
	next map[uint64]uint32
	// committing is the commit number of each transaction whose commit is out, not answered.
	committing map[uint64]uint32
}

func newOpenTxns() *openTxns {
	return &openTxns{next: map[uint64]uint32{}, committing: map[uint64]uint32{}}
}

// saw notes a request the endpoint sent.
func (o *openTxns) saw(m *wire.ClientRequest) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if m.Op == wire.OpAbort {
		delete(o.next, m.Txn)
		delete(o.committing, m.Txn)
		return
	}
	if next := m.Seq + 1; next > o.next[m.Txn] {
		o.next[m.Txn] = next
	}
	if m.Op == wire.OpCommit {
		o.committing[m.Txn] = m.Seq
	}
}

// answered notes a reply on its way to the endpoint: the answer to a commit ends its
// transaction unless it refused the commit.
func (o *openTxns) answered(payload []byte) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.committing) == 0 {
		return // nothing to learn; spare the decoding
	}
	m, err := wire.Decode(payload)
	rep, ok := m.(*wire.ClientReply)
	if err != nil || !ok {
		return
	}
	if seq, ok := o.committing[rep.Txn]; !ok || seq != rep.Seq {
		return
	}
	delete(o.committing, rep.Txn)
	switch rep.Code {
	case wire.CodeBadArgument, wire.CodeUnavailable:
		// Refused: the transaction is still open, and the client may send its commit again.
	default:
		delete(o.next, rep.Txn)
	}
}

// abortOpen asks the coordinator to abort every transaction endpoint id left open, as the
// client would have (its answers go nowhere: the endpoint is gone).
func (s *Server) abortOpen(id topo.NodeID, o *openTxns) {
	o.mu.Lock()
	txns := make([]uint64, 0, len(o.next))
	for txn := range o.next {
		if _, out := o.committing[txn]; !out {
			txns = append(txns, txn)
		}
	}
	slices.Sort(txns)
	aborts := make([]*wire.ClientRequest, len(txns))
	for i, txn := range txns {
		aborts[i] = &wire.ClientRequest{Txn: txn, Seq: o.next[txn], Op: wire.OpAbort}
	}
	o.mu.Unlock()
	for _, m := range aborts {
		s.post(event{from: id, msg: m})
	}
}

// watchedSink hands an endpoint's replies to its openTxns on their way.
type watchedSink struct {
	clientSink
	open *openTxns
}

func (w watchedSink) enqueue(dest topo.NodeID, payload []byte) {
	w.open.answered(payload)
	w.clientSink.enqueue(dest, payload)
}
