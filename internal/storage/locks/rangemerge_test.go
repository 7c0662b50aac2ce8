package locks

import (
	"slices"
	"testing"
)

// TestAdjacentRangesOfATxnMerge: a scan in steps takes range locks on adjacent parts, one per
// step, as many as a run of tombstones past the start needs (a limit-1 scan over n deleted rows
// takes n steps). Kept apart, they grew the range list by one per step, and every range check
// walks that list: the scan's steps cost O(n²), and so did every exclusive request at the
// participant while the scan's transaction held them (8000 steps: 0.56 s of lock table time).
// A part granted at once beside one the transaction holds extends it.
func TestAdjacentRangesOfATxnMerge(t *testing.T) {
	const a, b = 1, 2
	tab := New()
	runSteps(t, tab, []step{
		acqRange(a, "a", "b", Wait, 1, Granted),
		acqRange(a, "b", "c", Wait, 1, Granted),
		acqRange(a, "c", "d", Wait, 1, Granted),
		acqRange(a, "d", "", Wait, 1, Granted),
		acq(b, "cc", Exclusive, NoWait, 2, Aborted).because(ReasonNoWait).conflictsWith(a),
		acq(b, "z", Exclusive, NoWait, 2, Aborted).because(ReasonNoWait).conflictsWith(a),
		acq(b, "0", Exclusive, NoWait, 2, Granted),
	})
	if got, want := tab.HeldRanges(a), []Range{{"a", ""}}; !slices.Equal(got, want) {
		t.Fatalf("held ranges %v, want %v", got, want)
	}
	if got := len(tab.ranges); got != 1 {
		t.Fatalf("%d range entries, want 1", got)
	}
	tab.Release(a)
	if len(tab.ranges) != 0 || len(tab.txns) != 1 {
		t.Fatalf("after release: %d ranges, %d txns", len(tab.ranges), len(tab.txns))
	}
}
