package protocol

import (
	"sort"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Metrics is what a protocol node counts beyond what clients see: aborts by cause, deadlocks,
// commit-wait time, per-phase latencies (K2 Table 2). A handler exposes it by implementing
// MetricsSource; runtimes reset it when the measurement window opens and merge every node's at
// the end. Not safe for concurrent use: a node's handler runs on one logical thread.
type Metrics struct {
	Counters map[string]int64
	hists    map[string]*hdrhistogram.Histogram
}

// MetricsSource is implemented by handlers that keep Metrics.
type MetricsSource interface {
	Metrics() *Metrics
}

// NewMetrics returns empty metrics.
func NewMetrics() *Metrics {
	return &Metrics{Counters: map[string]int64{}, hists: map[string]*hdrhistogram.Histogram{}}
}

// Add adds delta to a counter.
func (m *Metrics) Add(name string, delta int64) { m.Counters[name] += delta }

// Observe records a duration in nanoseconds under name (kept in microseconds, 3 digits).
func (m *Metrics) Observe(name string, ns int64) {
	h := m.hists[name]
	if h == nil {
		h = hdrhistogram.New(1, 600_000_000, 3)
		m.hists[name] = h
	}
	us := ns / 1000
	if us < 1 {
		us = 1
	}
	_ = h.RecordValue(us)
}

// Reset clears everything (the measurement window opened).
func (m *Metrics) Reset() {
	m.Counters = map[string]int64{}
	m.hists = map[string]*hdrhistogram.Histogram{}
}

// Merge adds other into m.
func (m *Metrics) Merge(other *Metrics) {
	for k, v := range other.Counters {
		m.Counters[k] += v
	}
	for _, k := range sortedHistNames(other.hists) {
		h := m.hists[k]
		if h == nil {
			h = hdrhistogram.New(1, 600_000_000, 3)
			m.hists[k] = h
		}
		h.Merge(other.hists[k])
	}
}

func sortedHistNames(h map[string]*hdrhistogram.Histogram) []string {
	out := make([]string, 0, len(h))
	for k := range h {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Distribution summarizes one histogram in milliseconds.
type Distribution struct {
	Count int64   `json:"count"`
	Mean  float64 `json:"mean"`
	P50   float64 `json:"p50"`
	P90   float64 `json:"p90"`
	P99   float64 `json:"p99"`
}

// Snapshot is the JSON form of Metrics.
type Snapshot struct {
	Counters      map[string]int64        `json:"counters,omitempty"`
	Distributions map[string]Distribution `json:"distributions_ms,omitempty"`
}

// Snapshot summarizes the metrics.
func (m *Metrics) Snapshot() Snapshot {
	s := Snapshot{Counters: map[string]int64{}, Distributions: map[string]Distribution{}}
	for k, v := range m.Counters {
		s.Counters[k] = v
	}
	for k, h := range m.hists {
		ms := func(us int64) float64 { return float64(us) / 1000 }
		s.Distributions[k] = Distribution{Count: h.TotalCount(), Mean: h.Mean() / 1000,
			P50: ms(h.ValueAtQuantile(50)), P90: ms(h.ValueAtQuantile(90)), P99: ms(h.ValueAtQuantile(99))}
	}
	return s
}
