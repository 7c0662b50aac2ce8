// Package bench is Meridian's benchmark driver: closed-loop clients that run a workload's
// transactions against a cluster (simulated or real), measure throughput, latency and aborts in a
// measurement window after a warm-up, record a checkable history, and report the result in one
// shape for every protocol and runtime.
package bench

import (
	"math"
	"sort"
	"sync"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Latency percentiles in milliseconds.
type Latency struct {
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	Mean float64 `json:"mean"`
	Max  float64 `json:"max"`
}

// TypeStats is the result for one transaction type.
type TypeStats struct {
	Committed   int64   `json:"committed"`
	Aborted     int64   `json:"aborted"`
	Latency     Latency `json:"latency_ms"`
	Throughput  float64 `json:"throughput_tps"`
	RolledBack  int64   `json:"rolled_back,omitempty"`
	FailedFinal int64   `json:"failed,omitempty"`
}

// Metrics accumulates a run's measurements. Safe for concurrent use (real clients); in the
// simulator the lock is never contended.
type Metrics struct {
	mu          sync.Mutex
	all         *hdrhistogram.Histogram
	perType     map[string]*typeAcc
	committed   int64
	aborted     int64 // aborted attempts (each retry counts)
	firstTry    int64 // transactions committed on their first attempt
	retries     int64
	unknown     int64
	unavailable int64
	failed      int64 // transactions that gave up (non-retryable error or window end)
	rolledBack  int64
	causes      map[string]int64
	timeline    map[int64]int64 // commits per second of the window
}

type typeAcc struct {
	h                                  *hdrhistogram.Histogram
	committed, aborted, rolled, failed int64
}

func newHist() *hdrhistogram.Histogram { return hdrhistogram.New(1, 600_000_000, 3) } // µs, up to 10 min

// NewMetrics returns empty metrics.
func NewMetrics() *Metrics {
	return &Metrics{all: newHist(), perType: map[string]*typeAcc{}, causes: map[string]int64{}, timeline: map[int64]int64{}}
}

func (m *Metrics) typ(t string) *typeAcc {
	a := m.perType[t]
	if a == nil {
		a = &typeAcc{h: newHist()}
		m.perType[t] = a
	}
	return a
}

// Commit records a committed transaction with its latency (from its first attempt's start) and
// the second of the window it finished in.
func (m *Metrics) Commit(typ string, latencyNs int64, attempts int, second int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	us := latencyNs / 1000
	if us < 1 {
		us = 1
	}
	_ = m.all.RecordValue(us)
	a := m.typ(typ)
	_ = a.h.RecordValue(us)
	a.committed++
	m.committed++
	if attempts == 1 {
		m.firstTry++
	}
	m.timeline[second]++
}

// Abort records one aborted attempt.
func (m *Metrics) Abort(typ, cause string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if cause == "" {
		cause = "unspecified"
	}
	m.aborted++
	m.causes[cause]++
	m.typ(typ).aborted++
}

// Retry counts a retry of an aborted transaction.
func (m *Metrics) Retry() {
	m.mu.Lock()
	m.retries++
	m.mu.Unlock()
}

// RolledBack counts a transaction that rolled back by its own decision (TPC-C's 1%).
func (m *Metrics) RolledBack(typ string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.rolledBack++
	m.typ(typ).rolled++
}

// Failed counts a transaction that ended without committing (not retryable): with an unknown
// outcome, or because its coordinator was unreachable (a crashed gateway), or otherwise.
func (m *Metrics) Failed(typ string, unknown, unavailable bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.failed++
	if unknown {
		m.unknown++
	}
	if unavailable {
		m.unavailable++
	}
	m.typ(typ).failed++
}

func latencyOf(h *hdrhistogram.Histogram) Latency {
	ms := func(us int64) float64 { return float64(us) / 1000 }
	if h.TotalCount() == 0 {
		return Latency{}
	}
	return Latency{
		P50:  ms(h.ValueAtQuantile(50)),
		P90:  ms(h.ValueAtQuantile(90)),
		P99:  ms(h.ValueAtQuantile(99)),
		Mean: h.Mean() / 1000,
		Max:  ms(h.Max()),
	}
}

// Summary is the measured part of a Result.
type Summary struct {
	Committed     int64                `json:"committed"`
	Aborted       int64                `json:"aborted"`
	AbortRate     float64              `json:"abort_rate"`
	Retries       int64                `json:"retries"`
	FirstTry      int64                `json:"committed_first_try"`
	Failed        int64                `json:"failed"`
	Unknown       int64                `json:"unknown_outcome"`
	Unavailable   int64                `json:"unavailable"` // of Failed: the coordinator was unreachable
	RolledBack    int64                `json:"rolled_back"`
	Throughput    float64              `json:"throughput_tps"`
	Latency       Latency              `json:"latency_ms"`
	AbortsByCause map[string]int64     `json:"aborts_by_cause"`
	PerType       map[string]TypeStats `json:"per_type"`
	Timeline      []int64              `json:"timeline_tps"`
}

// Summarize computes the summary over a window of windowSeconds.
func (m *Metrics) Summarize(windowSeconds float64) Summary {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := Summary{
		Committed: m.committed, Aborted: m.aborted, Retries: m.retries, FirstTry: m.firstTry,
		Failed: m.failed, Unknown: m.unknown, Unavailable: m.unavailable, RolledBack: m.rolledBack,
		Latency: latencyOf(m.all), AbortsByCause: map[string]int64{}, PerType: map[string]TypeStats{},
	}
	if attempts := m.committed + m.aborted; attempts > 0 {
		s.AbortRate = float64(m.aborted) / float64(attempts)
	}
	if windowSeconds > 0 {
		s.Throughput = float64(m.committed) / windowSeconds
	}
	for c, n := range m.causes {
		s.AbortsByCause[c] = n
	}
	for t, a := range m.perType {
		ts := TypeStats{Committed: a.committed, Aborted: a.aborted, Latency: latencyOf(a.h), RolledBack: a.rolled, FailedFinal: a.failed}
		if windowSeconds > 0 {
			ts.Throughput = float64(a.committed) / windowSeconds
		}
		s.PerType[t] = ts
	}
	secs := make([]int64, 0, len(m.timeline))
	for sec := range m.timeline {
		secs = append(secs, sec)
	}
	sort.Slice(secs, func(i, j int) bool { return secs[i] < secs[j] })
	// Every second of the window, those without a commit too: a stall at the end read as a
	// shorter run (review: 4 entries for an 8 s window).
	length := int64(math.Ceil(windowSeconds))
	if len(secs) > 0 {
		length = max(length, secs[len(secs)-1]+1)
	}
	if length > 0 {
		s.Timeline = make([]int64, length)
		for _, sec := range secs {
			if sec >= 0 {
				s.Timeline[sec] = m.timeline[sec]
			}
		}
	}
	return s
}
