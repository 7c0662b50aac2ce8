// Package client is Meridian's Go client: interactive transactions with Get, Put, Delete, Scan,
// Commit and Abort, read-only transactions, typed errors, and a retry helper.
//
// The client is protocol-agnostic: every operation is a request to a coordinator node in the
// client's region, which runs the protocol on the client's behalf. The same code runs against
// the simulator (where a Transport suspends the calling coroutine until virtual time delivers
// the reply) and against real servers (where a Transport is a network connection).
//
//	db := client.Open(transport)
//	err := client.RunTxn(db, client.TxnOptions{}, func(tx *client.Txn) error {
//		v, err := tx.Get("k")
//		if err != nil && !errors.Is(err, client.ErrNotFound) {
//			return err
//		}
//		return tx.Put("k", append(v, 'x'))
//	})
package client

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/meridiandb/meridian/internal/runtime/frame"
	"github.com/meridiandb/meridian/internal/ts"
	"github.com/meridiandb/meridian/internal/wire"
)

// The wire protocol's types and limits the API uses, under names an application can refer to
// (their package is internal to this module, so an application could neither name nor build
// them: Batch could not be called, nor a Transport written).
type (
	// KV is a row: a key and its value.
	KV = wire.KV
	// Op is an operation of a request; Batch takes OpGet, OpPut and OpDelete.
	Op = wire.Op
	// BatchOp is one operation of Batch.
	BatchOp = wire.BatchOp
	// BatchResult is one operation's answer from Batch (a read's value and whether it was found).
	BatchResult = wire.BatchResult
	// Request and Reply are what a Transport carries; a Reply's Code is its outcome class.
	Request = wire.ClientRequest
	Reply   = wire.ClientReply
	Code    = wire.Code
	// Timestamp is a commit timestamp (Txn.CommitTS).
	Timestamp = ts.Timestamp
	// Setting is one of the settings nodes check of each other at a handshake (WithSetup).
	Setting = frame.Setting
)

// Operations of a Batch (and of a Request, with the rest a Transport carries).
const (
	OpGet    = wire.OpGet
	OpPut    = wire.OpPut
	OpDelete = wire.OpDelete
	OpCommit = wire.OpCommit
	OpAbort  = wire.OpAbort
	OpScan   = wire.OpScan
	OpBatch  = wire.OpBatch
)

// Outcome classes of a Reply (Reply.Code): aborted is retryable; unknown means a commit may or
// may not have applied.
const (
	CodeOK          = wire.CodeOK
	CodeAborted     = wire.CodeAborted
	CodeBadArgument = wire.CodeBadArgument
	CodeUnavailable = wire.CodeUnavailable
	CodeUnknown     = wire.CodeUnknown
)

// Limits on what a transaction may send at once; the coordinator enforces them.
const (
	// MaxTxnWriteBytes bounds a transaction's writes (see Put), each written key counting its
	// value's and key's bytes and TxnWriteOverheadBytes.
	MaxTxnWriteBytes      = wire.MaxTxnWriteBytes
	TxnWriteOverheadBytes = wire.TxnWriteOverheadBytes
	// MaxScanBytes bounds a scan's answer, and what one batch request may carry.
	MaxScanBytes = wire.MaxScanBytes
	// MaxBatchOps bounds the operations of one batch request; GetMany, PutMany and Batch split
	// larger ones.
	MaxBatchOps = wire.MaxBatchOps
)

// Limits on what a client may store; the coordinator enforces the same limits. Keys must also
// be valid UTF-8.
const (
	MaxKeyBytes   = 4 << 10
	MaxValueBytes = 1 << 20
	// MaxLabelBytes bounds a transaction's label (TxnOptions.Label): a kind's name, which
	// protocols keep metrics under.
	MaxLabelBytes = 128
)

// Errors. AbortError (retryable) and UnknownError are types; the rest are sentinels.
var (
	ErrNotFound    = errors.New("meridian: key not found")
	ErrBadArgument = errors.New("meridian: bad argument")
	ErrUnavailable = errors.New("meridian: unavailable")
	// ErrTxnDone is the error of a call on a transaction that has ended; it also wraps how it
	// ended (an AbortError or UnknownError) when it did not end by the caller's Commit or Abort.
	ErrTxnDone = errors.New("meridian: transaction already finished")
	// ErrTxnTooLarge is the refusal of a write that would take its transaction past
	// MaxTxnWriteBytes (it also wraps ErrBadArgument). The write is not applied; the
	// transaction goes on.
	ErrTxnTooLarge = errors.New("meridian: transaction writes too large")
)

// AbortError reports that the transaction aborted and may be retried.
type AbortError struct {
	Cause string // protocol's reason, e.g. "read-watermark", "wound-wait", "uncertainty"
}

// causeHints explain the abort causes whose name does not say what the client can do about them.
var causeHints = map[string]string{
	// A coordinator forgets a transaction it aborted for silence (its idle-timeout option, 5 s
	// by default) or lost in a restart, and then answers it with this.
	"unknown-transaction": "the coordinator no longer knows this transaction: it aborted it after the client sent nothing for its idle timeout (5s by default), or restarted",
}

func (e *AbortError) Error() string {
	if hint, ok := causeHints[e.Cause]; ok {
		return "meridian: transaction aborted: " + e.Cause + " (" + hint + ")"
	}
	return "meridian: transaction aborted: " + e.Cause
}

// UnknownError reports that the outcome of a commit is unknown: it may or may not have applied.
type UnknownError struct {
	Detail string
	Err    error // the transport's error, if that is why (e.g. wrapping context.Canceled)
}

func (e *UnknownError) Error() string { return "meridian: outcome unknown: " + e.Detail }

func (e *UnknownError) Unwrap() error { return e.Err }

// IsRetryable reports whether err is an abort that a retry may get past.
func IsRetryable(err error) bool {
	var a *AbortError
	return errors.As(err, &a)
}

// AbortCause returns the cause of an abort error, or "".
func AbortCause(err error) string {
	var a *AbortError
	if errors.As(err, &a) {
		return a.Cause
	}
	return ""
}

// Transport carries requests to the client's coordinator.
type Transport interface {
	// RoundTrip sends req and blocks until its reply (or a transport error, which the client
	// reports as ErrUnavailable before commit and as an unknown outcome at commit, under their
	// "meridian:" prefix: a transport's errors carry none of their own). An error that wraps
	// ErrBadArgument says the transport refused req without sending any of it: the client
	// reuses its sequence number and the transaction goes on as if it had not been made.
	RoundTrip(req *Request) (*Reply, error)
	// Sleep blocks for d (virtual time in the simulator).
	Sleep(d time.Duration)
	// Now is the time used for latencies and histories, in nanoseconds.
	Now() int64
}

// ContextTransport is a Transport whose round trips a context can cut short (NetTransport is
// one). A transaction begun with BeginContext sends through it; with another Transport its
// context is only checked before each request.
type ContextTransport interface {
	Transport
	// RoundTripContext is RoundTrip that returns, with an error wrapping ctx.Err(), once ctx
	// is done; the request may or may not have reached the coordinator by then.
	RoundTripContext(ctx context.Context, req *Request) (*Reply, error)
}

// DB is a handle on a Meridian cluster for one client endpoint. It is not safe for concurrent
// use: open one per concurrent client. A call of a transaction's method made while another
// call on the same DB runs fails at once (ErrBadArgument) rather than sending anything.
type DB struct {
	t       Transport
	nextTxn atomic.Uint64
	// busy is set while a call of one of the DB's transactions runs. A second goroutine's
	// request would carry the same transaction and sequence numbers as the one in flight, or
	// take the same transaction id, and a reply would be matched to the wrong request.
	busy    atomic.Bool
	noBatch bool // the protocol refused an OpBatch: send batches' operations one at a time
	// shared is set when the transport already served another DB (one that says so: see
	// Open); every call then fails, since the two DBs' transaction numbers would collide.
	shared bool
}

// enter claims db for one call of a transaction's method; leave releases it.
func (db *DB) enter() error {
	if db.shared {
		return fmt.Errorf("%w: this DB's transport already serves another DB, and their transaction numbers would collide: dial one transport per DB", ErrBadArgument)
	}
	if !db.busy.CompareAndSwap(false, true) {
		return fmt.Errorf("%w: DB used by two goroutines at once: open one DB, on its own transport, per goroutine", ErrBadArgument)
	}
	return nil
}

func (db *DB) leave() { db.busy.Store(false) }

// Open returns a DB that sends requests through t. A transport serves one DB: a NetTransport
// given to a second Open makes that DB's every call fail (ErrBadArgument).
func Open(t Transport) *DB {
	db := &DB{t: t}
	if c, ok := t.(interface{ claimForDB() bool }); ok && !c.claimForDB() {
		db.shared = true
	}
	return db
}

// Transport returns the DB's transport.
func (db *DB) Transport() Transport { return db.t }

// TxnOptions configures a transaction.
type TxnOptions struct {
	ReadOnly bool   // the transaction will only read; protocols may serve it lock-free
	Attempt  uint32 // retry number of the same logical transaction (set by RunTxn)
	// Label names the transaction's kind for the protocol's metrics (e.g. "new-order"); it is
	// sent with the first request only.
	Label string
}

// Txn is one transaction. Its methods must be called from one goroutine.
type Txn struct {
	db   *DB
	ctx  context.Context // nil: not bound to a context (Begin)
	id   uint64
	opts TxnOptions
	seq  uint32
	done bool
	// lost is the error of a request that may or may not have reached the coordinator (its
	// connection failed). The transaction can then only be aborted: a commit sent after it
	// could succeed without that request's write (the coordinator never saw it).
	lost error
	// ended is how the transaction ended when not by the caller: the abort or unknown outcome
	// a request was answered with. A later call reports it (with ErrTxnDone), so that a caller
	// that missed the error learns it; a later Commit returns it as is.
	ended     error
	committed bool
	CommitTS  Timestamp // set after a successful commit, when the protocol reports one
}

// Begin starts a transaction. Nothing is sent until the first operation.
func (db *DB) Begin(opts TxnOptions) *Txn {
	return &Txn{db: db, opts: opts}
}

// BeginContext starts a transaction bound to ctx: once ctx is done, a request not yet sent fails
// at once with ctx's error (the transaction stays open until Abort), and one under way returns
// it as soon as the transport can tell (a ContextTransport) — as a request lost in transit
// before commit (only Abort is left) and as an unknown outcome at commit, since the coordinator
// may have received it. Abort is sent whatever ctx says, so that the coordinator lets the
// transaction go.
func (db *DB) BeginContext(ctx context.Context, opts TxnOptions) *Txn {
	return &Txn{db: db, ctx: ctx, opts: opts}
}

// ID is the transaction's per-client id. It is assigned at the first request (or the first
// call of ID): coordinators refuse a first request numbered at or below a transaction of the
// endpoint that has already ended (a late network copy), so ids must grow in the order
// transactions start talking, not in the order they were begun. Calling ID before the first
// request therefore fixes the id early: if another transaction of the DB is numbered and ends
// first, this one's first request is refused (aborted, unknown-transaction).
func (tx *Txn) ID() uint64 {
	if tx.id == 0 {
		tx.id = tx.db.nextTxn.Add(1)
	}
	return tx.id
}

func (tx *Txn) call(op wire.Op, key, end string, limit int, value []byte) (*wire.ClientReply, error) {
	if err := tx.db.enter(); err != nil {
		return nil, err
	}
	defer tx.db.leave()
	return tx.callHeld(op, key, end, limit, value)
}

// callHeld is call for a caller that holds the DB (enter).
func (tx *Txn) callHeld(op wire.Op, key, end string, limit int, value []byte) (*wire.ClientReply, error) {
	if err := tx.check(op, key, value); err != nil {
		return nil, err
	}
	if len(end) > MaxKeyBytes {
		return nil, fmt.Errorf("%w: key longer than %d bytes", ErrBadArgument, MaxKeyBytes)
	}
	if !utf8.ValidString(end) {
		return nil, fmt.Errorf("%w: key %q is not valid UTF-8", ErrBadArgument, end)
	}
	if limit < 0 || limit > math.MaxInt32 {
		return nil, fmt.Errorf("%w: scan limit %d outside 0..%d (0: no limit)", ErrBadArgument, limit, math.MaxInt32)
	}
	return tx.send(&wire.ClientRequest{Op: op, Key: key, EndKey: end, Limit: int32(limit), Value: value})
}

func (tx *Txn) lostError() error {
	return fmt.Errorf("%w: an earlier request of this transaction was lost in transit (%v), so what it did is unknown: the transaction can only be aborted", ErrUnavailable, tx.lost)
}

// finished is the error of a call on an ended transaction.
func (tx *Txn) finished() error {
	if tx.ended != nil {
		return fmt.Errorf("%w: %w", ErrTxnDone, tx.ended)
	}
	return ErrTxnDone
}

// check validates one operation before anything is sent.
func (tx *Txn) check(op wire.Op, key string, value []byte) error {
	if tx.done {
		return tx.finished()
	}
	if tx.lost != nil && op != wire.OpAbort {
		return tx.lostError()
	}
	if len(key) > MaxKeyBytes {
		return fmt.Errorf("%w: key longer than %d bytes", ErrBadArgument, MaxKeyBytes)
	}
	// Keys and labels travel as text: a node cannot decode a request holding one that is not
	// UTF-8, so it would never answer, and the client would wait out its timeout and report the
	// outcome unknown.
	if !utf8.ValidString(key) {
		return fmt.Errorf("%w: key %q is not valid UTF-8", ErrBadArgument, key)
	}
	if tx.seq == 0 && !utf8.ValidString(tx.opts.Label) {
		return fmt.Errorf("%w: label is not valid UTF-8", ErrBadArgument)
	}
	if tx.seq == 0 && len(tx.opts.Label) > MaxLabelBytes {
		return fmt.Errorf("%w: label longer than %d bytes", ErrBadArgument, MaxLabelBytes)
	}
	if len(value) > MaxValueBytes {
		return fmt.Errorf("%w: value longer than %d bytes", ErrBadArgument, MaxValueBytes)
	}
	if (op == wire.OpGet || op == wire.OpPut || op == wire.OpDelete) && key == "" {
		return fmt.Errorf("%w: empty key", ErrBadArgument)
	}
	if tx.opts.ReadOnly && (op == wire.OpPut || op == wire.OpDelete) {
		return fmt.Errorf("%w: write in a read-only transaction", ErrBadArgument)
	}
	return nil
}

// send stamps req with the transaction's ids and options, sends it and maps the reply's code
// to the client's errors.
func (tx *Txn) send(req *wire.ClientRequest) (*wire.ClientReply, error) {
	ctx := tx.ctx
	if req.Op == wire.OpAbort {
		ctx = nil // an abort goes out whatever the context says
	}
	if ctx != nil && ctx.Err() != nil {
		// Not sent: a Commit or Abort stopped here leaves the transaction open to Abort.
		return nil, fmt.Errorf("meridian: request not sent: %w", notSent{ctx.Err()})
	}
	req.Txn, req.Seq, req.ReadOnly, req.Attempt = tx.ID(), tx.seq, tx.opts.ReadOnly, tx.opts.Attempt
	if tx.seq == 0 {
		req.Label = tx.opts.Label
	}
	tx.seq++
	var rep *Reply
	var err error
	if ct, ok := tx.db.t.(ContextTransport); ok && ctx != nil {
		rep, err = ct.RoundTripContext(ctx, req)
	} else {
		rep, err = tx.db.t.RoundTrip(req)
	}
	if err != nil {
		if errors.Is(err, ErrBadArgument) {
			// The transport refused the request before sending it (NetTransport: its numbers
			// are already in flight), so the number was not used and nothing happened: not an
			// unknown outcome, nor a request lost in transit.
			tx.seq--
			return nil, fmt.Errorf("%w: %w", ErrBadArgument, notSent{err})
		}
		if req.Op == wire.OpCommit {
			return nil, tx.end(&UnknownError{Detail: err.Error(), Err: err})
		}
		tx.lost = err
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	switch rep.Code {
	case wire.CodeOK:
		return rep, nil
	case wire.CodeAborted:
		return nil, tx.end(&AbortError{Cause: rep.Cause})
	case wire.CodeBadArgument:
		if strings.HasSuffix(rep.Error, wire.TxnWritesTooLarge) {
			return nil, fmt.Errorf("%w: %w: %s", ErrBadArgument, ErrTxnTooLarge, rep.Error)
		}
		return nil, fmt.Errorf("%w: %s", ErrBadArgument, rep.Error)
	case wire.CodeUnknown:
		return nil, tx.end(&UnknownError{Detail: rep.Error})
	case wire.CodeUnavailable:
		return nil, fmt.Errorf("%w: %s", ErrUnavailable, rep.Error)
	default:
		// A code this client does not know (a newer server's): for a commit, the outcome is
		// not known to be "not committed", so it must not be reported as a failure.
		if req.Op == wire.OpCommit {
			return nil, tx.end(&UnknownError{Detail: fmt.Sprintf("commit answered with code %d: %s", rep.Code, rep.Error)})
		}
		return nil, fmt.Errorf("%w: code %d: %s", ErrUnavailable, rep.Code, rep.Error)
	}
}

// notSent marks a request the transport refused without sending it: a Commit or Abort refused
// so leaves the transaction open (it can still be aborted), since the coordinator holds it.
type notSent struct{ err error }

func (e notSent) Error() string { return e.err.Error() }

func (e notSent) Unwrap() error { return e.err }

func isNotSent(err error) bool {
	var n notSent
	return errors.As(err, &n)
}

// end records that a request's answer ended the transaction, and returns err.
func (tx *Txn) end(err error) error {
	tx.done, tx.ended = true, err
	return err
}

// Read is the outcome of one read of GetMany.
type Read struct {
	Value []byte
	Found bool
}

// GetMany reads keys, which must be distinct. The coordinator may read them concurrently: one
// round trip to it, and one to each data node in parallel, instead of one per key (one per
// MaxBatchOps keys, or per MaxScanBytes of keys and values). The reads are part of the
// transaction exactly as if made by Get in some order.
func (tx *Txn) GetMany(keys []string) ([]Read, error) {
	ops := make([]wire.BatchOp, len(keys))
	for i, k := range keys {
		ops[i] = wire.BatchOp{Op: wire.OpGet, Key: k}
	}
	res, err := tx.batch(ops)
	if err != nil {
		return nil, err
	}
	out := make([]Read, len(res))
	for i, r := range res {
		out[i] = Read{Value: r.Value, Found: r.Found}
	}
	return out, nil
}

// PutMany writes rows, whose keys must be distinct, as one batch (see GetMany).
func (tx *Txn) PutMany(rows []KV) error {
	ops := make([]wire.BatchOp, len(rows))
	for i, r := range rows {
		v := r.Value
		if v == nil {
			v = []byte{}
		}
		ops[i] = wire.BatchOp{Op: wire.OpPut, Key: r.Key, Value: v}
	}
	_, err := tx.batch(ops)
	return err
}

// Batch runs reads, writes and deletes of distinct keys (OpGet, OpPut, OpDelete) that the
// caller does not order among themselves, as one request the coordinator may run concurrently;
// reads' results come back in request order (see GetMany).
func (tx *Txn) Batch(ops []BatchOp) ([]BatchResult, error) { return tx.batch(ops) }

// SetBatching turns batches on (the default) or off: off, GetMany, PutMany and Batch send their
// operations one at a time, for comparison.
func (db *DB) SetBatching(on bool) { db.noBatch = !on }

// batch sends ops as OpBatch requests, each of at most MaxBatchOps operations and MaxScanBytes
// (1,025 reads had gone one at a time, a thousand times slower than 1,024), or one at a time to
// a protocol that does not run batches (learned from its first refusal and remembered by the
// DB) and when a request's answer would be too large for one (wire.BatchAnswerTooLarge).
func (tx *Txn) batch(ops []wire.BatchOp) ([]wire.BatchResult, error) {
	if len(ops) == 0 {
		return nil, nil
	}
	if err := tx.db.enter(); err != nil {
		return nil, err
	}
	defer tx.db.leave()
	seen := make(map[string]bool, len(ops))
	for _, op := range ops {
		// Anything else would go out as its own request when the batch is sent one op at a
		// time: a commit in it ended the transaction while the body went on.
		if op.Op != wire.OpGet && op.Op != wire.OpPut && op.Op != wire.OpDelete {
			return nil, fmt.Errorf("%w: batch operation %v is not a get, put or delete", ErrBadArgument, op.Op)
		}
		if err := tx.check(op.Op, op.Key, op.Value); err != nil {
			return nil, err
		}
		if seen[op.Key] {
			return nil, fmt.Errorf("%w: key %q twice in one batch", ErrBadArgument, op.Key)
		}
		seen[op.Key] = true
	}
	out := make([]wire.BatchResult, 0, len(ops))
	for len(ops) > 0 {
		n := batchPrefix(ops)
		res, err := tx.batchChunk(ops[:n])
		if err != nil {
			return nil, err
		}
		out, ops = append(out, res...), ops[n:]
	}
	return out, nil
}

// batchChunk sends ops, validated and within one request's bounds, as one OpBatch request or
// one at a time.
func (tx *Txn) batchChunk(ops []wire.BatchOp) ([]wire.BatchResult, error) {
	if !tx.db.noBatch && len(ops) > 1 {
		rep, err := tx.send(&wire.ClientRequest{Op: wire.OpBatch, Batch: ops})
		switch {
		case err == nil && len(rep.Results) == len(ops):
			return rep.Results, nil
		case err == nil:
			return nil, fmt.Errorf("%w: batch of %d answered with %d results", ErrUnavailable, len(ops), len(rep.Results))
		case errors.Is(err, ErrBadArgument) && strings.HasSuffix(err.Error(), wire.BatchUnsupported):
			// The refusal is stateless at the coordinator: reuse the sequence number (a first
			// request must still be number 0 and carry the label).
			tx.db.noBatch = true
			tx.seq--
		case errors.Is(err, ErrBadArgument) && strings.HasSuffix(err.Error(), wire.BatchAnswerTooLarge):
			// The reads' values would not fit one answer. The coordinator ran the batch and
			// took its sequence number (a copy of it would be a duplicate), so the next
			// number goes on; running the ops again, one at a time, reads the same values
			// and writes the same ones in this transaction.
		default:
			return nil, err
		}
	}
	out := make([]wire.BatchResult, len(ops))
	for i, op := range ops {
		rep, err := tx.send(&wire.ClientRequest{Op: op.Op, Key: op.Key, Value: op.Value})
		if err != nil {
			return nil, err
		}
		out[i] = wire.BatchResult{Found: rep.Found, Value: rep.Value}
	}
	return out, nil
}

// batchPrefix is how many of ops, at least one, may travel as one OpBatch request: at most
// wire.MaxBatchOps, and within wire.MaxScanBytes. A node closes a connection that sends it a
// frame over wire.MaxFrameBytes (20 puts of 1 MiB failed as "connection lost"), and a
// coordinator forwards a batch's operations to data nodes inside messages of its own, so a
// batch is held to the bound a scan's answer has for the same reason. One operation always
// fits (a key and a value within their limits).
func batchPrefix(ops []wire.BatchOp) int {
	size := 0
	for i, op := range ops {
		if size += len(op.Key) + len(op.Value) + 8; i == wire.MaxBatchOps || (size > wire.MaxScanBytes && i > 0) {
			return i
		}
	}
	return len(ops)
}

// Get reads key. It returns ErrNotFound if the key has no visible value.
func (tx *Txn) Get(key string) ([]byte, error) {
	rep, err := tx.call(wire.OpGet, key, "", 0, nil)
	if err != nil {
		return nil, err
	}
	if !rep.Found {
		return nil, ErrNotFound
	}
	return rep.Value, nil
}

// Put writes value at key.
//
// A transaction's writes are held to MaxTxnWriteBytes (8 MiB), each written key counted once,
// at its latest value, plus TxnWriteOverheadBytes, because its commit carries them between
// nodes in messages that must fit a frame. A write that would take the transaction past it
// fails with ErrTxnTooLarge (and ErrBadArgument) and is not applied; the transaction goes on,
// and may commit what it has written or abort. The same holds for PutMany and Batch, each
// request of which is refused whole; one that needs several requests (over MaxBatchOps
// operations or MaxScanBytes) keeps the requests before the refused one written.
func (tx *Txn) Put(key string, value []byte) error {
	if value == nil {
		value = []byte{}
	}
	_, err := tx.call(wire.OpPut, key, "", 0, value)
	return err
}

// Delete removes key.
func (tx *Txn) Delete(key string) error {
	_, err := tx.call(wire.OpDelete, key, "", 0, nil)
	return err
}

// Scan returns up to limit rows with start ≤ key < end, in key order (limit 0: no limit).
// A scan whose answer would exceed MaxScanBytes, or one a protocol does not serve (spanner
// in a read-write transaction), fails with ErrBadArgument.
func (tx *Txn) Scan(start, end string, limit int) ([]KV, error) {
	rep, err := tx.call(wire.OpScan, start, end, limit, nil)
	if err != nil {
		return nil, err
	}
	return rep.Rows, nil
}

// Commit commits the transaction. A read-only transaction that sent nothing commits locally.
// Called again after it succeeded, it returns nil; on a transaction that a request's answer
// ended, it returns that answer's error (an AbortError or UnknownError), so that a caller that
// missed it learns how the transaction ended; after Abort, ErrTxnDone.
func (tx *Txn) Commit() error {
	if err := tx.db.enter(); err != nil {
		return err
	}
	defer tx.db.leave()
	switch {
	case tx.committed:
		return nil
	case tx.done && tx.ended != nil:
		return tx.ended
	}
	if tx.seq == 0 && !tx.done {
		tx.committed = true
		tx.done = true
		return nil
	}
	if tx.lost != nil && !tx.done {
		// The commit is not sent (the coordinator may never have seen the lost request), but
		// the abort is: a caller that takes this error for the transaction's end (RunTxn, the
		// bench driver) would leave it holding its locks at the coordinator until the idle
		// timeout.
		_, _ = tx.callHeld(wire.OpAbort, "", "", 0, nil)
		return tx.end(tx.lostError())
	}
	rep, err := tx.callHeld(wire.OpCommit, "", "", 0, nil)
	if isNotSent(err) || err != nil && tx.ended == nil {
		// Not sent, or refused (bad argument, unavailable) with the transaction still open at
		// its coordinator: Abort must still go out, or the transaction holds its locks until
		// the coordinator's idle timeout (review). An abort, a loss or an unknown outcome ended it.
		return err
	}
	tx.done = true
	if err != nil {
		return err
	}
	tx.committed, tx.CommitTS = true, rep.CommitTS
	return nil
}

// Abort abandons the transaction. Aborting a finished transaction is a no-op.
func (tx *Txn) Abort() error {
	if err := tx.db.enter(); err != nil {
		return err
	}
	defer tx.db.leave()
	if tx.done {
		return nil
	}
	if tx.seq == 0 {
		tx.done = true
		return nil
	}
	_, err := tx.callHeld(wire.OpAbort, "", "", 0, nil)
	if isNotSent(err) {
		return err
	}
	// The caller ended it: an abort answered "aborted" (the coordinator had already dropped
	// the transaction) is not an end to report to a later Commit, which says ErrTxnDone.
	tx.done, tx.ended = true, nil
	if err != nil && !IsRetryable(err) {
		return err
	}
	return nil
}

// RetryPolicy bounds RunTxn's retries.
type RetryPolicy struct {
	MaxAttempts int           // total attempts; 0 means 10
	BaseBackoff time.Duration // first backoff; doubles up to MaxBackoff; 0 means 1ms
	MaxBackoff  time.Duration // 0 means 100ms
}

// RunTxn runs fn in a transaction and commits it, retrying with a fresh transaction (and, for
// timestamp protocols, a fresh timestamp) while the error is a retryable abort. fn must be safe to
// re-run; it may commit the transaction itself. It returns the error that ended it: one not
// retryable, or once every attempt of the policy (10) aborted, "gave up after 10 attempts"
// wrapping the last abort.
func RunTxn(db *DB, opts TxnOptions, fn func(tx *Txn) error) error {
	return RunTxnWith(db, opts, RetryPolicy{}, fn)
}

// RunTxnContext is RunTxnWith whose transactions are bound to ctx (BeginContext): it makes no
// attempt after ctx is done and returns ctx's error then (a backoff already begun, at most
// p.MaxBackoff, runs out first).
func RunTxnContext(ctx context.Context, db *DB, opts TxnOptions, p RetryPolicy, fn func(tx *Txn) error) error {
	return runTxn(ctx, db, opts, p, fn)
}

// RunTxnWith is RunTxn with an explicit retry policy.
func RunTxnWith(db *DB, opts TxnOptions, p RetryPolicy, fn func(tx *Txn) error) error {
	return runTxn(nil, db, opts, p, fn)
}

func runTxn(ctx context.Context, db *DB, opts TxnOptions, p RetryPolicy, fn func(tx *Txn) error) error {
	if p.MaxAttempts <= 0 {
		p.MaxAttempts = 10
	}
	if p.BaseBackoff <= 0 {
		p.BaseBackoff = time.Millisecond
	}
	if p.MaxBackoff <= 0 {
		p.MaxBackoff = 100 * time.Millisecond
	}
	backoff := p.BaseBackoff
	var err error
	for attempt := 0; attempt < p.MaxAttempts; attempt++ {
		if ctx != nil && ctx.Err() != nil {
			if err == nil {
				return fmt.Errorf("meridian: no attempt made: %w", ctx.Err())
			}
			return fmt.Errorf("meridian: gave up after %d attempts: %w; the last: %w", attempt, ctx.Err(), err)
		}
		o := opts
		o.Attempt = uint32(attempt)
		tx := &Txn{db: db, ctx: ctx, opts: o}
		err = fn(tx)
		if err == nil {
			err = tx.Commit()
		}
		if err != nil {
			_ = tx.Abort() // nothing once the transaction has ended; a commit not sent leaves it open
		}
		if err == nil || !IsRetryable(err) {
			return err
		}
		if attempt == p.MaxAttempts-1 {
			break
		}
		db.t.Sleep(backoff)
		backoff *= 2
		if backoff > p.MaxBackoff {
			backoff = p.MaxBackoff
		}
	}
	return fmt.Errorf("meridian: gave up after %d attempts: %w", p.MaxAttempts, err)
}
