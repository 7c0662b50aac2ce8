package bench

import (
	"fmt"
	"maps"
	"slices"

	"github.com/meridiandb/meridian/internal/protocol"
)

// MeanResult averages the results of the same run under different seeds: every rate, count and
// latency percentile is the mean over the runs (a mean of p90s, not the p90 of the pooled
// samples: each run keeps only its histogram's summary), except the abort rate, which pools
// the attempts, and latencies, which leave out runs that committed nothing of the kind. Single-seed numbers of a contended run
// move by several percent from seed to seed; a reproduction that compares protocols by the
// ratio of their peaks needs the mean.
//
// The consistency verdict is "ok" only if every run's is; otherwise it names the first failing
// seed. Histories, trace digests and timelines are per run and are left out.
func MeanResult(rs []*Result) (*Result, error) {
	if len(rs) == 0 {
		return nil, fmt.Errorf("bench: no results to average")
	}
	first := rs[0]
	for _, r := range rs[1:] {
		if r.Protocol != first.Protocol || r.Workload != first.Workload || r.Clients != first.Clients {
			return nil, fmt.Errorf("bench: cannot average %s/%s with %d clients and %s/%s with %d",
				first.Protocol, first.Workload, first.Clients, r.Protocol, r.Workload, r.Clients)
		}
	}
	n := float64(len(rs))
	meanF := func(get func(*Result) float64) float64 {
		var sum float64
		for _, r := range rs {
			sum += get(r)
		}
		return sum / n
	}
	meanI := func(get func(*Result) int64) int64 {
		return int64(meanF(func(r *Result) float64 { return float64(get(r)) }) + 0.5)
	}
	meanU := func(get func(*Result) uint64) uint64 {
		return uint64(meanF(func(r *Result) float64 { return float64(get(r)) }) + 0.5)
	}
	out := &Result{
		Protocol: first.Protocol, Workload: first.Workload, Topology: first.Topology, Seed: first.Seed,
		Clients:        first.Clients,
		VirtualSeconds: meanF(func(r *Result) float64 { return r.VirtualSeconds }),
		WallSeconds:    meanF(func(r *Result) float64 { return r.WallSeconds }),
		Events:         meanU(func(r *Result) uint64 { return r.Events }),
		WindowMessages: meanU(func(r *Result) uint64 { return r.WindowMessages }),
		WindowFlushes:  meanU(func(r *Result) uint64 { return r.WindowFlushes }),
		EventsPerSec:   meanF(func(r *Result) float64 { return r.EventsPerSec }),
		LoadSeconds:    meanF(func(r *Result) float64 { return r.LoadSeconds }),
		Consistency:    meanConsistency(rs),
	}
	s := &out.Summary
	s.Committed = meanI(func(r *Result) int64 { return r.Committed })
	s.Aborted = meanI(func(r *Result) int64 { return r.Aborted })
	// Pooled, so that it agrees with the averaged counts: aborted attempts over all attempts.
	var committed, aborted float64
	for _, r := range rs {
		committed += float64(r.Committed)
		aborted += float64(r.Aborted)
	}
	if committed+aborted > 0 {
		s.AbortRate = aborted / (committed + aborted)
	}
	s.Retries = meanI(func(r *Result) int64 { return r.Retries })
	s.FirstTry = meanI(func(r *Result) int64 { return r.FirstTry })
	s.Failed = meanI(func(r *Result) int64 { return r.Failed })
	s.Unknown = meanI(func(r *Result) int64 { return r.Unknown })
	s.Unavailable = meanI(func(r *Result) int64 { return r.Unavailable })
	s.RolledBack = meanI(func(r *Result) int64 { return r.RolledBack })
	s.Throughput = meanF(func(r *Result) float64 { return r.Throughput })
	s.Latency = meanLatency(rs, func(r *Result) (Latency, bool) { return r.Latency, r.Committed > 0 })
	s.AbortsByCause = map[string]int64{}
	for _, cause := range unionKeys(rs, func(r *Result) []string { return mapKeys(r.AbortsByCause) }) {
		s.AbortsByCause[cause] = meanI(func(r *Result) int64 { return r.AbortsByCause[cause] })
	}
	s.PerType = map[string]TypeStats{}
	for _, typ := range unionKeys(rs, func(r *Result) []string { return mapKeys(r.PerType) }) {
		get := func(r *Result) TypeStats { return r.PerType[typ] }
		s.PerType[typ] = TypeStats{
			Committed:   meanI(func(r *Result) int64 { return get(r).Committed }),
			Aborted:     meanI(func(r *Result) int64 { return get(r).Aborted }),
			Throughput:  meanF(func(r *Result) float64 { return get(r).Throughput }),
			RolledBack:  meanI(func(r *Result) int64 { return get(r).RolledBack }),
			FailedFinal: meanI(func(r *Result) int64 { return get(r).FailedFinal }),
			Latency: meanLatency(rs, func(r *Result) (Latency, bool) {
				ts, ok := r.PerType[typ]
				return ts.Latency, ok
			}),
		}
	}
	out.ProtocolMetrics = meanSnapshot(rs)
	return out, nil
}

// meanLatency averages the latencies the runs have (a run that committed no transaction of a
// type has none, and counting it as zero would pull the mean down).
func meanLatency(rs []*Result, get func(*Result) (Latency, bool)) Latency {
	var sum Latency
	k := 0
	for _, r := range rs {
		l, ok := get(r)
		if !ok {
			continue
		}
		k++
		sum.P50 += l.P50
		sum.P90 += l.P90
		sum.P99 += l.P99
		sum.Mean += l.Mean
		sum.Max = max(sum.Max, l.Max)
	}
	if k == 0 {
		return Latency{}
	}
	f := float64(k)
	return Latency{P50: sum.P50 / f, P90: sum.P90 / f, P99: sum.P99 / f, Mean: sum.Mean / f, Max: sum.Max}
}

func meanSnapshot(rs []*Result) *protocol.Snapshot {
	var have []*protocol.Snapshot
	for _, r := range rs {
		if r.ProtocolMetrics != nil {
			have = append(have, r.ProtocolMetrics)
		}
	}
	if len(have) == 0 {
		return nil
	}
	n := float64(len(have))
	out := &protocol.Snapshot{Counters: map[string]int64{}, Distributions: map[string]protocol.Distribution{}}
	counters := map[string]bool{}
	dists := map[string]bool{}
	for _, s := range have {
		for k := range s.Counters {
			counters[k] = true
		}
		for k := range s.Distributions {
			dists[k] = true
		}
	}
	for _, k := range slices.Sorted(maps.Keys(counters)) {
		var sum float64
		for _, s := range have {
			sum += float64(s.Counters[k])
		}
		out.Counters[k] = int64(sum/n + 0.5)
	}
	for _, k := range slices.Sorted(maps.Keys(dists)) {
		var d protocol.Distribution
		var count float64
		k2 := 0
		for _, s := range have {
			x, ok := s.Distributions[k]
			if !ok {
				continue
			}
			k2++
			count += float64(x.Count)
			d.Mean += x.Mean
			d.P50 += x.P50
			d.P90 += x.P90
			d.P99 += x.P99
		}
		f := float64(k2)
		out.Distributions[k] = protocol.Distribution{Count: int64(count/n + 0.5), Mean: d.Mean / f, P50: d.P50 / f, P90: d.P90 / f, P99: d.P99 / f}
	}
	return out
}

func meanConsistency(rs []*Result) string {
	verdict := ""
	for _, r := range rs {
		switch {
		case r.Consistency == "":
		case r.Consistency == "ok":
			if verdict == "" {
				verdict = "ok"
			}
		default:
			return fmt.Sprintf("seed %d: %s", r.Seed, r.Consistency)
		}
	}
	return verdict
}

func unionKeys(rs []*Result, keys func(*Result) []string) []string {
	set := map[string]bool{}
	for _, r := range rs {
		for _, k := range keys(r) {
			set[k] = true
		}
	}
	return slices.Sorted(maps.Keys(set))
}

func mapKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}
