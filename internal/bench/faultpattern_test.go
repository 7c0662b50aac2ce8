package bench

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/meridiandb/meridian/internal/topo"
)

func TestParseFaultPattern(t *testing.T) {
	good := map[string]FaultPattern{
		"300ms-3s/1.5s":     {300 * time.Millisecond, 3 * time.Second, 0, 1500 * time.Millisecond},
		"1s/200ms-400ms":    {time.Second, time.Second, 200 * time.Millisecond, 400 * time.Millisecond},
		"0s-2s/0s-1s":       {0, 2 * time.Second, 0, time.Second},
		"500ms/500ms-500ms": {500 * time.Millisecond, 500 * time.Millisecond, 500 * time.Millisecond, 500 * time.Millisecond},
	}
	for text, want := range good {
		got, err := ParseFaultPattern(text)
		if err != nil || got != want {
			t.Errorf("%q: %+v, %v; want %+v", text, got, err, want)
		}
		if again, err := ParseFaultPattern(got.String()); err != nil || again != got {
			t.Errorf("%q: String %q reads back as %+v, %v", text, got.String(), again, err)
		}
	}
	bad := map[string]string{
		"1s":          "want GAP/FOR",
		"soon/1s":     `gap "soon" is not a duration`,
		"1s/long":     `length "long" is not a duration`,
		"3s-1s/1s":    "want 0 ≤ A ≤ B",
		"1s/-1s":      `length "-1s" is not a duration`,
		"0s/1s":       "a positive gap",
		"1s/0s":       "a positive time",
		"1s-2s-3s/1s": "is not a duration",
	}
	for text, want := range bad {
		if _, err := ParseFaultPattern(text); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want one mentioning %q", text, err, want)
		}
	}
}

// A pattern's schedules are valid crash schedules for the run, within the pattern's bounds,
// the same for one seed and different for another, and put several nodes down at once when
// gaps are shorter than outages.
func TestFaultPatternCrashes(t *testing.T) {
	tp, p := shortGapPattern(t)
	const run = 6 * time.Second
	overlapped := false
	for seed := uint64(1); seed <= 50; seed++ {
		s := p.Crashes(tp, seed, run)
		if err := CheckCrashes(tp, s, run); err != nil {
			t.Fatalf("seed %d: %v\n%v", seed, err, s)
		}
		if len(s) < 5 || s[0].At > p.GapMax || s[len(s)-1].At < run-p.GapMax-p.ForMax {
			t.Fatalf("seed %d: %d crashes in %s with gaps of at most %v, first at %v, last at %v",
				seed, len(s), run, p.GapMax, s[0].At, s[len(s)-1].At)
		}
		for i, c := range s {
			if c.For < minFault || c.For > p.ForMax || c.At%time.Millisecond != 0 || c.For%time.Millisecond != 0 {
				t.Errorf("seed %d: %+v outside the pattern or not whole milliseconds", seed, c)
			}
			// A draw is skipped when every node is down, or its outage would outlast the
			// run, so a gap may pass GapMax but never falls below GapMin.
			if i > 0 && c.At-s[i-1].At < p.GapMin {
				t.Errorf("seed %d: gap %v between crashes, pattern %v", seed, c.At-s[i-1].At, p)
			}
			for _, d := range s[:i] {
				if d.Node != c.Node && d.At+d.For > c.At {
					overlapped = true
				}
			}
		}
		if !reflect.DeepEqual(s, p.Crashes(tp, seed, run)) {
			t.Fatalf("seed %d: two schedules differ", seed)
		}
		if reflect.DeepEqual(s, p.Crashes(tp, seed+1, run)) {
			t.Fatalf("seeds %d and %d give one schedule", seed, seed+1)
		}
	}
	if !overlapped {
		t.Error("no two nodes were ever down at once, with gaps shorter than outages")
	}
}

// Partitions drawn from a pattern are valid network faults for the run, the same for one seed,
// and cut several pairs at once when gaps are shorter than lengths.
func TestFaultPatternPartitions(t *testing.T) {
	tp, p := shortGapPattern(t)
	const run = 6 * time.Second
	overlapped := false
	for seed := uint64(1); seed <= 50; seed++ {
		s := p.Partitions(tp, seed, run)
		if err := CheckNetFaults(tp, NetFaults{Partitions: s}, run); err != nil {
			t.Fatalf("seed %d: %v\n%v", seed, err, s)
		}
		if len(s) < 5 {
			t.Fatalf("seed %d: %d partitions in %s", seed, len(s), run)
		}
		for i, c := range s {
			if c.A >= c.B || c.For < minFault || c.For > p.ForMax {
				t.Errorf("seed %d: %+v outside the pattern", seed, c)
			}
			for _, d := range s[:i] {
				if d.At+d.For > c.At {
					overlapped = true
				}
			}
		}
		if !reflect.DeepEqual(s, p.Partitions(tp, seed, run)) {
			t.Fatalf("seed %d: two schedules differ", seed)
		}
	}
	if !overlapped {
		t.Error("no two partitions ever overlapped, with gaps shorter than lengths")
	}
}

// shortGapPattern is a pattern whose gaps are shorter than its faults, on the five-region
// topology.
func shortGapPattern(t *testing.T) (*topo.Topology, FaultPattern) {
	t.Helper()
	tp, err := topo.FromPreset("k2-5region", topo.DefaultLayout())
	if err != nil {
		t.Fatal(err)
	}
	p, err := ParseFaultPattern("100ms-600ms/1.5s")
	if err != nil {
		t.Fatal(err)
	}
	return tp, p
}

// Skews moves a server's clock by up to ±by and back after the step's length: a seed gives one
// schedule, each step's pair cancels out, no server is stepped again while stepped, and every
// skew passes the simulator's check.
func TestFaultPatternSkews(t *testing.T) {
	tp, p := shortGapPattern(t)
	const run, by = 6 * time.Second, 20 * time.Millisecond
	for seed := uint64(1); seed <= 50; seed++ {
		s := p.Skews(tp, seed, run, by)
		if err := CheckClockSkews(tp, s, run); err != nil {
			t.Fatalf("seed %d: %v\n%v", seed, err, s)
		}
		if len(s) < 10 {
			t.Fatalf("seed %d: %d skews in %s", seed, len(s), run)
		}
		moved := map[topo.NodeID]time.Duration{} // each server's step now in force
		for _, k := range s {                    // in the order drawn: a step, then its return
			switch cur := moved[k.Node]; {
			case cur == 0 && (k.By == 0 || k.By > by || k.By < -by):
				t.Fatalf("seed %d: %+v steps outside ±%s", seed, k, by)
			case cur != 0 && k.By != -cur:
				t.Fatalf("seed %d: %+v moves a clock already moved by %s other than back", seed, k, cur)
			}
			moved[k.Node] += k.By
		}
		if !reflect.DeepEqual(s, p.Skews(tp, seed, run, by)) {
			t.Fatalf("seed %d: two schedules differ", seed)
		}
	}
	if reflect.DeepEqual(p.Skews(tp, 1, run, by), p.Skews(tp, 2, run, by)) {
		t.Error("seeds 1 and 2 drew one schedule")
	}
}

// Offsets are uniform over the non-zero whole microseconds in [-by, by]: with by = 1µs a step
// is as often behind as ahead (folding a drawn 0 onto +by made it ahead two times in three).
func TestFaultPatternSkewsUniformSign(t *testing.T) {
	tp, p := shortGapPattern(t)
	ahead, behind := 0, 0
	for seed := uint64(1); seed <= 200; seed++ {
		moved := map[topo.NodeID]bool{}
		for _, k := range p.Skews(tp, seed, 6*time.Second, time.Microsecond) {
			if moved[k.Node] = !moved[k.Node]; !moved[k.Node] {
				continue // a return
			}
			if k.By > 0 {
				ahead++
			} else {
				behind++
			}
		}
	}
	if n := ahead + behind; n < 1000 || ahead > n*55/100 || behind > n*55/100 {
		t.Errorf("%d steps ahead, %d behind: want about half each", ahead, behind)
	}
}

// Slowdowns slow pairs of regions by up to by, one slowdown of a pair at a time, each over
// before the run ends: a seed gives one schedule, and every one passes CheckNetFaults.
func TestFaultPatternSlowdowns(t *testing.T) {
	tp, p := shortGapPattern(t)
	const run, by = 6 * time.Second, 800 * time.Millisecond
	var largest time.Duration
	for seed := uint64(1); seed <= 50; seed++ {
		s := p.Slowdowns(tp, seed, run, by)
		if err := CheckNetFaults(tp, NetFaults{Slowdowns: s}, run); err != nil {
			t.Fatalf("seed %d: %v\n%v", seed, err, s)
		}
		if len(s) < 5 {
			t.Fatalf("seed %d: %d slowdowns in %s", seed, len(s), run)
		}
		for _, d := range s {
			if d.A >= d.B || d.For < minFault || d.For > p.ForMax || d.By <= 0 || d.By > by || d.By%time.Microsecond != 0 {
				t.Errorf("seed %d: %+v outside the pattern", seed, d)
			}
			largest = max(largest, d.By)
		}
		if !reflect.DeepEqual(s, p.Slowdowns(tp, seed, run, by)) {
			t.Fatalf("seed %d: two schedules differ", seed)
		}
	}
	if largest < by*9/10 {
		t.Errorf("the largest delay drawn in 50 seeds is %s, want delays spread up to %s", largest, by)
	}
	if reflect.DeepEqual(p.Slowdowns(tp, 1, run, by), p.Slowdowns(tp, 2, run, by)) {
		t.Error("seeds 1 and 2 drew one schedule")
	}
}

// CheckNetFaults refuses a slowdown that is not of two regions, not positive, past the run, or
// that overlaps the pair's last one.
func TestCheckSlowdowns(t *testing.T) {
	tp, _ := shortGapPattern(t)
	const run = 5 * time.Second
	ok := Slowdown{A: 0, B: 1, At: time.Second, For: time.Second, By: 100 * time.Millisecond}
	if err := CheckNetFaults(tp, NetFaults{Slowdowns: []Slowdown{ok, {A: 1, B: 0, At: 2100 * time.Millisecond, For: time.Second, By: time.Second}}}, run); err != nil {
		t.Fatalf("two slowdowns of a pair one after the other: %v", err)
	}
	for _, c := range []struct {
		name string
		d    []Slowdown
		want string
	}{
		{"one region", []Slowdown{{A: 2, B: 2, At: 0, For: time.Second, By: time.Second}}, "not two regions"},
		{"no delay", []Slowdown{{A: 0, B: 1, At: 0, For: time.Second}}, "extra delay must be positive"},
		{"past the bound", []Slowdown{{A: 0, B: 1, At: 0, For: time.Second, By: 11 * time.Second}}, "at most 10s"},
		{"past the run", []Slowdown{{A: 0, B: 1, At: 4 * time.Second, For: 2 * time.Second, By: time.Second}}, "must end by the end of the run"},
		{"overlapping", []Slowdown{ok, {A: 1, B: 0, At: 1500 * time.Millisecond, For: time.Second, By: time.Second}}, "must not overlap"},
	} {
		err := CheckNetFaults(tp, NetFaults{Slowdowns: c.d}, run)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error mentioning %q", c.name, err, c.want)
		}
	}
}

// BenchmarkCheckManySlowdowns times CheckNetFaults on a long run's slowdowns (1ms/1ms over
// 20 s, about 10,000): it once sorted them again for each, and a 30 s run spent 27 s in it.
func BenchmarkCheckManySlowdowns(b *testing.B) {
	tp, err := topo.FromPreset("k2-5region", topo.DefaultLayout())
	if err != nil {
		b.Fatal(err)
	}
	p, err := ParseFaultPattern("1ms/1ms")
	if err != nil {
		b.Fatal(err)
	}
	const run = 20 * time.Second
	s := p.Slowdowns(tp, 1, run, time.Millisecond)
	b.ReportMetric(float64(len(s)), "slowdowns")
	for b.Loop() {
		if err := CheckNetFaults(tp, NetFaults{Slowdowns: s}, run); err != nil {
			b.Fatal(err)
		}
	}
}
