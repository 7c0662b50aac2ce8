package runtime

import (
	"slices"

	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/wire"
)

// openTxns are the transactions of one client endpoint (a TCP connection, a gRPC stream) whose
// last request was neither a commit nor an abort, each with the number its next request would
// carry. When the endpoint goes, each is aborted at once (abortOpen): a client that hangs up
// cannot finish them, and they would otherwise hold their locks, intents and records until the
// coordinator's idle timeout. A transaction whose commit was sent is left alone: its outcome is
// the protocol's to settle.
type openTxns map[uint64]uint32

// saw notes a request the endpoint sent.
func (o openTxns) saw(m *wire.ClientRequest) {
	if m.Op == wire.OpCommit || m.Op == wire.OpAbort {
		delete(o, m.Txn)
		return
	}
	if next := m.Seq + 1; next > o[m.Txn] {
		o[m.Txn] = next
	}
}

// abortOpen asks the coordinator to abort every transaction endpoint id left open, as the
// client would have (its answers go nowhere: the endpoint is gone).
func (s *Server) abortOpen(id topo.NodeID, o openTxns) {
	txns := make([]uint64, 0, len(o))
	for txn := range o {
		txns = append(txns, txn)
	}
	slices.Sort(txns)
	for _, txn := range txns {
		s.post(event{from: id, msg: &wire.ClientRequest{Txn: txn, Seq: o[txn], Op: wire.OpAbort}})
	}
}
