package txnkit

import "github.com/meridiandb/meridian/internal/wire"

// TxnWrites counts a transaction's writes against wire.MaxTxnWriteBytes at its coordinator:
// each key once, at its latest write, since every message that carries the writes carries a
// key's last value only (a rewrite replaces the earlier one). The zero value is empty.
type TxnWrites struct {
	total int
	byKey map[string]int // what each written key counts now
}

// Admit reports whether the writes of req (a put, a delete, or an OpBatch's) keep the
// transaction within wire.MaxTxnWriteBytes, and counts them if so. A request refused here must
// be answered with TxnWritesRefused and not run at all, so that the count stays what was
// written. Reads, scans and the rest are always admitted.
func (w *TxnWrites) Admit(req *wire.ClientRequest) bool {
	switch req.Op {
	case wire.OpPut, wire.OpDelete:
		size := writeBytes(req.Op, req.Key, req.Value)
		if w.total+size-w.byKey[req.Key] > wire.MaxTxnWriteBytes {
			return false
		}
		w.count(req.Key, size)
	case wire.OpBatch:
		// Keys are distinct within a batch (Validate), so each replaces at most one count.
		total := w.total
		for _, op := range req.Batch {
			if op.Op == wire.OpPut || op.Op == wire.OpDelete {
				total += writeBytes(op.Op, op.Key, op.Value) - w.byKey[op.Key]
			}
		}
		if total > wire.MaxTxnWriteBytes {
			return false
		}
		for _, op := range req.Batch {
			if op.Op == wire.OpPut || op.Op == wire.OpDelete {
				w.count(op.Key, writeBytes(op.Op, op.Key, op.Value))
			}
		}
	}
	return true
}

func (w *TxnWrites) count(key string, size int) {
	if w.byKey == nil {
		w.byKey = map[string]int{}
	}
	w.total += size - w.byKey[key]
	w.byKey[key] = size
}

// writeBytes is what a write counts; a delete's value, if a request carries one, is not kept.
func writeBytes(op wire.Op, key string, value []byte) int {
	if op == wire.OpDelete {
		value = nil
	}
	return wire.TxnWriteBytes(key, value)
}

// TxnWritesRefused is the answer to a request TxnWrites.Admit refuses.
func TxnWritesRefused() *wire.ClientReply {
	return &wire.ClientReply{Code: wire.CodeBadArgument, Error: wire.TxnWritesTooLarge}
}
