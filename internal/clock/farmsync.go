package clock

import (
	"fmt"
	"math"
	"time"

	"github.com/meridiandb/meridian/internal/ts"
)

// Sync is one FaRMv2 clock synchronisation (notes/farmv2.md §2.6): the local clock when the
// request was sent and when the reply arrived, and the clock master's time in the reply.
type Sync struct {
	SendLocal int64
	CM        int64
	RecvLocal int64
}

// syncRoundingNs widens both bounds to cover the nanosecond rounding of the local and the clock
// master's readings (at most 1 ns each, scaled by a rate ratio below 2) plus the floor/ceil here.
const syncRoundingNs = 3

// lower returns LB(S, T) = CM + (T − RecvLocal)·(1 − ε): the CM's clock has advanced at least that
// much since it replied, which was before we received the reply.
func (s Sync) lower(localNow int64, drift float64) int64 {
	return s.CM + int64(math.Floor(float64(localNow-s.RecvLocal)*(1-drift))) - syncRoundingNs
}

// upper returns UB(S, T) = CM + (T − SendLocal)·(1 + ε): the CM replied after we sent.
func (s Sync) upper(localNow int64, drift float64) int64 {
	return s.CM + int64(math.Ceil(float64(localNow-s.SendLocal)*(1+drift))) + syncRoundingNs
}

// SyncState is a non-clock-master's view of global time in FaRMv2: the sync giving the highest
// lower bound and the one giving the lowest upper bound, which together yield the tightest
// interval consistent with every sync so far (all lower bounds have slope 1−ε and all upper bounds
// 1+ε, so the best sync for each bound stays the best as time passes).
type SyncState struct {
	drift        float64       // ε: bound on the CM's elapsed time over ours, as |ratio − 1|
	skew         time.Duration // extra widening on each side (FaRM's cross-thread counter skew)
	lower, upper Sync
	synced       bool
}

// NewSyncState returns an unsynchronised state. driftBound is FaRMv2's ε, the bound on the rate of
// the clock master's clock relative to ours (1000e-6 in the paper); skew widens every interval on
// both sides (the paper's cross-thread counter precision, ~400 ns; zero in the simulator).
func NewSyncState(driftBound float64, skew time.Duration) (*SyncState, error) {
	if math.IsNaN(driftBound) || driftBound < 0 || driftBound >= 1 {
		return nil, fmt.Errorf("clock: sync drift bound %v outside [0, 1)", driftBound)
	}
	if skew < 0 {
		return nil, fmt.Errorf("clock: negative sync skew %v", skew)
	}
	return &SyncState{drift: driftBound, skew: skew}, nil
}

// RelativeDriftBound returns the smallest ε for SyncState that covers two clocks each of whose
// rates is within ±maxDrift of true time (the simulator's model): (1+D)/(1−D) − 1 = 2D/(1−D).
func RelativeDriftBound(maxDrift float64) float64 {
	return 2 * maxDrift / (1 - maxDrift)
}

// Synced reports whether at least one sync has been applied since creation or Reset.
func (s *SyncState) Synced() bool { return s.synced }

// Reset forgets every sync, as a FaRMv2 node does when a new configuration commits (a new clock
// master's time is unrelated to the old one's).
func (s *SyncState) Reset() { s.synced = false }

// OnSync applies a sync whose request was sent at local tSend, answered with CM time tCM and
// received at local tRecv, keeping it for either bound it improves.
func (s *SyncState) OnSync(tSend, tCM, tRecv int64) error {
	if tRecv < tSend {
		return fmt.Errorf("clock: sync received at %d before it was sent at %d", tRecv, tSend)
	}
	n := Sync{SendLocal: tSend, CM: tCM, RecvLocal: tRecv}
	if !s.synced {
		s.lower, s.upper, s.synced = n, n, true
		return nil
	}
	if n.lower(tRecv, s.drift) >= s.lower.lower(tRecv, s.drift) {
		s.lower = n
	}
	if n.upper(tRecv, s.drift) <= s.upper.upper(tRecv, s.drift) {
		s.upper = n
	}
	return nil
}

// Interval returns [L, U], bounds on the clock master's time when the local clock reads localNow
// (which must not be before the last sync's receipt). Before the first sync it is the whole line:
// callers must check Synced, as FaRMv2 blocks timestamp requests while its clock is disabled.
func (s *SyncState) Interval(localNow int64) ts.Interval {
	if !s.synced {
		return ts.Interval{Earliest: math.MinInt64, Latest: math.MaxInt64}
	}
	return ts.Interval{
		Earliest: s.lower.lower(localNow, s.drift) - int64(s.skew),
		Latest:   s.upper.upper(localNow, s.drift) + int64(s.skew),
	}
}
