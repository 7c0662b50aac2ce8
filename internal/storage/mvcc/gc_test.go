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

// TestGCCollectsVersionDecidedBelowANewerOne: a key's first committed version, alone when
// decided, is superseded in a pass only once an older version decided later (a K2 write at a
// lower timestamp) sits under it; that older version is garbage once the horizon passes the
// newer one, and used to stay for ever, since nothing queued the key for it.
func TestGCCollectsVersionDecidedBelowANewerOne(t *testing.T) {
	s := New(Options{})
	commitAt(t, s, "k", 10)
	if err := s.PutIntent("k", Version{TS: ts.New(5), Txn: 5, Value: []byte("5")}); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit("k", 5, ts.New(5)); err != nil {
		t.Fatal(err)
	}
	s.CollectGarbage(ts.New(7), math.MaxInt) // reads at 7 need k@5
	if n := len(s.Versions("k")); n != 2 {
		t.Fatalf("k holds %d versions at horizon 7, want 2", n)
	}
	if old, ok := s.OldestGarbage(); !ok || old != ts.New(10) {
		t.Fatalf("OldestGarbage = %v, %v; want 10, true (k@5 is garbage from horizon 10 on)", old, ok)
	}
	s.CollectGarbage(ts.New(20), math.MaxInt)
	if vs := s.Versions("k"); len(vs) != 1 || vs[0].TS != ts.New(10) {
		t.Fatalf("k holds %v at horizon 20, want only k@10", vs)
	}
}

// TestGCCollectsAbortedVersionAtTheHorizonLater: an aborted version exactly at the horizon
// stays (an operation at the horizon is not refused, and the aborted version keeps a late copy
// of its write out), and goes in the first pass past it, instead of staying for ever.
func TestGCCollectsAbortedVersionAtTheHorizonLater(t *testing.T) {
	s := New(Options{})
	commitAt(t, s, "k", 1)
	if err := s.PutIntent("k", Version{TS: ts.New(10), Txn: 10, Value: []byte("10")}); err != nil {
		t.Fatal(err)
	}
	s.AbortIntent("k", 10)
	if st := s.CollectGarbage(ts.New(10), math.MaxInt); st.VersionsRemoved != 0 {
		t.Fatalf("pass at horizon 10 removed %d versions, want none", st.VersionsRemoved)
	}
	if st := s.CollectGarbage(ts.New(11), math.MaxInt); st.VersionsRemoved != 1 || len(s.Versions("k")) != 1 {
		t.Fatalf("pass at horizon 11 removed %d versions, leaving %v; want the aborted one gone", st.VersionsRemoved, s.Versions("k"))
	}
}

// TestGCQueueOneItemPerKey: a key rewritten often (or for ever, in a store nothing collects) is
// queued about once, not once per decision, and a pass's budget goes to distinct keys.
func TestGCQueueOneItemPerKey(t *testing.T) {
	s := New(Options{})
	for k := 0; k < 3; k++ {
		key := fmt.Sprintf("k%d", k)
		if err := s.Preload(key, []byte("initial")); err != nil {
			t.Fatal(err)
		}
		for w := int64(1); w <= 1000; w++ {
			commitAt(t, s, key, w)
		}
	}
	if len(s.gc) > 3 {
		t.Fatalf("queue holds %d items for 3 keys written 1000 times each, want at most 3", len(s.gc))
	}
	st := s.CollectGarbage(ts.New(500), 3)
	if st.KeysVisited != 3 || st.VersionsRemoved != 3*500 || st.More {
		t.Fatalf("pass with budget 3 at horizon 500: %+v; want each key visited once, 500 versions removed from each", st)
	}
	if len(s.gc) > 3 {
		t.Fatalf("queue holds %d items after the pass, want at most 3", len(s.gc))
	}
	if st := s.CollectGarbage(ts.New(2000), 3); st.VersionsRemoved != 3*500 {
		t.Fatalf("second pass %+v, want the other 500 versions of each key removed", st)
	}
	for k := 0; k < 3; k++ {
		if n := len(s.Versions(fmt.Sprintf("k%d", k))); n != 1 {
			t.Fatalf("k%d keeps %d versions, want 1", k, n)
		}
	}
}

// TestGCLeavesNoGarbageBehind: random histories of writes at or above the current horizon
// (intents, commits at or above their write timestamp, aborts, decisions arriving after the
// horizon passed them) interleaved with passes at a rising horizon. After every pass no key
// holds a version a pass at that horizon would remove, whatever order versions were decided
// in, and every read at or above the horizon answers as in a store nothing collects.
func TestGCLeavesNoGarbageBehind(t *testing.T) {
	for seed := uint64(1); seed <= 300; seed++ {
		rng := rand.New(rand.NewPCG(seed, 2))
		s, all := New(Options{}), New(Options{})
		both := func(f func(s *Store)) { f(s); f(all) }
		var open []storage.TxnID
		openKey := map[storage.TxnID]string{}
		openTS := map[storage.TxnID]int64{}
		horizon := int64(0)
		for i := 1; i <= 200; i++ {
			key := fmt.Sprintf("k%d", rng.IntN(4))
			w := horizon + int64(rng.IntN(30))
			v := Version{TS: ts.New(w), Txn: storage.TxnID(i), Value: []byte(fmt.Sprint(i)), Tombstone: rng.IntN(8) == 0}
			switch r := rng.IntN(10); {
			case r < 3:
				both(func(s *Store) { _ = s.PutCommitted(key, v) })
			case r < 6:
				both(func(s *Store) { _ = s.PutIntent(key, v) })
				open, openKey[v.Txn], openTS[v.Txn] = append(open, v.Txn), key, w
			case r < 9 && len(open) > 0:
				j := rng.IntN(len(open))
				txn := open[j]
				open = append(open[:j], open[j+1:]...)
				if rng.IntN(3) == 0 {
					both(func(s *Store) { s.AbortIntent(openKey[txn], txn) })
				} else {
					at := ts.New(openTS[txn] + int64(rng.IntN(3)))
					both(func(s *Store) { _ = s.Commit(openKey[txn], txn, at) })
				}
			default:
				horizon += int64(rng.IntN(15))
				h := ts.New(horizon)
				s.CollectGarbage(h, math.MaxInt)
				for k := 0; k < 4; k++ {
					key := fmt.Sprintf("k%d", k)
					committed := 0
					for _, v := range s.Versions(key) {
						if v.State == Committed && v.TS.LessEq(h) {
							committed++
						}
						if committed > 1 || (v.State == Aborted && v.TS.Less(h)) {
							t.Fatalf("seed %d op %d: %s holds garbage after a pass at %d: %v", seed, i, key, horizon, s.Versions(key))
						}
					}
					for r := horizon; r <= horizon+40; r++ {
						got, want := s.VisibleAt(key, ts.New(r), 0), all.VisibleAt(key, ts.New(r), 0)
						if got.Found != want.Found || got.Version.TS != want.Version.TS || got.Version.Txn != want.Version.Txn || len(got.Pending) != len(want.Pending) {
							t.Fatalf("seed %d op %d: %s at %d reads %+v after GC at %d, want %+v", seed, i, key, r, got, horizon, want)
						}
					}
				}
			}
		}
	}
}
