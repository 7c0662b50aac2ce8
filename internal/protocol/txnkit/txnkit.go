// Package txnkit holds the small pieces every protocol's coordinator needs and would otherwise
// write again: naming a client's transaction, validating client requests, answering clients,
// and reading typed protocol options.
package txnkit

import (
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/meridiandb/meridian/client"
	"github.com/meridiandb/meridian/internal/node"
	"github.com/meridiandb/meridian/internal/protocol"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/wire"
)

// ClientTxn names a client's transaction: the client endpoint and its per-client counter.
type ClientTxn struct {
	Client topo.NodeID
	Txn    uint64
}

// Validate checks a client request against the limits every protocol enforces, returning a
// reply to send back if the request is bad (nil if it is fine).
func Validate(req *wire.ClientRequest) *wire.ClientReply {
	bad := func(format string, args ...any) *wire.ClientReply {
		return &wire.ClientReply{Txn: req.Txn, Seq: req.Seq, Code: wire.CodeBadArgument, Error: fmt.Sprintf(format, args...)}
	}
	switch req.Op {
	case wire.OpGet, wire.OpPut, wire.OpDelete:
		if req.Key == "" {
			return bad("empty key")
		}
	case wire.OpScan, wire.OpCommit, wire.OpAbort:
	case wire.OpBatch:
		if msg := validateBatch(req); msg != "" {
			return bad("%s", msg)
		}
	default:
		return bad("unknown operation %d", req.Op)
	}
	if req.Op == wire.OpScan && req.Limit < 0 {
		// The Go client refuses one; a gRPC client's reached here and was taken as no limit.
		return bad("scan limit %d is negative (0: no limit)", req.Limit)
	}
	if len(req.Key) > client.MaxKeyBytes || len(req.EndKey) > client.MaxKeyBytes {
		return bad("key longer than %d bytes", client.MaxKeyBytes)
	}
	if len(req.Value) > client.MaxValueBytes {
		return bad("value longer than %d bytes", client.MaxValueBytes)
	}
	// Keys and labels are text on the wire: a node cannot decode a message holding one that is
	// not UTF-8, so a protocol that took one in would lose every message it sent about it.
	for _, k := range []string{req.Key, req.EndKey} {
		if !utf8.ValidString(k) {
			return bad("key %q is not valid UTF-8", k)
		}
	}
	if !utf8.ValidString(req.Label) {
		return bad("label is not valid UTF-8")
	}
	if len(req.Label) > client.MaxLabelBytes {
		return bad("label longer than %d bytes", client.MaxLabelBytes)
	}
	if req.ReadOnly && (req.Op == wire.OpPut || req.Op == wire.OpDelete) {
		return bad("write in a read-only transaction")
	}
	return nil
}

// validateBatch checks an OpBatch's operations ("" if they are fine): reads and writes only,
// each on its own key (the coordinator may run them in any order), within the size limits.
func validateBatch(req *wire.ClientRequest) string {
	if len(req.Batch) == 0 || len(req.Batch) > wire.MaxBatchOps {
		return fmt.Sprintf("a batch holds 1 to %d operations, not %d", wire.MaxBatchOps, len(req.Batch))
	}
	seen := make(map[string]bool, len(req.Batch))
	size := 0
	for _, op := range req.Batch {
		switch op.Op {
		case wire.OpGet, wire.OpPut, wire.OpDelete:
		default:
			return fmt.Sprintf("batch operation %v is not a get, put or delete", op.Op)
		}
		switch {
		case op.Key == "":
			return "empty key"
		case len(op.Key) > client.MaxKeyBytes:
			return fmt.Sprintf("key longer than %d bytes", client.MaxKeyBytes)
		case len(op.Value) > client.MaxValueBytes:
			return fmt.Sprintf("value longer than %d bytes", client.MaxValueBytes)
		case !utf8.ValidString(op.Key):
			return fmt.Sprintf("key %q is not valid UTF-8", op.Key)
		case req.ReadOnly && op.Op != wire.OpGet:
			return "write in a read-only transaction"
		case seen[op.Key]:
			return fmt.Sprintf("key %q twice in one batch", op.Key)
		}
		seen[op.Key] = true
		// A coordinator forwards a batch's operations inside messages of its own, and a node
		// reading a frame over wire.MaxFrameBytes drops the link: a batch is held to the bound
		// of a scan's answer, measured as the Go client measures it (client.batchPrefix), which
		// splits a larger one into requests that each fit and so is never refused here.
		if size += len(op.Key) + len(op.Value) + 8; size > wire.MaxScanBytes {
			return fmt.Sprintf("batch keys and values larger than %d MiB: send fewer operations at once", wire.MaxScanBytes>>20)
		}
	}
	return ""
}

// ResultsTooLarge reports whether a batch's answer exceeds wire.MaxScanBytes (its values, with
// a few bytes of framing each), and must be refused (wire.BatchAnswerTooLarge).
func ResultsTooLarge(res []wire.BatchResult) bool {
	return ValuesTooLarge(len(res), func(i int) []byte { return res[i].Value })
}

// ValuesTooLarge is ResultsTooLarge for n values given by value, for an answer of another
// shape (a node's share of a batch).
func ValuesTooLarge(n int, value func(i int) []byte) bool {
	size := 0
	for i := range n {
		if size += len(value(i)) + 8; size > wire.MaxScanBytes {
			return true
		}
	}
	return false
}

// BatchAnswerRefused is the answer to a batch whose answer ResultsTooLarge refuses.
func BatchAnswerRefused() *wire.ClientReply {
	return &wire.ClientReply{Code: wire.CodeBadArgument, Error: wire.BatchAnswerTooLarge}
}

// BatchUnsupported answers an OpBatch of a protocol that runs operations one at a time; the
// client then sends them singly.
func BatchUnsupported(env node.Env, to topo.NodeID, req *wire.ClientRequest) {
	Reply(env, to, req, &wire.ClientReply{Code: wire.CodeBadArgument, Error: wire.BatchUnsupported})
}

// Reply sends r to the client that sent req, stamping it with the request's ids.
func Reply(env node.Env, to topo.NodeID, req *wire.ClientRequest, r *wire.ClientReply) {
	r.Txn, r.Seq = req.Txn, req.Seq
	env.Send(to, r)
}

// OK answers a request successfully with no payload.
func OK(env node.Env, to topo.NodeID, req *wire.ClientRequest) {
	Reply(env, to, req, &wire.ClientReply{Code: wire.CodeOK})
}

// Aborted answers that the transaction aborted for cause.
func Aborted(env node.Env, to topo.NodeID, req *wire.ClientRequest, cause string) {
	Reply(env, to, req, &wire.ClientReply{Code: wire.CodeAborted, Cause: cause})
}

// CauseUnknownTxn is the abort cause AnswerUnheld answers a transaction's later request with.
const CauseUnknownTxn = "unknown-transaction"

// AnswerUnheld handles req, a request of a transaction its coordinator does not hold. A first
// request (Seq 0) begins the transaction unless it commits or aborts: answered is false then,
// nothing was sent, and the caller begins it; a first commit or abort did nothing and is
// answered OK. A later request (Seq > 0) belongs to a transaction that began at this
// coordinator and is gone: an idle timeout ended it while its client was silent, or an earlier
// life held it. Begun afresh, it would commit only the requests from this one on, and the client
// would take that commit for all of them (put k1, silence, put k2, commit: both OK, k1 lost). So
// it aborts, retryably, and refused says so, for the caller to count. A first request may be a
// late copy of an ended transaction's: the caller refuses those first (EndedTxns).
func AnswerUnheld(env node.Env, to topo.NodeID, req *wire.ClientRequest) (answered, refused bool) {
	switch {
	case req.Seq != 0:
		Aborted(env, to, req, CauseUnknownTxn)
		return true, true
	case req.Op == wire.OpCommit || req.Op == wire.OpAbort:
		OK(env, to, req)
		return true, false
	}
	return false, false
}

// Options reads typed protocol options, remembering the first error.
type Options struct {
	Protocol string
	M        map[string]string
	Err      error
}

func (o *Options) fail(key, val, want string) {
	if o.Err == nil {
		o.Err = &protocol.OptionError{Protocol: o.Protocol, Key: key, Value: val, Want: want}
	}
}

// MaxDuration bounds every duration option. Protocols add such durations to clock readings and
// to one another (K2's commit wait is 2×(ttl+ε)), and millions of hours overflow: with
// ttl=2000000h K2 stopped waiting at all and its histories were not strictly serializable. No
// run lasts this long (the CLI's --duration stops at the same bound).
const MaxDuration = 1000 * time.Hour

// Duration reads a duration option in [0, MaxDuration].
func (o *Options) Duration(key string, def time.Duration) time.Duration {
	v, ok := o.M[key]
	if !ok {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 || d > MaxDuration {
		o.fail(key, v, fmt.Sprintf("a duration from 0 to %dh such as 10ms", MaxDuration/time.Hour))
		return def
	}
	return d
}

// Bool reads an on/off option (on, off, true, false, 1, 0).
func (o *Options) Bool(key string, def bool) bool {
	v, ok := o.M[key]
	if !ok {
		return def
	}
	switch v {
	case "on", "true", "1", "yes":
		return true
	case "off", "false", "0", "no":
		return false
	}
	o.fail(key, v, "on or off")
	return def
}

// Int reads an integer option within [min, max].
func (o *Options) Int(key string, def, min, max int) int {
	v, ok := o.M[key]
	if !ok {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < min || n > max {
		o.fail(key, v, fmt.Sprintf("an integer in %d..%d", min, max))
		return def
	}
	return n
}

// Enum reads an option that must be one of choices ("" allowed if it is the default).
func (o *Options) Enum(key, def string, choices ...string) string {
	v, ok := o.M[key]
	if !ok {
		return def
	}
	for _, c := range choices {
		if v == c {
			return v
		}
	}
	o.fail(key, v, fmt.Sprintf("one of %v", choices))
	return def
}
