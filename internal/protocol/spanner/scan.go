package spanner

import (
	"strings"
	"time"

	"github.com/meridiandb/meridian/internal/protocol/txnkit"
	"github.com/meridiandb/meridian/internal/storage/mvcc"
	"github.com/meridiandb/meridian/internal/wire"
)

// Range scans, in read-only transactions only. A snapshot scan needs no lock: once a
// participant has raised maxTS to the snapshot (onSnapRead), every later prepare there gets a
// timestamp above it, so no row can appear in the range at or below the snapshot except by a
// transaction already prepared, whose intent the scan meets and waits out like a snapshot
// read's. The keys to read are therefore fixed when the request arrives. A scan in a read-write
// transaction would need range (predicate or next-key) locks to keep phantoms out of it under
// two-phase locking; the lock table has per-key locks only, so such a scan is refused.

// ScanRange is a snapshot scan's range [Start, End) (End "": to the end of the key space) and
// row limit (0: all).
type ScanRange struct {
	Start string
	End   string `cbor:",omitempty"`
	Limit int32  `cbor:",omitempty"`
}

// errScanReadWrite is the refusal of a scan in a read-write transaction.
const errScanReadWrite = "spanner: scans are served in read-only transactions only (a read-write scan needs range locks, which spanner's lock table does not have)"

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
