package repro

import (
	"strings"
	"testing"

	"github.com/meridiandb/meridian/internal/bench"
)

// A series whose curve peaks at either end of the sweep is named, and one that peaks inside it
// is not: its peak is a real one, the others only bounds.
func TestPeakEdges(t *testing.T) {
	curve := func(series string, tputs ...float64) []*Run {
		var rs []*Run
		for i, v := range tputs {
			rs = append(rs, &Run{Series: series, X: float64(5 * (i + 1)), Result: &bench.Result{Summary: bench.Summary{Throughput: v}}})
		}
		return rs
	}
	var runs []*Run
	runs = append(runs, curve("falling", 9, 5, 1)...)
	runs = append(runs, curve("inside", 1, 9, 5)...)
	runs = append(runs, curve("rising", 1, 5, 9)...)
	got := peakEdges(runs)
	if !strings.Contains(got, "lowest load swept (5 clients per region)") || !strings.Contains(got, "lower bounds: falling.") {
		t.Errorf("the series peaking at the lowest load is not named:\n%s", got)
	}
	if !strings.Contains(got, "highest load swept (15 clients per region)") || !strings.Contains(got, "lower bounds: rising.") {
		t.Errorf("the series peaking at the highest load is not named:\n%s", got)
	}
	if strings.Contains(got, "inside") {
		t.Errorf("a series peaking inside the sweep is flagged:\n%s", got)
	}
	if got := peakEdges(curve("inside", 1, 9, 5)); got != "" {
		t.Errorf("nothing at an edge, yet: %q", got)
	}
}
