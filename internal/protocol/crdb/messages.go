package crdb

import (
	"github.com/meridiandb/meridian/internal/storage"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/ts"
	"github.com/meridiandb/meridian/internal/wire"
)

// Messages between coordinators (gateways), leaseholders and transaction-record holders. Every
// message that carries a timestamp is merged into the receiver's HLC; every reply carries the
// sender's HLC reading (Clock) so coordinators learn about timestamps they have not seen.

// TxnMeta names a transaction and what a pusher needs to know about it.
type TxnMeta struct {
	ID         storage.TxnID
	Age        ts.Timestamp // priority: the begin timestamp of the first attempt (smaller is older)
	RecordNode topo.NodeID  // where the transaction record lives (-1: no record yet)
	Coord      topo.NodeID
}

// ReadReq asks a leaseholder for key at ReadTS.
type ReadReq struct {
	Req      uint64
	Txn      TxnMeta
	Key      string
	ReadTS   ts.Timestamp
	Limit    ts.Timestamp // global uncertainty limit: ReadTS at begin + max offset
	ReadOnly bool
	// OwnWrite: the transaction wrote Key and this leaseholder acknowledged it. A pipelined
	// write is acknowledged before its intent is durable; a leaseholder that finds no intent of
	// the transaction on Key lost it in a crash, and answers WriteLost instead of the value
	// below it, which the transaction could otherwise read and still commit (a later write of
	// Key lays the intent its commit proves).
	OwnWrite bool `cbor:",omitempty"`
}

// ReadResp answers ReadReq.
type ReadResp struct {
	Req       uint64
	Clock     ts.Timestamp
	Found     bool
	Value     []byte
	Uncertain bool         // a value (or older transaction's intent) lies in (ReadTS, Limit]
	ValueTS   ts.Timestamp // the uncertain timestamp
	// TooOld: ReadTS is below the leaseholder's GC horizon, so the versions the read needs may
	// be gone; it was refused and the transaction aborts (cause too-old).
	TooOld bool `cbor:",omitempty"`
	// WriteLost: the request's OwnWrite, but the transaction has no intent on Key here (lost in
	// a crash, or removed by its abort here: Aborted); the transaction aborts (cause write-lost,
	// or push-abort).
	WriteLost bool `cbor:",omitempty"`
	// Aborted, with WriteLost: the intent went because the transaction was aborted here (an
	// older writer's push), not lost in a crash; the transaction aborts (cause push-abort).
	Aborted bool `cbor:",omitempty"`
	// Floor: the leaseholder's read floor, when it lies above Clock (a restarted node whose
	// clock is behind what its previous life wrote). The observed timestamp a coordinator keeps
	// for the leaseholder is the higher of the two, as the first visit's limit was (startRead):
	// kept at Clock, a later visit's limit cut the interval short of an acknowledged write.
	// Clock itself stays the clock, as coordinators merge it into their HLCs.
	Floor ts.Timestamp `cbor:",omitempty"`
}

// observedAt is the observed timestamp a reply gives its coordinator for the node that sent it.
func observedAt(clock, floor ts.Timestamp) ts.Timestamp { return ts.MaxOf(clock, floor) }

// WriteReq lays down an intent.
type WriteReq struct {
	Req          uint64
	Txn          TxnMeta
	Key          string
	Value        []byte
	Tombstone    bool
	WriteTS      ts.Timestamp
	CreateRecord bool // this leaseholder holds the record: create it (PENDING) with the write
	// ReadAt, if set, is the transaction's read timestamp, sent because it read Key there: a
	// committed value of Key above ReadAt fails every refresh the commit can make, so the
	// write is refused (WriteTooOld) instead of laying an intent that can only be rolled back.
	ReadAt ts.Timestamp `cbor:",omitempty"`
}

// WriteResp answers WriteReq. WrittenTS > the request's WriteTS means the write was pushed (the
// timestamp cache or a newer committed value): the transaction must refresh before committing.
type WriteResp struct {
	Req       uint64
	Clock     ts.Timestamp
	WrittenTS ts.Timestamp
	Aborted   bool // the transaction's record is already aborted (it was pushed out)
	// TooOld: WriteTS is below the leaseholder's GC horizon; refused, the transaction aborts
	// (cause too-old).
	TooOld bool `cbor:",omitempty"`
	// WriteTooOld: another transaction committed Key above the request's ReadAt; refused, the
	// transaction aborts (cause write-too-old).
	WriteTooOld bool `cbor:",omitempty"`
}

// RefreshReq re-validates reads: no other transaction wrote Keys in (From, To].
type RefreshReq struct {
	Req   uint64
	Txn   storage.TxnID
	Keys  []string
	Spans []Span `cbor:",omitempty"` // scanned spans: nothing may have been written in them either
	From  ts.Timestamp
	To    ts.Timestamp
}

// RefreshResp answers RefreshReq.
type RefreshResp struct {
	Req   uint64
	Clock ts.Timestamp
	OK    bool
	// TooOld: To is below the leaseholder's GC horizon, where a refresh cannot be answered
	// (onRefresh); the transaction aborts (cause too-old). OK is false.
	TooOld bool `cbor:",omitempty"`
}

// QueryIntentReq asks whether Txn's intents on Keys (every key of the transaction this
// leaseholder holds: one message per node, not per key) are durable at timestamps <= TS
// (proving pipelined writes). Prevent, used by commit and recovery, makes each missing intent
// impossible to lay down at or below TS later.
type QueryIntentReq struct {
	Req     uint64
	Txn     storage.TxnID
	Keys    []string
	TS      ts.Timestamp
	Prevent bool
}

// QueryIntentResp answers QueryIntentReq. Found means every key's intent is there and durable,
// and is sent once they are; a single missing key decides the answer (the commit cannot
// succeed), so it is sent at once.
type QueryIntentResp struct {
	Req   uint64
	Clock ts.Timestamp
	Found bool
}

// ResolveReq commits (at TS) or aborts Txn's intents on Keys. Record is the node holding the
// transaction record, which a leaseholder tells (Resolved) once a commit's resolution is
// durable. The coordinator sends it, and so does the record holder (recovery, and a
// resolution whose acknowledgement is late).
type ResolveReq struct {
	Txn    storage.TxnID
	Keys   []string
	Commit bool
	TS     ts.Timestamp
	Record topo.NodeID
}

// Resolved tells a record holder that the sender's resolution of these committed transactions'
// intents is durable: it holds no intent of them and never will again (one message per record
// holder per flush). Once every leaseholder of a transaction's writes has said so, and its
// coordinator has ended it, the holder forgets the record.
type Resolved struct {
	Txns []storage.TxnID
}

// EndedQuery asks a coordinator which of these transactions of its own it no longer runs. A
// record holder asks about a record it decided, or may abort, without its coordinator's word.
type EndedQuery struct {
	Txns []storage.TxnID
}

// Ended answers an EndedQuery: the coordinator no longer runs these transactions, so it will
// never send anything about them again (links are FIFO: what it sent before came first).
type Ended struct {
	Txns []storage.TxnID
}

// Restarted tells the other nodes that the sender restarted (its Life-th life): what it had
// not answered is lost, and they send those requests again.
type Restarted struct {
	Life uint64
}

// OpsReq carries several reads and writes of one client request that share a leaseholder, so a
// batch costs one message per node rather than one per operation (as spanner's OpsReq and
// CockroachDB's BatchRequest per range). Each sub-request keeps its own request id and is
// evaluated exactly as if it had arrived alone, in order; only the answers are gathered.
type OpsReq struct {
	Ops []SubReq
}

// SubReq is one operation of an OpsReq: exactly one of Read and Write is set.
type SubReq struct {
	Read  *ReadReq  `cbor:",omitempty"`
	Write *WriteReq `cbor:",omitempty"`
}

// OpsResp answers an OpsReq with every sub-request's answer, in request order, once the last
// one is ready (a read may wait on an intent, a write without pipelining on the disk); answers
// whose values pass wire.MaxScanBytes are cut into several OpsResps, so each fits a frame.
type OpsResp struct {
	Clock ts.Timestamp
	Ops   []SubResp
}

// SubResp is one answer of an OpsResp: the one of Read and Write its sub-request asked for.
type SubResp struct {
	Read  *ReadResp  `cbor:",omitempty"`
	Write *WriteResp `cbor:",omitempty"`
}

// Push types.
const (
	PushQuery     uint8 = iota + 1 // the pusher waits: only learn the status (and expire a dead coordinator)
	PushTimestamp                  // move the pushee's commit timestamp above PushTo
	PushAbort                      // abort the pushee
)

// PushReq asks the record holder to push Pushee on behalf of a blocked request.
type PushReq struct {
	Req    uint64
	Pushee storage.TxnID
	Type   uint8
	PushTo ts.Timestamp
}

// Push outcomes.
const (
	PushPending   uint8 = iota + 1 // still running (or staging) and not pushed: wait
	PushPushed                     // commit timestamp is now at least PushTo
	PushCommitted                  // committed at TS
	PushAborted                    // aborted
)

// PushResp answers PushReq.
type PushResp struct {
	Req     uint64
	Clock   ts.Timestamp
	Outcome uint8
	TS      ts.Timestamp
}

// HeartbeatReq keeps a transaction alive at its record holder (and creates the record if it is
// missing, e.g. lost in a crash before it was persisted, or its creating write still waits on
// another transaction's intent).
type HeartbeatReq struct {
	Txn storage.TxnID
	// Key is the key of the write that creates the record, which the holder leads: what the
	// transaction left there tells a late copy from a record that is yet to be (onHeartbeat).
	Key string `cbor:",omitempty"`
	// Aborted says the coordinator heard from the holder that the transaction was aborted
	// (HeartbeatResp.Aborted) and keeps it only until its client's next request: not a sign
	// of life, and an abort to make again if a crash lost it.
	Aborted bool `cbor:",omitempty"`
}

// HeartbeatResp tells the coordinator if its transaction was aborted by a pusher.
type HeartbeatResp struct {
	Txn     storage.TxnID
	Aborted bool
}

// EndTxn status requests.
const (
	EndStage  uint8 = iota + 1 // parallel commit: STAGING with the in-flight writes
	EndCommit                  // explicit COMMITTED (after implicit commit, or without parallel commits)
	EndAbort                   // sent unanswered (Req 0) by a rollback; awaited after a failed proof (coord.go, stage)
)

// EndTxnReq changes the transaction record.
type EndTxnReq struct {
	Req      uint64
	Txn      storage.TxnID
	Status   uint8
	TS       ts.Timestamp
	InFlight []string // EndStage: every written key, to prove or recover
}

// EndTxn outcomes.
const (
	EndOK        uint8 = iota + 1 // staged / recorded
	EndPushed                     // the commit timestamp is below a push: refresh to TS and retry
	EndAborted                    // the record is aborted
	EndCommitted                  // an awaited EndAbort found the record committed (by recovery) at TS
)

// EndTxnResp answers EndTxnReq.
type EndTxnResp struct {
	Req     uint64
	Clock   ts.Timestamp
	Outcome uint8
	TS      ts.Timestamp
}

func (*ReadReq) Kind() wire.Kind         { return 400 }
func (*ReadResp) Kind() wire.Kind        { return 401 }
func (*WriteReq) Kind() wire.Kind        { return 402 }
func (*WriteResp) Kind() wire.Kind       { return 403 }
func (*RefreshReq) Kind() wire.Kind      { return 404 }
func (*RefreshResp) Kind() wire.Kind     { return 405 }
func (*QueryIntentReq) Kind() wire.Kind  { return 406 }
func (*QueryIntentResp) Kind() wire.Kind { return 407 }
func (*ResolveReq) Kind() wire.Kind      { return 408 }
func (*PushReq) Kind() wire.Kind         { return 409 }
func (*PushResp) Kind() wire.Kind        { return 410 }
func (*HeartbeatReq) Kind() wire.Kind    { return 411 }
func (*HeartbeatResp) Kind() wire.Kind   { return 412 }
func (*EndTxnReq) Kind() wire.Kind       { return 413 }
func (*EndTxnResp) Kind() wire.Kind      { return 414 }
func (*OpsReq) Kind() wire.Kind          { return 415 }
func (*OpsResp) Kind() wire.Kind         { return 416 }
func (*Resolved) Kind() wire.Kind        { return 417 }
func (*EndedQuery) Kind() wire.Kind      { return 418 }
func (*Ended) Kind() wire.Kind           { return 419 }
func (*Restarted) Kind() wire.Kind       { return 420 }

func init() {
	for _, m := range []wire.Msg{&ReadReq{}, &ReadResp{}, &WriteReq{}, &WriteResp{}, &RefreshReq{}, &RefreshResp{},
		&QueryIntentReq{}, &QueryIntentResp{}, &ResolveReq{}, &PushReq{}, &PushResp{}, &HeartbeatReq{},
		&HeartbeatResp{}, &EndTxnReq{}, &EndTxnResp{}, &OpsReq{}, &OpsResp{}, &Resolved{}, &EndedQuery{}, &Ended{}, &Restarted{}} {
		wire.Register(m)
	}
}
