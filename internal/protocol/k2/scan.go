package k2

import (
	"strings"
	"time"

	"github.com/meridiandb/meridian/internal/protocol/txnkit"
	"github.com/meridiandb/meridian/internal/storage"
	"github.com/meridiandb/meridian/internal/storage/mvcc"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/ts"
	"github.com/meridiandb/meridian/internal/wire"
)

// Range scans. The paper has point reads only; notes/k2.md §3.3 leaves range reads open ("a
// per-partition watermark if TPC-C scans are implemented"). A scan [Start, End) at the
// transaction's timestamp is a point read of every key in the range plus a read watermark on
// the range itself, so that no write below the scan's timestamp can later land in it: that
// is what keeps a key the scan did not see (a phantom) from appearing under it, exactly as a
// point read's watermark covers a key that does not exist. Keys are hash-partitioned, so a
// scan goes to the primary of every shard at once (one ScanReq per data node) and costs the
// round trip to the farthest; each node reads its keys in the range as point reads do
// (PUSHWS on an undecided intent below the timestamp, the transaction's own intents visible)
// and answers once all are settled.

// ScanReq asks a data node for the rows of [Start, End) (End "" : to the end of the key space)
// that a transaction at TS sees among the keys it leads, at most Limit (0: all).
type ScanReq struct {
	ReqID uint64
	Txn   storage.TxnID
	TS    ts.Timestamp
	Start string
	End   string `cbor:",omitempty"`
	Limit int32  `cbor:",omitempty"`
}

// ScanResp answers a ScanReq: the rows in key order, or a refusal that aborts the transaction,
// or TooLarge: the node's rows (cut to the limit) exceed wire.MaxScanBytes, and the client's
// scan is refused. PushNanos is the longest PUSHWS wait among the scan's keys (Table 2's
// PushWS phase).
type ScanResp struct {
	ReqID     uint64
	Aborted   bool
	TooLarge  bool      `cbor:",omitempty"`
	Cause     string    `cbor:",omitempty"`
	Rows      []wire.KV `cbor:",omitempty"`
	PushNanos int64     `cbor:",omitempty"`
}

func (*ScanReq) Kind() wire.Kind  { return 223 }
func (*ScanResp) Kind() wire.Kind { return 224 }

func init() {
	wire.Register(&ScanReq{})
	wire.Register(&ScanResp{})
}

// markScan records a scan's range watermark.
func (n *Node) markScan(start, end string, at ts.Timestamp) {
	if n.cfg.noScanWatermark {
		return // mutant: phantoms may appear under a finished scan
	}
	if raiseTo, fold := n.scanMarks.Add(start, end, at, 0, n.store.ReadFloor()); fold {
		n.store.RaiseReadFloor(raiseTo)
		n.m.Add("scan.marks-evicted", 1)
	}
}

// readWatermark is the watermark a write to key must not be below: the key's own (or the
// node's floor) and that of every scanned range holding it.
func (n *Node) readWatermark(key string) ts.Timestamp {
	return ts.MaxOf(n.store.ReadWatermark(key), n.scanMarks.Highest(key, 0))
}

// onScan serves a ScanReq: the range's watermark first, as a point read's (so no lower write
// can land in the range afterwards), then a point read of every key in the range that has a
// version, answered together once the last is settled.
func (n *Node) onScan(from topo.NodeID, r *ScanReq) {
	n.markScan(r.Start, r.End, r.TS)
	var keys []string
	n.store.Ascend(r.Start, r.End, func(key string, _ []mvcc.Version) bool {
		// A layout with shard replicas preloads their rows here too; k2 never updates those
		// copies (it reads and writes primaries only), so only the keys this node leads count.
		if n.tp.PrimaryOf(key) == n.self {
			keys = append(keys, strings.Clone(key))
		}
		return true
	})
	n.m.Add("scan.keys", int64(len(keys)))
	n.env.Charge(time.Duration(len(keys)) * txnkit.ScanCostPerKey)
	ref := opRef{from, r.ReqID}
	rows := make([]wire.KV, len(keys))
	found := make([]bool, len(keys))
	left, refused, serving := len(keys), false, true
	var pushNanos int64
	finish := func(resp *ScanResp) {
		if !serving {
			delete(n.serving, ref)
		}
		n.env.Send(from, resp)
	}
	answer := func() {
		out := rows[:0]
		for i, row := range rows {
			if found[i] {
				out = append(out, row)
			}
		}
		if r.Limit > 0 && len(out) > int(r.Limit) {
			out = out[:r.Limit]
		}
		if wire.RowsTooLarge(out) {
			finish(&ScanResp{ReqID: r.ReqID, TooLarge: true, PushNanos: pushNanos})
			return
		}
		finish(&ScanResp{ReqID: r.ReqID, Rows: out, PushNanos: pushNanos})
	}
	for i, key := range keys {
		if refused {
			break
		}
		op := &readOp{req: ReadReq{ReqID: r.ReqID, Txn: r.Txn, TS: r.TS, Key: key}}
		op.reply = func(rr *ReadResp) {
			if refused {
				return
			}
			if rr.Aborted {
				refused = true
				finish(&ScanResp{ReqID: r.ReqID, Aborted: true, Cause: rr.Cause})
				return
			}
			pushNanos = max(pushNanos, rr.PushNanos)
			rows[i], found[i] = wire.KV{Key: key, Value: rr.Value}, rr.Found
			if left--; left == 0 && !serving {
				answer()
			}
		}
		n.serveRead(op)
	}
	serving = false
	switch {
	case refused:
	case left == 0:
		answer()
	default:
		n.serving[ref] = struct{}{} // an OpsProbe must hear the scan is still here
	}
}

// startScan sends t's scan to every data node that leads a shard the range may hold keys of
// (txnkit.ScanNodes), all at once; the request is
// answered when the last has answered (opsDone), with the rows merged in key order.
func (n *Node) startScan(t *ctxn, req wire.ClientRequest) {
	nodes := txnkit.ScanNodes(n.tp, req.Key, req.EndKey)
	if n.reqIDsLeft() < uint64(len(nodes)) {
		n.abort(t, reqIDsSpent, true)
		return
	}
	n.beginOps(t, 0)
	t.hasReads = true
	t.rows, t.scanTooLarge = nil, false
	for _, to := range nodes {
		id := n.newReqID()
		n.byReq[id] = t
		t.flights[id] = flight{to: to, kind: opScan, sentLocal: t.sentLocal, rto: n.rto(to)}
		n.env.Send(to, scanReq(t, id))
	}
	n.armOpTimeout(t)
}

// scanReq is t's scan share request numbered id (the request being served is the scan).
func scanReq(t *ctxn, id uint64) *ScanReq {
	return &ScanReq{ReqID: id, Txn: t.id, TS: t.ts, Start: t.req.Key, End: t.req.EndKey, Limit: t.req.Limit}
}

func (n *Node) onScanResp(r *ScanResp) {
	t, _, ok := n.landed(r.ReqID, opScan)
	if !ok {
		return
	}
	if r.Aborted {
		n.abort(t, r.Cause, true)
		return
	}
	t.readEndLocal = n.env.Now()
	t.maxPushNanos = max(t.maxPushNanos, r.PushNanos)
	t.rows = append(t.rows, r.Rows...)
	t.scanTooLarge = t.scanTooLarge || r.TooLarge
	n.opsDone(t)
}
