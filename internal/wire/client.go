package wire

import "github.com/meridiandb/meridian/internal/ts"

// Op is a client operation inside a transaction.
type Op uint8

// Client operations. A transaction starts implicitly with its first request (which carries the
// transaction options), so a one-shot read costs one round trip to the coordinator.
const (
	OpGet Op = iota + 1
	OpPut
	OpDelete
	OpCommit
	OpAbort
	OpScan
	// OpBatch carries several reads and writes of distinct keys that the client does not order
	// among themselves (ClientRequest.Batch); the coordinator may run them concurrently and
	// answers once, with one result per operation (ClientReply.Results).
	OpBatch
)

// MaxBatchOps bounds the operations of one OpBatch request.
const MaxBatchOps = 1024

// BatchUnsupported is the Error of the CodeBadArgument reply of a protocol that does not run
// OpBatch; clients then send the operations one at a time.
const BatchUnsupported = "batch operations are not supported by this protocol"

func (o Op) String() string {
	switch o {
	case OpGet:
		return "get"
	case OpPut:
		return "put"
	case OpDelete:
		return "delete"
	case OpCommit:
		return "commit"
	case OpAbort:
		return "abort"
	case OpScan:
		return "scan"
	case OpBatch:
		return "batch"
	}
	return "op?"
}

// Code is the outcome class of a client request.
type Code uint8

// Outcome codes. Aborted is retryable; Unknown means the transaction may or may not have
// committed (a Jepsen-style "info" completion).
const (
	CodeOK Code = iota
	CodeAborted
	CodeBadArgument
	CodeUnavailable
	CodeUnknown
)

func (c Code) String() string {
	switch c {
	case CodeOK:
		return "ok"
	case CodeAborted:
		return "aborted"
	case CodeBadArgument:
		return "bad-argument"
	case CodeUnavailable:
		return "unavailable"
	case CodeUnknown:
		return "unknown"
	}
	return "code?"
}

// ClientRequest is one operation of a client's transaction, sent to the coordinator.
// (Client, Txn) names the transaction; Client is the sender's endpoint id, Txn a per-client
// counter that never repeats, Seq orders the requests of one transaction.
type ClientRequest struct {
	Txn      uint64
	Seq      uint32
	Op       Op
	Key      string `cbor:",omitempty"`
	EndKey   string `cbor:",omitempty"` // OpScan: exclusive upper bound
	Limit    int32  `cbor:",omitempty"` // OpScan: at most this many rows (0: no limit)
	Value    []byte `cbor:",omitempty"`
	ReadOnly bool   `cbor:",omitempty"` // declared read-only at the first request
	Attempt  uint32 `cbor:",omitempty"` // retry number of the same logical transaction (0 first)
	// Label names the transaction's kind (e.g. "new-order/remote-stock"), sent with its first
	// request; protocols may break their metrics down by it.
	Label string `cbor:",omitempty"`
	// Batch holds OpBatch's operations: OpGet, OpPut or OpDelete, each on a different key.
	Batch []BatchOp `cbor:",omitempty"`
}

// BatchOp is one operation of an OpBatch request.
type BatchOp struct {
	Op    Op
	Key   string
	Value []byte `cbor:",omitempty"`
}

// BatchResult is the outcome of one operation of an OpBatch request (reads fill it in).
type BatchResult struct {
	Found bool   `cbor:",omitempty"`
	Value []byte `cbor:",omitempty"`
}

// KV is one row of a scan.
type KV struct {
	Key   string
	Value []byte
}

// MaxScanBytes bounds a scan's answer, at each node that holds part of it and as a whole: a
// quarter of a frame (MaxFrameBytes), so that an answer, with the rest of its message and
// whatever forwards it, always fits one. A scan whose rows would exceed it is refused
// (ScanTooLarge) rather than cut short silently.
const MaxScanBytes = MaxFrameBytes / 4

// ScanTooLarge is the refusal of a scan whose answer would exceed MaxScanBytes.
const ScanTooLarge = "scan answer larger than 4 MiB: narrow the range or set a limit"

// RowsTooLarge reports whether rows, with a few bytes of framing each, exceed MaxScanBytes.
func RowsTooLarge(rows []KV) bool {
	n := 0
	for _, r := range rows {
		if n += len(r.Key) + len(r.Value) + 8; n > MaxScanBytes {
			return true
		}
	}
	return false
}

// BatchAnswerTooLarge is the refusal of an OpBatch whose reads' values would exceed
// MaxScanBytes: like a scan's answer (ScanTooLarge), it would not fit a frame. The batch has
// run (its writes are made, its reads count as the transaction's), and the transaction goes
// on: the client reads the keys in smaller batches or one at a time.
const BatchAnswerTooLarge = "batch answer larger than 4 MiB: read fewer keys at once"

// MaxTxnWriteBytes bounds a transaction's writes, each written key counted once, at its latest
// value, as TxnWriteBytes. Commit carries them between nodes in one message per participant
// (spanner's PrepareReq ships every buffered write; crdb's staging record lists every written
// key, k2's durability question every key written at a node), and a node reading a frame over
// MaxFrameBytes drops the link, so without a bound a transaction of many 1 MiB puts could
// never commit. Half a frame: each of those messages carries every write at most once, with
// less framing per write than TxnWriteOverheadBytes counts (under 30 bytes of CBOR), so it
// stays within half a frame plus a few fixed fields, and a count within the bound is also
// far from the codec's limit on array elements (2^20). A write that would take the
// transaction past it is refused (TxnWritesTooLarge), as CockroachDB refuses a transaction
// over its intent budget, and the transaction goes on without it.
const MaxTxnWriteBytes = MaxFrameBytes / 2

// TxnWriteOverheadBytes is what each written key counts against MaxTxnWriteBytes besides its
// key and value: the framing of a write in the messages above, with room to spare, so that a
// transaction of many tiny writes is bounded too.
const TxnWriteOverheadBytes = 64

// TxnWriteBytes is what a write of key counts against MaxTxnWriteBytes (value nil: a delete).
func TxnWriteBytes(key string, value []byte) int {
	return len(key) + len(value) + TxnWriteOverheadBytes
}

// TxnWritesTooLarge is the refusal of a write (or a batch holding one) that would take its
// transaction's writes past MaxTxnWriteBytes. Nothing of the request is applied, and the
// transaction goes on: it may commit what it has written, or abort.
const TxnWritesTooLarge = "transaction writes larger than 8 MiB (keys and values): write refused; commit or abort the transaction"

// ClientReply answers a ClientRequest.
type ClientReply struct {
	Txn      uint64
	Seq      uint32
	Code     Code
	Found    bool          `cbor:",omitempty"`
	Value    []byte        `cbor:",omitempty"`
	Rows     []KV          `cbor:",omitempty"`
	Cause    string        `cbor:",omitempty"` // abort cause, for metrics ("read-watermark", "wound", …)
	Error    string        `cbor:",omitempty"`
	CommitTS ts.Timestamp  `cbor:",omitempty"`
	Results  []BatchResult `cbor:",omitempty"` // OpBatch: one per operation, in request order
}

func (*ClientRequest) Kind() Kind { return 1 }
func (*ClientReply) Kind() Kind   { return 2 }

// maxDecodedBatchOps is the most batch operations a ClientRequest may carry to be decoded at
// all: far more than a batch may hold, so that one a little over MaxBatchOps still decodes and
// validation answers it, but few enough that decoding a frame of them costs under a megabyte.
const maxDecodedBatchOps = 16 * MaxBatchOps

func init() {
	RegisterBounded(&ClientRequest{}, maxDecodedBatchOps)
	Register(&ClientReply{})
}
