package spanner

import (
	"time"

	"github.com/meridiandb/meridian/internal/storage"
)

// decidedTxns remembers, for a bounded time, the transactions whose decision a participant
// applied, so that a late copy of one of their requests is not taken for a new transaction.
// The decision deletes the transaction's state, and the network may deliver a ReadReq, WriteReq,
// OpsReq or PrepareReq twice, the copy up to its delay bound late; found under no name, a copy
// of a first request (Seen 0) was admitted as a fresh transaction that no coordinator drives,
// its locks (a prepare's intents too) held until the idle timeout (or the poll) freed them, and
// every conflicting transaction queued behind them: with 10% of messages duplicated up to 100
// ms late, list-append's commits fell from 786 to 80, p90 latency 5 s. It is the participant's
// twin of the coordinator's txnkit.EndedTxns.
//
// Transaction ids do not help here: a coordinator hands them out in order, but its transactions
// end in any order, so no watermark tells an ended one from one not begun here yet.
//
// An entry lasts the idle timeout: a participant already takes a coordinator silent that long
// for gone, and a copy delayed longer than that is not expected (a copy that late would cost
// what it cost before, locks held for an idle timeout). So the memory is the decisions of one
// idle timeout, swept as entries are added and looked up (no timer: a timer per decision would
// add events to every trace). A restarted participant forgets them all, as it forgets every
// unprepared transaction.
type decidedTxns struct {
	at    map[storage.TxnID]int64 // local clock at the newest decision
	order []decidedEntry          // decisions in the order applied (so by time); may hold stale entries
	head  int                     // order[:head] are swept
}

type decidedEntry struct {
	id storage.TxnID
	at int64
}

// add remembers that id was decided at now.
func (d *decidedTxns) add(id storage.TxnID, now int64, keep time.Duration) {
	if d.at == nil {
		d.at = map[storage.TxnID]int64{}
	}
	d.sweep(now, keep)
	d.at[id] = now
	d.order = append(d.order, decidedEntry{id, now})
}

// has reports whether id was decided within keep of now.
func (d *decidedTxns) has(id storage.TxnID, now int64, keep time.Duration) bool {
	d.sweep(now, keep)
	_, ok := d.at[id]
	return ok
}

// sweep forgets the decisions older than keep, a prefix of order as the local clock runs
// forward (one that ran back would only keep some longer).
func (d *decidedTxns) sweep(now int64, keep time.Duration) {
	for d.head < len(d.order) && now-d.order[d.head].at > int64(keep) {
		e := d.order[d.head]
		if d.at[e.id] == e.at { // not decided again since (a duplicated decision)
			delete(d.at, e.id)
		}
		d.head++
	}
	if d.head > 0 && d.head >= len(d.order)/2 {
		d.order = append(d.order[:0], d.order[d.head:]...)
		d.head = 0
	}
}

// Len is the number of decisions remembered (tests).
func (d *decidedTxns) Len() int { return len(d.at) }
