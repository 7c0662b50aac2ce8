package txnkit

import (
	"time"

	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/ts"
)

// RetryAges keeps a coordinator's client transaction ages (their priority under wound-wait,
// wait-die, or a deadlock detector's choice of victim) across retries, so that a retried
// transaction grows older and is not starved. A client retries at its coordinator right after
// an abort (ClientRequest.Attempt > 0), after a backoff of at most 100ms (client.RunTxn) or
// 50ms (the bench driver), and no session end ever reaches the coordinator; so an age is kept
// only from an abort to the client's next begin, and for an idle timeout at most (Expire).
// What is held is then bounded by the clients that aborted recently, not by every client
// endpoint ever seen: a client that redials is a new endpoint, and the real runtime's endpoint
// ids keep changing across a node's lives.
//
// A client whose retry comes later than that, or after a coordinator restart, starts with a
// fresh age. The zero value (a nil map) is ready to use; len gives the number of ages kept.
type RetryAges map[topo.NodeID]retryAge

type retryAge struct {
	age     ts.Timestamp
	abortAt int64 // coordinator's local clock at the abort
}

// Begin returns the age of the transaction client begins now: for a retry (attempt > 0) the
// age its aborted attempt left, if still kept, and otherwise fresh. Either way the client's
// entry goes: the running transaction carries its age, and leaves it again only if it too
// aborts. A commit, or an unknown outcome (which clients do not retry), so leaves nothing.
func (r *RetryAges) Begin(client topo.NodeID, attempt uint32, fresh ts.Timestamp) ts.Timestamp {
	k, ok := (*r)[client]
	if !ok {
		return fresh
	}
	delete(*r, client)
	if attempt > 0 {
		return k.age
	}
	return fresh
}

// Aborted keeps the age of client's transaction that aborted at now (local clock) for its
// retry. It must run before the client can hear of the abort, so that the retry finds it.
func (r *RetryAges) Aborted(client topo.NodeID, age ts.Timestamp, now int64) {
	if *r == nil {
		*r = RetryAges{}
	}
	(*r)[client] = retryAge{age: age, abortAt: now}
}

// Expire forgets the ages of clients that have not retried within idle of their abort: a
// coordinator takes a client silent that long inside a transaction for gone, and retries
// follow an abort within a backoff. The caller runs it periodically.
func (r *RetryAges) Expire(now int64, idle time.Duration) {
	for c, k := range *r { // each entry is judged alone: the order is moot
		if now-k.abortAt > int64(idle) {
			delete(*r, c)
		}
	}
}

// Len is the number of ages kept.
func (r RetryAges) Len() int { return len(r) }
