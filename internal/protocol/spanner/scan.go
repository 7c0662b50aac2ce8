package spanner

import (
	"math"
	"slices"
	"strings"
	"time"

	"github.com/meridiandb/meridian/internal/protocol/txnkit"
	"github.com/meridiandb/meridian/internal/storage/locks"
	"github.com/meridiandb/meridian/internal/storage/mvcc"
	"github.com/meridiandb/meridian/internal/ts"
	"github.com/meridiandb/meridian/internal/wire"
)

// Range scans. A scan goes to every participant that leads a shard the range may hold keys of
// (txnkit.ScanNodes: one, for a range within one routing prefix), one request each, and the
// coordinator merges the answers in key order.
//
// In a read-only transaction a scan is a snapshot scan and needs no lock: once a participant has
// raised maxTS to the snapshot (onSnapRead), every later prepare there gets a timestamp above
// it, so no row can appear in the range at or below the snapshot except by a transaction already
// prepared, whose intent the scan meets and waits out like a snapshot read's. The keys to read
// are therefore fixed when the request arrives.
//
// In a read-write transaction a scan is a locking read of the range (ScanReq): the participant
// takes a shared range lock on [Start, End) under the lock policy (locks.Table.AcquireRange),
// which keeps every other transaction from writing any key of the range, one that exists or one
// that does not yet, until this one's decision; that is what keeps phantoms out under two-phase
// locking, as a point read's shared lock keeps the key it read. Once it holds the lock no other
// transaction holds an exclusive lock in the range, so no intent or pending write of another
// lies there, and the participant answers with the latest committed row of each key. The lock
// counts as one lock granted (Seen), is held to the decision like a read lock, and is recorded
// with a yes vote (s/rr/<txn>) so that a restart takes it back. The transaction's own writes
// are applied as its point reads see them: eager writes (write-locks=eager) by the participant
// that holds them pending, buffered ones by the coordinator when it merges the rows; so that a
// limited scan still fills its limit after the buffered deletes remove rows, each participant's
// share is cut at the limit plus those deletes (shareLimit). The whole range is locked whatever
// the limit, which is coarser than the rows a limited scan returns but never too fine.

// ScanRange is a scan's range [Start, End) (End "": to the end of the key space) and row limit
// (0: all).
type ScanRange struct {
	Start string
	End   string `cbor:",omitempty"`
	Limit int32  `cbor:",omitempty"`
}

// keys is r's key range, as the lock table takes it.
func (r *ScanRange) keys() locks.Range { return locks.Range{Start: r.Start, End: r.End} }

// scanKeys lists the keys with versions in r that this participant leads, in key order. A
// layout with shard replicas preloads their rows on every replica too; spanner reads and
// writes leaders only and never updates those copies, so they must not count.
func (p *Participant) scanKeys(r *ScanRange) []string {
	var keys []string
	tp := p.env.Topology()
	p.store.Ascend(r.Start, r.End, func(key string, _ []mvcc.Version) bool {
		if tp.PrimaryOf(key) == p.env.Self() {
			keys = append(keys, strings.Clone(key))
		}
		return true
	})
	p.env.Charge(time.Duration(len(keys)) * txnkit.ScanCostPerKey)
	return keys
}

// scanRows is a participant's answer to a snapshot scan: the keys found, with their values, cut
// to the limit.
func scanRows(keys []string, results []ReadResult, limit int32) []wire.KV {
	rows := []wire.KV{}
	for i, k := range keys {
		if results[i].Found {
			rows = append(rows, wire.KV{Key: k, Value: results[i].Value})
		}
	}
	if limit > 0 && len(rows) > int(limit) {
		rows = rows[:limit]
	}
	return rows
}

// readScan reads r's range under t's range lock: the latest committed row of every key this
// participant leads there, with t's pending eager writes applied, cut to the limit, and the
// newest version seen (tombstones included), which t's commit timestamp must exceed.
func (p *Participant) readScan(t *partTxn, r *opsReq) {
	rows := []wire.KV{}
	for _, k := range p.scanKeys(r.scan) {
		v, ok := p.store.Latest(k)
		if !ok {
			continue
		}
		r.version = ts.MaxOf(r.version, v.TS)
		if !v.Tombstone {
			rows = append(rows, wire.KV{Key: k, Value: v.Value})
		}
	}
	rows = applyWrites(rows, t.writes, r.scan.keys())
	if lim := r.scan.Limit; lim > 0 && len(rows) > int(lim) {
		rows = rows[:lim]
	}
	r.rows, r.tooLarge = rows, false
	if wire.RowsTooLarge(rows) {
		r.rows, r.tooLarge = nil, true
	}
}

// applyWrites returns rows with a transaction's own writes to keys in rg applied, in key order:
// a put replaces or adds its key's row, a delete removes it. rows may be reused.
func applyWrites(rows []wire.KV, writes map[string]Write, rg locks.Range) []wire.KV {
	var keys []string
	for k := range writes {
		if rg.Covers(k) {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return rows
	}
	slices.Sort(keys)
	rows = slices.DeleteFunc(rows, func(r wire.KV) bool { _, own := writes[r.Key]; return own })
	for _, k := range keys {
		if w := writes[k]; !w.Delete {
			rows = append(rows, wire.KV{Key: k, Value: w.Value})
		}
	}
	slices.SortFunc(rows, func(a, b wire.KV) int { return strings.Compare(a.Key, b.Key) })
	return rows
}

// shareLimit is the limit of each participant's share of a read-write scan limited to limit
// rows: limit plus the buffered deletes in rg, each of which may remove one of the rows a share
// returns when the coordinator applies it, so that the merged answer still has limit rows
// whenever the range holds them. Buffered puts remove none.
func shareLimit(limit int32, writes map[string]Write, rg locks.Range) int32 {
	if limit <= 0 {
		return limit
	}
	n := int64(limit)
	for k, w := range writes {
		if w.Delete && rg.Covers(k) {
			n++
		}
	}
	return int32(min(n, math.MaxInt32))
}
