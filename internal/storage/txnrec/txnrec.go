// Package txnrec keeps transaction records: the durable decision point of a transaction (K2's
// recorder, CRDB's transaction record, a 2PC coordinator's log) and the requests waiting for that
// decision (K2's PUSHWS, CRDB's push).
//
// A decision becomes visible only once it is durable. Decide records it and produces the persist
// write; until the protocol reports the persist complete with Decided, Status still answers
// InProgress (or Staging) and new waiters queue. Every recorded state has a version, and Decided
// names the one its persist carried (Version, read when the persist is issued): a state recorded
// while an earlier persist was in flight is published only by its own persist. This is what lets
// a recorder answer PUSHWS without ever exposing a decision a crash could undo. A record's fate
// is final: a transaction decided committed can never be aborted and vice versa (K2 §3.5: a
// recorder that suspects a dead coordinator aborts the transaction and "promises they will not
// be committed in the future").
//
// Like mvcc, the Table is protocol-side code: one logical thread, no I/O, deterministic. Waiters
// are opaque callbacks run by Decided in FIFO order on the caller's thread.
package txnrec

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"

	"github.com/meridiandb/meridian/internal/node"
	"github.com/meridiandb/meridian/internal/storage"
	"github.com/meridiandb/meridian/internal/ts"
)

// Status is a transaction's state.
type Status uint8

// Statuses. Staging is CRDB's parallel-commit state: committed once all its in-flight writes
// (listed by the protocol in Meta) are durable, which the protocol checks.
const (
	InProgress Status = iota + 1
	Staging
	Committed
	Aborted
)

func (s Status) String() string {
	switch s {
	case InProgress:
		return "in-progress"
	case Staging:
		return "staging"
	case Committed:
		return "committed"
	case Aborted:
		return "aborted"
	}
	return fmt.Sprintf("status(%d)", uint8(s))
}

// Final reports whether s is a decision.
func (s Status) Final() bool { return s == Committed || s == Aborted }

// Record is a transaction record.
type Record struct {
	Txn      storage.TxnID
	Status   Status
	CommitTS ts.Timestamp // commit timestamp (CRDB, Spanner) or zero
	Epoch    uint64       // K2-VCR's commit epoch epoch_C, or zero
	Meta     []byte       // per-protocol: coordinator id, in-flight writes, participants
}

// Version identifies one recorded state of a record. Versions grow across the whole table, so a
// persist of a forgotten record's state never publishes a later record of the same transaction.
type Version uint64

type versioned struct {
	v   Version
	rec Record
}

// Waiter is called once with the durable decision.
type Waiter func(Record)

type entry struct {
	durable Record // what is known to be persisted (what Status reports)
	latest  Record // the newest state handed to TakeWrites, possibly not yet persisted
	// published is durable's version, version latest's; pending holds the states recorded
	// since durable, oldest first, for Decided to publish the one its persist carried.
	published, version Version
	pending            []versioned
	waiters            []Waiter // FIFO
	// placeholder: made by Wait and never written; Create adopts it by writing it.
	placeholder bool
}

// Errors.
var (
	ErrUnknown    = errors.New("txnrec: unknown transaction")
	ErrFinal      = errors.New("txnrec: transaction already decided otherwise")
	ErrBadStatus  = errors.New("txnrec: not a decision")
	ErrMetaTooBig = fmt.Errorf("txnrec: metadata longer than %d bytes", storage.MaxMetaBytes)
	ErrCorrupt    = errors.New("txnrec: corrupt record")
)

// Table holds the transaction records of one node.
type Table struct {
	recs    map[storage.TxnID]*entry
	writes  []node.Write
	version Version // of the newest state recorded
}

// New returns an empty table.
func New() *Table { return &Table{recs: make(map[storage.TxnID]*entry)} }

// TakeWrites returns the persist writes recorded since the last call and clears the buffer.
func (t *Table) TakeWrites() []node.Write {
	w := t.writes
	t.writes = nil
	return w
}

// Len returns the number of records.
func (t *Table) Len() int { return len(t.recs) }

// Create makes an InProgress record (K2: at the first write, piggybacked on it). Creating an
// existing record is a no-op that returns its current durable state, except that a placeholder
// Wait made for a waiter that overtook the first write is written now: the record then reaches
// the disk with the write that creates it, as one that did not meet a waiter does.
func (t *Table) Create(txn storage.TxnID, meta []byte) (Record, error) {
	if len(meta) > storage.MaxMetaBytes {
		return Record{}, ErrMetaTooBig
	}
	if e := t.recs[txn]; e != nil {
		if e.placeholder {
			e.placeholder = false
			if !e.latest.Status.Final() {
				e.latest.Meta = meta
				t.record(e)
			}
		}
		return e.durable, nil
	}
	r := Record{Txn: txn, Status: InProgress, Meta: meta}
	// An InProgress record is durable-equivalent at once: answering "in progress" is always safe.
	e := &entry{durable: r, latest: r}
	t.recs[txn] = e
	t.record(e)
	e.published, e.pending = e.version, nil
	return r, nil
}

// Get returns the durable state of txn's record.
func (t *Table) Get(txn storage.TxnID) (Record, bool) {
	if e := t.recs[txn]; e != nil {
		return e.durable, true
	}
	return Record{}, false
}

// Stage moves an InProgress record to Staging with the given commit timestamp and metadata
// (CRDB's parallel commit). It is persisted like a decision, and visible after Decided.
func (t *Table) Stage(txn storage.TxnID, commitTS ts.Timestamp, meta []byte) error {
	if len(meta) > storage.MaxMetaBytes {
		return ErrMetaTooBig
	}
	e := t.recs[txn]
	if e == nil {
		return fmt.Errorf("%w: %v", ErrUnknown, txn)
	}
	if e.latest.Status.Final() {
		return fmt.Errorf("%w: %v is %v", ErrFinal, txn, e.latest.Status)
	}
	e.latest.Status, e.latest.CommitTS, e.latest.Meta = Staging, commitTS, meta
	t.record(e)
	return nil
}

// Decide records txn's decision (Committed or Aborted), creating the record if needed (a recorder
// aborting a transaction whose first write never arrived). Deciding the same way twice is a no-op;
// deciding otherwise returns ErrFinal. The decision is not visible until Decided is called after
// the returned writes (TakeWrites) are persisted, with the Version read when they were taken.
func (t *Table) Decide(txn storage.TxnID, status Status, commitTS ts.Timestamp, epoch uint64) error {
	return t.decide(txn, status, commitTS, epoch, nil, false)
}

// DecideWith is Decide that also replaces the record's metadata, persisted in the same write as
// the decision: what the holder must still know about a decided transaction after a restart
// (K2: the participants that must acknowledge its finalization before the record may be
// forgotten). Deciding the same way again changes nothing, metadata included.
func (t *Table) DecideWith(txn storage.TxnID, status Status, commitTS ts.Timestamp, epoch uint64, meta []byte) error {
	if len(meta) > storage.MaxMetaBytes {
		return ErrMetaTooBig
	}
	return t.decide(txn, status, commitTS, epoch, meta, true)
}

func (t *Table) decide(txn storage.TxnID, status Status, commitTS ts.Timestamp, epoch uint64, meta []byte, setMeta bool) error {
	if !status.Final() {
		return fmt.Errorf("%w: %v", ErrBadStatus, status)
	}
	e := t.recs[txn]
	if e == nil {
		e = &entry{durable: Record{Txn: txn, Status: InProgress}}
		e.latest = e.durable
		t.recs[txn] = e
	}
	if e.latest.Status.Final() {
		if e.latest.Status != status {
			return fmt.Errorf("%w: %v is %v", ErrFinal, txn, e.latest.Status)
		}
		return nil
	}
	e.latest.Status, e.latest.CommitTS, e.latest.Epoch = status, commitTS, epoch
	if setMeta {
		e.latest.Meta = meta
	}
	t.record(e)
	return nil
}

// Version returns the version of txn's latest recorded state (zero if txn has no record). A
// protocol reads it as it issues the persist carrying that state and hands it to Decided when
// the persist completes.
func (t *Table) Version(txn storage.TxnID) Version {
	if e := t.recs[txn]; e != nil {
		return e.version
	}
	return 0
}

// Decided is called when a persist issued once txn's state of version v was recorded is durable
// (batches complete in the order issued, so that state is on disk). It publishes that state, not
// one recorded since, whose own persist is still to come, and, if it is a decision, wakes every
// waiter in FIFO order with it. It returns the number of waiters woken. A version already
// published, or older than the record (forgotten and made again since), changes nothing.
func (t *Table) Decided(txn storage.TxnID, v Version) int {
	e := t.recs[txn]
	if e == nil || v <= e.published {
		return 0
	}
	i := len(e.pending) - 1
	for i >= 0 && e.pending[i].v > v {
		i--
	}
	if i < 0 {
		return 0
	}
	e.durable, e.published = e.pending[i].rec, e.pending[i].v
	if e.pending = e.pending[i+1:]; len(e.pending) == 0 {
		e.pending = nil // most records stay a while once decided (until acknowledged): free it
	}
	if !e.durable.Status.Final() {
		return 0
	}
	ws := e.waiters
	e.waiters = nil
	for _, w := range ws {
		w(e.durable)
	}
	return len(ws)
}

// Wait asks for txn's decision. If it is durably decided, w is not kept and the record is returned
// with decided = true (the caller answers at once). Otherwise w is queued and called by Decided.
// An unknown txn gets an InProgress placeholder (K2 §3.5: a PUSHWS can overtake the first write);
// the protocol bounds the wait with a timer that aborts the transaction through Decide.
func (t *Table) Wait(txn storage.TxnID, w Waiter) (rec Record, decided bool) {
	e := t.recs[txn]
	if e == nil {
		r := Record{Txn: txn, Status: InProgress}
		e = &entry{durable: r, latest: r, placeholder: true}
		t.recs[txn] = e
	}
	if e.durable.Status.Final() {
		return e.durable, true
	}
	e.waiters = append(e.waiters, w)
	return e.durable, false
}

// Placeholder reports whether txn's record is only the placeholder Wait made for a waiter: no
// write of txn has created it, so nothing of txn may be on this node.
func (t *Table) Placeholder(txn storage.TxnID) bool {
	e := t.recs[txn]
	return e != nil && e.placeholder
}

// Waiting returns how many waiters txn has.
func (t *Table) Waiting(txn storage.TxnID) int {
	if e := t.recs[txn]; e != nil {
		return len(e.waiters)
	}
	return 0
}

// Forget drops a decided record once no one can ask about it any more (all intents resolved).
// The deletion is persisted. Forgetting an undecided record is refused, and so is forgetting a
// decision that is not durable yet (Decided not called): its persist write is still to come,
// and would bring the record back after the deletion.
func (t *Table) Forget(txn storage.TxnID) error {
	e := t.recs[txn]
	if e == nil {
		return nil
	}
	if !e.durable.Status.Final() || len(e.waiters) > 0 {
		return fmt.Errorf("txnrec: forget %v: not decided or still has waiters", txn)
	}
	delete(t.recs, txn)
	t.writes = append(t.writes, node.Write{Key: recordKey(txn), Delete: true})
	return nil
}

// record hands e's latest state to TakeWrites under a new version.
func (t *Table) record(e *entry) {
	t.version++
	e.version = t.version
	r := e.latest
	e.pending = append(e.pending, versioned{v: e.version, rec: r})
	t.writes = append(t.writes, node.Write{Key: recordKey(r.Txn), Value: encodeRecord(r)})
}

// Persistence encoding. Key: 't' | txn id (8 bytes, big endian). Value: format (1) | status (1) |
// commit ts (16) | epoch (uvarint) | uvarint len(meta) | meta | CRC-32C over key and body.

const formatV1 byte = 1

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func recordKey(txn storage.TxnID) []byte {
	return storage.EncodeTxnID([]byte{storage.PrefixTxnRec}, txn)
}

func encodeRecord(r Record) []byte {
	b := make([]byte, 0, 2+ts.EncodedLen+2*binary.MaxVarintLen64+len(r.Meta)+4)
	b = append(b, formatV1, byte(r.Status))
	b = r.CommitTS.Encode(b)
	b = binary.AppendUvarint(b, r.Epoch)
	b = binary.AppendUvarint(b, uint64(len(r.Meta)))
	b = append(b, r.Meta...)
	c := crc32.Update(crc32.Checksum(recordKey(r.Txn), castagnoli), castagnoli, b)
	return binary.BigEndian.AppendUint32(b, c)
}

func decodeRecord(k, v []byte) (Record, error) {
	if len(k) != 9 || k[0] != storage.PrefixTxnRec {
		return Record{}, fmt.Errorf("%w: key %x", ErrCorrupt, k)
	}
	txn, _ := storage.DecodeTxnID(k[1:])
	bad := func(why string) (Record, error) {
		return Record{}, fmt.Errorf("%w: %v: %s", ErrCorrupt, txn, why)
	}
	if len(v) < 2+ts.EncodedLen+2+4 {
		return bad(fmt.Sprintf("value truncated to %d bytes", len(v)))
	}
	body, sum := v[:len(v)-4], binary.BigEndian.Uint32(v[len(v)-4:])
	if got := crc32.Update(crc32.Checksum(k, castagnoli), castagnoli, body); got != sum {
		return bad(fmt.Sprintf("checksum mismatch (stored %08x, computed %08x)", sum, got))
	}
	if body[0] != formatV1 {
		return bad(fmt.Sprintf("unknown format %d", body[0]))
	}
	r := Record{Txn: txn, Status: Status(body[1])}
	if r.Status < InProgress || r.Status > Aborted {
		return bad(fmt.Sprintf("bad status %d", body[1]))
	}
	r.CommitTS, _ = ts.Decode(body[2:])
	rest := body[2+ts.EncodedLen:]
	epoch, w := binary.Uvarint(rest)
	if w <= 0 {
		return bad("bad epoch")
	}
	r.Epoch, rest = epoch, rest[w:]
	n, w := binary.Uvarint(rest)
	if w <= 0 || n > storage.MaxMetaBytes || n != uint64(len(rest)-w) {
		return bad("bad metadata length")
	}
	if n > 0 {
		r.Meta = append([]byte(nil), rest[w:]...)
	}
	return r, nil
}

// Recover rebuilds a Table from the records persisted in d. It fails on the first corrupt record.
// Waiters are not persisted: after a restart, waiting requests are re-sent by their senders.
func Recover(d node.Durable) (*Table, error) {
	t := New()
	var derr error
	err := d.Scan([]byte{storage.PrefixTxnRec}, []byte{storage.PrefixTxnRec + 1}, func(k, v []byte) bool {
		r, err := decodeRecord(k, v)
		if err != nil {
			derr = err
			return false
		}
		t.recs[r.Txn] = &entry{durable: r, latest: r}
		return true
	})
	if err != nil {
		return nil, fmt.Errorf("txnrec: recover: scan: %w", err)
	}
	if derr != nil {
		return nil, fmt.Errorf("txnrec: recover: %w", derr)
	}
	return t, nil
}

// Records calls fn for every record in ascending txn order (recovery: find undecided ones).
func (t *Table) Records(fn func(Record) bool) {
	ids := make([]storage.TxnID, 0, len(t.recs))
	for id := range t.recs {
		ids = append(ids, id)
	}
	sortIDs(ids)
	for _, id := range ids {
		if !fn(t.recs[id].durable) {
			return
		}
	}
}

func sortIDs(ids []storage.TxnID) { slices.Sort(ids) }
