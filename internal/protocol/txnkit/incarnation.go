package txnkit

import (
	"encoding/binary"
	"fmt"

	"github.com/meridiandb/meridian/internal/node"
	"github.com/meridiandb/meridian/internal/storage"
	"github.com/meridiandb/meridian/internal/topo"
)

// Incarnation numbers one life of a node, and the transaction ids its coordinator hands out
// in it: (node, incarnation, counter). Records, intents and other durable state outlive a
// coordinator's memory, so an id of an earlier life taken again would inherit them; numbering
// each life anew, from a counter persisted under the protocol's own key, never repeats one.
//
// The caller persists Write() as the life starts and hands out no id before that persist
// completes: a life that crashes earlier hands out none, so the next one may take its number.
// Each protocol keeps its own key, so that stores written before this helper still recover.
//
// A busy life spends its 2^32 counters (a day at 50k transactions a second): the next id
// would repeat its first, and inherit whatever of that transaction is still about. So before
// each id the caller asks Spent, and if so Renews and persists Write() again, handing out no
// id until that completes, as at a start. The ids then carry the next number; N, the life's
// number that peers compare to tell a restart, stays.
type Incarnation struct {
	key []byte
	// N is this life's number, from 1, above every number an earlier life persisted.
	N uint64
	// ids is the number the ids handed out now carry: N, plus one for each Renew. Write
	// persists it, so the next life starts above every number this one used.
	ids uint64
	seq uint64 // ids handed out under ids
}

// MaxIncarnation is the first number a node refuses to use: an id keeps 48 bits beside the
// node's, the low 32 of which count a life's transactions.
const MaxIncarnation = 1 << 16

// maxTxnCounter is the last counter an id takes under one number.
const maxTxnCounter = 1<<32 - 1

// StartIncarnation reads the number the node's previous life persisted under key in d (none
// if d is nil or holds nothing there) and returns the next life.
func StartIncarnation(d node.Durable, key []byte) (Incarnation, error) {
	inc := Incarnation{key: key, N: 1, ids: 1}
	if d == nil {
		return inc, nil
	}
	var val []byte
	found := false
	if err := d.Scan(key, append(append([]byte(nil), key...), 0), func(_, v []byte) bool {
		val, found = append([]byte(nil), v...), true
		return false
	}); err != nil {
		return inc, err
	}
	if !found {
		return inc, nil
	}
	if len(val) != 8 {
		return inc, fmt.Errorf("bad incarnation record %q (%d bytes, want 8)", key, len(val))
	}
	prev := binary.BigEndian.Uint64(val)
	if prev >= MaxIncarnation-1 {
		return inc, fmt.Errorf("restarted %d times: transaction id space exhausted", prev)
	}
	inc.N, inc.ids = prev+1, prev+1
	return inc, nil
}

// Write is what makes this life's number, or the one Renew took since, durable.
func (i *Incarnation) Write() node.Write {
	return node.Write{Key: i.key, Value: binary.BigEndian.AppendUint64(nil, i.ids)}
}

// Spent reports whether the counter is used up: the caller must Renew, and persist Write(),
// before the next id.
func (i *Incarnation) Spent() bool { return i.seq >= maxTxnCounter }

// Renew takes the next number for the ids to come. It fails once the id space is used up, for
// good: the node can hand out no more ids.
func (i *Incarnation) Renew() error {
	if i.ids+1 >= MaxIncarnation {
		return fmt.Errorf("transaction id space exhausted after %d incarnations", i.ids)
	}
	i.ids++
	i.seq = 0
	return nil
}

// LifeOf is the incarnation number that issued id (NextTxnID). Every id an earlier life of a
// node handed out is below its next life's number, so a restart notice carrying that number
// tells the transactions of the dead lives from those of the new one in any message order.
func LifeOf(id storage.TxnID) uint64 { return id.Seq() >> 32 }

// NextTxnID hands out the next transaction id of this life for coordinator self. Called once
// Spent, it panics rather than hand out an id again.
func (i *Incarnation) NextTxnID(self topo.NodeID) storage.TxnID {
	if i.Spent() {
		panic(fmt.Sprintf("txnkit: node %d handed out every id of incarnation %d without Renew", self, i.ids))
	}
	i.seq++
	return storage.MakeTxnID(int32(self), i.ids<<32|i.seq)
}
