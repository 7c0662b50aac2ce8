package spanner

import (
	"github.com/meridiandb/meridian/internal/storage/durable"
	"github.com/meridiandb/meridian/internal/wire"
)

// maxTxnReadLockBytes bounds what a read-write transaction's shared locks take to record: a
// participant's yes vote stores the keys it read-locked there as one value (readVoteKey) and
// its scans' ranges as another (rangeVote), so that a crash before the decision keeps them. A
// value over durable.MaxValueBytes is refused by the store, and a real node stops on a refused
// write (a transaction of 600 reads of 4,000-byte keys stopped one: review), so a read or scan
// that would take the transaction past half of it is refused, as an over-large write is
// (wire.TxnWritesTooLarge), and the transaction goes on without it.
const maxTxnReadLockBytes = durable.MaxValueBytes / 2

// readLockOverheadBytes is what each locked key or range counts besides its keys: a record's
// length prefixes, with room to spare, so that many tiny keys are bounded too.
const readLockOverheadBytes = 16

// txnReadLocksTooLarge refuses a read or scan that maxTxnReadLockBytes does not admit.
const txnReadLocksTooLarge = "transaction read locks larger than 1 MiB (keys read and ranges scanned): read refused; commit or abort the transaction"

// readLocks counts a read-write transaction's shared locks against maxTxnReadLockBytes at its
// coordinator, each key or scanned range once, whichever participant holds it (so each
// participant's records stay within it too). The zero value is empty.
type readLocks struct {
	total int
	seen  map[string]bool // a key, or a range as start + "\x00" + end
}

// admit reports whether req's reads (a get, an OpBatch's gets, or a scan) keep the transaction
// within maxTxnReadLockBytes. If they do, take counts them: call it only once the request is
// sure to run (its writes admitted too), so that the count stays what is locked. Writes count
// against wire.MaxTxnWriteBytes instead.
func (r *readLocks) admit(req *wire.ClientRequest) (take func(), ok bool) {
	var add []string
	size := 0
	// A batch's keys are distinct (txnkit.Validate), so only earlier requests' count twice.
	note := func(id string, bytes int) {
		if !r.seen[id] {
			add = append(add, id)
			size += bytes + readLockOverheadBytes
		}
	}
	switch req.Op {
	case wire.OpGet:
		note(req.Key, len(req.Key))
	case wire.OpBatch:
		for _, op := range req.Batch {
			if op.Op == wire.OpGet {
				note(op.Key, len(op.Key))
			}
		}
	case wire.OpScan:
		note(req.Key+"\x00"+req.EndKey, len(req.Key)+len(req.EndKey))
	}
	if r.total+size > maxTxnReadLockBytes {
		return nil, false
	}
	return func() {
		if r.seen == nil && len(add) > 0 {
			r.seen = make(map[string]bool)
		}
		for _, id := range add {
			r.seen[id] = true
		}
		r.total += size
	}, true
}
