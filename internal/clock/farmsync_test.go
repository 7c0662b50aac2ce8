package clock

import (
	"math"
	"testing"
	"time"
)

// farmRun syncs a node with a clock master over random round trips and checks, at random later
// times, whether the node's interval contains the master's clock. It returns the number of misses.
func farmRun(t *testing.T, seed uint64, maxDrift, epsilon float64) (misses, checks int) {
	t.Helper()
	r := newRand(seed)
	cm, err := RandomPhysical(r, time.Second, maxDrift)
	if err != nil {
		t.Fatal(err)
	}
	local, err := RandomPhysical(r, time.Second, maxDrift)
	if err != nil {
		t.Fatal(err)
	}
	if r.IntN(2) == 0 { // opposite extremes: the largest relative drift the bound allows
		cm.Drift, local.Drift = maxDrift, -maxDrift
	}
	s, err := NewSyncState(epsilon, 0)
	if err != nil {
		t.Fatal(err)
	}
	now := int64(0)
	for range 200 {
		// A sync: request delay, CM read, reply delay (tens of µs, sometimes a slow outlier).
		send := now
		cmAt := send + r.Int64N(40_000)
		recv := cmAt + r.Int64N(40_000)
		if r.IntN(20) == 0 {
			recv += r.Int64N(5_000_000)
		}
		if err := s.OnSync(local.Read(send), cm.Read(cmAt), local.Read(recv)); err != nil {
			t.Fatal(err)
		}
		now = recv
		for range 5 {
			now += r.Int64N(500_000)
			iv := s.Interval(local.Read(now))
			checks++
			if !iv.Contains(cm.Read(now)) {
				misses++
			}
			// The best-bound interval is never wider than the newest sync alone would give.
			single, _ := NewSyncState(epsilon, 0)
			_ = single.OnSync(local.Read(send), cm.Read(cmAt), local.Read(recv))
			if w := single.Interval(local.Read(now)).Width(); iv.Width() > w {
				t.Fatalf("seed %#x: best-bound interval %v wider than the newest sync's (%d)", seed, iv, w)
			}
		}
	}
	return misses, checks
}

// TestFaRMIntervalContainsCMTime: with ε covering the relative drift of two clocks within D, the
// interval always contains the clock master's time.
func TestFaRMIntervalContainsCMTime(t *testing.T) {
	for _, d := range []float64{0, 200e-6, 500e-6, 0.01} {
		for _, seed := range testSeeds(24) {
			if misses, checks := farmRun(t, seed, d, RelativeDriftBound(d)); misses > 0 {
				t.Fatalf("D=%v seed %#x: %d of %d intervals missed CM time", d, seed, misses, checks)
			}
		}
	}
}

// TestFaRMIntervalCanFail: with ε below the clocks' real relative drift, some interval misses.
func TestFaRMIntervalCanFail(t *testing.T) {
	const d = 500e-6
	total := 0
	for _, seed := range testSeeds(24) {
		misses, _ := farmRun(t, seed, d, d/4)
		total += misses
	}
	if total == 0 {
		t.Fatal("an under-stated drift bound never produced a wrong interval: the test cannot fail")
	}
}

func TestFaRMSyncStateBasics(t *testing.T) {
	s, err := NewSyncState(1e-3, 400*time.Nanosecond)
	if err != nil {
		t.Fatal(err)
	}
	if iv := s.Interval(0); s.Synced() || iv.Earliest != math.MinInt64 || iv.Latest != math.MaxInt64 {
		t.Fatal("an unsynchronised state must say so and bound nothing")
	}
	if err := s.OnSync(100, 5_000, 50); err == nil {
		t.Fatal("a sync received before it was sent was accepted")
	}
	if err := s.OnSync(0, 1_000_000, 20_000); err != nil {
		t.Fatal(err)
	}
	// Right after the sync: [CM − 3, CM + RTT·(1+ε) + 3] widened by the 400 ns skew.
	iv := s.Interval(20_000)
	if iv.Earliest != 1_000_000-3-400 || iv.Latest != 1_000_000+20_020+3+400 {
		t.Fatalf("interval after one sync = %v", iv)
	}
	// A later, tighter sync improves both bounds.
	if err := s.OnSync(1_000_000, 2_000_000, 1_000_002); err != nil {
		t.Fatal(err)
	}
	if w := s.Interval(1_000_002).Width(); w > 2+6+800+2 {
		t.Fatalf("tight sync not used: width %d", w)
	}
	s.Reset()
	if s.Synced() {
		t.Fatal("Reset kept the sync state")
	}
	for _, bad := range []float64{-1, 1, 2} {
		if _, err := NewSyncState(bad, 0); err == nil {
			t.Errorf("drift bound %v accepted", bad)
		}
	}
	if _, err := NewSyncState(0, -1); err == nil {
		t.Error("negative skew accepted")
	}
}
