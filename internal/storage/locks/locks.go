// Package locks is a lock table for the two-phase-locking protocols (Spanner's d2PL-TTC and
// Spanner-RLS, notes/rls.md §3.1–3.2, notes/k2.md §4; FW-KV's per-key locks): shared and
// exclusive locks per key, shared range locks, FIFO waiters, and four deadlock policies chosen
// per request:
//
//   - NoWait: any conflict aborts the requester ("no-wait").
//   - WaitDie: an older requester waits for younger conflicting transactions; a younger one aborts
//     ("wait-die"). Every wait edge goes from older to younger, so no cycle can form.
//   - WoundWait: an older requester wounds (the protocol aborts) every younger conflicting
//     transaction and waits; a younger requester waits. Every wait edge goes from younger to older
//     once the wounded are gone. This is Spanner's policy.
//   - Wait: plain FIFO waiting, for protocols that detect deadlocks by timeout.
//
// "Conflicting transactions" are the incompatible holders and the incompatible waiters queued
// ahead of the requester: a request waits behind those too, so the policy must judge them.
//
// An upgrade (S→X by a holder) goes ahead of every ordinary waiter, so the waiters it passes
// start waiting for it without having judged it: they queued while it held S, which blocked only
// the exclusive requests among them, and those judged it then. Under WoundWait a waiter older
// than the upgrader would now wait for a younger transaction that nobody wounds — the one wait
// the policy rules out, which can close a deadlock cycle through other tables that nothing
// breaks. Its wound is dealt at once: the upgrade is refused (ReasonWoundWait), as the waiter
// would have wounded the upgrader had it come later. Spanner's participant never meets this: it
// aborts a wounded transaction that has not voted in the step that wounds it, after which no
// younger unvoted transaction holds S beside an older waiter; a protocol that aborts the
// wounded later would. Under WaitDie no waiter an upgrade passes is younger than the upgrader:
// an exclusive waiter judged its S lock, and a shared one waits only behind an exclusive one it
// is older than.
//
// Range locks (AcquireRange) are shared locks on a key range [start, end), which a scan in a
// read-write transaction takes to keep phantoms out under two-phase locking: no other
// transaction can write a key in the range, one that exists or one that does not yet, while it
// is held. A range lock conflicts with the exclusive locks other transactions hold on keys in
// its range and with their exclusive requests queued there before it (a shared point request
// judges the exclusive waiters ahead of it the same way); an exclusive request on a key
// conflicts with the range locks of other transactions that cover the key, held or queued before
// it. Shared locks of either kind are compatible. A transaction's own range lock covering a key
// is its shared lock there, as a point one is: its read of the key is granted at once, its write
// is an upgrade, and a range lock it asks for later does not wait for the requests queued on keys
// it already holds a lock on (they wait for that lock, so waiting for them is a deadlock). The
// policies judge these conflicts exactly as point ones, and WaitsFor reports them, so every wait edge a range lock adds was judged when it
// formed: one sequence number orders queued requests across the key queues and the range
// queue, and a request waits only for the conflicting ones queued before it (an upgrade passes
// point waiters, never a range waiter). Release grants, per released key, the head of its queue
// as before, then the keys under the released range locks, then the queued range locks, each
// in a fixed order. Range locks live in one list, checked only when it is not empty: a table in
// which nobody scans works, and costs, exactly as one without range locks.
//
// Age orders transactions: the smaller Age is older (a start timestamp, kept across retries so
// an old transaction does not starve, notes/rls.md §3.2), ties broken by the smaller TxnID.
//
// Every decision is reported to the caller: Acquire returns Granted, Waiting (with the wounded
// set for WoundWait) or Aborted with a reason; Release returns the waiting requests it granted, in
// FIFO order, so the protocol can resume them. The table never aborts anyone by itself: a wounded
// transaction keeps its locks until the protocol releases them (Spanner does not wound a
// transaction that has already prepared). Locks are volatile: after a restart a participant
// re-acquires exclusive locks for its prepared transactions from their recovered intents, and
// the read locks, point and range, that it recorded with their votes.
//
// Protocol-side code: one logical thread, no I/O, deterministic (per-transaction lock lists are
// kept in acquisition order; the keys under a range are sorted before any order can leak).
package locks

import (
	"fmt"
	"maps"
	"slices"

	"github.com/google/btree"

	"github.com/meridiandb/meridian/internal/storage"
	"github.com/meridiandb/meridian/internal/ts"
)

// Mode is a lock mode.
type Mode uint8

// Lock modes.
const (
	Shared Mode = iota + 1
	Exclusive
)

func (m Mode) String() string {
	switch m {
	case Shared:
		return "S"
	case Exclusive:
		return "X"
	}
	return fmt.Sprintf("mode(%d)", uint8(m))
}

// Policy decides what happens on a conflict.
type Policy uint8

// Policies.
const (
	NoWait Policy = iota + 1
	WaitDie
	WoundWait
	Wait
)

func (p Policy) String() string {
	switch p {
	case NoWait:
		return "no-wait"
	case WaitDie:
		return "wait-die"
	case WoundWait:
		return "wound-wait"
	case Wait:
		return "wait"
	}
	return fmt.Sprintf("policy(%d)", uint8(p))
}

// Outcome is the result of an Acquire.
type Outcome uint8

// Outcomes.
const (
	Granted Outcome = iota + 1
	Waiting
	Aborted
)

func (o Outcome) String() string {
	switch o {
	case Granted:
		return "granted"
	case Waiting:
		return "waiting"
	case Aborted:
		return "aborted"
	}
	return fmt.Sprintf("outcome(%d)", uint8(o))
}

// Abort reasons.
const (
	ReasonNoWait  = "no-wait"
	ReasonWaitDie = "wait-die"
	// ReasonWoundWait refuses a WoundWait upgrade that would go ahead of an older waiter.
	ReasonWoundWait = "wound-wait"
)

// Result reports an Acquire decision.
type Result struct {
	Outcome Outcome
	Reason  string // for Aborted: ReasonNoWait, ReasonWaitDie, ReasonWoundWait or ReasonQueueFull
	// Conflicts are the transactions the request conflicted with (holders first, then waiters
	// ahead; for an upgrade refused under WoundWait, the older waiters it would have passed),
	// for diagnostics and deadlock accounting.
	Conflicts []storage.TxnID
	// Wound are the younger conflicting transactions an older WoundWait requester wounds: the
	// protocol aborts them (unless already committing) and releases their locks.
	Wound []storage.TxnID
}

// Grant is a waiting request that Release granted: a lock on Key, or with Range set a shared
// range lock on [Key, End) (End "": to the end of the key space).
type Grant struct {
	Txn   storage.TxnID
	Key   string
	Mode  Mode
	End   string
	Range bool
}

// Range is a key range [Start, End); End "" reaches to the end of the key space.
type Range struct {
	Start, End string
}

// Covers reports whether key lies in r.
func (r Range) Covers(key string) bool { return key >= r.Start && (r.End == "" || key < r.End) }

// contains reports whether r covers all of o.
func (r Range) contains(o Range) bool {
	return o.Start >= r.Start && (r.End == "" || (o.End != "" && o.End <= r.End))
}

// Age is a transaction's priority: smaller is older and wins.
type Age = ts.Timestamp

type request struct {
	txn  storage.TxnID
	age  Age
	mode Mode
	// seq numbers a queued request in arrival order across every queue of the table: a point
	// waiter and a range waiter whose range covers its key are ahead of each other by seq.
	seq uint64
}

// rangeLock is a transaction's shared lock on a key range, held or queued.
type rangeLock struct {
	request
	Range
	granted bool
}

type lock struct {
	holders []request // all Shared, or one Exclusive
	waiters []request // FIFO; upgrades are placed before ordinary waiters
}

type txnState struct {
	keys   []string // keys held or waited on, first-touch order
	ranges bool     // holds or waits for a range lock
}

// Table is a lock table. The zero value is not usable; call New.
type Table struct {
	locks map[string]*lock
	// keys orders the keys of locks, so that a range lock's conflicts are found among the keys
	// in its range alone (a scan's step on a node with thousands of locks walked them all).
	keys *btree.BTreeG[string]
	txns map[storage.TxnID]*txnState
	// waiting holds the keys with queued requests, so WaitsFor need not walk every lock.
	waiting map[string]struct{}
	// ranges are the range locks, held and queued, in request order (so the queued ones are in
	// seq order). Empty unless some transaction scans: every range check is skipped then, so a
	// table without range locks costs what it did before they existed.
	ranges []*rangeLock
	seq    uint64 // the last request queued
	// MaxWaitersPerKey bounds each FIFO queue, the queued range locks' too; a request beyond it
	// is aborted with reason "queue-full" whatever the policy. 0 means unbounded.
	MaxWaitersPerKey int
}

// ReasonQueueFull is the abort reason when MaxWaitersPerKey is reached.
const ReasonQueueFull = "queue-full"

// New returns an empty lock table.
func New() *Table {
	return &Table{locks: make(map[string]*lock), keys: btree.NewOrderedG[string](32), txns: make(map[storage.TxnID]*txnState), waiting: map[string]struct{}{}}
}

func older(a, b request) bool {
	if c := a.age.Compare(b.age); c != 0 {
		return c < 0
	}
	return a.txn < b.txn
}

func compatible(a, b Mode) bool { return a == Shared && b == Shared }

func (t *Table) touch(txn storage.TxnID, key string) {
	st := t.txns[txn]
	if st == nil {
		st = &txnState{}
		t.txns[txn] = st
	}
	if !slices.Contains(st.keys, key) {
		st.keys = append(st.keys, key)
	}
}

// Acquire requests key in mode for txn under policy. Re-acquiring a held lock (or S while holding
// X) is granted at once; S→X is an upgrade, granted if txn is the only holder and otherwise queued
// ahead of the ordinary waiters (under WoundWait refused if one of them is older). A transaction may
// have at most one waiting request per key; a second Acquire while waiting returns Waiting again.
func (t *Table) Acquire(txn storage.TxnID, key string, mode Mode, policy Policy, age Age) Result {
	l := t.locks[key]
	if l == nil {
		l = &lock{}
		t.locks[key] = l
		t.keys.ReplaceOrInsert(key)
		// Granted at once without an entry (a read under txn's own range lock) or refused, the
		// request leaves the new entry empty: dropped, or it stayed for good, and every range
		// check walked it.
		defer t.dropIfUnused(key, l)
	}
	me := request{txn: txn, age: age, mode: mode}
	held := -1
	for i, h := range l.holders {
		if h.txn == txn {
			held = i
		}
	}
	if held >= 0 && (l.holders[held].mode == Exclusive || mode == Shared) {
		return Result{Outcome: Granted}
	}
	// A range lock of txn's covering key is its shared lock on key: a read is granted at once,
	// a write is an upgrade. Otherwise txn would queue behind the exclusive requests that wait
	// for its own range lock, each waiting for the other.
	ownRange := held < 0 && len(t.ranges) > 0 && t.rangeHeldBy(txn, key)
	if ownRange && mode == Shared {
		return Result{Outcome: Granted}
	}
	for _, w := range l.waiters {
		if w.txn == txn {
			return Result{Outcome: Waiting}
		}
	}
	upgrade := held >= 0 || ownRange
	// Conflicting holders, then conflicting waiters that would be ahead of this request.
	var conflicts []request
	for _, h := range l.holders {
		if h.txn != txn && !compatible(h.mode, mode) {
			conflicts = append(conflicts, h)
		}
	}
	if !upgrade {
		for _, w := range l.waiters {
			if !compatible(w.mode, mode) {
				conflicts = append(conflicts, w)
			}
		}
		if len(conflicts) == 0 && len(l.waiters) > 0 {
			// Compatible with everyone but others are queued: no barging, wait behind them.
			conflicts = append(conflicts, l.waiters...)
		}
	}
	if mode == Exclusive && len(t.ranges) > 0 {
		// Other transactions' range locks covering key, held and then queued: every queued
		// one is ahead of this request, an upgrade included (upgrades pass point waiters only).
		conflicts = t.rangeConflicts(txn, key, conflicts, true)
		conflicts = t.rangeConflicts(txn, key, conflicts, false)
	}
	if upgrade && policy == WoundWait {
		var passed []storage.TxnID
		for _, w := range l.waiters {
			if !t.isHolder(l, w.txn) && older(w, me) {
				passed = append(passed, w.txn)
			}
		}
		if len(passed) > 0 {
			return Result{Outcome: Aborted, Reason: ReasonWoundWait, Conflicts: passed}
		}
	}
	if len(conflicts) == 0 {
		if held >= 0 {
			l.holders[held].mode = Exclusive
		} else {
			l.holders = append(l.holders, me)
		}
		t.touch(txn, key)
		return Result{Outcome: Granted}
	}
	res := judge(me, conflicts, policy)
	if res.Outcome == Aborted {
		return res
	}
	if t.MaxWaitersPerKey > 0 && len(l.waiters) >= t.MaxWaitersPerKey {
		res.Outcome, res.Reason, res.Wound = Aborted, ReasonQueueFull, nil
		return res
	}
	t.seq++
	me.seq = t.seq
	if upgrade {
		// Upgraders go ahead of ordinary waiters: they already hold S, and an X waiter queued
		// before them could never be granted while they hold it.
		i := 0
		for i < len(l.waiters) && t.isHolder(l, l.waiters[i].txn) {
			i++
		}
		l.waiters = slices.Insert(l.waiters, i, me)
	} else {
		l.waiters = append(l.waiters, me)
	}
	t.touch(txn, key)
	t.waiting[key] = struct{}{}
	res.Outcome = Waiting
	return res
}

// judge applies policy to a request me that conflicts with conflicts (not empty): Aborted with
// the policy's reason, or else (Outcome unset: it waits) the transactions an older WoundWait
// requester wounds.
func judge(me request, conflicts []request, policy Policy) Result {
	res := Result{Conflicts: make([]storage.TxnID, len(conflicts))}
	for i, c := range conflicts {
		res.Conflicts[i] = c.txn
	}
	switch policy {
	case NoWait:
		res.Outcome, res.Reason = Aborted, ReasonNoWait
	case WaitDie:
		for _, c := range conflicts {
			if !older(me, c) {
				res.Outcome, res.Reason = Aborted, ReasonWaitDie
				break
			}
		}
	case WoundWait:
		for _, c := range conflicts {
			if older(me, c) && !slices.Contains(res.Wound, c.txn) {
				res.Wound = append(res.Wound, c.txn)
			}
		}
	}
	return res
}

// rangeConflicts appends to out the range locks of transactions other than txn that cover key,
// the held ones if held, else the queued ones (in seq order).
func (t *Table) rangeConflicts(txn storage.TxnID, key string, out []request, held bool) []request {
	for _, r := range t.ranges {
		if r.granted == held && r.txn != txn && r.Covers(key) {
			out = append(out, r.request)
		}
	}
	return out
}

// rangeHeldBy reports whether txn holds a range lock covering key.
func (t *Table) rangeHeldBy(txn storage.TxnID, key string) bool {
	for _, r := range t.ranges {
		if r.granted && r.txn == txn && r.Covers(key) {
			return true
		}
	}
	return false
}

// rangeBlocks reports whether a range lock of another transaction keeps w, an exclusive waiter
// on key, from being granted: one held, or one queued ahead of it.
func (t *Table) rangeBlocks(key string, w request) bool {
	for _, r := range t.ranges {
		if r.txn != w.txn && (r.granted || r.seq < w.seq) && r.Covers(key) {
			return true
		}
	}
	return false
}

// AcquireRange requests a shared lock on the key range rg for txn under policy. It conflicts
// with the exclusive locks other transactions hold on keys in rg and with their exclusive
// requests queued there (as a shared point request conflicts with the exclusive waiters ahead
// of it); other shared locks, point or range, are compatible. The policy judges those conflicts
// as it judges a point request's. Holding a range lock that contains rg grants it at once; a
// second request for a range txn already waits for returns Waiting again. A queued range lock is
// granted (Release) once no exclusive lock is held in its range and no exclusive request queued
// there before it remains; exclusive requests on keys in the range that come after it wait for
// it, so it cannot starve.
func (t *Table) AcquireRange(txn storage.TxnID, rg Range, policy Policy, age Age) Result {
	for _, r := range t.ranges {
		if r.txn == txn && (r.granted && r.contains(rg) || !r.granted && r.Range == rg) {
			if r.granted {
				return Result{Outcome: Granted}
			}
			return Result{Outcome: Waiting}
		}
	}
	me := &rangeLock{request: request{txn: txn, age: age, mode: Shared}, Range: rg}
	conflicts := t.exclusiveIn(me, false)
	if len(conflicts) == 0 {
		// A scan's steps lock adjacent parts, one per step: one granted at once extends the
		// part before it, or the list, which every range check walks, grows by a step each.
		for _, r := range t.ranges {
			if r.txn == txn && r.granted && r.End != "" && r.End == rg.Start {
				r.End = rg.End
				return Result{Outcome: Granted}
			}
		}
		me.granted = true
		t.ranges = append(t.ranges, me)
		t.touchRange(txn)
		return Result{Outcome: Granted}
	}
	res := judge(me.request, conflicts, policy)
	if res.Outcome == Aborted {
		return res
	}
	if t.MaxWaitersPerKey > 0 && t.queuedRanges() >= t.MaxWaitersPerKey {
		res.Outcome, res.Reason, res.Wound = Aborted, ReasonQueueFull, nil
		return res
	}
	t.seq++
	me.seq = t.seq
	t.ranges = append(t.ranges, me)
	t.touchRange(txn)
	res.Outcome = Waiting
	return res
}

func (t *Table) touchRange(txn storage.TxnID) {
	st := t.txns[txn]
	if st == nil {
		st = &txnState{}
		t.txns[txn] = st
	}
	st.ranges = true
}

func (t *Table) queuedRanges() int {
	n := 0
	for _, r := range t.ranges {
		if !r.granted {
			n++
		}
	}
	return n
}

// exclusiveIn returns what r conflicts with: the exclusive holders of other transactions on
// keys in its range, then the exclusive requests of other transactions queued there before r
// (all of them if r is not queued yet), keys in ascending order. With first set it stops at the
// first one found.
//
// The requests queued on a key r's transaction already holds a lock on, point or range, are
// left out: they wait for that lock, so none of them can be granted before r's transaction ends,
// and r waiting for them would be a deadlock (a point request is granted at once, or queued as
// an upgrade, in that case too).
func (t *Table) exclusiveIn(r *rangeLock, first bool) []request {
	var holders, waiters []request
	visit := func(k string, l *lock) bool {
		for _, h := range l.holders {
			if h.txn != r.txn && h.mode == Exclusive {
				holders = append(holders, h)
			}
		}
		for _, w := range l.waiters {
			if w.txn != r.txn && w.mode == Exclusive && (r.seq == 0 || w.seq < r.seq) {
				if t.isHolder(l, r.txn) || t.rangeHeldBy(r.txn, k) {
					break
				}
				waiters = append(waiters, w)
			}
		}
		return first && len(holders)+len(waiters) > 0
	}
	each := func(k string) bool { return !visit(k, t.locks[k]) }
	if r.End == "" {
		t.keys.AscendGreaterOrEqual(r.Start, each)
	} else {
		t.keys.AscendRange(r.Start, r.End, each)
	}
	return append(holders, waiters...)
}

// dropIfUnused forgets key's lock once nothing holds or waits for it.
func (t *Table) dropIfUnused(key string, l *lock) {
	if len(l.holders) == 0 && len(l.waiters) == 0 {
		delete(t.locks, key)
		t.keys.Delete(key)
	}
}

func (t *Table) isHolder(l *lock, txn storage.TxnID) bool {
	for _, h := range l.holders {
		if h.txn == txn {
			return true
		}
	}
	return false
}

// Release drops every lock txn holds and every request it has queued, range locks included,
// and returns the waiting requests that became granted: per key in FIFO order, keys in txn's
// first-touch order, then the keys under txn's range locks that gained nothing above (ascending),
// then queued range locks in request order.
func (t *Table) Release(txn storage.TxnID) []Grant {
	st := t.txns[txn]
	if st == nil {
		return nil
	}
	delete(t.txns, txn)
	var freed []Range
	if st.ranges {
		// Dropped first, so that the exclusive waiters they held back are granted below.
		t.ranges = slices.DeleteFunc(t.ranges, func(r *rangeLock) bool {
			if r.txn == txn {
				freed = append(freed, r.Range)
				return true
			}
			return false
		})
	}
	var grants []Grant
	for _, key := range st.keys {
		grants = t.releaseKey(txn, key, grants)
	}
	if len(freed) > 0 {
		var keys []string
		for k := range t.waiting {
			if slices.ContainsFunc(freed, func(r Range) bool { return r.Covers(k) }) {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		for _, k := range keys {
			grants = t.grantKey(k, t.locks[k], grants)
		}
	}
	return t.grantRanges(grants)
}

// ReleaseKey drops txn's lock or queued request on one key (early release of read locks, as
// Spanner-RLS does when converting a transaction) and returns what became granted.
func (t *Table) ReleaseKey(txn storage.TxnID, key string) []Grant {
	if st := t.txns[txn]; st != nil {
		if i := slices.Index(st.keys, key); i >= 0 {
			st.keys = slices.Delete(st.keys, i, i+1)
		}
		if len(st.keys) == 0 && !st.ranges {
			delete(t.txns, txn)
		}
	}
	return t.grantRanges(t.releaseKey(txn, key, nil))
}

func (t *Table) releaseKey(txn storage.TxnID, key string, grants []Grant) []Grant {
	l := t.locks[key]
	if l == nil {
		return grants
	}
	l.holders = slices.DeleteFunc(l.holders, func(r request) bool { return r.txn == txn })
	l.waiters = slices.DeleteFunc(l.waiters, func(r request) bool { return r.txn == txn })
	return t.grantKey(key, l, grants)
}

// grantKey grants key's waiters from the head of its queue while they can be (strict FIFO: it
// stops at the first that cannot be), and drops the lock once nobody holds or waits for it.
func (t *Table) grantKey(key string, l *lock, grants []Grant) []Grant {
	for len(l.waiters) > 0 {
		w := l.waiters[0]
		held := -1
		ok := true
		for i, h := range l.holders {
			if h.txn == w.txn {
				held = i
			} else if !compatible(h.mode, w.mode) {
				ok = false
			}
		}
		if !ok || w.mode == Exclusive && len(t.ranges) > 0 && t.rangeBlocks(key, w) {
			break
		}
		if held >= 0 {
			l.holders[held].mode = Exclusive
		} else {
			l.holders = append(l.holders, w)
		}
		l.waiters = l.waiters[1:]
		grants = append(grants, Grant{Txn: w.txn, Key: key, Mode: w.mode})
	}
	if len(l.waiters) == 0 {
		delete(t.waiting, key)
	}
	t.dropIfUnused(key, l)
	return grants
}

// grantRanges grants, in request order, the queued range locks nothing holds back any more.
// Granting one holds back no request that was not already waiting for it, so one pass is
// enough.
func (t *Table) grantRanges(grants []Grant) []Grant {
	for _, r := range t.ranges {
		if !r.granted && len(t.exclusiveIn(r, true)) == 0 {
			r.granted = true
			grants = append(grants, Grant{Txn: r.txn, Key: r.Start, End: r.End, Range: true, Mode: Shared})
		}
	}
	return grants
}

// WaitsFor calls fn for every queued request with the transactions it waits for now: the
// holders it is incompatible with and the incompatible requests queued ahead of it (or, if
// there are none, every request ahead of it, which it may not overtake). This is the table's
// part of the wait-for graph a deadlock detector needs, read from the queues as they are, so
// upgrades that went ahead of a request are included. Keys are visited in ascending order, then
// the queued range locks in request order. An exclusive request also waits for the range locks
// covering its key, held or queued ahead of it; a range lock for the exclusive locks held on keys
// in its range and the exclusive requests queued there ahead of it.
func (t *Table) WaitsFor(fn func(waiter storage.TxnID, age Age, blockers []storage.TxnID)) {
	for _, key := range slices.Sorted(maps.Keys(t.waiting)) {
		l := t.locks[key]
		for i, w := range l.waiters {
			var blockers []storage.TxnID
			for _, h := range l.holders {
				if h.txn != w.txn && !compatible(h.mode, w.mode) {
					blockers = append(blockers, h.txn)
				}
			}
			for _, a := range l.waiters[:i] {
				if !compatible(a.mode, w.mode) {
					blockers = append(blockers, a.txn)
				}
			}
			if len(blockers) == 0 {
				for _, a := range l.waiters[:i] {
					blockers = append(blockers, a.txn)
				}
			}
			if w.mode == Exclusive {
				for _, r := range t.ranges {
					if r.txn != w.txn && (r.granted || r.seq < w.seq) && r.Covers(key) {
						blockers = append(blockers, r.txn)
					}
				}
			}
			fn(w.txn, w.age, blockers)
		}
	}
	for _, r := range t.ranges {
		if r.granted {
			continue
		}
		var blockers []storage.TxnID
		for _, c := range t.exclusiveIn(r, false) {
			blockers = append(blockers, c.txn)
		}
		fn(r.txn, r.age, blockers)
	}
}

// Holders returns the transactions holding key and the mode they hold it in (all Shared, or one
// Exclusive), in grant order.
func (t *Table) Holders(key string) ([]storage.TxnID, Mode) {
	l := t.locks[key]
	if l == nil || len(l.holders) == 0 {
		return nil, 0
	}
	out := make([]storage.TxnID, len(l.holders))
	mode := Shared
	for i, h := range l.holders {
		out[i] = h.txn
		if h.mode == Exclusive {
			mode = Exclusive
		}
	}
	return out, mode
}

// Held returns the keys txn holds a lock on (not those it waits for), in first-touch order.
func (t *Table) Held(txn storage.TxnID) []string {
	st := t.txns[txn]
	if st == nil {
		return nil
	}
	var keys []string
	for _, k := range st.keys {
		if l := t.locks[k]; l != nil && t.isHolder(l, txn) {
			keys = append(keys, k)
		}
	}
	return keys
}

// HeldRanges returns the range locks txn holds (not those it waits for), in request order; one
// granted at once beside one txn held is returned as part of it.
func (t *Table) HeldRanges(txn storage.TxnID) []Range {
	if st := t.txns[txn]; st == nil || !st.ranges {
		return nil
	}
	var out []Range
	for _, r := range t.ranges {
		if r.txn == txn && r.granted {
			out = append(out, r.Range)
		}
	}
	return out
}

// Waiters returns the transactions queued on key, in FIFO order.
func (t *Table) Waiters(key string) []storage.TxnID {
	l := t.locks[key]
	if l == nil {
		return nil
	}
	out := make([]storage.TxnID, len(l.waiters))
	for i, w := range l.waiters {
		out[i] = w.txn
	}
	return out
}

// Len returns the number of keys with holders or waiters.
func (t *Table) Len() int { return len(t.locks) }
