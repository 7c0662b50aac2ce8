package main

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/common/expfmt"

	mrt "github.com/meridiandb/meridian/internal/runtime"
)

// A real run's protocol counters come from the nodes' metrics endpoints (runtime/metrics.go):
// bench scrapes every node that has a metrics_addr before the warm-up, every second of the run
// and after the final read, and reports what the counters gained, summed over the nodes and
// their lives (counterTally), so that a run on real processes shows the counters a simulated
// one prints (pushes, recoveries, records expired...).

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

// counterTally follows every node's counters over a run's scrapes (before the warm-up, every
// tallyPeriod while clients run, after the final read) and sums what each life of each node
// gained: a node killed and restarted during the run (cluster chaos) counts its killed life up
// to that life's last scrape, and its new life from zero. Nodes missing from the first scrape
// are left out; one missing from the last counts up to its last scrape. Only observe may run
// while another goroutine scrapes, so the tally is locked.
type counterTally struct {
	mu    sync.Mutex
	cfg   *mrt.Config
	nodes map[string]*nodeLives
	// unreachable are the nodes the first scrape missed; lastMissed those the latest one did.
	unreachable, lastMissed []string
}

// nodeLives is one node's tally: the gains of its ended lives, and its current life's base
// (its counters at the run's start, or zero for a life begun during the run) and latest scrape.
type nodeLives struct {
	ended     map[string]float64
	base, cur nodeScrape
	restarted bool
}

const tallyPeriod = time.Second

// newCounterTally starts a tally from the first scrape, before the warm-up.
func newCounterTally(cfg *mrt.Config, first map[string]nodeScrape, failed []string) *counterTally {
	t := &counterTally{cfg: cfg, nodes: map[string]*nodeLives{}, unreachable: failed}
	for name, s := range first {
		t.nodes[name] = &nodeLives{ended: map[string]float64{}, base: s, cur: s}
	}
	return t
}

// observe takes one later scrape.
func (t *counterTally) observe(got map[string]nodeScrape, failed []string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lastMissed = failed
	for name, s := range got {
		n := t.nodes[name]
		if n == nil {
			continue // missed by the first scrape: nothing to count from
		}
		if s.started != n.cur.started || decreased(n.cur.counters, s.counters) {
			for k, v := range n.cur.counters {
				n.ended[k] += v - n.base.counters[k]
			}
			n.base, n.restarted = nodeScrape{}, true
		}
		n.cur = s
	}
}

// result sums every node's lives, and says in note which nodes were counted in part.
func (t *counterTally) result() (sum map[string]int64, note string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	sum = map[string]int64{}
	var restarted, partial []string
	for _, n := range t.cfg.Nodes {
		l := t.nodes[n.Name]
		if l == nil {
			continue
		}
		for k, v := range l.ended {
			sum[k] += int64(v)
		}
		for k, v := range l.cur.counters {
			sum[k] += int64(v - l.base.counters[k])
		}
		if l.restarted {
			restarted = append(restarted, n.Name)
		}
		if slices.Contains(t.lastMissed, n.Name) {
			partial = append(partial, n.Name)
		}
	}
	for k, v := range sum {
		if v == 0 {
			delete(sum, k)
		}
	}
	var parts []string
	if len(t.unreachable) > 0 {
		parts = append(parts, "not counted (metrics unreachable at the start): "+strings.Join(sortedCopy(t.unreachable), ", "))
	}
	if len(partial) > 0 {
		parts = append(parts, "counted up to their last scrape (metrics unreachable at the end): "+strings.Join(partial, ", "))
	}
	if len(restarted) > 0 {
		parts = append(parts, fmt.Sprintf("restarted during the run, each ended life counted up to its last scrape (every %v): %s", tallyPeriod, strings.Join(restarted, ", ")))
	}
	return sum, strings.Join(parts, "; ")
}

func sortedCopy(s []string) []string {
	c := slices.Clone(s)
	slices.Sort(c)
	return c
}

// tallyWhile scrapes every node each tallyPeriod until stop is closed, into t; the returned
// channel is closed once it has stopped.
func tallyWhile(t *counterTally, stop <-chan struct{}) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(tallyPeriod)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				t.observe(scrapeNodes(t.cfg))
			}
		}
	}()
	return done
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
