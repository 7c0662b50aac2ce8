package bench

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/meridiandb/meridian/internal/topo"
)

// CrashPattern draws crash schedules as a crash review's kill script makes them: after each
// gap, drawn uniformly from [GapMin, GapMax], a data node that is up, chosen uniformly, is
// killed, and restarts after an outage drawn uniformly from [DownMin, DownMax]. Gaps shorter
// than outages put several nodes down at once.
type CrashPattern struct {
	GapMin, GapMax   time.Duration
	DownMin, DownMax time.Duration
}

// String gives the pattern in the form ParseCrashPattern reads.
func (p CrashPattern) String() string {
	return fmt.Sprintf("%s-%s/%s-%s", p.GapMin, p.GapMax, p.DownMin, p.DownMax)
}

// ParseCrashPattern parses GAP/DOWN, each a duration range A-B or a single duration D, which
// for a gap means exactly D and for an outage anything up to D (300ms-3s/1.5s: a crash every
// 0.3 to 3 s, each node down for up to 1.5 s).
func ParseCrashPattern(text string) (CrashPattern, error) {
	const form = "want GAP/DOWN, each a duration or a range A-B, e.g. 300ms-3s/1.5s"
	gapText, downText, ok := strings.Cut(text, "/")
	if !ok {
		return CrashPattern{}, fmt.Errorf("%s", form)
	}
	parse := func(what, s string, fromZero bool) (lo, hi time.Duration, err error) {
		a, b, isRange := strings.Cut(s, "-")
		if hi, err = time.ParseDuration(b); !isRange {
			hi, err = time.ParseDuration(a)
		}
		if err != nil {
			return 0, 0, fmt.Errorf("%s %q is not a duration or a range of two: %s", what, s, form)
		}
		switch {
		case isRange:
			if lo, err = time.ParseDuration(a); err != nil {
				return 0, 0, fmt.Errorf("%s %q is not a duration or a range of two: %s", what, s, form)
			}
		case !fromZero:
			lo = hi
		}
		if lo < 0 || hi < lo {
			return 0, 0, fmt.Errorf("%s %q: want 0 ≤ A ≤ B", what, s)
		}
		return lo, hi, nil
	}
	var p CrashPattern
	var err error
	if p.GapMin, p.GapMax, err = parse("gap", gapText, false); err != nil {
		return CrashPattern{}, err
	}
	if p.DownMin, p.DownMax, err = parse("outage", downText, true); err != nil {
		return CrashPattern{}, err
	}
	switch {
	case p.GapMax <= 0:
		return CrashPattern{}, fmt.Errorf("gap %q: a crash needs a positive gap after the one before", gapText)
	case p.DownMax <= 0:
		return CrashPattern{}, fmt.Errorf("outage %q: an outage must last a positive time", downText)
	}
	return p, nil
}

// minOutage is the shortest outage drawn: a crash and its restart at one instant is none.
const minOutage = time.Millisecond

// Schedule draws p's crashes of the data nodes of tp for a run of runLength (warm-up plus
// duration) from seed, its own stream: the simulator's draws are not disturbed, and one seed
// gives one schedule. Every outage ends before the run does (CheckCrashes), and times are whole
// milliseconds, as a reader of the result would write them back in --crash.
func (p CrashPattern) Schedule(tp *topo.Topology, seed uint64, runLength time.Duration) []Crash {
	rng := rand.New(rand.NewPCG(seed, 0x6372617368)) // "crash"
	uniform := func(lo, hi time.Duration) time.Duration {
		ms := func(d time.Duration) int64 { return int64(d / time.Millisecond) }
		return time.Duration(ms(lo)+rng.Int64N(ms(hi)-ms(lo)+1)) * time.Millisecond
	}
	var nodes []topo.NodeID
	for r := range tp.Regions {
		nodes = append(nodes, tp.DataNodes(topo.RegionID(r))...)
	}
	upAt := map[topo.NodeID]time.Duration{} // when each node that crashed is back
	var out []Crash
	for at := uniform(p.GapMin, p.GapMax); at < runLength; at += max(uniform(p.GapMin, p.GapMax), time.Millisecond) {
		var up []topo.NodeID
		for _, n := range nodes {
			if back, crashed := upAt[n]; !crashed || back < at { // outages of one node must not touch
				up = append(up, n)
			}
		}
		down := max(uniform(p.DownMin, p.DownMax), minOutage)
		if len(up) == 0 || at+down > runLength {
			continue
		}
		n := up[rng.IntN(len(up))]
		upAt[n] = at + down
		out = append(out, Crash{Node: n, At: at, For: down})
	}
	return out
}
