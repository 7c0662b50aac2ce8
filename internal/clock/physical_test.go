package clock

import (
	"math"
	"testing"
	"time"
)

func TestPhysicalReadMonotonicAndInverse(t *testing.T) {
	for _, seed := range testSeeds(32) {
		r := newRand(seed)
		c, err := RandomPhysical(r, time.Second, 0.3)
		if err != nil {
			t.Fatal(err)
		}
		prevT := r.Int64N(1<<50) - 1<<49
		prev := c.Read(prevT)
		for range 2000 {
			tt := prevT + r.Int64N(1000)
			got := c.Read(tt)
			if got < prev {
				t.Fatalf("%+v: Read(%d) = %d < Read(%d) = %d", c, tt, got, prevT, prev)
			}
			prevT, prev = tt, got

			local := got + r.Int64N(2_000_000) - 1_000_000
			at := c.TrueAt(local)
			if c.Read(at) < local || c.Read(at-1) >= local {
				t.Fatalf("%+v: TrueAt(%d) = %d is not the earliest time reading it", c, local, at)
			}
		}
	}
}

func TestPhysicalSkewFormula(t *testing.T) {
	c := Physical{Offset: -3 * time.Microsecond, Drift: 200e-6}
	tests := []struct {
		trueNs int64
		skew   time.Duration
	}{
		{0, -3000},
		{15_000_000, 0},                         // 15 ms × 200 ppm = 3 µs catches up with the offset
		{1_000_000_000, 197 * time.Microsecond}, // 200 µs − 3 µs after one second
	}
	for _, tc := range tests {
		if got := c.Skew(tc.trueNs); got != tc.skew {
			t.Errorf("Skew(%d) = %v, want %v", tc.trueNs, got, tc.skew)
		}
	}
	if got, want := c.TrueDuration(1_000_200), time.Duration(1_000_000); got != want {
		t.Errorf("TrueDuration(1.0002 ms) = %v, want %v", got, want)
	}
}

// TestReadPrecisionLongRun: the drift term must not lose nanoseconds after simulated days.
func TestReadPrecisionLongRun(t *testing.T) {
	c := Physical{Drift: 1e-4}
	tt := int64(30 * 24 * time.Hour) // 30 days
	if got, want := c.Read(tt)-tt, int64(float64(tt)/1e4); got != want {
		t.Errorf("skew after 30 days = %d ns, want %d", got, want)
	}
}

// TestLocalWaitAndExpiryBounds: on every clock with drift within D, a local wait of
// LocalWait(x, D) lasts more than x of true time, and a local span below LocalExpiry(x, D) lasts
// less than x.
func TestLocalWaitAndExpiryBounds(t *testing.T) {
	for _, seed := range testSeeds(64) {
		r := newRand(seed)
		maxDrift := []float64{0, 200e-6, 1e-3, 0.05, 0.3}[r.IntN(5)]
		c, err := RandomPhysical(r, time.Second, maxDrift)
		if err != nil {
			t.Fatal(err)
		}
		if r.IntN(4) == 0 { // the extreme rates are where a bound breaks first
			c.Drift = []float64{-maxDrift, maxDrift}[r.IntN(2)]
		}
		for range 500 {
			x := time.Duration(1 + r.Int64N(int64(time.Second)))
			t0 := r.Int64N(1<<55) - 1<<54
			l0 := c.Read(t0)
			if w := LocalWait(x, maxDrift); c.TrueAt(l0+int64(w))-t0 <= int64(x) {
				t.Fatalf("%+v: local wait %v for %v lasted only %d ns", c, w, x, c.TrueAt(l0+int64(w))-t0)
			}
			e := LocalExpiry(x, maxDrift)
			// The latest true time still inside the window, from the earliest reading l0.
			if span := c.TrueAt(l0+int64(e)) - 1 - c.TrueAt(l0); span >= int64(x) {
				t.Fatalf("%+v: local span below %v covers %d ns ≥ %v", c, e, span, x)
			}
		}
	}
}

func TestPhysicalValidation(t *testing.T) {
	r := newRand(1)
	tests := []struct {
		name      string
		maxOffset time.Duration
		maxDrift  float64
	}{
		{"negative offset", -1, 0},
		{"negative drift", 0, -1e-6},
		{"drift too large", 0, 0.9},
		{"NaN drift", 0, math.NaN()},
	}
	for _, tc := range tests {
		if _, err := RandomPhysical(r, tc.maxOffset, tc.maxDrift); err == nil {
			t.Errorf("%s: RandomPhysical accepted it", tc.name)
		}
	}
	if err := (Physical{Drift: -1}).Validate(); err == nil {
		t.Error("Validate accepted a clock that stops")
	}
	if _, err := RandomWithin(r, 2, time.Second, 1e-4); err == nil {
		t.Error("RandomWithin accepted ε = 2 ns")
	}
	if err := (TrueTimeParams{Epsilon: -1}).Validate(); err == nil {
		t.Error("TrueTimeParams accepted a negative ε")
	}
}

// TestTrueTimeIntervalHonesty: an oracle clock drawn within the bound always reports an interval
// containing true time; and in general the interval is honest exactly when the skew is within ε.
func TestTrueTimeIntervalHonesty(t *testing.T) {
	const horizon = 10 * time.Second
	dishonest := 0
	for _, seed := range testSeeds(64) {
		r := newRand(seed)
		p := TrueTimeParams{Epsilon: time.Duration(4 + r.Int64N(int64(time.Millisecond))), MaxDrift: 200e-6}
		within, err := RandomWithin(r, p.Epsilon, horizon, p.MaxDrift)
		if err != nil {
			t.Fatal(err)
		}
		// Any clock whose offset leaves room for D × horizon of drift stays within ε too.
		room := p.Epsilon - time.Duration(p.MaxDrift*float64(horizon)) - 1
		var bounded Physical
		if room > 0 {
			if bounded, err = RandomPhysical(r, room, p.MaxDrift); err != nil {
				t.Fatal(err)
			}
		}
		wild, err := RandomPhysical(r, 2*p.Epsilon, 10*p.MaxDrift)
		if err != nil {
			t.Fatal(err)
		}
		for range 1000 {
			tt := r.Int64N(int64(horizon) + 1)
			if !p.Honest(within, tt) {
				t.Fatalf("ε=%v clock %+v: interval %v misses true time %d", p.Epsilon, within, p.IntervalOf(within, tt), tt)
			}
			if room > 0 && !p.Honest(bounded, tt) {
				t.Fatalf("ε=%v clock %+v: interval misses true time %d", p.Epsilon, bounded, tt)
			}
			skew := int64(wild.Offset) + int64(math.Floor(float64(tt)*wild.Drift))
			if got, want := p.Honest(wild, tt), skew >= -int64(p.Epsilon) && skew <= int64(p.Epsilon); got != want {
				t.Fatalf("clock %+v at %d: Honest = %v, but skew %d vs ε %v", wild, tt, got, skew, p.Epsilon)
			}
			if !p.Honest(wild, tt) {
				dishonest++
			}
		}
		if iv := p.Interval(1000); iv.Width() != 2*int64(p.Epsilon) || !iv.Contains(1000) {
			t.Fatalf("Interval(1000) = %v for ε %v", iv, p.Epsilon)
		}
	}
	if dishonest == 0 {
		t.Error("no clock outside the bound ever reported a dishonest interval: the check cannot fail")
	}
}
