package sim

import (
	"math/rand/v2"
	"testing"
	"time"
)

// TestTrueTimeErrorBand: a synced source's error never leaves ε, and stays within about 0.6ε by
// default; with FullTrueTimeError some clocks' errors come near the edge of ε.
func TestTrueTimeErrorBand(t *testing.T) {
	for _, full := range []bool{false, true} {
		cfg := DefaultConfig()
		cfg.SyncPeriod = 62500 * time.Microsecond
		cfg.FullTrueTimeError = full
		eps := int64(cfg.Epsilon)
		r := rand.New(rand.NewPCG(1, 2))
		var widest int64
		for range 200 {
			c := newClock(r, cfg)
			for step := int64(0); step < 4*c.period; step += c.period / 16 {
				e := c.syncedErr(step)
				if e > eps || e < -eps {
					t.Fatalf("full=%v: error %d ns outside ε = %d ns", full, e, eps)
				}
				widest = max(widest, e, -e)
			}
		}
		switch {
		case !full && widest > eps*65/100:
			t.Errorf("default: widest error %d ns, want within ~0.6ε (%d ns)", widest, eps*65/100)
		case full && widest < eps*95/100:
			t.Errorf("full: widest error %d ns, want near ε (%d ns)", widest, eps)
		}
	}
}
