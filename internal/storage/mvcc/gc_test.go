package mvcc

import (
	"fmt"
	"math/rand/v2"
	"testing"

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
			switch rng.IntN(4) {
			case 0:
				_ = s.PutIntent(key, v)
			case 1:
				if s.PutIntent(key, v) == nil {
					s.AbortIntent(key, v.Txn)
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
		s.GC(safe)
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
