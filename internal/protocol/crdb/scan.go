package crdb

import (
	"slices"
	"strings"
	"time"

	"github.com/meridiandb/meridian/internal/protocol/txnkit"
	"github.com/meridiandb/meridian/internal/storage"
	"github.com/meridiandb/meridian/internal/storage/mvcc"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/ts"
	"github.com/meridiandb/meridian/internal/wire"
)

// Range scans, as CockroachDB serves them: a leaseholder evaluates a scan of a span at the
// transaction's read timestamp in one step (CockroachDB holds the span's latches for it), so
// nothing is written into the span meanwhile. An intent of another transaction in the span
// (below the read timestamp, or in its uncertainty interval) blocks the whole scan, which is
// evaluated again once it is gone, as a read is; a committed value in the uncertainty interval
// sends the transaction past it (refresh). A scan that completes records the span in the
// timestamp cache (spanMarks), so a later write into it below the read timestamp is pushed
// above it, and the coordinator adds the span to its refresh set, so a refresh fails if
// another transaction committed anything in the span since. A scan within one routing prefix
// goes to that prefix's leaseholder; any other goes to every leaseholder at once.
//
// A scan with a row limit stops at its limit's last row, as CockroachDB's does (its resume
// key): what lies beyond was not read, so it neither blocks the scan nor goes into the
// timestamp cache or the refresh set (limitedSpan). Each leaseholder's share stops at its own
// limit's last row, at or past the merged answer's last, so the spans the leaseholders record
// cover all that the answer read.

// Span is a key range [Start, End); End "" is the end of the key space.
type Span struct {
	Start string
	End   string `cbor:",omitempty"`
}

// ScanReq asks a leaseholder for the rows of Span that a transaction reading at ReadTS sees
// among the keys it leads (uncertainty up to Limit, as ReadReq's).
type ScanReq struct {
	Req      uint64
	Txn      TxnMeta
	Span     Span
	ReadTS   ts.Timestamp
	Limit    ts.Timestamp
	ReadOnly bool  `cbor:",omitempty"`
	RowLimit int32 `cbor:",omitempty"` // at most this many rows (0: all)
	// OwnKeys are the keys of Span this leaseholder leads that the transaction wrote and had
	// acknowledged, as ReadReq.OwnWrite: one without the transaction's intent was lost in a
	// crash (or the transaction aborted here), and the scan is answered WriteLost.
	OwnKeys []string `cbor:",omitempty"`
}

// ScanResp answers ScanReq with the rows in key order, or Uncertain (a committed value in the
// uncertainty interval, the newest at ValueTS), or TooOld (ReadTS below the GC horizon), or
// TooLarge (the rows, cut to RowLimit, exceed wire.MaxScanBytes: the client's scan is refused).
type ScanResp struct {
	Req       uint64
	Clock     ts.Timestamp
	Rows      []wire.KV    `cbor:",omitempty"`
	Uncertain bool         `cbor:",omitempty"`
	ValueTS   ts.Timestamp `cbor:",omitempty"`
	TooOld    bool         `cbor:",omitempty"`
	TooLarge  bool         `cbor:",omitempty"`
	WriteLost bool         `cbor:",omitempty"` // an OwnKeys key has no intent of the transaction
	Aborted   bool         `cbor:",omitempty"` // with WriteLost: the transaction was aborted here (ReadResp.Aborted)
	Floor     ts.Timestamp `cbor:",omitempty"` // as ReadResp.Floor
}

func (*ScanReq) Kind() wire.Kind  { return 421 }
func (*ScanResp) Kind() wire.Kind { return 422 }

func init() {
	wire.Register(&ScanReq{})
	wire.Register(&ScanResp{})
}

type scanRef struct {
	from topo.NodeID
	req  uint64
}

// markSpan records that txn read span at at.
func (n *Node) markSpan(span Span, at ts.Timestamp, txn storage.TxnID) {
	if n.set.noSpanTSCache {
		return // mutant: writes may land under a finished scan
	}
	if raiseTo, fold := n.spanMarks.Add(span.Start, span.End, at, txn, n.store.ReadFloor()); fold {
		n.store.RaiseReadFloor(raiseTo)
		n.m.Add("scan/marks-evicted", 1)
	}
}

// spanWriteFloor is the lowest timestamp txn may write key at as far as scanned spans go:
// above every other transaction's scan of a span holding key.
func (n *Node) spanWriteFloor(key string, txn storage.TxnID) ts.Timestamp {
	if h := n.spanMarks.Highest(key, txn); !h.IsZero() {
		return h.Next()
	}
	return ts.Zero
}

func (n *Node) onScan(from topo.NodeID, req *ScanReq) {
	if n.scansWaiting[scanRef{from, req.Req}] {
		return // a copy of a scan waiting here: the waiting one will be answered
	}
	n.observe(req.ReadTS)
	r := *req
	// The observed timestamp, as startRead's: after a restart at least the read floor, above
	// what the previous life wrote with timestamps from faster clocks (the clock alone cut the
	// uncertainty interval short of an acknowledged write: TestScanAfterRestartSeesEarlierCommits).
	r.Limit = ts.MinOf(req.Limit, ts.MaxOf(n.hlc.Last(), n.store.ReadFloor()))
	n.evalScan(from, &r, n.env.Now())
}

// evalScan evaluates a scan in one step (see the top of this file); an intent in its way parks
// it until the intent is gone, and it is then evaluated afresh.
func (n *Node) evalScan(from topo.NodeID, req *ScanReq, since int64) {
	ref := scanRef{from, req.Req}
	reply := func(r *ScanResp) {
		delete(n.scansWaiting, ref)
		r.Req, r.Clock, r.Floor = req.Req, n.now(), n.floorAbove()
		n.env.Send(from, r)
	}
	if n.belowGCHorizon(req.ReadTS) {
		reply(&ScanResp{TooOld: true})
		return
	}
	for _, k := range req.OwnKeys {
		if !n.hasOwnIntent(k, req.Txn.ID) {
			n.ownWriteGone(req.Txn.ID, func(aborted bool) { reply(&ScanResp{WriteLost: true, Aborted: aborted}) })
			return
		}
	}
	limit := ts.MaxOf(req.Limit, req.ReadTS)
	var (
		rows      []wire.KV
		uncertain ts.Timestamp
		visited   int
		blockKey  string
		blocker   mvcc.Version
		blocked   bool
	)
	full := func() bool { return req.RowLimit > 0 && len(rows) == int(req.RowLimit) }
	n.store.Ascend(req.Span.Start, req.Span.End, func(key string, vs []mvcc.Version) bool {
		visited++
		if !n.leads(key) {
			return true
		}
		for i := len(vs) - 1; i >= 0; i-- {
			if v := vs[i]; v.State == mvcc.Intent && v.Txn == req.Txn.ID {
				if !v.Tombstone {
					rows = append(rows, wire.KV{Key: strings.Clone(key), Value: v.Value})
				}
				return !full()
			}
		}
		for i := len(vs) - 1; i >= 0; i-- {
			v := vs[i]
			if v.State == mvcc.Aborted || limit.Less(v.TS) {
				continue
			}
			if v.State == mvcc.Intent {
				blockKey, blocker, blocked = strings.Clone(key), v, true
				return false
			}
			if req.ReadTS.Less(v.TS) {
				uncertain = ts.MaxOf(uncertain, v.TS)
				return true
			}
			if !v.Tombstone {
				rows = append(rows, wire.KV{Key: strings.Clone(key), Value: v.Value})
			}
			return !full()
		}
		return true
	})
	n.m.Add("scan/keys", int64(visited))
	n.env.Charge(time.Duration(visited) * txnkit.ScanCostPerKey)
	switch {
	case blocked:
		// As a read does: an intent below the read timestamp is waited for (an older reader
		// pushes it above), one in the uncertainty interval is pushed past the limit by an
		// older reader and waited for by a younger one.
		pushTo := req.ReadTS.Next()
		if req.ReadTS.Less(blocker.TS) {
			pushTo = ts.Zero
			if _, age := decodeIntentMeta(blocker.Meta); older(req.Txn.Age, req.Txn.ID, age, blocker.Txn) {
				pushTo = limit.Next()
			}
		}
		n.scansWaiting[ref] = true
		n.block(blockKey, blocker, &blockedOp{txn: req.Txn, from: from, req: req.Req, pushTo: pushTo, since: since,
			retry: func() { n.evalScan(from, req, since) }})
	case !uncertain.IsZero():
		reply(&ScanResp{Uncertain: true, ValueTS: uncertain})
	default:
		n.markSpan(limitedSpan(req.Span, rows, req.RowLimit), req.ReadTS, req.Txn.ID)
		n.observeWait(since)
		if wire.RowsTooLarge(rows) {
			reply(&ScanResp{TooLarge: true})
			return
		}
		reply(&ScanResp{Rows: rows})
	}
}

// limitedSpan is the part of span a scan with row limit read to answer rows: up to and
// including the last row when the limit cut it short, else all of it.
func limitedSpan(span Span, rows []wire.KV, limit int32) Span {
	if limit > 0 && len(rows) == int(limit) {
		span.End = rows[len(rows)-1].Key + "\x00"
	}
	return span
}

// refreshSpans reports whether no other transaction wrote anything in spans in (from, to], as
// onRefresh asks of keys.
func (n *Node) refreshSpans(spans []Span, txn storage.TxnID, from, to ts.Timestamp) bool {
	ok := true
	for _, sp := range spans {
		n.store.Ascend(sp.Start, sp.End, func(key string, vs []mvcc.Version) bool {
			ok = !n.leads(key) || !conflictsWithRefresh(vs, txn, from, to)
			return ok
		})
		if !ok {
			return false
		}
	}
	return true
}

// conflictsWithRefresh reports whether another transaction committed a version in (from, to]
// or holds an intent at or below to: a refresh of a read of these versions to to fails.
func conflictsWithRefresh(vs []mvcc.Version, txn storage.TxnID, from, to ts.Timestamp) bool {
	for _, v := range vs {
		if v.Txn == txn || v.State == mvcc.Aborted {
			continue
		}
		if (v.State == mvcc.Committed && from.Less(v.TS) && v.TS.LessEq(to)) ||
			(v.State == mvcc.Intent && v.TS.LessEq(to)) {
			return true
		}
	}
	return false
}

// leads reports whether this node is key's leaseholder. A layout with shard replicas preloads
// their rows on every replica too, and crdb never updates those copies (it reads and writes
// leaseholders only): a scan must not count them.
func (n *Node) leads(key string) bool { return n.tp.PrimaryOf(key) == n.self }

// scan sends t's scan to every leaseholder the span may hold keys of (txnkit.ScanNodes) and
// answers the client with the rows merged in key order once all have answered; an uncertain
// value moves the transaction past it first and scans again.
func (n *Node) scan(t *coordTxn, span Span, limit int32) {
	nodes := txnkit.ScanNodes(n.tp, span.Start, span.End)
	left := len(nodes)
	var (
		rows      []wire.KV
		uncertain ts.Timestamp
		tooOld    bool
		tooLarge  bool
		writeLost bool
		pushed    bool // a leaseholder had aborted the transaction: the cause of a write it lost
	)
	for _, nd := range nodes {
		ulimit := t.limit
		if o, ok := t.observed[nd]; ok {
			ulimit = ts.MinOf(ulimit, o)
		}
		var own []string
		for _, k := range t.writeKeys {
			if t.acked[k] && n.tp.PrimaryOf(k) == nd && span.Start <= k && (span.End == "" || k < span.End) {
				own = append(own, k)
			}
		}
		n.callFor(t, nil, nd, func(r uint64) wire.Msg {
			return &ScanReq{Req: r, Txn: t.meta, Span: span, ReadTS: t.readTS, Limit: ulimit, ReadOnly: t.readOnly, RowLimit: limit, OwnKeys: own}
		}, func(m wire.Msg) {
			resp := m.(*ScanResp)
			if !n.live(t) {
				return
			}
			if _, ok := t.observed[nd]; !ok {
				t.observed[nd] = observedAt(resp.Clock, resp.Floor)
			}
			tooOld = tooOld || resp.TooOld
			tooLarge = tooLarge || resp.TooLarge
			writeLost = writeLost || resp.WriteLost
			pushed = pushed || resp.Aborted
			if resp.Uncertain {
				uncertain = ts.MaxOf(uncertain, resp.ValueTS)
			}
			rows = append(rows, resp.Rows...)
			if left--; left > 0 {
				return
			}
			switch {
			case writeLost && pushed:
				n.abort(t, "push-abort")
			case writeLost:
				n.abort(t, "write-lost")
			case tooOld:
				n.abort(t, txnkit.AbortTooOld)
			case !uncertain.IsZero():
				// Every share is back, so nothing is still out at the old read timestamp.
				n.m.Add("uncertainty/hit", 1)
				n.refreshPastUncertainty(t, uncertain, func() { n.scan(t, span, limit) })
			default:
				rows = txnkit.MergeScanRows(rows, limit)
				if tooLarge || wire.RowsTooLarge(rows) {
					// Refused, so the transaction read nothing: no span to refresh.
					n.replyClient(t, &wire.ClientReply{Code: wire.CodeBadArgument, Error: wire.ScanTooLarge})
					return
				}
				if read := limitedSpan(span, rows, limit); !slices.Contains(t.readSpans, read) {
					t.readSpans = append(t.readSpans, read)
				}
				n.replyClient(t, &wire.ClientReply{Code: wire.CodeOK, Rows: rows})
			}
		})
	}
}
