package locks

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/meridiandb/meridian/internal/storage"
	"github.com/meridiandb/meridian/internal/ts"
)

// modelTxn is what the model protocol knows of one transaction at one lock table.
type modelTxn struct {
	age      int64
	waiting  bool
	prepared bool // voted: makes no more requests, and a wound leaves its locks alone
	wounded  bool
}

// policyModel drives a table the way a 2PL participant does, at random: transactions take
// locks in both modes (so upgrades happen), wait, prepare, commit and abort, and the wounded
// ones that have not prepared are aborted — at once (Spanner's participant aborts them in the
// step that wounds them) or some steps later (a protocol whose aborts take a message). After
// every step check tests the policy's promise on the wait-for edges the table reports.
type policyModel struct {
	tab    *Table
	policy Policy
	lazy   bool // wounded transactions are aborted in a later step
	rng    *rand.Rand
	txns   map[storage.TxnID]*modelTxn
	next   storage.TxnID
	log    []string
	ranges bool // requests range locks too
}

// modelRanges are the ranges the model locks, over its keys a, b and c: within one key, across
// several, open-ended and the whole key space.
var modelRanges = []Range{{"a", "b"}, {"a", "c"}, {"b", "c"}, {"b", ""}, {"bb", "c"}, {"c", ""}, {"", ""}}

func (m *policyModel) begin() {
	m.next++
	m.txns[m.next] = &modelTxn{age: m.rng.Int64N(1000)}
}

func (m *policyModel) end(id storage.TxnID, why string) {
	m.log = append(m.log, fmt.Sprintf("release %d (%s)", id, why))
	for _, g := range m.tab.Release(id) {
		m.txns[g.Txn].waiting = false
	}
	delete(m.txns, id)
	m.begin()
}

// pick returns a random transaction satisfying ok, choosing in id order so a seed replays.
func (m *policyModel) pick(ok func(*modelTxn) bool) (storage.TxnID, bool) {
	var ids []storage.TxnID
	for id, x := range m.txns {
		if ok(x) {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return 0, false
	}
	slices.Sort(ids)
	return ids[m.rng.IntN(len(ids))], true
}

func (m *policyModel) step() {
	idle := func(x *modelTxn) bool { return !x.prepared && !x.waiting }
	switch r := m.rng.IntN(10); {
	case r < 6:
		id, ok := m.pick(idle)
		if !ok {
			return
		}
		x := m.txns[id]
		var res Result
		if m.ranges && m.rng.IntN(4) == 0 {
			rg := modelRanges[m.rng.IntN(len(modelRanges))]
			res = m.tab.AcquireRange(id, rg, m.policy, ts.New(x.age))
			m.log = append(m.log, fmt.Sprintf("%d (age %d) [%s, %s): %v %s wounds %v", id, x.age, rg.Start, rg.End, res.Outcome, res.Reason, res.Wound))
		} else {
			key := string(rune('a' + m.rng.IntN(3)))
			mode := Mode(1 + m.rng.IntN(2))
			res = m.tab.Acquire(id, key, mode, m.policy, ts.New(x.age))
			m.log = append(m.log, fmt.Sprintf("%d (age %d) %s %v: %v %s wounds %v", id, x.age, key, mode, res.Outcome, res.Reason, res.Wound))
		}
		switch res.Outcome {
		case Waiting:
			x.waiting = true
		case Aborted:
			m.end(id, "refused")
			return
		}
		for _, w := range res.Wound {
			m.txns[w].wounded = true
		}
		if !m.lazy {
			for _, w := range res.Wound {
				if y := m.txns[w]; y != nil && !y.prepared {
					m.end(w, "wounded")
				}
			}
		}
	case r < 7:
		if id, ok := m.pick(idle); ok {
			m.txns[id].prepared = true
			m.log = append(m.log, fmt.Sprintf("prepare %d", id))
		}
	case r < 8:
		if id, ok := m.pick(func(x *modelTxn) bool { return x.prepared }); ok {
			m.end(id, "decided")
		}
	case r < 9:
		if id, ok := m.pick(func(x *modelTxn) bool { return x.wounded && !x.prepared }); ok {
			m.end(id, "wounded")
		}
	default:
		if id, ok := m.pick(func(x *modelTxn) bool { return !x.prepared }); ok {
			m.end(id, "aborted elsewhere")
		}
	}
}

// checkTable tests what every policy promises: no two transactions hold conflicting locks (an
// exclusive lock beside another lock on its key, or beside another transaction's range lock
// covering it), every request the model thinks waits is queued and waits for someone, and no
// other request is queued (a grant Release did not report, or a waiter it forgot).
func (m *policyModel) checkTable() error {
	for key, l := range m.tab.locks {
		for _, h := range l.holders {
			if h.mode != Exclusive {
				continue
			}
			if len(l.holders) > 1 {
				return fmt.Errorf("%d holds %s exclusively beside %v", h.txn, key, l.holders)
			}
			for _, r := range m.tab.ranges {
				if r.granted && r.txn != h.txn && r.Covers(key) {
					return fmt.Errorf("%d holds %s exclusively under %d's range [%s, %s)", h.txn, key, r.txn, r.Start, r.End)
				}
			}
		}
	}
	queued := map[storage.TxnID]bool{}
	var err error
	m.tab.WaitsFor(func(waiter storage.TxnID, _ Age, blockers []storage.TxnID) {
		queued[waiter] = true
		if len(blockers) == 0 && err == nil {
			err = fmt.Errorf("%d is queued but waits for nobody: a grant was missed", waiter)
		}
		if x := m.txns[waiter]; (x == nil || !x.waiting) && err == nil {
			err = fmt.Errorf("%d is queued, but no Acquire left it waiting or a Release granted it unreported", waiter)
		}
	})
	for id, x := range m.txns {
		if x.waiting && !queued[id] && err == nil {
			err = fmt.Errorf("%d waits, but the table has no request of it queued", id)
		}
	}
	return err
}

// check tests the policy's promise on every wait-for edge. Wound-wait: an older transaction
// waits for a younger one only if that one is wounded (it goes, unless it is committing).
// Wait-die: every edge goes from older to younger.
func (m *policyModel) check() error {
	var err error
	m.tab.WaitsFor(func(waiter storage.TxnID, _ Age, blockers []storage.TxnID) {
		w := m.txns[waiter]
		for _, b := range blockers {
			y := m.txns[b]
			olderWaits := older(request{txn: waiter, age: ts.New(w.age)}, request{txn: b, age: ts.New(y.age)})
			switch {
			case m.policy == WoundWait && olderWaits && !y.wounded:
				err = fmt.Errorf("%d (age %d) waits for younger %d (age %d), never wounded", waiter, w.age, b, y.age)
			case m.policy == WaitDie && !olderWaits:
				err = fmt.Errorf("%d (age %d) waits for older %d (age %d)", waiter, w.age, b, y.age)
			}
		}
	})
	return err
}

// TestPolicyModel checks wound-wait and wait-die on random schedules, upgrades included. Before
// upgrades were judged against the waiters they pass, wound-wait with lazy aborts failed (seed 20,
// step 137: an older S waiter queued behind a younger X waiter, which it wounded, beside a
// younger S holder; that holder's upgrade queued ahead of it, and the older transaction waited
// for the upgrader, which nobody wounded). With aborts at once, as Spanner's participant deals
// them, that schedule cannot arise: the wounded X waiter leaves, and the older S request is
// granted, before the upgrade comes, which then waits for it.
func TestPolicyModel(t *testing.T) {
	for _, policy := range []Policy{WoundWait, WaitDie} {
		for _, lazy := range []bool{false, true} {
			t.Run(fmt.Sprintf("%v/lazy=%v", policy, lazy), func(t *testing.T) {
				runPolicyModel(t, policy, lazy, false)
			})
		}
	}
}

// TestPolicyModelWithRanges is TestPolicyModel with a quarter of the requests range locks, under
// every policy: each keeps its promise on the wait-for edges range locks add, and the table
// stays consistent (checkTable) however the two kinds of lock interleave.
func TestPolicyModelWithRanges(t *testing.T) {
	for _, policy := range []Policy{WoundWait, WaitDie, NoWait, Wait} {
		for _, lazy := range []bool{false, true} {
			if lazy && policy != WoundWait {
				continue // only wound-wait wounds
			}
			t.Run(fmt.Sprintf("%v/lazy=%v", policy, lazy), func(t *testing.T) {
				runPolicyModel(t, policy, lazy, true)
			})
		}
	}
}

func runPolicyModel(t *testing.T, policy Policy, lazy, ranges bool) {
	t.Helper()
	for seed := uint64(1); seed <= 1000; seed++ {
		m := &policyModel{tab: New(), policy: policy, lazy: lazy, ranges: ranges,
			rng: rand.New(rand.NewPCG(seed, 0)), txns: map[storage.TxnID]*modelTxn{}}
		for range 6 {
			m.begin()
		}
		for i := range 200 {
			m.step()
			err := m.check()
			if err == nil {
				err = m.checkTable()
			}
			if err != nil {
				tail := m.log[max(0, len(m.log)-30):]
				t.Fatalf("seed %d step %d: %v; last steps:\n  %s", seed, i, err, strings.Join(tail, "\n  "))
			}
		}
	}
}
