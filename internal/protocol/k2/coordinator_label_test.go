package k2

import (
	"fmt"
	"testing"
)

// TestMetricLabelsBounded: phases are kept under at most maxMetricLabels labels, the rest under
// "other", so a client naming every transaction apart cannot grow the coordinator's memory.
func TestMetricLabelsBounded(t *testing.T) {
	n := &Node{}
	for i := range maxMetricLabels {
		if got := n.metricLabel(fmt.Sprint("kind-", i)); got != fmt.Sprint("kind-", i) {
			t.Fatalf("label %d kept as %q", i, got)
		}
	}
	if got := n.metricLabel("order-12345"); got != "other" {
		t.Errorf("label past the bound kept as %q, want other", got)
	}
	if got := n.metricLabel("kind-3"); got != "kind-3" {
		t.Errorf("a known label kept as %q", got)
	}
	if len(n.labels) != maxMetricLabels {
		t.Errorf("%d labels kept, want %d", len(n.labels), maxMetricLabels)
	}
}
