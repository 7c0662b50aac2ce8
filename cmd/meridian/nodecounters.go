package main

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/common/expfmt"

	mrt "github.com/meridiandb/meridian/internal/runtime"
)

// A real run's protocol counters come from the nodes' metrics endpoints (runtime/metrics.go):
// bench scrapes every node that has a metrics_addr before the warm-up and after the final read
// and reports the difference, summed over the nodes, so that a run on real processes shows the
// counters a simulated one prints (pushes, recoveries, records expired...).

// nodeScrape is one node's protocol counters, and when its process started (a restart between
// two scrapes resets its counters).
type nodeScrape struct {
	started  float64
	counters map[string]float64
}

const scrapeTimeout = 5 * time.Second

// scrapeNodes reads the protocol counters of every node of cfg with a metrics_addr; failed
// names the nodes that did not answer.
func scrapeNodes(cfg *mrt.Config) (got map[string]nodeScrape, failed []string) {
	got = map[string]nodeScrape{}
	hc := &http.Client{Timeout: scrapeTimeout}
	for _, n := range cfg.Nodes {
		if n.MetricsAddr == "" {
			continue
		}
		s, err := scrapeNode(hc, n.MetricsAddr)
		if err != nil {
			failed = append(failed, n.Name)
			continue
		}
		got[n.Name] = s
	}
	return got, failed
}

func scrapeNode(hc *http.Client, addr string) (nodeScrape, error) {
	resp, err := hc.Get("http://" + addr + "/metrics")
	if err != nil {
		return nodeScrape{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nodeScrape{}, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	var parser expfmt.TextParser
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nodeScrape{}, err
	}
	s := nodeScrape{counters: map[string]float64{}}
	if f := families["process_start_time_seconds"]; f != nil && len(f.Metric) > 0 {
		s.started = f.Metric[0].GetGauge().GetValue()
	}
	if f := families["meridian_protocol_events_total"]; f != nil {
		for _, m := range f.Metric {
			for _, l := range m.Label {
				if l.GetName() == "name" {
					s.counters[l.GetValue()] = m.GetCounter().GetValue()
				}
			}
		}
	}
	return s, nil
}

// counterDelta sums over the nodes what each counter gained between two scrapes. A node that
// restarted in between counts from its restart; one missing from either scrape is left out.
// note says which, if any.
func counterDelta(cfg *mrt.Config, before, after map[string]nodeScrape, failed []string) (sum map[string]int64, note string) {
	sum = map[string]int64{}
	var restarted, missing []string
	for _, n := range cfg.Nodes {
		if n.MetricsAddr == "" {
			continue
		}
		b, hadB := before[n.Name]
		a, hadA := after[n.Name]
		switch {
		case !hadB || !hadA:
			missing = append(missing, n.Name)
			continue
		case a.started != b.started || decreased(b.counters, a.counters):
			restarted = append(restarted, n.Name)
			b = nodeScrape{}
		}
		for name, v := range a.counters {
			if d := int64(v - b.counters[name]); d != 0 {
				sum[name] += d
			}
		}
	}
	var parts []string
	for _, f := range failed {
		if !slices.Contains(missing, f) {
			missing = append(missing, f)
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		parts = append(parts, "not counted (metrics unreachable): "+strings.Join(missing, ", "))
	}
	if len(restarted) > 0 {
		parts = append(parts, "counted since their last restart: "+strings.Join(restarted, ", "))
	}
	return sum, strings.Join(parts, "; ")
}

// decreased reports whether any counter went down: the node's process was replaced, whatever
// its start time says (a platform without it reports 0).
func decreased(before, after map[string]float64) bool {
	for name, v := range before {
		if after[name] < v {
			return true
		}
	}
	return false
}
