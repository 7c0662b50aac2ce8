package bench

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/meridiandb/meridian/internal/topo"
)

// FaultPattern draws fault schedules as a review's fault script makes them: after each gap,
// drawn uniformly from [GapMin, GapMax], a fault strikes something not already struck (a data
// node that is up; a pair of regions not cut; a server whose clock is not moved), chosen
// uniformly, and lasts a length drawn
// uniformly from [ForMin, ForMax]. Gaps shorter than lengths overlap faults.
type FaultPattern struct {
	GapMin, GapMax time.Duration
	ForMin, ForMax time.Duration
}

// String gives the pattern in the form ParseFaultPattern reads.
func (p FaultPattern) String() string {
	return fmt.Sprintf("%s-%s/%s-%s", p.GapMin, p.GapMax, p.ForMin, p.ForMax)
}

// ParseFaultPattern parses GAP/FOR, each a duration range A-B or a single duration D, which for
// a gap means exactly D and for a length anything up to D (300ms-3s/1.5s: a fault every 0.3
// to 3 s, each lasting up to 1.5 s).
func ParseFaultPattern(text string) (FaultPattern, error) {
	const form = "want GAP/FOR, each a duration or a range A-B, e.g. 300ms-3s/1.5s"
	gapText, forText, ok := strings.Cut(text, "/")
	if !ok {
		return FaultPattern{}, fmt.Errorf("%s", form)
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
	var p FaultPattern
	var err error
	if p.GapMin, p.GapMax, err = parse("gap", gapText, false); err != nil {
		return FaultPattern{}, err
	}
	if p.ForMin, p.ForMax, err = parse("length", forText, true); err != nil {
		return FaultPattern{}, err
	}
	switch {
	case p.GapMax <= 0:
		return FaultPattern{}, fmt.Errorf("gap %q: a fault needs a positive gap after the one before", gapText)
	case p.ForMax <= 0:
		return FaultPattern{}, fmt.Errorf("length %q: a fault must last a positive time", forText)
	}
	return p, nil
}

// minFault is the shortest fault drawn: one that ends as it starts is none.
const minFault = time.Millisecond

// draw runs the pattern over a run of runLength from seed, on stream, its own: the
// simulator's draws are not disturbed, and one seed gives one schedule. After each gap it asks
// free which of targets is free at that time, and strikes one of them, chosen uniformly, for
// a drawn length that ends before the run does. Times are whole milliseconds, as a reader of
// the result would write them back in --crash or --partition.
func (p FaultPattern) draw(seed, stream uint64, runLength time.Duration, targets int, strike func(target int, at, length time.Duration)) {
	rng := rand.New(rand.NewPCG(seed, stream))
	uniform := func(lo, hi time.Duration) time.Duration {
		ms := func(d time.Duration) int64 { return int64(d / time.Millisecond) }
		return time.Duration(ms(lo)+rng.Int64N(ms(hi)-ms(lo)+1)) * time.Millisecond
	}
	freeAt := make([]time.Duration, targets) // when each target's latest fault ends
	struck := make([]bool, targets)
	for at := uniform(p.GapMin, p.GapMax); at < runLength; {
		var free []int
		for i := range targets {
			if !struck[i] || freeAt[i] < at { // one target's faults must not overlap or touch
				free = append(free, i)
			}
		}
		length := max(uniform(p.ForMin, p.ForMax), minFault)
		if len(free) > 0 && length <= runLength-at { // not at+length: a huge length overflows
			i := free[rng.IntN(len(free))]
			struck[i], freeAt[i] = true, at+length
			strike(i, at, length)
		}
		gap := max(uniform(p.GapMin, p.GapMax), time.Millisecond)
		if gap >= runLength-at {
			break
		}
		at += gap
	}
}

// Fits reports why the pattern can strike nothing of targets in a run of runLength, whatever
// the seed: "" if some draw can. A seed may still draw no fault (a long gap drawn first).
func (p FaultPattern) Fits(targets int, what string, runLength time.Duration) string {
	switch {
	case targets == 0:
		return "the topology has no " + what
	case p.GapMin >= runLength || max(p.ForMin, minFault) > runLength-p.GapMin:
		return fmt.Sprintf("no fault fits a run of %s: shorten the gap or the length", runLength)
	}
	return ""
}

// Targets counts what Crashes and Partitions strike in tp: data nodes, and pairs of regions.
func Targets(tp *topo.Topology) (dataNodes, regionPairs int) {
	for r := range tp.Regions {
		dataNodes += len(tp.DataNodes(topo.RegionID(r)))
	}
	n := len(tp.Regions)
	return dataNodes, n * (n - 1) / 2
}

// Crashes draws the pattern's crashes of tp's data nodes, each an outage that ends before the
// run does (CheckCrashes).
func (p FaultPattern) Crashes(tp *topo.Topology, seed uint64, runLength time.Duration) []Crash {
	var nodes []topo.NodeID
	for r := range tp.Regions {
		nodes = append(nodes, tp.DataNodes(topo.RegionID(r))...)
	}
	var out []Crash
	p.draw(seed, 0x6372617368, runLength, len(nodes), func(i int, at, length time.Duration) { // "crash"
		out = append(out, Crash{Node: nodes[i], At: at, For: length})
	})
	return out
}

// Partitions draws the pattern's partitions of pairs of tp's regions, each healed before the
// run ends (CheckNetFaults).
func (p FaultPattern) Partitions(tp *topo.Topology, seed uint64, runLength time.Duration) []Partition {
	pairs := regionPairs(tp)
	var out []Partition
	p.draw(seed, 0x706172746974696f, runLength, len(pairs), func(i int, at, length time.Duration) { // "partitio"
		out = append(out, Partition{A: pairs[i][0], B: pairs[i][1], At: at, For: length})
	})
	return out
}

// Slowdowns draws the pattern's slowdowns of pairs of tp's regions, each by an extra one-way
// delay drawn uniformly from whole microseconds in (0, by], and each over before the run ends
// (CheckNetFaults).
func (p FaultPattern) Slowdowns(tp *topo.Topology, seed uint64, runLength, by time.Duration) []Slowdown {
	pairs := regionPairs(tp)
	extra := rand.New(rand.NewPCG(seed, 0x736c6f772d6279)) // "slow-by": the delays' own stream
	limit := max(int64(by/time.Microsecond), 1)
	var out []Slowdown
	p.draw(seed, 0x736c6f77, runLength, len(pairs), func(i int, at, length time.Duration) { // "slow"
		out = append(out, Slowdown{A: pairs[i][0], B: pairs[i][1], At: at, For: length, By: time.Duration(1+extra.Int64N(limit)) * time.Microsecond})
	})
	return out
}

// regionPairs lists tp's pairs of distinct regions, each once, in topology order.
func regionPairs(tp *topo.Topology) [][2]topo.RegionID {
	var pairs [][2]topo.RegionID
	for a := range tp.Regions {
		for b := a + 1; b < len(tp.Regions); b++ {
			pairs = append(pairs, [2]topo.RegionID{topo.RegionID(a), topo.RegionID(b)})
		}
	}
	return pairs
}

// Skews draws the pattern's clock steps of tp's servers (data nodes and oracles): after each
// gap a server whose clock is not already moved is moved by an offset drawn uniformly from
// whole microseconds in [-by, by] (none zero), and moved back once its length is over (unless
// that is the run's end). A step is thus two ClockSkews; by within the ε a protocol assumes
// must not break its guarantee, as an NTP step within the bound must not.
func (p FaultPattern) Skews(tp *topo.Topology, seed uint64, runLength, by time.Duration) []ClockSkew {
	offsets := rand.New(rand.NewPCG(seed, 0x736b65772d6279)) // "skew-by": the offsets' own stream
	limit := int64(by / time.Microsecond)
	var out []ClockSkew
	p.draw(seed, 0x736b6577, runLength, len(tp.Nodes), func(i int, at, length time.Duration) { // "skew"
		v := offsets.Int64N(2*limit) - limit // [-limit, limit-1]; 0 and above shift up: no zero
		if v >= 0 {
			v++
		}
		off := time.Duration(v) * time.Microsecond
		out = append(out, ClockSkew{Node: topo.NodeID(i), At: at, By: off})
		if at+length < runLength {
			out = append(out, ClockSkew{Node: topo.NodeID(i), At: at + length, By: -off})
		}
	})
	return out
}
