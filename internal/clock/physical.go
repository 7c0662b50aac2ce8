package clock

import (
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/meridiandb/meridian/internal/ts"
)

// MaxDriftRate bounds the drift a Physical clock may have. Real oscillators stay within a few
// hundred ppm; the bound is far above that so tests can exaggerate drift, and far enough below 1
// that a clock never stops or runs backwards.
const MaxDriftRate = 0.5

// Physical models one node's hardware clock against true (simulated) time: it reads
// t + t·Drift + Offset at true time t. Drift is a rate (200e-6 = 200 ppm, fast; negative = slow).
// Readings are monotonic non-decreasing in t, and exact to the nanosecond for |t| < 2^62.
type Physical struct {
	Offset time.Duration // reading at true time 0
	Drift  float64       // rate error: local elapsed = true elapsed × (1 + Drift)
}

// Validate reports a clock model that cannot be a clock.
func (c Physical) Validate() error {
	if math.IsNaN(c.Drift) || math.Abs(c.Drift) > MaxDriftRate {
		return fmt.Errorf("clock: drift %v outside [-%v, %v]", c.Drift, MaxDriftRate, MaxDriftRate)
	}
	return nil
}

// Read returns the clock's reading at true time trueNs. The drift term is computed on its own
// (true × drift, not true × (1+drift)) so that its float64 rounding error stays far below a
// nanosecond even after simulated days; math.Floor keeps readings monotonic across t = 0.
func (c Physical) Read(trueNs int64) int64 {
	return trueNs + int64(math.Floor(float64(trueNs)*c.Drift)) + int64(c.Offset)
}

// Skew returns Read(trueNs) − trueNs: how far the clock is ahead of true time (negative: behind).
func (c Physical) Skew(trueNs int64) time.Duration {
	return time.Duration(c.Read(trueNs) - trueNs)
}

// TrueDuration returns how much true time passes while the clock advances by local: local/(1+Drift),
// rounded up. It is exact up to the nanosecond rounding of readings; a simulator that must fire a
// timer no earlier than the local clock says should use TrueAt instead.
func (c Physical) TrueDuration(local time.Duration) time.Duration {
	return time.Duration(math.Ceil(float64(local) / (1 + c.Drift)))
}

// TrueAt returns the earliest true time at which the clock reads at least localNs. A timer set at
// local reading r for d fires at TrueAt(r + d), which honours node.Env's promise that timers never
// fire early by the node's own clock.
func (c Physical) TrueAt(localNs int64) int64 {
	est := int64(math.Floor(float64(localNs-int64(c.Offset)) / (1 + c.Drift)))
	// The estimate is within a few ns; widen a bracket around it, then bisect. Both loops are
	// bounded: the step doubles, so 62 rounds cover the whole int64 range.
	lo, hi := est, est
	for step := int64(1); c.Read(lo) >= localNs && step < 1<<62; step *= 2 {
		lo = est - step
	}
	for step := int64(1); c.Read(hi) < localNs && step < 1<<62; step *= 2 {
		hi = est + step
	}
	// Invariant: Read(lo) < localNs ≤ Read(hi).
	for hi-lo > 1 {
		mid := lo + (hi-lo)/2
		if c.Read(mid) >= localNs {
			hi = mid
		} else {
			lo = mid
		}
	}
	return hi
}

// RandomPhysical draws a clock with offset uniform in [−maxOffset, maxOffset] and drift uniform in
// [−maxDrift, maxDrift].
func RandomPhysical(r *rand.Rand, maxOffset time.Duration, maxDrift float64) (Physical, error) {
	if maxOffset < 0 {
		return Physical{}, fmt.Errorf("clock: negative max offset %v", maxOffset)
	}
	if math.IsNaN(maxDrift) || maxDrift < 0 || maxDrift > MaxDriftRate {
		return Physical{}, fmt.Errorf("clock: max drift %v outside [0, %v]", maxDrift, MaxDriftRate)
	}
	return Physical{
		Offset: time.Duration(r.Int64N(2*int64(maxOffset)+1) - int64(maxOffset)),
		Drift:  (2*r.Float64() - 1) * maxDrift,
	}, nil
}

// RandomWithin draws a clock whose skew stays within ±epsilon over true times [0, horizon]: what a
// TrueTime oracle disciplined by GPS or atomic clocks looks like to the simulator. Half of the
// budget goes to the offset, half to the drift accumulated over the horizon (capped at maxDrift).
func RandomWithin(r *rand.Rand, epsilon, horizon time.Duration, maxDrift float64) (Physical, error) {
	if epsilon < 4 {
		return Physical{}, fmt.Errorf("clock: epsilon %v too small to draw a clock within it", epsilon)
	}
	if horizon <= 0 {
		return Physical{}, fmt.Errorf("clock: horizon %v must be positive", horizon)
	}
	// One ns of each half goes to the floor() in Read.
	offsetBudget := epsilon/2 - 1
	drift := math.Min(maxDrift, float64(epsilon/2-1)/float64(horizon))
	return RandomPhysical(r, offsetBudget, drift)
}

// LocalWait converts a wait that must last at least real of true time into a duration on a local
// clock whose drift is within ±maxDrift: real·(1+D), plus 2 ns for the rounding of readings. Every
// commit wait and epoch timer goes through it.
func LocalWait(real time.Duration, maxDrift float64) time.Duration {
	return time.Duration(math.Ceil(float64(real)*(1+maxDrift))) + 2
}

// LocalExpiry converts a window that must close before real of true time has passed into a local
// clock span: while local elapsed time is below LocalExpiry(real, D), less than real of true time
// has passed on any clock with drift within ±D. It is real·(1−D) minus 1 ns of rounding: a slow
// clock under-measures time, so the window shrinks. (notes/k2.md recommends TTL/(1+D); under the
// rate model of Physical the exact bound is the slightly smaller TTL·(1−D).) It may be ≤ 0, in
// which case no window fits.
func LocalExpiry(real time.Duration, maxDrift float64) time.Duration {
	return time.Duration(math.Floor(float64(real)*(1-maxDrift))) - 1
}

// TrueTimeParams are the TrueTime bounds a deployment declares: a node's clock is believed to be
// within Epsilon of true time, and clock rates within MaxDrift of 1 (K2: ε = 100 µs, D = 200 ppm).
type TrueTimeParams struct {
	Epsilon  time.Duration
	MaxDrift float64
}

// K2TrueTime is the paper's setting (notes/k2.md §2.4).
var K2TrueTime = TrueTimeParams{Epsilon: 100 * time.Microsecond, MaxDrift: 200e-6}

// Validate reports parameters no clock can satisfy.
func (p TrueTimeParams) Validate() error {
	if p.Epsilon < 0 {
		return fmt.Errorf("clock: negative epsilon %v", p.Epsilon)
	}
	if math.IsNaN(p.MaxDrift) || p.MaxDrift < 0 || p.MaxDrift > MaxDriftRate {
		return fmt.Errorf("clock: max drift %v outside [0, %v]", p.MaxDrift, MaxDriftRate)
	}
	return nil
}

// Interval returns the TrueTime interval [local−ε, local+ε] a node reports when its clock reads
// local.
func (p TrueTimeParams) Interval(local int64) ts.Interval {
	return ts.Interval{Earliest: local - int64(p.Epsilon), Latest: local + int64(p.Epsilon)}
}

// IntervalOf returns the interval a node with clock c reports at true time trueNs. It contains
// trueNs iff |c.Skew(trueNs)| ≤ ε, i.e. iff |Offset + Drift·t| ≤ ε (up to the nanosecond of
// rounding): the node merely believes its clock is within ε, so the interval is an honest TrueTime
// only while the skew stays within the bound. The simulator's clock-fault mode breaks that on
// purpose, and a free-running clock with drift D leaves the bound after about (ε−|Offset|)/D.
func (p TrueTimeParams) IntervalOf(c Physical, trueNs int64) ts.Interval {
	return p.Interval(c.Read(trueNs))
}

// Honest reports whether clock c's interval contains true time at trueNs.
func (p TrueTimeParams) Honest(c Physical, trueNs int64) bool {
	return p.IntervalOf(c, trueNs).Contains(trueNs)
}
