package bench

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/meridiandb/meridian/internal/sim"
	"github.com/meridiandb/meridian/internal/topo"
)

// NetFaults are the network faults of a simulated run, in the manner of a Jepsen nemesis. They
// hit only messages between nodes: a client holds a TCP connection to its coordinator, in its
// own region, whose messages are never lost or duplicated, and which no partition between
// regions crosses.
type NetFaults struct {
	// Loss and Duplicate are the probabilities that a node-to-node message is dropped, or
	// delivered twice, from the clients' start (warm-up included, loading not) to the end of the
	// run, drain and verification included.
	Loss, Duplicate float64
	// DuplicateDelay bounds how late a copy arrives after its original: the seeded source draws
	// its extra delay uniformly from [0, DuplicateDelay] (0: sim.DefaultDuplicateDelay).
	DuplicateDelay time.Duration
	Partitions     []Partition
	Slowdowns      []Slowdown
}

// Slowdown adds By to the one-way delay of every message between two regions, both ways, sent
// At after the clients start (warm-up included, loading not) until For later, as a congested or
// rerouted WAN link would: a message then arrives late rather than never, after the timeouts a
// partition would have tripped as well. Links stay FIFO.
type Slowdown struct {
	A, B topo.RegionID
	At   time.Duration
	For  time.Duration
	By   time.Duration
}

// Partition cuts two regions from each other, both ways, At after the clients start (warm-up
// included, loading not) for For: messages between their nodes sent meanwhile are lost, those
// already on their way arrive. Then the cut heals.
type Partition struct {
	A, B topo.RegionID
	At   time.Duration
	For  time.Duration
}

// NetFaultsRecord is NetFaults as a result file reports them, times as duration text (the form
// the sim command's flags take them in).
type NetFaultsRecord struct {
	Loss           float64           `json:"loss,omitempty"`
	Duplicate      float64           `json:"duplicate,omitempty"`
	DuplicateDelay string            `json:"duplicate_delay,omitempty"`
	Partitions     []PartitionRecord `json:"partitions,omitempty"`
	Slowdowns      []SlowdownRecord  `json:"slowdowns,omitempty"`
}

// SlowdownRecord is one Slowdown as a result file reports it, the regions by name.
type SlowdownRecord struct {
	Regions [2]string `json:"regions"`
	At      string    `json:"at"`
	For     string    `json:"for"`
	By      string    `json:"by"`
}

// PartitionRecord is one Partition as a result file reports it, the regions by name.
type PartitionRecord struct {
	Regions [2]string `json:"regions"`
	At      string    `json:"at"`
	For     string    `json:"for"`
}

// Empty reports whether f injects no fault at all.
func (f NetFaults) Empty() bool {
	return f.Loss == 0 && f.Duplicate == 0 && len(f.Partitions) == 0 && len(f.Slowdowns) == 0
}

// ParsePartition parses A|B@AT/FOR (SH|BJ@2s/1s), regions by name in any case.
func ParsePartition(tp *topo.Topology, text string) (Partition, error) {
	const form = "want A|B@AT/FOR, e.g. SH|BJ@2s/1s"
	pair, times, ok := strings.Cut(text, "@")
	if !ok {
		return Partition{}, fmt.Errorf("%s", form)
	}
	a, b, ok := strings.Cut(pair, "|")
	if !ok || a == "" || b == "" {
		return Partition{}, fmt.Errorf("no pair of regions: %s", form)
	}
	at, cut, ok := strings.Cut(times, "/")
	if !ok {
		return Partition{}, fmt.Errorf("no partition length: %s", form)
	}
	var p Partition
	for _, r := range []struct {
		name string
		id   *topo.RegionID
	}{{a, &p.A}, {b, &p.B}} {
		id, known := tp.RegionByName(r.name)
		if !known {
			return Partition{}, fmt.Errorf("no region %q in topology %s: its regions are %s", r.name, tp.Name, regionNames(tp))
		}
		*r.id = id
	}
	if p.A == p.B {
		return Partition{}, fmt.Errorf("%s twice: a partition cuts two regions from each other", tp.Regions[p.A].Name)
	}
	var err error
	if p.At, err = time.ParseDuration(at); err != nil {
		return Partition{}, fmt.Errorf("partition time %q is not a duration: %s", at, form)
	}
	if p.For, err = time.ParseDuration(cut); err != nil {
		return Partition{}, fmt.Errorf("partition length %q is not a duration: %s", cut, form)
	}
	return p, nil
}

func regionNames(tp *topo.Topology) string {
	names := make([]string, len(tp.Regions))
	for i, r := range tp.Regions {
		names[i] = r.Name
	}
	return strings.Join(names, ", ")
}

// CheckNetFaults validates network faults for a run of runLength (warm-up plus measured time).
// Every partition must heal before the run ends, so that the drain and the workload's own
// verification find every region reachable; one pair's partitions must not overlap or touch
// (the heal of one would end the other early).
func CheckNetFaults(tp *topo.Topology, f NetFaults, runLength time.Duration) error {
	for _, p := range []struct {
		name string
		v    float64
	}{{"loss", f.Loss}, {"duplicate", f.Duplicate}} {
		if !(p.v >= 0 && p.v < 1) { // also rejects NaN
			return fmt.Errorf("%s probability %g: want one in [0, 1)", p.name, p.v)
		}
	}
	if f.DuplicateDelay < 0 {
		return fmt.Errorf("duplicate delay %s: must not be negative", f.DuplicateDelay)
	}
	if err := checkPairFaults(tp, f.Partitions, runLength, "partition", "cut", "the regions must be healed"); err != nil {
		return err
	}
	if err := checkPairFaults(tp, f.Slowdowns, runLength, "slowdown", "slowed", "the slowdown must end"); err != nil {
		return err
	}
	for _, d := range f.Slowdowns {
		if d.By <= 0 || d.By > MaxSlowdown {
			return fmt.Errorf("%s: the extra delay must be positive and at most %s", d.describe(tp), MaxSlowdown)
		}
	}
	return nil
}

// MaxSlowdown bounds a slowdown's extra delay. A link slowed longer is cut in all but name,
// and messages slowed at the run's end must still arrive within the 30 s the drain and the
// final read wait for them (slowed by 40 s, half of a review's runs could not read their keys
// back). runtime.MaxSlowdown bounds real links the same way.
const MaxSlowdown = 10 * time.Second

// pairFault is a fault that strikes a pair of regions for a window of the run: a Partition or
// a Slowdown.
type pairFault[F any] interface {
	pair() (a, b topo.RegionID)
	window() (at, length time.Duration)
	inOrder() F // the same fault, its pair in topology order
	describe(tp *topo.Topology) string
}

func (p Partition) pair() (topo.RegionID, topo.RegionID)   { return p.A, p.B }
func (p Partition) window() (time.Duration, time.Duration) { return p.At, p.For }
func (p Partition) inOrder() Partition                     { p.A, p.B = min(p.A, p.B), max(p.A, p.B); return p }
func (d Slowdown) pair() (topo.RegionID, topo.RegionID)    { return d.A, d.B }
func (d Slowdown) window() (time.Duration, time.Duration)  { return d.At, d.For }
func (d Slowdown) inOrder() Slowdown                       { d.A, d.B = min(d.A, d.B), max(d.A, d.B); return d }

// checkPairFaults checks faults of one kind (what: "partition") for a run of runLength: each of
// two regions of tp, within the run and over before it ends (endRule says what must end), and
// one pair's not overlapping or touching (the end of one would end the other early; state says
// what a pair is meanwhile: "cut").
func checkPairFaults[F pairFault[F]](tp *topo.Topology, faults []F, runLength time.Duration, what, state, endRule string) error {
	n := len(tp.Regions)
	for _, f := range faults {
		a, b := f.pair()
		at, length := f.window()
		if int(a) < 0 || int(a) >= n || int(b) < 0 || int(b) >= n || a == b {
			return fmt.Errorf("%s of regions %d and %d: not two regions of topology %s", what, a, b, tp.Name)
		}
		switch {
		case at < 0:
			return fmt.Errorf("%s: the %s time must not be negative", f.describe(tp), what)
		case length <= 0:
			return fmt.Errorf("%s: the %s must last a positive time", f.describe(tp), what)
		case at >= runLength:
			return fmt.Errorf("%s: the run ends at %s (warm-up plus duration)", f.describe(tp), runLength)
		case length > runLength-at:
			return fmt.Errorf("%s: %s by the end of the run at %s (warm-up plus duration)", f.describe(tp), endRule, runLength)
		}
	}
	latest := map[[2]topo.RegionID]F{} // each pair's latest fault so far
	for _, f := range sortedPairFaults(faults) {
		a, b := f.pair()
		at, _ := f.window()
		if prev, seen := latest[[2]topo.RegionID{a, b}]; seen {
			pat, plen := prev.window()
			if at <= pat+plen {
				return fmt.Errorf("%s: the regions are %s until %s (%s); one pair's %ss must not overlap or touch",
					f.describe(tp), state, pat+plen, prev.describe(tp), what)
			}
		}
		latest[[2]topo.RegionID{a, b}] = f
	}
	return nil
}

// sortedPairFaults orders faults by time and pair, each pair in topology order, so that a run
// and its report do not depend on the order or spelling (SH|BJ or BJ|SH) they were given in.
func sortedPairFaults[F pairFault[F]](faults []F) []F {
	out := make([]F, len(faults))
	for i, f := range faults {
		out[i] = f.inOrder()
	}
	slices.SortFunc(out, func(x, y F) int {
		xa, xb := x.pair()
		ya, yb := y.pair()
		xat, _ := x.window()
		yat, _ := y.window()
		return cmp.Or(cmp.Compare(xat, yat), cmp.Compare(xa, ya), cmp.Compare(xb, yb))
	})
	return out
}

func (f NetFaults) duplicateDelay() time.Duration {
	return cmp.Or(f.DuplicateDelay, sim.DefaultDuplicateDelay)
}

func (p Partition) describe(tp *topo.Topology) string {
	return fmt.Sprintf("partition %s|%s at %s for %s", tp.Regions[p.A].Name, tp.Regions[p.B].Name, p.At, p.For)
}

func (d Slowdown) describe(tp *topo.Topology) string {
	return fmt.Sprintf("slowdown %s|%s by %s at %s for %s", tp.Regions[d.A].Name, tp.Regions[d.B].Name, d.By, d.At, d.For)
}

func (f NetFaults) record(tp *topo.Topology) *NetFaultsRecord {
	if f.Empty() {
		return nil
	}
	r := &NetFaultsRecord{Loss: f.Loss, Duplicate: f.Duplicate}
	if f.Duplicate > 0 {
		r.DuplicateDelay = f.duplicateDelay().String()
	}
	for _, p := range sortedPairFaults(f.Partitions) {
		r.Partitions = append(r.Partitions, PartitionRecord{Regions: [2]string{tp.Regions[p.A].Name, tp.Regions[p.B].Name},
			At: p.At.String(), For: p.For.String()})
	}
	for _, d := range sortedPairFaults(f.Slowdowns) {
		r.Slowdowns = append(r.Slowdowns, SlowdownRecord{Regions: [2]string{tp.Regions[d.A].Name, tp.Regions[d.B].Name},
			At: d.At.String(), For: d.For.String(), By: d.By.String()})
	}
	return r
}

// scheduleNetFaults switches loss and duplication on now, at the clients' start (w.Start), and
// scripts each partition and its heal into s relative to it.
func scheduleNetFaults(s *sim.Sim, f NetFaults, w Window) {
	if f.Loss > 0 || f.Duplicate > 0 {
		s.SetClientLinksReliable(true)
		s.SetLoss(f.Loss)
		s.SetDuplication(f.Duplicate)
		s.SetDuplicateDelay(f.duplicateDelay())
	}
	for _, p := range sortedPairFaults(f.Partitions) {
		s.At(w.Start+int64(p.At), func() { s.PartitionRegions(p.A, p.B) })
		s.At(w.Start+int64(p.At+p.For), func() { s.HealRegions(p.A, p.B) })
	}
	for _, d := range sortedPairFaults(f.Slowdowns) {
		s.At(w.Start+int64(d.At), func() { s.SlowRegions(d.A, d.B, d.By) })
		s.At(w.Start+int64(d.At+d.For), func() { s.SlowRegions(d.A, d.B, 0) })
	}
}
