package txnkit

import (
	"slices"

	"github.com/meridiandb/meridian/internal/node"
	"github.com/meridiandb/meridian/internal/storage"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/wire"
)

// What forgetting decided transaction records needs in every protocol that keeps them on a
// node other than the coordinator (K2's recorders, CockroachDB's record holders). When a
// record may go differs between them and stays with each (their gc.go); both ask a
// transaction's coordinator whether it has ended it, since only then can no message of the
// coordinator's about it follow, and that question and its answer are the same.

// IsDataNode reports whether id names a data node of tp: a participant, record holder or
// coordinator named in a message or a transaction id must be one, or the message is malformed.
func IsDataNode(tp *topo.Topology, id topo.NodeID) bool {
	return id >= 0 && int(id) < len(tp.Nodes) && tp.Nodes[id].Roles&topo.RoleData != 0
}

// EndedOf answers a record holder's question to coordinator self: which of txns it has ended.
// Those are its own (the node in the id) that it does not run now (running), including every
// transaction of its earlier lives, none of which a restarted coordinator runs, and any it
// never began.
func EndedOf(self topo.NodeID, txns []storage.TxnID, running func(storage.TxnID) bool) []storage.TxnID {
	var ended []storage.TxnID
	for _, txn := range txns {
		if txn.Coordinator() == int32(self) && !running(txn) {
			ended = append(ended, txn)
		}
	}
	return ended
}

// EndedQueries gathers the transactions a record holder asks their coordinators about, so
// that each coordinator gets one question.
type EndedQueries map[topo.NodeID][]storage.TxnID

// Add asks txn's coordinator about it, unless the id names no data node of tp (no coordinator
// handed it out, and none would answer).
func (q EndedQueries) Add(tp *topo.Topology, txn storage.TxnID) {
	if c := topo.NodeID(txn.Coordinator()); IsDataNode(tp, c) {
		q[c] = append(q[c], txn)
	}
}

// Send sends each coordinator its question, compose(txns), in ascending coordinator order so
// that the send order is deterministic, and returns how many transactions it asked about.
func (q EndedQueries) Send(env node.Env, compose func(txns []storage.TxnID) wire.Msg) int {
	coords := make([]topo.NodeID, 0, len(q))
	for c := range q {
		coords = append(coords, c)
	}
	slices.Sort(coords)
	asked := 0
	for _, c := range coords {
		asked += len(q[c])
		env.Send(c, compose(q[c]))
	}
	return asked
}
