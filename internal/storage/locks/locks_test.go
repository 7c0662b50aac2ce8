package locks

import (
	"fmt"
	"slices"
	"testing"

	"github.com/meridiandb/meridian/internal/storage"
	"github.com/meridiandb/meridian/internal/ts"
)

// step is one Acquire or Release in a scenario, with what the table must answer.
type step struct {
	release bool
	txn     storage.TxnID
	key     string
	mode    Mode
	policy  Policy
	age     int64 // smaller is older

	rng       bool   // a range lock on [key, end)
	end       string // for rng
	want      Outcome
	reason    string
	wound     []storage.TxnID
	conflicts []storage.TxnID
	grants    []Grant // for release
}

func acq(txn storage.TxnID, key string, mode Mode, p Policy, age int64, want Outcome) step {
	return step{txn: txn, key: key, mode: mode, policy: p, age: age, want: want}
}

// acqRange requests a range lock on [start, end).
func acqRange(txn storage.TxnID, start, end string, p Policy, age int64, want Outcome) step {
	return step{txn: txn, key: start, end: end, rng: true, mode: Shared, policy: p, age: age, want: want}
}

// rangeGrant is the Grant of a range lock on [start, end).
func rangeGrant(txn storage.TxnID, start, end string) Grant {
	return Grant{Txn: txn, Key: start, End: end, Range: true, Mode: Shared}
}

func rel(txn storage.TxnID, grants ...Grant) step {
	return step{release: true, txn: txn, grants: grants}
}

func (s step) because(r string) step                   { s.reason = r; return s }
func (s step) wounds(ids ...storage.TxnID) step        { s.wound = ids; return s }
func (s step) conflictsWith(ids ...storage.TxnID) step { s.conflicts = ids; return s }

func TestPolicies(t *testing.T) {
	const a, b, c, d = 1, 2, 3, 4
	tests := []struct {
		name  string
		steps []step
	}{
		{"shared locks are compatible", []step{
			acq(a, "k", Shared, NoWait, 1, Granted),
			acq(b, "k", Shared, NoWait, 2, Granted),
			acq(a, "k", Shared, NoWait, 1, Granted), // re-entrant
		}},
		{"no-wait aborts on any conflict", []step{
			acq(a, "k", Exclusive, NoWait, 2, Granted),
			acq(b, "k", Shared, NoWait, 1, Aborted).because(ReasonNoWait).conflictsWith(a),
			acq(b, "k", Exclusive, NoWait, 3, Aborted).because(ReasonNoWait),
		}},
		{"wait-die: older waits, younger dies", []step{
			acq(b, "k", Exclusive, WaitDie, 2, Granted),
			acq(a, "k", Shared, WaitDie, 1, Waiting).conflictsWith(b),
			acq(c, "k", Shared, WaitDie, 3, Aborted).because(ReasonWaitDie),
			rel(b, Grant{Txn: a, Key: "k", Mode: Shared}),
		}},
		{"wait-die judges waiters ahead too", []step{
			acq(b, "k", Exclusive, WaitDie, 5, Granted),
			acq(c, "k", Exclusive, WaitDie, 3, Waiting),
			// d is older than the holder b but younger than the waiter c it would queue behind.
			acq(d, "k", Exclusive, WaitDie, 4, Aborted).because(ReasonWaitDie).conflictsWith(b, c),
			acq(a, "k", Exclusive, WaitDie, 1, Waiting).conflictsWith(b, c),
			rel(b, Grant{Txn: c, Key: "k", Mode: Exclusive}),
			rel(c, Grant{Txn: a, Key: "k", Mode: Exclusive}),
		}},
		{"wound-wait: older wounds younger holders and waits", []step{
			acq(b, "k", Shared, WoundWait, 2, Granted),
			acq(c, "k", Shared, WoundWait, 3, Granted),
			acq(a, "k", Exclusive, WoundWait, 1, Waiting).wounds(b, c).conflictsWith(b, c),
			acq(d, "k", Shared, WoundWait, 4, Waiting).conflictsWith(a), // younger waits, wounds no one
			rel(b),
			rel(c, Grant{Txn: a, Key: "k", Mode: Exclusive}),
			rel(a, Grant{Txn: d, Key: "k", Mode: Shared}),
		}},
		{"wound-wait: younger requester waits without wounding", []step{
			acq(a, "k", Exclusive, WoundWait, 1, Granted),
			acq(b, "k", Exclusive, WoundWait, 2, Waiting).conflictsWith(a),
		}},
		{"FIFO: shared behind a queued exclusive waits (no barging)", []step{
			acq(a, "k", Shared, Wait, 1, Granted),
			acq(b, "k", Exclusive, Wait, 2, Waiting),
			acq(c, "k", Shared, Wait, 3, Waiting).conflictsWith(b),
			acq(d, "k", Shared, Wait, 4, Waiting),
			rel(a, Grant{Txn: b, Key: "k", Mode: Exclusive}),
			rel(b, Grant{Txn: c, Key: "k", Mode: Shared}, Grant{Txn: d, Key: "k", Mode: Shared}),
		}},
		{"upgrade granted to sole holder, queued ahead otherwise", []step{
			acq(a, "k", Shared, Wait, 1, Granted),
			acq(a, "k", Exclusive, Wait, 1, Granted),
			acq(b, "k", Shared, NoWait, 2, Aborted).because(ReasonNoWait),
			rel(a),
			acq(a, "k", Shared, Wait, 1, Granted),
			acq(b, "k", Shared, Wait, 2, Granted),
			acq(c, "k", Exclusive, Wait, 3, Waiting),
			acq(a, "k", Exclusive, Wait, 1, Waiting).conflictsWith(b),
			rel(b, Grant{Txn: a, Key: "k", Mode: Exclusive}),
			rel(a, Grant{Txn: c, Key: "k", Mode: Exclusive}),
		}},
		{"upgrade deadlock resolved by wait-die", []step{
			acq(a, "k", Shared, WaitDie, 1, Granted),
			acq(b, "k", Shared, WaitDie, 2, Granted),
			acq(a, "k", Exclusive, WaitDie, 1, Waiting),
			acq(b, "k", Exclusive, WaitDie, 2, Aborted).because(ReasonWaitDie),
			rel(b, Grant{Txn: a, Key: "k", Mode: Exclusive}),
		}},
		// The defect: an older S waiter o queued behind a younger X waiter z (which it wounds)
		// while y held S compatibly; y's upgrade then went ahead of o, granted at once as the
		// only holder, and o waited for the younger y with no wound ever dealt: once the wounded
		// z was gone, o still waited for y, which could be waiting for o at another table.
		{"wound-wait: an upgrade that would pass an older waiter is refused", []step{
			acq(b, "k", Shared, WoundWait, 2, Granted),
			acq(c, "k", Exclusive, WoundWait, 3, Waiting).conflictsWith(b),
			acq(a, "k", Shared, WoundWait, 1, Waiting).wounds(c).conflictsWith(c),
			acq(b, "k", Exclusive, WoundWait, 2, Aborted).because(ReasonWoundWait).conflictsWith(a),
			rel(b, Grant{Txn: c, Key: "k", Mode: Exclusive}),
			rel(c, Grant{Txn: a, Key: "k", Mode: Shared}),
		}},
		{"wound-wait: a queued upgrade that would pass an older waiter is refused", []step{
			acq(b, "k", Shared, WoundWait, 2, Granted),
			acq(d, "k", Shared, WoundWait, 4, Granted),
			acq(c, "k", Exclusive, WoundWait, 5, Waiting).conflictsWith(b, d),
			acq(a, "k", Shared, WoundWait, 1, Waiting).wounds(c).conflictsWith(c),
			acq(b, "k", Exclusive, WoundWait, 2, Aborted).because(ReasonWoundWait).conflictsWith(a),
		}},
		{"wound-wait: an upgrade passing only younger waiters waits ahead of them", []step{
			acq(b, "k", Shared, WoundWait, 2, Granted),
			acq(d, "k", Shared, WoundWait, 4, Granted),
			acq(c, "k", Exclusive, WoundWait, 5, Waiting).conflictsWith(b, d),
			acq(b, "k", Exclusive, WoundWait, 2, Waiting).wounds(d).conflictsWith(d),
			rel(d, Grant{Txn: b, Key: "k", Mode: Exclusive}),
			rel(b, Grant{Txn: c, Key: "k", Mode: Exclusive}),
		}},
		// The mirror: under wait-die, the waiters an upgrade passes are older than the upgrader,
		// so the edges they gain still go from older to younger: an X waiter judged the S lock
		// the upgrader held, and an S waiter waits only behind an X waiter it is older than.
		{"wait-die: the waiters an upgrade passes are older than it", []step{
			acq(b, "k", Shared, WaitDie, 2, Granted),
			acq(c, "k", Exclusive, WaitDie, 3, Aborted).because(ReasonWaitDie).conflictsWith(b),
			acq(a, "k", Exclusive, WaitDie, 1, Waiting).conflictsWith(b),
			acq(d, "k", Shared, WaitDie, 4, Aborted).because(ReasonWaitDie).conflictsWith(a),
			acq(b, "k", Exclusive, WaitDie, 2, Granted), // the only holder: granted ahead of a
			rel(b, Grant{Txn: a, Key: "k", Mode: Exclusive}),
		}},
		{"release grants across keys in first-touch order", []step{
			acq(a, "x", Exclusive, Wait, 1, Granted),
			acq(a, "y", Exclusive, Wait, 1, Granted),
			acq(b, "y", Shared, Wait, 2, Waiting),
			acq(c, "x", Shared, Wait, 3, Waiting),
			rel(a, Grant{Txn: c, Key: "x", Mode: Shared}, Grant{Txn: b, Key: "y", Mode: Shared}),
		}},
		{"a released waiter leaves the queue", []step{
			acq(a, "k", Exclusive, Wait, 1, Granted),
			acq(b, "k", Exclusive, Wait, 2, Waiting),
			acq(c, "k", Shared, Wait, 3, Waiting),
			rel(b),
			rel(a, Grant{Txn: c, Key: "k", Mode: Shared}),
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			runSteps(t, New(), tt.steps)
		})
	}
}

func runSteps(t *testing.T, tab *Table, steps []step) {
	t.Helper()
	for i, s := range steps {
		if s.release {
			got := tab.Release(s.txn)
			if !slices.Equal(got, s.grants) {
				t.Fatalf("step %d: Release(%v) granted %v, want %v", i, s.txn, got, s.grants)
			}
			continue
		}
		var r Result
		what := fmt.Sprintf("%v %s %v %v", s.txn, s.key, s.mode, s.policy)
		if s.rng {
			r = tab.AcquireRange(s.txn, Range{s.key, s.end}, s.policy, ts.New(s.age))
			what = fmt.Sprintf("%v [%s, %s) %v", s.txn, s.key, s.end, s.policy)
		} else {
			r = tab.Acquire(s.txn, s.key, s.mode, s.policy, ts.New(s.age))
		}
		if r.Outcome != s.want || r.Reason != s.reason {
			t.Fatalf("step %d: Acquire(%s) = %v %q, want %v %q", i, what, r.Outcome, r.Reason, s.want, s.reason)
		}
		if !slices.Equal(r.Wound, s.wound) {
			t.Fatalf("step %d: wound %v, want %v", i, r.Wound, s.wound)
		}
		if s.conflicts != nil && !slices.Equal(r.Conflicts, s.conflicts) {
			t.Fatalf("step %d: conflicts %v, want %v", i, r.Conflicts, s.conflicts)
		}
	}
}

func TestQueueBound(t *testing.T) {
	tab := New()
	tab.MaxWaitersPerKey = 1
	runSteps(t, tab, []step{
		acq(1, "k", Exclusive, Wait, 1, Granted),
		acq(2, "k", Exclusive, Wait, 2, Waiting),
		acq(3, "k", Exclusive, Wait, 3, Aborted).because(ReasonQueueFull),
	})
}

// TestReleaseEmptiesTable checks that no state leaks once every transaction has released.
func TestReleaseEmptiesTable(t *testing.T) {
	tab := New()
	for i := storage.TxnID(1); i <= 20; i++ {
		tab.Acquire(i, string(rune('a'+i%3)), Mode(1+i%2), Wait, ts.New(int64(i)))
		if i%4 == 0 {
			tab.AcquireRange(i, Range{string(rune('a' + i%3)), ""}, Wait, ts.New(int64(i)))
		}
	}
	for i := storage.TxnID(1); i <= 20; i++ {
		tab.Release(i)
	}
	if tab.Len() != 0 || len(tab.txns) != 0 || len(tab.ranges) != 0 || len(tab.waiting) != 0 {
		t.Fatalf("after releasing everything: %d keys, %d txns, %d ranges, %d waiting keys left", tab.Len(), len(tab.txns), len(tab.ranges), len(tab.waiting))
	}
}

// TestWaitsFor: the wait-for edges are read from the queues as they stand, so they include the
// holders and requests that came ahead of a waiter after it queued — an upgrade queued ahead of
// it, or one granted at once (the only shared holder upgrading while others wait behind an
// exclusive request).
func TestWaitsFor(t *testing.T) {
	const a, b, c, r, u, w = 1, 2, 3, 4, 5, 6
	age := func(n int64) Age { return ts.Timestamp{Wall: n} }
	edges := func(tb *Table) map[storage.TxnID][]storage.TxnID {
		out := map[storage.TxnID][]storage.TxnID{}
		tb.WaitsFor(func(waiter storage.TxnID, _ Age, blockers []storage.TxnID) { out[waiter] = blockers })
		return out
	}
	t.Run("queued upgrade goes ahead", func(t *testing.T) {
		tb := New()
		tb.Acquire(a, "k", Shared, Wait, age(1))
		tb.Acquire(b, "k", Shared, Wait, age(2))
		tb.Acquire(c, "k", Exclusive, Wait, age(3))
		if got := edges(tb)[c]; !slices.Equal(got, []storage.TxnID{a, b}) {
			t.Fatalf("c waits for %v, want [a b]", got)
		}
		tb.Acquire(a, "k", Exclusive, Wait, age(1)) // upgrade: waits for b, queued ahead of c
		e := edges(tb)
		if !slices.Equal(e[a], []storage.TxnID{b}) || !slices.Equal(e[c], []storage.TxnID{a, b, a}) {
			t.Fatalf("edges %v, want a→[b], c→[a b a]", e)
		}
	})
	t.Run("upgrade granted at once", func(t *testing.T) {
		tb := New()
		tb.Acquire(u, "k", Shared, Wait, age(1))
		tb.Acquire(w, "k", Exclusive, Wait, age(2)) // waits for u
		tb.Acquire(r, "k", Shared, Wait, age(3))    // waits behind w
		if res := tb.Acquire(u, "k", Exclusive, Wait, age(1)); res.Outcome != Granted {
			t.Fatalf("u's upgrade: %v, want granted (u is the only holder)", res.Outcome)
		}
		e := edges(tb)
		if !slices.Equal(e[w], []storage.TxnID{u}) || !slices.Equal(e[r], []storage.TxnID{u, w}) {
			t.Fatalf("edges %v, want w→[u], r→[u w]", e)
		}
		tb.Release(w)
		if e := edges(tb); !slices.Equal(e[r], []storage.TxnID{u}) {
			t.Fatalf("after w left, r waits for %v, want [u]", e[r])
		}
		tb.Release(u)
		if e := edges(tb); len(e) != 0 {
			t.Fatalf("edges %v after every holder left, want none", e)
		}
	})
}

func TestRangeLocks(t *testing.T) {
	const a, b, c, d, e = 1, 2, 3, 4, 5
	tests := []struct {
		name  string
		steps []step
	}{
		{"shared locks are compatible with a range; exclusive ones inside it conflict", []step{
			acqRange(a, "b", "d", NoWait, 1, Granted),
			acq(b, "c", Shared, NoWait, 2, Granted),
			acq(b, "c", Exclusive, NoWait, 2, Aborted).because(ReasonNoWait).conflictsWith(a), // an upgrade too
			acq(c, "d", Exclusive, NoWait, 3, Granted),                                        // the end is not in the range
			acq(c, "a", Exclusive, NoWait, 3, Granted),
			acqRange(d, "c", "", NoWait, 4, Aborted).because(ReasonNoWait).conflictsWith(c), // open-ended
			acqRange(a, "b", "d", NoWait, 1, Granted),                                       // held
			acqRange(a, "bb", "c", NoWait, 1, Granted),                                      // inside one held
			acqRange(a, "a", "d", NoWait, 1, Aborted).because(ReasonNoWait).conflictsWith(c),
		}},
		{"a queued range goes ahead of later exclusive requests in it", []step{
			acq(a, "k", Exclusive, Wait, 1, Granted),
			acqRange(b, "j", "l", Wait, 2, Waiting).conflictsWith(a),
			acq(c, "k2", Exclusive, Wait, 3, Waiting).conflictsWith(b),
			acq(d, "z", Exclusive, Wait, 4, Granted),
			rel(a, rangeGrant(b, "j", "l")),
			rel(b, Grant{Txn: c, Key: "k2", Mode: Exclusive}),
		}},
		{"an exclusive request queued before a range is granted first", []step{
			acq(a, "k", Shared, Wait, 1, Granted),
			acq(b, "k", Exclusive, Wait, 2, Waiting).conflictsWith(a),
			acqRange(c, "", "", Wait, 3, Waiting).conflictsWith(b),
			rel(a, Grant{Txn: b, Key: "k", Mode: Exclusive}),
			rel(b, rangeGrant(c, "", "")),
		}},
		{"wait-die judges range conflicts", []step{
			acq(b, "k", Exclusive, WaitDie, 2, Granted),
			acqRange(a, "a", "z", WaitDie, 1, Waiting).conflictsWith(b),
			acqRange(c, "k", "l", WaitDie, 3, Aborted).because(ReasonWaitDie).conflictsWith(b),
			acq(d, "m", Exclusive, WaitDie, 4, Aborted).because(ReasonWaitDie).conflictsWith(a),
			rel(b, rangeGrant(a, "a", "z")),
		}},
		{"wound-wait: an older range wounds, a younger one waits", []step{
			acq(c, "k", Exclusive, WoundWait, 3, Granted),
			acq(d, "k", Exclusive, WoundWait, 4, Waiting).conflictsWith(c),
			acqRange(a, "a", "z", WoundWait, 1, Waiting).wounds(c, d).conflictsWith(c, d),
			acqRange(e, "k", "l", WoundWait, 5, Waiting).conflictsWith(c, d),
			acq(b, "x", Exclusive, WoundWait, 2, Waiting).conflictsWith(a),
			rel(c, Grant{Txn: d, Key: "k", Mode: Exclusive}), // d queued before both ranges
			rel(d, rangeGrant(a, "a", "z"), rangeGrant(e, "k", "l")),
			rel(a, Grant{Txn: b, Key: "x", Mode: Exclusive}),
		}},
		{"an upgrade does not pass a queued range", []step{
			acq(a, "k", Shared, Wait, 1, Granted),
			acq(b, "m", Exclusive, Wait, 2, Granted),
			acqRange(c, "k", "n", Wait, 3, Waiting).conflictsWith(b),
			acq(a, "k", Exclusive, Wait, 1, Waiting).conflictsWith(c), // a is the only holder of k
			rel(b, rangeGrant(c, "k", "n")),
			rel(c, Grant{Txn: a, Key: "k", Mode: Exclusive}),
		}},
		{"a transaction's own locks never conflict", []step{
			acq(a, "k", Exclusive, NoWait, 1, Granted),
			acqRange(a, "a", "z", NoWait, 1, Granted),
			acq(a, "m", Exclusive, NoWait, 1, Granted),
			acq(b, "m", Shared, NoWait, 2, Aborted).because(ReasonNoWait),
			acqRange(b, "l", "n", NoWait, 2, Aborted).because(ReasonNoWait).conflictsWith(a),
			acq(b, "zz", Exclusive, NoWait, 2, Granted),
		}},
		{"releasing a queued range lets the exclusive requests behind it go", []step{
			acq(a, "k", Exclusive, Wait, 1, Granted),
			acqRange(b, "a", "z", Wait, 2, Waiting),
			acq(c, "m", Exclusive, Wait, 3, Waiting).conflictsWith(b),
			acq(d, "n", Exclusive, Wait, 4, Waiting).conflictsWith(b),
			rel(b, Grant{Txn: c, Key: "m", Mode: Exclusive}, Grant{Txn: d, Key: "n", Mode: Exclusive}),
		}},
		{"release order: released keys, then keys under released ranges, then ranges", []step{
			acq(a, "x", Exclusive, Wait, 1, Granted),
			acqRange(a, "m", "p", Wait, 1, Granted),
			acq(b, "x", Shared, Wait, 2, Waiting),
			acq(c, "o", Exclusive, Wait, 3, Waiting).conflictsWith(a),
			acq(d, "n", Exclusive, Wait, 4, Waiting).conflictsWith(a),
			acqRange(e, "w", "y", Wait, 5, Waiting).conflictsWith(a),
			rel(a, Grant{Txn: b, Key: "x", Mode: Shared}, Grant{Txn: d, Key: "n", Mode: Exclusive},
				Grant{Txn: c, Key: "o", Mode: Exclusive}, rangeGrant(e, "w", "y")),
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			runSteps(t, New(), tt.steps)
		})
	}
}

func TestRangeQueueBound(t *testing.T) {
	tab := New()
	tab.MaxWaitersPerKey = 1
	runSteps(t, tab, []step{
		acq(1, "k", Exclusive, Wait, 1, Granted),
		acqRange(2, "a", "z", Wait, 2, Waiting),
		acqRange(3, "j", "l", Wait, 3, Aborted).because(ReasonQueueFull),
	})
}

// TestRangeWaitsFor: range waits are wait-for edges both ways, each to the requests ahead.
func TestRangeWaitsFor(t *testing.T) {
	const a, b, c, d, e = 1, 2, 3, 4, 5
	tab := New()
	runSteps(t, tab, []step{
		acq(c, "k", Exclusive, Wait, 3, Granted),
		acq(d, "k", Exclusive, Wait, 4, Waiting),
		acqRange(a, "a", "z", Wait, 1, Waiting),
		acqRange(e, "k", "l", Wait, 5, Waiting),
		acq(b, "x", Exclusive, Wait, 2, Waiting),
	})
	type edge struct {
		waiter   storage.TxnID
		blockers []storage.TxnID
	}
	var got []edge
	tab.WaitsFor(func(w storage.TxnID, _ Age, bl []storage.TxnID) { got = append(got, edge{w, bl}) })
	want := []edge{{d, []storage.TxnID{c}}, {b, []storage.TxnID{a}}, {a, []storage.TxnID{c, d}}, {e, []storage.TxnID{c, d}}}
	if !slices.EqualFunc(got, want, func(x, y edge) bool { return x.waiter == y.waiter && slices.Equal(x.blockers, y.blockers) }) {
		t.Fatalf("edges %v, want %v", got, want)
	}
	if got, want := tab.HeldRanges(a), []Range(nil); !slices.Equal(got, want) {
		t.Fatalf("HeldRanges of a waiter: %v", got)
	}
}
