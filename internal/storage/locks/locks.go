// Package locks is a lock table for the two-phase-locking protocols (Spanner's d2PL-TTC and
// Spanner-RLS, notes/rls.md §3.1–3.2, notes/k2.md §4; FW-KV's per-key locks): shared and
// exclusive locks per key, FIFO waiters, and three deadlock policies chosen per request:
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
// Age orders transactions: the smaller Age is older (a start timestamp, kept across retries so
// an old transaction does not starve, notes/rls.md §3.2), ties broken by the smaller TxnID.
//
// Every decision is reported to the caller: Acquire returns Granted, Waiting (with the wounded
// set for WoundWait) or Aborted with a reason; Release returns the waiting requests it granted, in
// FIFO order, so the protocol can resume them. The table never aborts anyone by itself: a wounded
// transaction keeps its locks until the protocol releases them (Spanner does not wound a
// transaction that has already prepared). Locks are volatile: after a restart a participant
// re-acquires exclusive locks for its prepared transactions from their recovered intents.
//
// Protocol-side code: one logical thread, no I/O, deterministic (per-transaction lock lists are
// kept in acquisition order; no map iteration).
package locks

import (
	"fmt"
	"maps"
	"slices"

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

// Grant is a waiting request that Release granted.
type Grant struct {
	Txn  storage.TxnID
	Key  string
	Mode Mode
}

// Age is a transaction's priority: smaller is older and wins.
type Age = ts.Timestamp

type request struct {
	txn  storage.TxnID
	age  Age
	mode Mode
}

type lock struct {
	holders []request // all Shared, or one Exclusive
	waiters []request // FIFO; upgrades are placed before ordinary waiters
}

type txnState struct {
	keys []string // keys held or waited on, first-touch order
}

// Table is a lock table. The zero value is not usable; call New.
type Table struct {
	locks map[string]*lock
	txns  map[storage.TxnID]*txnState
	// waiting holds the keys with queued requests, so WaitsFor need not walk every lock.
	waiting map[string]struct{}
	// MaxWaitersPerKey bounds each FIFO queue; a request beyond it is aborted with reason
	// "queue-full" whatever the policy. 0 means unbounded.
	MaxWaitersPerKey int
}

// ReasonQueueFull is the abort reason when MaxWaitersPerKey is reached.
const ReasonQueueFull = "queue-full"

// New returns an empty lock table.
func New() *Table {
	return &Table{locks: make(map[string]*lock), txns: make(map[storage.TxnID]*txnState), waiting: map[string]struct{}{}}
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
	for _, w := range l.waiters {
		if w.txn == txn {
			return Result{Outcome: Waiting}
		}
	}
	upgrade := held >= 0
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
		if upgrade {
			l.holders[held].mode = Exclusive
		} else {
			l.holders = append(l.holders, me)
		}
		t.touch(txn, key)
		return Result{Outcome: Granted}
	}
	res := Result{Conflicts: make([]storage.TxnID, len(conflicts))}
	for i, c := range conflicts {
		res.Conflicts[i] = c.txn
	}
	switch policy {
	case NoWait:
		res.Outcome, res.Reason = Aborted, ReasonNoWait
		return res
	case WaitDie:
		for _, c := range conflicts {
			if !older(me, c) {
				res.Outcome, res.Reason = Aborted, ReasonWaitDie
				return res
			}
		}
	case WoundWait:
		for _, c := range conflicts {
			if older(me, c) && !slices.Contains(res.Wound, c.txn) {
				res.Wound = append(res.Wound, c.txn)
			}
		}
	}
	if t.MaxWaitersPerKey > 0 && len(l.waiters) >= t.MaxWaitersPerKey {
		res.Outcome, res.Reason, res.Wound = Aborted, ReasonQueueFull, nil
		return res
	}
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

func (t *Table) isHolder(l *lock, txn storage.TxnID) bool {
	for _, h := range l.holders {
		if h.txn == txn {
			return true
		}
	}
	return false
}

// Release drops every lock txn holds and every request it has queued, and returns the waiting
// requests that became granted, in FIFO order per key and keys in txn's first-touch order.
func (t *Table) Release(txn storage.TxnID) []Grant {
	st := t.txns[txn]
	if st == nil {
		return nil
	}
	delete(t.txns, txn)
	var grants []Grant
	for _, key := range st.keys {
		grants = t.releaseKey(txn, key, grants)
	}
	return grants
}

// ReleaseKey drops txn's lock or queued request on one key (early release of read locks, as
// Spanner-RLS does when converting a transaction) and returns what became granted.
func (t *Table) ReleaseKey(txn storage.TxnID, key string) []Grant {
	if st := t.txns[txn]; st != nil {
		if i := slices.Index(st.keys, key); i >= 0 {
			st.keys = slices.Delete(st.keys, i, i+1)
		}
		if len(st.keys) == 0 {
			delete(t.txns, txn)
		}
	}
	return t.releaseKey(txn, key, nil)
}

func (t *Table) releaseKey(txn storage.TxnID, key string, grants []Grant) []Grant {
	l := t.locks[key]
	if l == nil {
		return grants
	}
	l.holders = slices.DeleteFunc(l.holders, func(r request) bool { return r.txn == txn })
	l.waiters = slices.DeleteFunc(l.waiters, func(r request) bool { return r.txn == txn })
	// Grant from the head of the queue while compatible (strict FIFO: stop at the first that
	// cannot be granted).
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
		if !ok {
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
	if len(l.holders) == 0 && len(l.waiters) == 0 {
		delete(t.locks, key)
	}
	return grants
}

// WaitsFor calls fn for every queued request with the transactions it waits for now: the
// holders it is incompatible with and the incompatible requests queued ahead of it (or, if
// there are none, every request ahead of it, which it may not overtake). This is the table's
// part of the wait-for graph a deadlock detector needs, read from the queues as they are, so
// upgrades that went ahead of a request are included. Keys are visited in ascending order.
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
			fn(w.txn, w.age, blockers)
		}
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
