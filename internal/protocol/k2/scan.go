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
// point read's watermark covers a key that does not exist. A scan within one routing prefix goes
// to that prefix's primary; any other goes to the primary of every shard at once (one ScanReq
// per data node) and costs the round trip to the farthest; each node reads its keys in the range as point reads do
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

// onScan serves a ScanReq: the range's watermark first (so no lower write can land in the range
// afterwards, also while one of its reads waits by PUSHWS: unlike a point read's mark, taken with
// its value, a range's covers keys the scan cannot re-examine), then a point read of every key
// in the range that has a version, answered together once the last is settled.
//
// A scan with a row limit reads only as far as its limit needs, in steps: each step takes as
// many of the next keys as rows are still wanted, marks the range up to the last of them and
// reads them; a key with no row for the scan (a tombstone, an aborted or later write) sends it
// on to the next step. The range past the last step was not read, so it is not marked: writes
// there stay free, and the scan neither waits on nor reads what it would only cut away. A step
// marks its part before reading it, and the next step starts where the mark ends, so every key
// of the range up to the scan's last row was either marked before it could be written or seen.
func (n *Node) onScan(from topo.NodeID, r *ScanReq) {
	n.scanStep(&scanRun{from: from, req: r, next: r.Start})
}

// scanRun is a ScanReq being served: the rows found so far, in key order, and where the next
// step starts.
type scanRun struct {
	from      topo.NodeID
	req       *ScanReq
	next      string // the first key not yet marked and read
	exhausted bool   // the last step reached the range's end
	rows      []wire.KV
	pushNanos int64
	held      bool // waiting in n.serving, so an OpsProbe hears the scan is still here
	done      bool
}

// scanKeys lists the next keys of s's range that this node leads, as many as the limit still
// wants (all with no limit), and marks the range they span.
func (n *Node) scanKeys(s *scanRun) []string {
	want := int(s.req.Limit) - len(s.rows)
	var keys []string
	s.exhausted = true
	n.store.Ascend(s.next, s.req.End, func(key string, _ []mvcc.Version) bool {
		// A layout with shard replicas preloads their rows here too; k2 never updates those
		// copies (it reads and writes primaries only), so only the keys this node leads count.
		if n.tp.PrimaryOf(key) != n.self {
			return true
		}
		if s.req.Limit > 0 && len(keys) == want {
			s.exhausted = false
			return false
		}
		keys = append(keys, strings.Clone(key))
		return true
	})
	upTo := s.req.End
	if !s.exhausted {
		upTo = keys[len(keys)-1] + "\x00"
	}
	n.markScan(s.next, upTo, s.req.TS)
	s.next = upTo
	n.m.Add("scan.keys", int64(len(keys)))
	n.env.Charge(time.Duration(len(keys)) * txnkit.ScanCostPerKey)
	return keys
}

// scanStep serves steps of s until one waits (its last read then resumes the scan) or the scan
// is answered.
func (n *Node) scanStep(s *scanRun) {
	for !s.done {
		keys := n.scanKeys(s)
		rows := make([]wire.KV, len(keys))
		found := make([]bool, len(keys))
		left, inStep := len(keys), true
		// stepDone adds the step's rows and reports whether another step is wanted.
		stepDone := func() bool {
			for i, row := range rows {
				if found[i] {
					s.rows = append(s.rows, row)
				}
			}
			if s.exhausted || (s.req.Limit > 0 && len(s.rows) >= int(s.req.Limit)) {
				n.answerScan(s)
				return false
			}
			return true
		}
		for i, key := range keys {
			if s.done {
				break
			}
			op := &readOp{req: ReadReq{ReqID: s.req.ReqID, Txn: s.req.Txn, TS: s.req.TS, Key: key}}
			op.reply = func(rr *ReadResp) {
				if s.done {
					return
				}
				if rr.Aborted {
					n.finishScan(s, &ScanResp{ReqID: s.req.ReqID, Aborted: true, Cause: rr.Cause})
					return
				}
				s.pushNanos = max(s.pushNanos, rr.PushNanos)
				rows[i], found[i] = wire.KV{Key: key, Value: rr.Value}, rr.Found
				if left--; left == 0 && !inStep && stepDone() {
					n.scanStep(s)
				}
			}
			n.serveRead(op)
		}
		inStep = false
		switch {
		case s.done:
		case left > 0:
			if !s.held {
				s.held = true
				n.serving[opRef{s.from, s.req.ReqID}] = struct{}{}
			}
			return
		case !stepDone():
			return
		}
	}
}

// answerScan answers s with its rows, cut to the limit, or refuses them as too large.
func (n *Node) answerScan(s *scanRun) {
	rows := s.rows
	if s.req.Limit > 0 && len(rows) > int(s.req.Limit) {
		rows = rows[:s.req.Limit]
	}
	if wire.RowsTooLarge(rows) {
		n.finishScan(s, &ScanResp{ReqID: s.req.ReqID, TooLarge: true, PushNanos: s.pushNanos})
		return
	}
	n.finishScan(s, &ScanResp{ReqID: s.req.ReqID, Rows: rows, PushNanos: s.pushNanos})
}

func (n *Node) finishScan(s *scanRun, resp *ScanResp) {
	s.done = true
	if s.held {
		delete(n.serving, opRef{s.from, s.req.ReqID})
	}
	n.env.Send(s.from, resp)
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
		id := n.addFlight(t, flight{to: to, kind: opScan, sentLocal: t.sentLocal, rto: n.rto(to)})
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
	t.readEndLocal = n.env.Elapsed()
	t.maxPushNanos = max(t.maxPushNanos, r.PushNanos)
	t.rows = append(t.rows, r.Rows...)
	t.scanTooLarge = t.scanTooLarge || r.TooLarge
	n.opsDone(t)
}
