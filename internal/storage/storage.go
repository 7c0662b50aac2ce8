// Package storage is Meridian's storage engine, shared by every protocol. It is split by concern:
//
//   - mvcc: the in-memory multi-version index of one node (versions, intents / write streams,
//     per-key read watermarks, tombstones, garbage collection) and its persistence encoding;
//   - locks: a lock table with shared and exclusive locks, FIFO waiters and the NO_WAIT,
//     WAIT_DIE and wound-wait policies;
//   - txnrec: transaction records (status, commit timestamp or epoch, waiters on the decision);
//   - durable: the backends behind a node's persist call (an in-memory one for the simulator, a
//     Pebble one for servers) and a group committer for the real runtime.
//
// Everything except durable's Committer is protocol-side code: single logical thread, no locks,
// no goroutines, deterministic. None of it does I/O. A mutation of an mvcc.Store or a
// txnrec.Table is recorded as node.Write entries that the protocol drains with TakeWrites and
// hands to node.Env.Persist; on restart, mvcc.Recover and txnrec.Recover rebuild the in-memory
// state from the node.Durable the runtime passes in.
//
// Durable key space. The persistence encodings own these key prefixes; a protocol that persists
// its own state must use another first byte:
//
//	'v' (0x76)  mvcc versions        v <escaped user key> <ts> <txn>
//	't' (0x74)  transaction records  t <txn>
//
// Size limits (enforced at the API, so nothing oversized is ever persisted): keys at most
// MaxKeyBytes, values at most MaxValueBytes, protocol metadata at most MaxMetaBytes.
package storage

import (
	"encoding/binary"
	"fmt"
)

// TxnID names a transaction. It is a plain uint64 so that it is comparable, cheap to hash and
// sorts deterministically; a protocol builds it from whatever makes its ids unique, usually
// MakeTxnID(coordinator, sequence). Zero is "no transaction" (e.g. versions loaded by a bulk
// import that no transaction wrote).
type TxnID uint64

// MakeTxnID packs a coordinator id (low 16 bits used) and a per-coordinator sequence number (low
// 48 bits used) into a TxnID. Two coordinators never produce the same id, and one coordinator
// produces 2^48 ids before wrapping.
func MakeTxnID(coordinator int32, seq uint64) TxnID {
	return TxnID(uint64(uint16(coordinator))<<48 | seq&(1<<48-1))
}

// Coordinator returns the coordinator part of an id built by MakeTxnID.
func (t TxnID) Coordinator() int32 { return int32(uint16(t >> 48)) }

// Seq returns the sequence part of an id built by MakeTxnID.
func (t TxnID) Seq() uint64 { return uint64(t) & (1<<48 - 1) }

func (t TxnID) String() string { return fmt.Sprintf("txn(%d:%d)", t.Coordinator(), t.Seq()) }

// EncodeTxnID appends t in big-endian order, so encoded ids sort like ids.
func EncodeTxnID(dst []byte, t TxnID) []byte { return binary.BigEndian.AppendUint64(dst, uint64(t)) }

// DecodeTxnID reads an id written by EncodeTxnID.
func DecodeTxnID(b []byte) (TxnID, error) {
	if len(b) < 8 {
		return 0, fmt.Errorf("storage: decode txn id: need 8 bytes, have %d", len(b))
	}
	return TxnID(binary.BigEndian.Uint64(b)), nil
}

// Limits on what the engine accepts. They keep one persisted record comfortably inside a Pebble
// batch and a simulator message, and match the order of magnitude of FoundationDB's limits
// (10 kB keys, 100 kB values), with more room for values because TPC-C rows can be large.
const (
	MaxKeyBytes   = 8 << 10  // 8 KiB
	MaxValueBytes = 1 << 20  // 1 MiB
	MaxMetaBytes  = 64 << 10 // 64 KiB
)

// Durable key prefixes owned by the engine's encodings.
const (
	PrefixVersion byte = 'v'
	PrefixTxnRec  byte = 't'
	// PrefixGC holds one record: the store's garbage-collection horizon (mvcc.Store.GCHorizon).
	PrefixGC byte = 'g'
)
