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
// A scan with a row limit reads only as far as its limit needs, in steps (as k2's and, through
// its resume key, CockroachDB's): each step lists as many of the next keys as rows are still
// wanted and reads them; a key with no row for the scan (a tombstone, a version the snapshot
// does not see) sends it on to another step. The range past the last step is neither read nor
// locked, so a YCSB-E scan of a few rows from a key to the end of its shard no longer reads, or
// in a read-write transaction locks, the rest of the shard, and writes there go on. A scan
// without a limit is one step over the whole range. Each participant's share ends at its own
// limit-th row, and a row of its past that one lies past the merged answer's limit-th row too,
// so the coordinator's cut is the same as if every share had read its whole range.
//
// In a read-only transaction a scan is a snapshot scan and needs no lock: once a participant has
// raised maxTS to the snapshot (onSnapRead), every later prepare there gets a timestamp above
// it, so no row can appear in the range at or below the snapshot except by a transaction already
// prepared, whose intent the scan meets and waits out like a snapshot read's (the step is
// parked on that key and resumes where it stopped). Which keys have a version the snapshot sees
// is therefore fixed when the request arrives, and a step may list its keys when it starts, even
// after an earlier step waited: a key it finds that the first step would not have found has
// only versions above the snapshot, and gives no row.
//
// In a read-write transaction a scan is a locking read of the range (ScanReq): each step takes
// a shared range lock under the lock policy (locks.Table.AcquireRange) from where the scan has
// got to up to its last listed key (the range [next, K+"\x00") holds exactly the keys up to K),
// or to the range's end when fewer keys are left than rows are wanted, and reads once the lock
// is held. The lock keeps every other transaction from writing any key of its part, one that
// exists or one that does not yet, until this one's decision; that is what keeps phantoms out
// under two-phase locking, as a point read's shared lock keeps the key it read. Once it holds
// the lock no other transaction holds an exclusive lock in that part, so no intent or pending
// write of another lies there, and the participant reads the latest committed row of each key.
//
// A step that waits for its lock re-lists its part once the lock is granted: the transactions
// it waited for (exclusive holders in the part, and exclusive requests queued there before it)
// may meanwhile have committed inserts into the part, which the scan must return, or deletes,
// which may leave it short of its limit and send it on to another step. Only the part's
// contents can have changed, not its bounds, and it is read only under the lock. (The bound was
// picked from keys listed without the lock; any bound would be safe, since what matters is that
// each part is read under its lock and the next step starts where it ends.) Phantom
// freedom: when the scan answers, its steps' locks cover [Start, E) without a gap (each step
// starts where the last one's lock ends), every part was read after its lock was granted, and
// the locks are held to the decision, so no other transaction writes in [Start, E) between the
// reads and the commit; and either E is the range's end or [Start, E) already held the rows
// the limit asks for, which nobody can delete from under the locks, so any row past E, there
// before the scan or written after it, lies past the rows it returned. The locks thus cover exactly the part of the
// range the answer depends on (plus, after a wait, rows inserted meanwhile past the limit),
// which is what two-phase locking needs.
//
// The scan's locks count as one lock granted (Seen), are held to the decision like read locks,
// and are recorded with a yes vote (s/rr/<txn>) so that a restart takes them back; a step still
// waiting holds nothing yet, and a waiting transaction cannot vote. The transaction's own writes
// are applied as its point reads see them: eager writes (write-locks=eager) by the participant
// that holds them pending, step by step within the part each step locked; buffered ones by the
// coordinator when it merges the rows, so that a limited scan still fills its limit after the
// buffered deletes remove rows, each participant's share is cut at the limit plus those deletes
// (shareLimit), and the steps run until that many rows are found.

// ScanRange is a scan's range [Start, End) (End "": to the end of the key space) and row limit
// (0: all).
type ScanRange struct {
	Start string
	End   string `cbor:",omitempty"`
	Limit int32  `cbor:",omitempty"`
}

// keys is r's key range, as the lock table takes it.
func (r *ScanRange) keys() locks.Range { return locks.Range{Start: r.Start, End: r.End} }

// listKeys lists the keys with versions in [start, end) that this participant leads, in key
// order, at most max of them (0: all). A layout with shard replicas preloads their rows on every
// replica too; spanner reads and writes leaders only and never updates those copies, so they
// must not count.
func (p *Participant) listKeys(start, end string, max int) []string {
	var keys []string
	tp := p.env.Topology()
	p.store.Ascend(start, end, func(key string, _ []mvcc.Version) bool {
		if tp.PrimaryOf(key) != p.env.Self() {
			return true
		}
		keys = append(keys, strings.Clone(key))
		return max <= 0 || len(keys) < max
	})
	p.env.Charge(time.Duration(len(keys)) * txnkit.ScanCostPerKey)
	return keys
}

// wanted is how many more rows a scan limited to limit (0: all) still needs, having found
// found; 0 means all of them.
func wanted(limit int32, found int) int {
	if limit <= 0 {
		return 0
	}
	return int(limit) - found
}

// startScanStep lists the keys of r's next step and sets the part of the range its lock
// covers: up to the last of them, or to the range's end when fewer are left than rows are
// wanted (the scan will need all of what is left) or the scan has no limit.
func (p *Participant) startScanStep(r *opsReq) []string {
	want := wanted(r.scan.Limit, len(r.rows))
	keys := p.listKeys(r.scanNext, r.scan.End, want)
	r.step, r.stepToEnd = locks.Range{Start: r.scanNext, End: r.scan.End}, true
	if want > 0 && len(keys) == want && (r.scan.End == "" || keys[want-1]+"\x00" < r.scan.End) {
		r.step.End, r.stepToEnd = keys[want-1]+"\x00", false
	}
	return keys
}

// scanSteps runs t's read-write scan r step by step from where it got to: each step's range
// lock is taken under the lock policy, and its part read once it is held. It returns true once
// the scan has its rows (cut to the limit, or refused as too large), false if a step must wait
// (the grant resumes it: resumeScan) or t was refused.
func (p *Participant) scanSteps(t *partTxn, r *opsReq) bool {
	for !r.scanDone {
		keys := p.startScanStep(r)
		// mutant=scan-no-range-lock: broken on purpose, the range is read unlocked.
		if p.cfg.Mutant != MutantScanNoRangeLock && !p.lockResult(t, p.locks.AcquireRange(t.id, r.step, p.cfg.Policy, t.age)) {
			return false
		}
		p.readScanStep(t, r, keys)
	}
	if lim := r.scan.Limit; lim > 0 && len(r.rows) > int(lim) {
		r.rows = r.rows[:lim]
	}
	r.tooLarge = false
	if wire.RowsTooLarge(r.rows) {
		r.rows, r.tooLarge = nil, true
	}
	return true
}

// resumeScan reads the step of r whose range lock was just granted after a wait. Its keys are
// listed again, under the lock: those the step listed before it waited may since have been
// joined by rows the transactions it waited for inserted, or left as tombstones.
func (p *Participant) resumeScan(t *partTxn, r *opsReq) {
	p.readScanStep(t, r, p.listKeys(r.step.Start, r.step.End, 0))
}

// readScanStep reads keys, the keys of r's current step, under its range lock: the latest
// committed row of each, with t's pending eager writes in the step's part applied, and the
// newest version seen (tombstones included), which t's commit timestamp must exceed. The scan is
// done once the step reached the range's end or the rows fill the limit.
func (p *Participant) readScanStep(t *partTxn, r *opsReq, keys []string) {
	var rows []wire.KV
	for _, k := range keys {
		v, ok := p.store.Latest(k)
		if !ok {
			continue
		}
		r.version = ts.MaxOf(r.version, v.TS)
		if !v.Tombstone {
			rows = append(rows, wire.KV{Key: k, Value: v.Value})
		}
	}
	// Steps are disjoint and in key order, so each step's rows follow the earlier ones'.
	r.rows = append(r.rows, applyWrites(rows, t.writes, r.step)...)
	r.scanNext = r.step.End
	r.scanDone = r.stepToEnd || wanted(r.scan.Limit, len(r.rows)) <= 0
}

// nextSnapStep lists the keys of snapshot scan w's next step, as many as rows are still
// wanted, and reports false if the scan is done instead: its last step reached the range's
// end, or its rows fill the limit.
func (p *Participant) nextSnapStep(w *snapWaiter) bool {
	scan := w.req.Scan
	want := wanted(scan.Limit, len(w.rows))
	if w.scanToEnd || scan.Limit > 0 && want <= 0 {
		return false
	}
	w.keys, w.next = p.listKeys(w.scanNext, scan.End, want), 0
	w.scanToEnd = want == 0 || len(w.keys) < want
	if !w.scanToEnd {
		w.scanNext = w.keys[len(w.keys)-1] + "\x00"
	}
	return true
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
