package mvcc

import (
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"testing"

	"github.com/meridiandb/meridian/internal/node"

	"github.com/meridiandb/meridian/internal/storage"
	"github.com/meridiandb/meridian/internal/ts"
)

// TestGCNeverChangesReadsAtOrAboveSafePoint: for random histories, every read at or above the
// safe point answers the same before and after GC, undecided intents all survive, and GC removes
// something whenever there was garbage.
func TestGCNeverChangesReadsAtOrAboveSafePoint(t *testing.T) {
	for seed := uint64(1); seed <= 200; seed++ {
		rng := rand.New(rand.NewPCG(seed, 1))
		s := New(Options{})
		for i := 0; i < 60; i++ {
			key := fmt.Sprintf("k%d", rng.IntN(5))
			v := Version{TS: ts.New(int64(1 + rng.IntN(100))), Txn: storage.TxnID(i + 1), Value: []byte(fmt.Sprint(i)), Tombstone: rng.IntN(8) == 0}
			switch rng.IntN(5) {
			case 0:
				_ = s.PutIntent(key, v)
			case 1:
				if s.PutIntent(key, v) == nil {
					s.AbortIntent(key, v.Txn)
				}
			case 2: // committed at a later timestamp than written, as CRDB and Spanner do
				if s.PutIntent(key, v) == nil {
					_ = s.Commit(key, v.Txn, ts.New(v.TS.Wall+int64(rng.IntN(3))))
				}
			default:
				_ = s.PutCommitted(key, v)
			}
		}
		safe := ts.New(int64(1 + rng.IntN(100)))
		type read struct {
			v  Version
			ok bool
			p  int
		}
		before := map[string]read{}
		intents := 0
		for k := 0; k < 5; k++ {
			key := fmt.Sprintf("k%d", k)
			for w := safe.Wall; w <= 101; w++ {
				v, ok := s.Get(key, ts.New(w))
				before[fmt.Sprint(key, w)] = read{v, ok, len(s.VisibleAt(key, ts.New(w), 0).Pending)}
			}
			for _, v := range s.Versions(key) {
				if v.State == Intent {
					intents++
				}
			}
		}
		s.CollectGarbage(safe, math.MaxInt)
		for k := 0; k < 5; k++ {
			key := fmt.Sprintf("k%d", k)
			for w := safe.Wall; w <= 101; w++ {
				v, ok := s.Get(key, ts.New(w))
				got := read{v, ok, len(s.VisibleAt(key, ts.New(w), 0).Pending)}
				if want := before[fmt.Sprint(key, w)]; got.ok != want.ok || got.p != want.p || got.v.TS != want.v.TS || got.v.Txn != want.v.Txn {
					t.Fatalf("seed %d: read %s at %d changed by GC(%v): %+v -> %+v", seed, key, w, safe, want, got)
				}
			}
			committedBelow := 0
			for _, v := range s.Versions(key) {
				if v.State == Intent {
					intents--
				}
				if v.State == Committed && v.TS.LessEq(safe) {
					committedBelow++
				}
				if v.State == Aborted && v.TS.Less(safe) {
					t.Fatalf("seed %d: aborted version %v of %s below the safe point survived", seed, v.TS, key)
				}
			}
			if committedBelow > 1 {
				t.Fatalf("seed %d: %s keeps %d committed versions at or below the safe point", seed, key, committedBelow)
			}
		}
		if intents != 0 {
			t.Fatalf("seed %d: GC removed %d undecided intents", seed, intents)
		}
	}
}

// commitAt installs a committed version of key at wall time w by transaction w.
func commitAt(t *testing.T, s *Store, key string, w int64) {
	t.Helper()
	if err := s.PutCommitted(key, Version{TS: ts.New(w), Txn: storage.TxnID(w), Value: []byte(fmt.Sprint(w))}); err != nil {
		t.Fatal(err)
	}
}

// TestCollectGarbageBudget: a pass visits at most budget keys, oldest decision first, and says
// when more are due; keys decided above the horizon wait for a later pass.
func TestCollectGarbageBudget(t *testing.T) {
	s := New(Options{})
	for k := 0; k < 5; k++ {
		key := fmt.Sprintf("k%d", k)
		commitAt(t, s, key, 1)
		commitAt(t, s, key, int64(10+k))
	}
	commitAt(t, s, "late", 1)
	commitAt(t, s, "late", 100)
	if old, ok := s.OldestGarbage(); !ok || old != ts.New(10) {
		t.Fatalf("OldestGarbage = %v, %v; want 10, true", old, ok)
	}
	st := s.CollectGarbage(ts.New(50), 2)
	if st.KeysVisited != 2 || st.VersionsRemoved != 2 || !st.More {
		t.Fatalf("first pass %+v, want 2 keys visited, 2 versions removed, more to do", st)
	}
	if n := len(s.Versions("k0")); n != 1 {
		t.Fatalf("k0 (oldest decision) keeps %d versions after the first pass, want 1", n)
	}
	if n := len(s.Versions("k4")); n != 2 {
		t.Fatalf("k4 (newest decision) was visited before older ones: %d versions left", n)
	}
	st = s.CollectGarbage(ts.Zero, 100) // a lower horizon never lowers the store's
	if st.KeysVisited != 3 || st.More || s.GCHorizon() != ts.New(50) {
		t.Fatalf("second pass %+v, horizon %v; want the 3 remaining keys at horizon 50", st, s.GCHorizon())
	}
	if n := len(s.Versions("late")); n != 2 {
		t.Fatalf("a key decided above the horizon was collected: %d versions left", n)
	}
	if old, _ := s.OldestGarbage(); old != ts.New(100) {
		t.Fatalf("OldestGarbage = %v after the passes, want 100", old)
	}
}

// TestGCHorizonSurvivesRecovery: the horizon is persisted ahead of the deletes it allowed,
// comes back with Recover, and a recovered store (with preloaded rows reinstalled under its
// versions) finds its garbage without a scan.
func TestGCHorizonSurvivesRecovery(t *testing.T) {
	disk := newMemDurable()
	s := New(Options{})
	if err := s.Preload("row", []byte("initial")); err != nil {
		t.Fatal(err)
	}
	commitAt(t, s, "a", 1)
	commitAt(t, s, "a", 2)
	commitAt(t, s, "row", 3)
	disk.apply(s.TakeWrites())

	if st := s.CollectGarbage(ts.New(10), 100); st.VersionsRemoved != 2 {
		t.Fatalf("pass removed %d versions, want 2 (a@1 and row's preloaded version)", st.VersionsRemoved)
	}
	w := s.TakeWrites()
	if len(w) == 0 || string(w[0].Key) != string(gcHorizonKey) || w[0].Delete {
		t.Fatalf("the pass's first write is %+v, want the horizon record ahead of the deletes", w)
	}
	// Only the horizon reaches the disk: the crash loses the deletes, which must be harmless.
	disk.apply(w[:1])

	r, err := Recover(disk, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if r.GCHorizon() != ts.New(10) {
		t.Fatalf("recovered horizon %v, want 10", r.GCHorizon())
	}
	if err := r.Preload("row", []byte("initial")); err != nil {
		t.Fatal(err)
	}
	if got, _ := r.Get("row", ts.New(10)); string(got.Value) != "3" {
		t.Fatalf("row at the horizon reads %q after recovery, want \"3\"", got.Value)
	}
	if st := r.CollectGarbage(ts.New(10), 100); st.VersionsRemoved != 2 {
		t.Fatalf("recovered store's pass removed %d versions, want 2", st.VersionsRemoved)
	}
	if len(r.Versions("a")) != 1 || len(r.Versions("row")) != 1 {
		t.Fatalf("after the pass a has %d versions and row %d, want 1 each", len(r.Versions("a")), len(r.Versions("row")))
	}
}

// memDurable is a sorted in-memory node.Durable.
type memDurable struct{ m map[string][]byte }

func newMemDurable() *memDurable { return &memDurable{m: map[string][]byte{}} }

func (d *memDurable) apply(ws []node.Write) {
	for _, w := range ws {
		if w.Delete {
			delete(d.m, string(w.Key))
		} else {
			d.m[string(w.Key)] = w.Value
		}
	}
}

func (d *memDurable) Scan(start, end []byte, fn func(k, v []byte) bool) error {
	keys := make([]string, 0, len(d.m))
	for k := range d.m {
		if k >= string(start) && (end == nil || k < string(end)) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !fn([]byte(k), d.m[k]) {
			break
		}
	}
	return nil
}
