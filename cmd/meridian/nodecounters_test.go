package main

import (
	"reflect"
	"testing"

	mrt "github.com/meridiandb/meridian/internal/runtime"
)

// counterDelta sums what each node's counters gained; a node whose process was replaced
// (another start time, or a counter that went down) counts from zero, and one missing from a
// scrape is left out; the note names both.
func TestCounterDelta(t *testing.T) {
	cfg := &mrt.Config{Nodes: []mrt.NodeConfig{{Name: "a", MetricsAddr: "x:1"}, {Name: "b", MetricsAddr: "x:2"},
		{Name: "c", MetricsAddr: "x:3"}, {Name: "d", MetricsAddr: "x:4"}, {Name: "e"}}}
	scrape := func(started float64, kv ...any) nodeScrape {
		s := nodeScrape{started: started, counters: map[string]float64{}}
		for i := 0; i < len(kv); i += 2 {
			s.counters[kv[i].(string)] = kv[i+1].(float64)
		}
		return s
	}
	before := map[string]nodeScrape{
		"a": scrape(10, "commit", 5.0, "push", 1.0),
		"b": scrape(10, "commit", 7.0),
		"c": scrape(0, "commit", 9.0),
		"d": scrape(10, "commit", 1.0),
	}
	after := map[string]nodeScrape{
		"a": scrape(10, "commit", 8.0, "push", 1.0, "abort", 2.0), // +3 commits, +2 aborts
		"b": scrape(20, "commit", 4.0),                            // restarted: 4 since
		"c": scrape(0, "commit", 2.0),                             // went down: restarted, 2 since
	}
	sum, note := counterDelta(cfg, before, after, []string{"d"})
	if want := map[string]int64{"commit": 3 + 4 + 2, "abort": 2}; !reflect.DeepEqual(sum, want) {
		t.Errorf("sum %v, want %v", sum, want)
	}
	if want := "not counted (metrics unreachable): d; counted since their last restart: b, c"; note != want {
		t.Errorf("note %q, want %q", note, want)
	}
}
