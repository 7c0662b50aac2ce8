package txnkit

import (
	"fmt"
	"testing"

	"github.com/meridiandb/meridian/internal/storage"
	"github.com/meridiandb/meridian/internal/ts"
)

// TestRangeMarks: Highest is the highest mark covering a key, leaving out the excepted
// transaction's; Add drops marks at or below the floor and, past MaxRangeMarks, folds the
// lower half into a timestamp the caller raises its floor to, so every range stays covered.
func TestRangeMarks(t *testing.T) {
	var r RangeMarks
	a, b := storage.TxnID(1), storage.TxnID(2)
	r.Add("b", "d", ts.Timestamp{Wall: 10}, a, ts.Zero)
	r.Add("c", "", ts.Timestamp{Wall: 20}, b, ts.Zero)
	for _, c := range []struct {
		key    string
		except storage.TxnID
		want   int64
	}{
		{"a", 0, 0}, {"b", 0, 10}, {"c", 0, 20}, {"c", b, 10}, {"d", 0, 20}, {"d", b, 0}, {"zz", 0, 20}, {"bb", a, 0},
	} {
		if got := r.Highest(c.key, c.except); got.Wall != c.want {
			t.Errorf("Highest(%q, except %d) = %d, want %d", c.key, c.except, got.Wall, c.want)
		}
	}
	if r.Add("x", "y", ts.Timestamp{Wall: 5}, a, ts.Timestamp{Wall: 15}); r.Len() != 2 {
		t.Errorf("a mark below the floor was kept: %d marks, want 2", r.Len())
	}
	if r.Add("x", "y", ts.Timestamp{Wall: 30}, a, ts.Timestamp{Wall: 15}); r.Len() != 2 || r.Highest("bb", 0).Wall != 0 {
		t.Errorf("after a floor of 15: %d marks, [b, d) at %d; want the marks at 20 and 30 only", r.Len(), r.Highest("bb", 0).Wall)
	}

	// A range continuing one txn's mark at the same timestamp extends it; one of another
	// transaction or timestamp, or after a mark to the end of the key space, does not.
	var c RangeMarks
	at := ts.Timestamp{Wall: 10}
	for _, step := range [][2]string{{"a", "b"}, {"b", "c"}, {"c", "d"}} {
		c.Add(step[0], step[1], at, a, ts.Zero)
	}
	if c.Len() != 1 || c.Highest("c", 0) != at || !c.Highest("d", 0).IsZero() {
		t.Errorf("three steps [a, d) at 10: %d marks, c at %v, d at %v; want 1 mark covering [a, d)", c.Len(), c.Highest("c", 0), c.Highest("d", 0))
	}
	c.Add("d", "e", at, b, ts.Zero)
	c.Add("e", "f", ts.Timestamp{Wall: 11}, b, ts.Zero)
	c.Add("g", "", at, a, ts.Zero)
	c.Add("", "a", at, a, ts.Zero)
	if c.Len() != 5 || !c.Highest("f", 0).IsZero() || c.Highest("0", 0) != at {
		t.Errorf("marks of another txn, timestamp or after an end \"\": %d marks, f at %v, \"0\" at %v; want 5, none and 10", c.Len(), c.Highest("f", 0), c.Highest("0", 0))
	}

	var m RangeMarks
	floor := ts.Zero
	ats := map[string]ts.Timestamp{}
	folds := 0
	for i := range 3 * MaxRangeMarks {
		start := fmt.Sprintf("r%04d", i)
		at := ts.Timestamp{Wall: int64(1000 + (i*7919)%5000)}
		ats[start+"x"] = at
		if raise, fold := m.Add(start, start+"~", at, a, floor); fold {
			floor, folds = ts.MaxOf(floor, raise), folds+1
		}
	}
	if m.Len() > MaxRangeMarks || folds == 0 {
		t.Fatalf("%d marks after %d folds, want at most %d and some folds", m.Len(), folds, MaxRangeMarks)
	}
	for key, at := range ats {
		if got := ts.MaxOf(floor, m.Highest(key, 0)); got.Less(at) {
			t.Fatalf("%s: covered at %v, below its read at %v", key, got, at)
		}
	}
}
