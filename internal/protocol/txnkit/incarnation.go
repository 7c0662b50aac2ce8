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
type Incarnation struct {
	key []byte
	// N is this life's number, from 1; N-1 is the one the previous life persisted (0 if none).
	N   uint64
	seq uint64 // ids handed out in this life
}

// MaxIncarnation is the first life a node refuses to start: an id keeps 48 bits beside the
// node's, the low 32 of which count a life's transactions.
const MaxIncarnation = 1 << 16

// StartIncarnation reads the number the node's previous life persisted under key in d (none
// if d is nil or holds nothing there) and returns the next life.
func StartIncarnation(d node.Durable, key []byte) (Incarnation, error) {
	inc := Incarnation{key: key, N: 1}
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
	inc.N = prev + 1
	return inc, nil
}

// Write is what makes this life's number durable.
func (i *Incarnation) Write() node.Write {
	return node.Write{Key: i.key, Value: binary.BigEndian.AppendUint64(nil, i.N)}
}

// NextTxnID hands out the next transaction id of this life for coordinator self.
func (i *Incarnation) NextTxnID(self topo.NodeID) storage.TxnID {
	i.seq++
	return storage.MakeTxnID(int32(self), i.N<<32|i.seq&(1<<32-1))
}
