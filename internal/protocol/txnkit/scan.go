package txnkit

import (
	"slices"
	"strings"
	"time"

	"github.com/meridiandb/meridian/internal/storage"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/ts"
	"github.com/meridiandb/meridian/internal/wire"
)

// The pieces of a range scan that every protocol serving one shares: where it goes, what a key
// visited costs, how the shares' rows merge, and the read watermarks of scanned ranges.

// ScanCostPerKey is the CPU a scan spends per key it visits, on top of its message's service
// time: a lookup, not a whole message's handling.
const ScanCostPerKey = 50 * time.Nanosecond

// ScanNodes are the nodes a scan of [start, end) goes to, ascending. Keys are partitioned by
// routing prefix, so a range within one prefix (a warehouse's rows, `kv scan --prefix`) goes to
// its shard's primary alone; any other range may hold rows on every shard's primary.
func ScanNodes(tp *topo.Topology, start, end string) []topo.NodeID {
	if s, ok := tp.RangeShard(start, end); ok {
		return []topo.NodeID{tp.Shards[s].Primary()}
	}
	var nodes []topo.NodeID
	for _, s := range tp.Shards {
		if p := s.Primary(); !slices.Contains(nodes, p) {
			nodes = append(nodes, p)
		}
	}
	slices.Sort(nodes)
	return nodes
}

// MergeScanRows is a finished scan's answer: every node's rows in key order (each key lives on
// one node), cut to limit (0: all).
func MergeScanRows(rows []wire.KV, limit int32) []wire.KV {
	slices.SortFunc(rows, func(a, b wire.KV) int { return strings.Compare(a.Key, b.Key) })
	if limit > 0 && len(rows) > int(limit) {
		rows = rows[:limit]
	}
	return rows
}

// MaxRangeMarks bounds the range watermarks a node keeps (RangeMarks.Add).
const MaxRangeMarks = 256

// RangeMarks are the read watermarks of scanned key ranges: which transaction read
// [start, end) at which timestamp, so that a later write into a range can be held above its
// reads, as a key's own watermark holds writes to that key. They are volatile, like per-key
// watermarks: a node that restarts raises its read floor above any read before the crash.
type RangeMarks struct {
	marks []rangeMark
}

type rangeMark struct {
	start, end string // end "": to the end of the key space
	at         ts.Timestamp
	txn        storage.TxnID
}

// Add records that txn read [start, end) at at, given the node's read floor (which covers every
// key, so marks at or below it say nothing more and are dropped). A range that continues one
// txn read at at, as a limited scan's next step does, extends that mark: the watermark is the
// same, and a scan stepping over many keys with no row keeps one mark rather than filling the
// bound with its steps and folding its own timestamp into the floor. Past MaxRangeMarks it drops
// the marks at or below the median mark's timestamp and returns that timestamp with fold set:
// the caller must raise its read floor to it, which covers the dropped ranges (a higher
// watermark only ever refuses or pushes more writes, so this is always safe).
func (r *RangeMarks) Add(start, end string, at ts.Timestamp, txn storage.TxnID, floor ts.Timestamp) (raiseTo ts.Timestamp, fold bool) {
	if at.LessEq(floor) {
		return ts.Zero, false
	}
	r.marks = slices.DeleteFunc(r.marks, func(m rangeMark) bool { return m.at.LessEq(floor) })
	for i := len(r.marks) - 1; i >= 0; i-- {
		// end "" is the end of the key space: nothing continues that mark.
		if m := &r.marks[i]; m.at == at && m.txn == txn && m.end != "" && m.end == start {
			m.end = end
			return ts.Zero, false
		}
	}
	r.marks = append(r.marks, rangeMark{start: start, end: end, at: at, txn: txn})
	if len(r.marks) <= MaxRangeMarks {
		return ts.Zero, false
	}
	all := make([]ts.Timestamp, len(r.marks))
	for i, m := range r.marks {
		all[i] = m.at
	}
	slices.SortFunc(all, ts.Timestamp.Compare)
	median := all[(len(all)-1)/2]
	r.marks = slices.DeleteFunc(r.marks, func(m rangeMark) bool { return m.at.LessEq(median) })
	return median, true
}

// Highest is the highest timestamp at which a transaction other than except (0: any) read a
// range holding key, or zero.
func (r *RangeMarks) Highest(key string, except storage.TxnID) ts.Timestamp {
	var high ts.Timestamp
	for _, m := range r.marks {
		if (except == 0 || m.txn != except) && high.Less(m.at) && key >= m.start && (m.end == "" || key < m.end) {
			high = m.at
		}
	}
	return high
}

// Len is how many range watermarks are kept.
func (r *RangeMarks) Len() int { return len(r.marks) }
