package txnkit

import (
	"time"

	"github.com/meridiandb/meridian/internal/node"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/wire"
)

// EndedTxns remembers, per client endpoint, the highest-numbered of its transactions that ended
// at this coordinator, so that a late copy of such a transaction's first request (Seq 0) is not
// taken for a new transaction. The network may deliver a message twice; a copy of a first
// request that arrives while its transaction runs is told apart by the request number, but one
// that arrives after the transaction ended found nothing under its name and began it again: a
// transaction no client drives, holding its locks, intents or serial's global lock until the
// idle timeout, and, if the client's next request of the old transaction came meanwhile (one
// the coordinator should refuse as unknown, AnswerUnheld), running that request in it.
//
// It relies on how clients number their transactions: per endpoint, increasingly, each one's
// first request sent after the previous one ended or was given up (client.DB, and so the
// simulator's clients, the bench driver and the CLI). So a first request numbered at or below
// one that ended is never a new transaction. A client that breaks this rule (two transactions
// of one endpoint interleaved, the earlier one's first request sent after the later one ended)
// has the earlier one refused, retryably: its retry takes a new number.
//
// A client's record goes an idle timeout after its last transaction ended (Expire, and every
// so often Ended): a coordinator takes a client silent that long for gone, and a copy held up
// in the network that long is not expected. A coordinator that restarts forgets them all; its
// clients' connections, and so their endpoint ids, do not survive the restart either. The zero
// value is ready to use.
type EndedTxns struct {
	last map[topo.NodeID]endedTxn
	// sweepAt is the number of records at which Ended expires old ones, so that what is held
	// stays bounded for a coordinator that has no periodic tick to call Expire.
	sweepAt int
}

type endedTxn struct {
	txn uint64 // highest transaction number that ended
	at  int64  // coordinator's local clock at the client's last end
}

// minSweep is the fewest records that make Ended sweep.
const minSweep = 64

// Ended records that k ended at now (local clock): committed, aborted, or dropped. Every so
// often (as the records double) it also expires those older than idle.
func (e *EndedTxns) Ended(k ClientTxn, now int64, idle time.Duration) {
	if e.last == nil {
		e.last = map[topo.NodeID]endedTxn{}
	}
	r := e.last[k.Client]
	e.last[k.Client] = endedTxn{txn: max(r.txn, k.Txn), at: now}
	if len(e.last) >= max(e.sweepAt, minSweep) {
		e.Expire(now, idle)
		e.sweepAt = 2 * len(e.last)
	}
}

// RefuseLateFirst answers req, a request from client to of a transaction the coordinator does
// not hold, if it is a first request (Seq 0) numbered at or below a transaction of that client
// that ended here, and reports whether it did. The answer is a retryable abort, cause
// unknown-transaction, which a client that sent the original has stopped waiting for and
// drops; one that broke the numbering rule retries under a new number. The caller begins
// nothing for it.
func (e *EndedTxns) RefuseLateFirst(env node.Env, to topo.NodeID, req *wire.ClientRequest) bool {
	if req.Seq != 0 {
		return false
	}
	r, ok := e.last[to]
	if !ok || req.Txn > r.txn {
		return false
	}
	Aborted(env, to, req, CauseUnknownTxn)
	return true
}

// Expire forgets the clients none of whose transactions ended within idle of now. The caller
// may run it periodically; Ended runs it too, as the records grow.
func (e *EndedTxns) Expire(now int64, idle time.Duration) {
	for c, r := range e.last { // each entry is judged alone: the order is moot
		if now-r.at > int64(idle) {
			delete(e.last, c)
		}
	}
}

// Len is the number of clients whose last ended transaction is remembered.
func (e *EndedTxns) Len() int { return len(e.last) }
