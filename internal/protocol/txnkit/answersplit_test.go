package txnkit

import (
	"bytes"
	"testing"

	"github.com/meridiandb/meridian/internal/wire"
)

// TestValuesThatFit: a share of reads is cut where the next value would take it past
// wire.MaxScanBytes, never before the first value, and not at all when everything fits.
func TestValuesThatFit(t *testing.T) {
	mib := bytes.Repeat([]byte{1}, 1<<20)
	tests := []struct {
		name   string
		values [][]byte
		want   int
	}{
		{"none", nil, 0},
		{"small", [][]byte{{1}, nil, {2}}, 3},
		{"three of 1 MiB fit", [][]byte{mib, mib, mib}, 3},
		{"the fourth does not", [][]byte{mib, mib, mib, mib, mib}, 3},
		{"a first value over the bound still goes", [][]byte{make([]byte, wire.MaxScanBytes+1), {1}}, 1},
	}
	for _, tc := range tests {
		got := ValuesThatFit(len(tc.values), func(i int) []byte { return tc.values[i] })
		if got != tc.want {
			t.Errorf("%s: %d fit, want %d", tc.name, got, tc.want)
		}
	}
}
