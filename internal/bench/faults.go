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
	for _, p := range f.Partitions {
		n := len(tp.Regions)
		if int(p.A) < 0 || int(p.A) >= n || int(p.B) < 0 || int(p.B) >= n || p.A == p.B {
			return fmt.Errorf("partition of regions %d and %d: not two regions of topology %s", p.A, p.B, tp.Name)
		}
		switch {
		case p.At < 0:
			return fmt.Errorf("%s: the partition time must not be negative", p.describe(tp))
		case p.For <= 0:
			return fmt.Errorf("%s: the partition must last a positive time", p.describe(tp))
		case p.At >= runLength:
			return fmt.Errorf("%s: the run ends at %s (warm-up plus duration)", p.describe(tp), runLength)
		case p.For > runLength-p.At:
			return fmt.Errorf("%s: the regions must be healed by the end of the run at %s (warm-up plus duration)", p.describe(tp), runLength)
		}
	}
	for _, d := range f.Slowdowns {
		if err := checkSlowdown(tp, d, runLength); err != nil {
			return err
		}
	}
	lastSlow := map[[2]topo.RegionID]Slowdown{} // each pair's latest slowdown so far
	for _, d := range sortedSlowdowns(f.Slowdowns) {
		if e, seen := lastSlow[[2]topo.RegionID{d.A, d.B}]; seen && d.At <= e.At+e.For {
			return fmt.Errorf("%s: the regions are slowed until %s (%s); one pair's slowdowns must not overlap or touch",
				d.describe(tp), e.At+e.For, e.describe(tp))
		}
		lastSlow[[2]topo.RegionID{d.A, d.B}] = d
	}
	latest := map[[2]topo.RegionID]Partition{} // each pair's latest partition so far
	for _, p := range sortedPartitions(f.Partitions) {
		if prev, seen := latest[[2]topo.RegionID{p.A, p.B}]; seen && p.At <= prev.At+prev.For {
			return fmt.Errorf("%s: the regions are cut until %s (%s); one pair's partitions must not overlap or touch",
				p.describe(tp), prev.At+prev.For, prev.describe(tp))
		}
		latest[[2]topo.RegionID{p.A, p.B}] = p
	}
	return nil
}

// sortedPartitions orders partitions by time and pair, each pair in topology order, so that a
// run and its report do not depend on the order or spelling (SH|BJ or BJ|SH) they were given
// in.
func sortedPartitions(ps []Partition) []Partition {
	out := make([]Partition, len(ps))
	for i, p := range ps {
		p.A, p.B = min(p.A, p.B), max(p.A, p.B)
		out[i] = p
	}
	slices.SortFunc(out, func(a, b Partition) int {
		return cmp.Or(cmp.Compare(a.At, b.At), cmp.Compare(a.A, b.A), cmp.Compare(a.B, b.B))
	})
	return out
}

// MaxSlowdown bounds a slowdown's extra delay. A link slowed longer is cut in all but name,
// and messages slowed at the run's end must still arrive within the 30 s the drain and the
// final read wait for them (slowed by 40 s, half of a review's runs could not read their keys
// back). runtime.MaxSlowdown bounds real links the same way.
const MaxSlowdown = 10 * time.Second

func checkSlowdown(tp *topo.Topology, d Slowdown, runLength time.Duration) error {
	n := len(tp.Regions)
	if int(d.A) < 0 || int(d.A) >= n || int(d.B) < 0 || int(d.B) >= n || d.A == d.B {
		return fmt.Errorf("slowdown of regions %d and %d: not two regions of topology %s", d.A, d.B, tp.Name)
	}
	switch {
	case d.By <= 0 || d.By > MaxSlowdown:
		return fmt.Errorf("%s: the extra delay must be positive and at most %s", d.describe(tp), MaxSlowdown)
	case d.At < 0:
		return fmt.Errorf("%s: the slowdown time must not be negative", d.describe(tp))
	case d.For <= 0:
		return fmt.Errorf("%s: the slowdown must last a positive time", d.describe(tp))
	case d.At >= runLength:
		return fmt.Errorf("%s: the run ends at %s (warm-up plus duration)", d.describe(tp), runLength)
	case d.For > runLength-d.At:
		return fmt.Errorf("%s: the slowdown must end by the end of the run at %s (warm-up plus duration)", d.describe(tp), runLength)
	}
	return nil
}

// sortedSlowdowns orders slowdowns as sortedPartitions orders partitions.
func sortedSlowdowns(ds []Slowdown) []Slowdown {
	out := make([]Slowdown, len(ds))
	for i, d := range ds {
		d.A, d.B = min(d.A, d.B), max(d.A, d.B)
		out[i] = d
	}
	slices.SortFunc(out, func(a, b Slowdown) int {
		return cmp.Or(cmp.Compare(a.At, b.At), cmp.Compare(a.A, b.A), cmp.Compare(a.B, b.B))
	})
	return out
}

func (d Slowdown) describe(tp *topo.Topology) string {
	return fmt.Sprintf("slowdown %s|%s by %s at %s for %s", tp.Regions[d.A].Name, tp.Regions[d.B].Name, d.By, d.At, d.For)
}

func (f NetFaults) duplicateDelay() time.Duration {
	return cmp.Or(f.DuplicateDelay, sim.DefaultDuplicateDelay)
}

func (p Partition) describe(tp *topo.Topology) string {
	return fmt.Sprintf("partition %s|%s at %s for %s", tp.Regions[p.A].Name, tp.Regions[p.B].Name, p.At, p.For)
}

func (f NetFaults) record(tp *topo.Topology) *NetFaultsRecord {
	if f.Empty() {
		return nil
	}
	r := &NetFaultsRecord{Loss: f.Loss, Duplicate: f.Duplicate}
	if f.Duplicate > 0 {
		r.DuplicateDelay = f.duplicateDelay().String()
	}
	for _, p := range sortedPartitions(f.Partitions) {
		r.Partitions = append(r.Partitions, PartitionRecord{Regions: [2]string{tp.Regions[p.A].Name, tp.Regions[p.B].Name},
			At: p.At.String(), For: p.For.String()})
	}
	for _, d := range sortedSlowdowns(f.Slowdowns) {
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
	for _, p := range sortedPartitions(f.Partitions) {
		s.At(w.Start+int64(p.At), func() { s.PartitionRegions(p.A, p.B) })
		s.At(w.Start+int64(p.At+p.For), func() { s.HealRegions(p.A, p.B) })
	}
	for _, d := range sortedSlowdowns(f.Slowdowns) {
		s.At(w.Start+int64(d.At), func() { s.SlowRegions(d.A, d.B, d.By) })
		s.At(w.Start+int64(d.At+d.For), func() { s.SlowRegions(d.A, d.B, 0) })
	}
}
