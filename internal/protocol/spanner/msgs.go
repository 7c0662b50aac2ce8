package spanner

import (
	"github.com/meridiandb/meridian/internal/storage"
	"github.com/meridiandb/meridian/internal/ts"
	"github.com/meridiandb/meridian/internal/wire"
)

// Messages between a coordinator (the transaction manager a client talks to) and the
// participants (the primaries of the shards a transaction touches). Kinds 300–399.

// ReadReq asks a participant for key under a shared lock (read-write transactions).
type ReadReq struct {
	Txn  storage.TxnID
	Age  ts.Timestamp // lock priority: the first attempt's start, kept across retries
	Seq  uint32       // the client request it serves, echoed back
	Key  string
	Seen uint32 // read locks this participant granted the transaction before (detects lost locks)
	// Life is the participant's life that granted the Seen locks (the Life of its answers): a
	// restarted participant lost them even if a late copy of an earlier request took as many
	// again in its new life.
	Life uint64 `cbor:",omitempty"`
}

// ReadResp answers a ReadReq.
type ReadResp struct {
	Txn     storage.TxnID
	Seq     uint32
	OK      bool
	Cause   string `cbor:",omitempty"` // abort cause when !OK
	Found   bool   `cbor:",omitempty"`
	Value   []byte `cbor:",omitempty"`
	Version ts.Timestamp
	Life    uint64 `cbor:",omitempty"` // the participant's life, which holds the lock
}

// SnapReadReq reads key at a snapshot timestamp without locks (read-only transactions). A batch
// reading several keys at one participant sends them all in Keys (Key empty), so they cost one
// round trip; a single read keeps Key.
type SnapReadReq struct {
	Txn  storage.TxnID
	Seq  uint32
	Key  string
	Keys []string `cbor:",omitempty"`
	At   ts.Timestamp
	Scan *ScanRange `cbor:",omitempty"` // a snapshot scan of a range instead of keys (scan.go)
}

// keys returns the keys m reads, in order.
func (m *SnapReadReq) keys() []string {
	if len(m.Keys) > 0 {
		return m.Keys
	}
	return []string{m.Key}
}

// SnapReadResp answers a SnapReadReq: Found and Value for a single key, Results (one per key, in
// the request's order) for Keys; or, if Cause is set, refuses it (a snapshot below the
// participant's GC horizon: txnkit.AbortTooOld) and the transaction aborts.
type SnapReadResp struct {
	Txn     storage.TxnID
	Seq     uint32
	Cause   string       `cbor:",omitempty"`
	Found   bool         `cbor:",omitempty"`
	Value   []byte       `cbor:",omitempty"`
	Results []ReadResult `cbor:",omitempty"`
	// Scan marks the answer to a snapshot scan; Rows are its rows in key order, unless TooLarge:
	// they (cut to the limit) exceed wire.MaxScanBytes, and the client's scan is refused. For
	// Keys, TooLarge says the same of Results' values, which are left out.
	Scan     bool      `cbor:",omitempty"`
	Rows     []wire.KV `cbor:",omitempty"`
	TooLarge bool      `cbor:",omitempty"`
}

// ReadResult is one key's value in a multi-key answer (OpsResp, SnapReadResp). Version is the
// committed version read under a lock (zero for snapshot reads and for writes).
type ReadResult struct {
	Found   bool         `cbor:",omitempty"`
	Value   []byte       `cbor:",omitempty"`
	Version ts.Timestamp `cbor:",omitempty"`
}

// WriteReq is an eager write (write-locks=eager): the participant takes key's exclusive lock
// now and keeps the value as the transaction's pending write, visible only to its own reads.
type WriteReq struct {
	Txn    storage.TxnID
	Age    ts.Timestamp
	Seq    uint32 // the client request it serves, echoed back
	Key    string
	Value  []byte `cbor:",omitempty"`
	Delete bool   `cbor:",omitempty"`
	Seen   uint32 // locks (read and write) this participant granted the transaction before
	Life   uint64 `cbor:",omitempty"` // as ReadReq's
}

// WriteResp answers a WriteReq.
type WriteResp struct {
	Txn   storage.TxnID
	Seq   uint32
	OK    bool
	Cause string `cbor:",omitempty"` // abort cause when !OK
	Life  uint64 `cbor:",omitempty"`
}

// OpsReq carries every operation of one client batch that goes to one participant: reads under
// shared locks and (write-locks=eager) writes under exclusive locks, in the client's order. The
// participant takes the locks one after another without a round trip between them — a lock it
// must wait for parks the request there, and a refused one aborts the transaction — and answers
// once, when all are held. A batch's single operation at a participant still goes as a ReadReq
// or WriteReq. Seen is checked as for those; each operation grants one more lock.
type OpsReq struct {
	Txn  storage.TxnID
	Age  ts.Timestamp
	Seq  uint32 // the client request it serves, echoed back
	Ops  []Op
	Seen uint32
	Life uint64 `cbor:",omitempty"`
}

// Op is one operation of an OpsReq.
type Op struct {
	Key    string
	Write  bool   `cbor:",omitempty"`
	Value  []byte `cbor:",omitempty"`
	Delete bool   `cbor:",omitempty"`
}

// OpsResp answers an OpsReq: when OK, Results holds one entry per operation in the request's
// order (a read's value and version, read-your-writes included; empty for a write). TooLarge:
// the reads' values exceed wire.MaxScanBytes and are left out (versions kept), every lock is
// held all the same, and the client's batch is refused (wire.BatchAnswerTooLarge).
type OpsResp struct {
	Txn      storage.TxnID
	Seq      uint32
	OK       bool
	Cause    string       `cbor:",omitempty"` // abort cause when !OK
	Results  []ReadResult `cbor:",omitempty"`
	TooLarge bool         `cbor:",omitempty"`
	Life     uint64       `cbor:",omitempty"`
}

// ScanReq is a read-write transaction's scan of a range at one participant (scan.go): the
// participant takes shared range locks under the lock policy on Scan's range up to the last row
// Scan.Limit needs, as a read takes its key's shared lock, and answers with the latest committed
// rows there, the transaction's own pending writes (write-locks=eager) applied, cut to
// Scan.Limit. Seen is checked as for a ReadReq; the scan's range locks count as one lock granted.
type ScanReq struct {
	Txn  storage.TxnID
	Age  ts.Timestamp
	Seq  uint32 // the client request it serves, echoed back
	Scan ScanRange
	Seen uint32
	Life uint64 `cbor:",omitempty"`
}

// ScanResp answers a ScanReq: when OK, Rows in key order, unless TooLarge (they exceed
// wire.MaxScanBytes and the client's scan is refused); Version is the newest committed version
// among the keys the scan read (tombstones included), which the commit timestamp must exceed, as
// a point read's.
type ScanResp struct {
	Txn      storage.TxnID
	Seq      uint32
	OK       bool
	Cause    string       `cbor:",omitempty"` // abort cause when !OK
	Rows     []wire.KV    `cbor:",omitempty"`
	TooLarge bool         `cbor:",omitempty"`
	Version  ts.Timestamp `cbor:",omitempty"`
	Life     uint64       `cbor:",omitempty"`
}

// Write is one buffered write shipped with a prepare.
type Write struct {
	Key    string
	Value  []byte `cbor:",omitempty"`
	Delete bool   `cbor:",omitempty"`
}

// PrepareReq is 2PC's first phase: take exclusive locks on Writes, persist them as intents at a
// prepare timestamp, and vote. A participant with no writes only checks that it still holds the
// transaction's read locks (Seen of them) and votes.
type PrepareReq struct {
	Txn    storage.TxnID
	Age    ts.Timestamp
	Seen   uint32  // locks this participant granted the transaction before (reads, eager writes)
	Life   uint64  `cbor:",omitempty"` // the participant's life that granted them (ReadReq.Life)
	Writes []Write `cbor:",omitempty"` // buffered writes, sorted by key (none with eager writes)
}

// PrepareResp is a participant's vote. TS is its prepare timestamp (zero for read-only votes).
type PrepareResp struct {
	Txn   storage.TxnID
	OK    bool
	Cause string `cbor:",omitempty"`
	TS    ts.Timestamp
}

// DecideReq is 2PC's second phase (and an abort at any time before it): install the intents at
// TS and release every lock, or drop everything.
type DecideReq struct {
	Txn    storage.TxnID
	Commit bool
	TS     ts.Timestamp
}

// DecideAck reports that a participant has persisted a commit (the coordinator may then forget
// its record).
type DecideAck struct {
	Txn storage.TxnID
}

// WoundReq tells a coordinator that an older transaction wounded its transaction at a
// participant (wound-wait), or that the deadlock detector chose it as a victim (Cause
// "deadlock"), or that the participant no longer knows it (Cause "participant-lost-locks", the
// answer to a KeepAlive after a restart); the coordinator aborts it unless it has already
// decided to commit.
type WoundReq struct {
	Txn   storage.TxnID
	Cause string `cbor:",omitempty"` // empty: wound-wait
}

// KeepAlive tells a participant that the coordinator of an unprepared transaction is alive (it
// may be waiting for another participant), so the participant's idle timeout must not fire.
//
// With Snap set it is about a read-only transaction's snapshot read instead (numbered Seq, still
// unanswered at its coordinator): such a transaction holds no state at a participant, only the
// read while it is parked behind a prepared intent, so a participant that holds no such read
// answers a SnapReadResp refusing it (cause participant-lost-read). Its own answer, if it sent
// one, went first on the same link, so the refusal only reaches a coordinator still waiting for
// a read the participant lost (a restart) or never got, which sends the read again.
//
// For a read-write transaction Await says what the coordinator is still waiting for from this
// participant: the answer to its request numbered Seq (awaitAnswer) or its vote (awaitVote).
// The message was lost if the participant never got that request or prepare (it went first on
// the same link: the participant asks for it again, ResendReq), or if its answer went long
// before (the participant sends it again; Participant.onKeepAlive), so that a lost message
// costs a keep-alive period rather than the transaction or the client's timeout.
type KeepAlive struct {
	Txn   storage.TxnID
	Seq   uint32 `cbor:",omitempty"`
	Snap  bool   `cbor:",omitempty"`
	Await uint8  `cbor:",omitempty"`
	// Seen is how many locks the coordinator saw granted here (as in a request): a participant
	// that does not know the transaction lost them if any, and otherwise never got its first
	// request.
	Seen uint32 `cbor:",omitempty"`
	Life uint64 `cbor:",omitempty"` // the participant's life that granted them (ReadReq.Life)
}

// ResendReq tells a coordinator that the participant never got the request numbered Seq, or
// the prepare (Prepare), that the coordinator's keep-alive says it awaits from it: the network
// lost it, and the coordinator sends it again. Requests are idempotent at the participant (a
// copy of one it admitted is dropped, a copy of a prepare votes again), so a copy that was
// only late does no harm.
type ResendReq struct {
	Txn     storage.TxnID
	Seq     uint32 `cbor:",omitempty"`
	Prepare bool   `cbor:",omitempty"`
}

// What a KeepAlive's coordinator awaits from the participant.
const (
	awaitNothing uint8 = iota // executing, nothing outstanding there
	awaitAnswer               // the answer to the read/write request numbered Seq
	awaitVote                 // the vote on its PrepareReq
)

// Restarted tells the other data nodes that the sender restarted, as its Life-th incarnation:
// every lock, pending write and parked read its earlier lives held for an unprepared
// transaction is gone, and so is every transaction its coordinator ran (only commit decisions
// and prepared state are durable). Each peer then settles at once what it would otherwise learn
// from a keep-alive or an idle timeout (Participant.onRestarted, Coordinator.onRestarted).
type Restarted struct {
	Life uint64
}

// StatusReq asks a coordinator for the fate of a transaction prepared at the sender. It also
// repeats what the coordinator may have missed, since each went once and may have been lost:
// the sender's yes vote (Voted, at prepare timestamp TS), and its wound of the transaction
// (Wounded: an older transaction waits here for its locks).
type StatusReq struct {
	Txn     storage.TxnID
	Voted   bool         `cbor:",omitempty"`
	TS      ts.Timestamp `cbor:",omitempty"`
	Wounded bool         `cbor:",omitempty"`
}

// Decision states in StatusResp.
const (
	statusInProgress uint8 = iota + 1
	statusCommitted
	statusAborted
)

// StatusResp answers a StatusReq.
type StatusResp struct {
	Txn    storage.TxnID
	Status uint8
	TS     ts.Timestamp
}

func (*ReadReq) Kind() wire.Kind      { return 300 }
func (*ReadResp) Kind() wire.Kind     { return 301 }
func (*SnapReadReq) Kind() wire.Kind  { return 302 }
func (*SnapReadResp) Kind() wire.Kind { return 303 }
func (*PrepareReq) Kind() wire.Kind   { return 304 }
func (*PrepareResp) Kind() wire.Kind  { return 305 }
func (*DecideReq) Kind() wire.Kind    { return 306 }
func (*DecideAck) Kind() wire.Kind    { return 307 }
func (*WoundReq) Kind() wire.Kind     { return 308 }
func (*StatusReq) Kind() wire.Kind    { return 309 }
func (*StatusResp) Kind() wire.Kind   { return 310 }
func (*WriteReq) Kind() wire.Kind     { return 311 }
func (*WriteResp) Kind() wire.Kind    { return 312 }
func (*WaitGraph) Kind() wire.Kind    { return 313 }
func (*KeepAlive) Kind() wire.Kind    { return 314 }
func (*OpsReq) Kind() wire.Kind       { return 315 }
func (*OpsResp) Kind() wire.Kind      { return 316 }
func (*Restarted) Kind() wire.Kind    { return 317 }
func (*ScanReq) Kind() wire.Kind      { return 318 }
func (*ScanResp) Kind() wire.Kind     { return 319 }
func (*ResendReq) Kind() wire.Kind    { return 320 }

func init() {
	for _, m := range []wire.Msg{&ReadReq{}, &ReadResp{}, &SnapReadReq{}, &SnapReadResp{}, &PrepareReq{},
		&PrepareResp{}, &DecideReq{}, &DecideAck{}, &WoundReq{}, &StatusReq{}, &StatusResp{}, &WriteReq{}, &WriteResp{}, &WaitGraph{}, &KeepAlive{},
		&OpsReq{}, &OpsResp{}, &Restarted{}, &ScanReq{}, &ScanResp{}, &ResendReq{}} {
		wire.Register(m)
	}
}
