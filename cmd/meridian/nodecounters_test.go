package main

import (
	"reflect"
	"testing"

	mrt "github.com/meridiandb/meridian/internal/runtime"
)

// counterTally sums what each node's counters gained over the run's scrapes: a node whose
// process was replaced (another start time, or a counter that went down) counts its ended life up
// to its last scrape and its new life from zero; one the first scrape missed is left out, and
// one the last missed counts up to its last scrape. The note names each.
func TestCounterTally(t *testing.T) {
	cfg := &mrt.Config{Nodes: []mrt.NodeConfig{{Name: "a", MetricsAddr: "x:1"}, {Name: "b", MetricsAddr: "x:2"},
		{Name: "c", MetricsAddr: "x:3"}, {Name: "d", MetricsAddr: "x:4"}, {Name: "e", MetricsAddr: "x:5"}, {Name: "f"}}}
	scrape := func(started float64, kv ...any) nodeScrape {
		s := nodeScrape{started: started, counters: map[string]float64{}}
		for i := 0; i < len(kv); i += 2 {
			s.counters[kv[i].(string)] = kv[i+1].(float64)
		}
		return s
	}
	tally := newCounterTally(cfg, map[string]nodeScrape{
		"a": scrape(10, "commit", 5.0, "push", 1.0),
		"b": scrape(10, "commit", 7.0),
		"c": scrape(0, "commit", 9.0),
		"e": scrape(10, "commit", 1.0),
	}, []string{"d"})
	tally.observe(map[string]nodeScrape{
		"b": scrape(10, "commit", 12.0), // +5 in its first life, then killed
		"e": scrape(10, "commit", 3.0),  // +2, then unreachable at the end
		"d": scrape(10, "commit", 50.0), // missed at the start: not counted
	}, []string{"a", "c"})
	tally.observe(map[string]nodeScrape{
		"a": scrape(10, "commit", 8.0, "push", 1.0, "abort", 2.0), // +3 commits, +2 aborts
		"b": scrape(20, "commit", 4.0),                            // restarted: 4 since
		"c": scrape(0, "commit", 2.0),                             // went down: restarted, 2 since
		"d": scrape(10, "commit", 60.0),
	}, []string{"e"})
	sum, note := tally.result()
	if want := map[string]int64{"commit": 3 + (5 + 4) + 2 + 2, "abort": 2}; !reflect.DeepEqual(sum, want) {
		t.Errorf("sum %v, want %v", sum, want)
	}
	if want := "not counted (metrics unreachable at the start): d; counted up to their last scrape (metrics unreachable at the end): e; " +
		"restarted during the run, each ended life counted up to its last scrape (every 1s): b, c"; note != want {
		t.Errorf("note %q, want %q", note, want)
	}
}
