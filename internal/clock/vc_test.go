package clock

import "testing"

func TestVectorClocks(t *testing.T) {
	tests := []struct {
		a, b                            VC
		lessEq, less, concurrent, equal bool
	}{
		{VC{1, 2, 3}, VC{1, 2, 3}, true, false, false, true},
		{VC{1, 2, 3}, VC{1, 3, 3}, true, true, false, false},
		{VC{1, 4, 3}, VC{1, 3, 3}, false, false, false, false},
		{VC{2, 0}, VC{0, 2}, false, false, true, false},
		{VC{1}, VC{1, 0, 0}, true, false, false, true}, // shorter = zero-padded
		{VC{1}, VC{1, 0, 1}, true, true, false, false},
		{nil, VC{0, 5}, true, true, false, false},
		{nil, nil, true, false, false, true},
	}
	for _, tc := range tests {
		if got := tc.a.LessEq(tc.b); got != tc.lessEq {
			t.Errorf("%v ≤ %v = %v", tc.a, tc.b, got)
		}
		if got := tc.a.Less(tc.b); got != tc.less {
			t.Errorf("%v < %v = %v", tc.a, tc.b, got)
		}
		if got := tc.a.Concurrent(tc.b); got != tc.concurrent {
			t.Errorf("%v ∥ %v = %v", tc.a, tc.b, got)
		}
		if got := tc.a.Equal(tc.b); got != tc.equal {
			t.Errorf("%v = %v: %v", tc.a, tc.b, got)
		}
	}
}

func TestVectorClockMergeAndCopy(t *testing.T) {
	a := VC{3, 0, 7}
	c := a.Copy()
	c[0] = 99
	if a[0] != 3 {
		t.Fatal("Copy shares storage")
	}
	if VC(nil).Copy() != nil {
		t.Fatal("Copy of nil is not nil")
	}
	m := a.Copy().Merge(VC{1, 5, 2, 4})
	want := VC{3, 5, 7, 4}
	if !m.Equal(want) || len(m) != 4 {
		t.Fatalf("merge = %v, want %v", m, want)
	}
	if !a.LessEq(m) || !(VC{1, 5, 2, 4}).LessEq(m) {
		t.Fatal("merge is not an upper bound of its inputs")
	}
}
