package bench

import (
	"strings"
	"testing"

	"github.com/meridiandb/meridian/internal/protocol"
)

func TestMeanResult(t *testing.T) {
	a := &Result{Protocol: "k2", Workload: "tpcc", Clients: 10, Seed: 1, Consistency: "ok",
		Summary: Summary{Committed: 100, Aborted: 25, Throughput: 1000, AbortRate: 0.2, Latency: Latency{P90: 10, Max: 50},
			AbortsByCause: map[string]int64{"read-watermark": 20},
			PerType:       map[string]TypeStats{"new-order": {Committed: 40, Latency: Latency{P90: 12}}}},
		ProtocolMetrics: &protocol.Snapshot{Counters: map[string]int64{"pushws": 4},
			Distributions: map[string]protocol.Distribution{"phase.read": {Count: 10, P90: 1}}}}
	b := &Result{Protocol: "k2", Workload: "tpcc", Clients: 10, Seed: 2, Consistency: "ok",
		Summary: Summary{Committed: 200, Aborted: 133, Throughput: 2000, AbortRate: 0.4, Latency: Latency{P90: 30, Max: 20},
			AbortsByCause: map[string]int64{"read-watermark": 40, "timeout": 2},
			PerType:       map[string]TypeStats{"payment": {Committed: 50, Latency: Latency{P90: 8}}}},
		ProtocolMetrics: &protocol.Snapshot{Counters: map[string]int64{"pushws": 8},
			Distributions: map[string]protocol.Distribution{"phase.read": {Count: 30, P90: 3}}}}
	m, err := MeanResult([]*Result{a, b})
	if err != nil {
		t.Fatal(err)
	}
	// Abort rate pooled over the attempts: (25+133)/(100+25+200+133) = 0.345.
	if m.Throughput != 1500 || m.Committed != 150 || m.AbortRate < 0.3449 || m.AbortRate > 0.3451 {
		t.Errorf("throughput %v, committed %d, abort rate %v; want 1500, 150, 0.345", m.Throughput, m.Committed, m.AbortRate)
	}
	if m.Latency.P90 != 20 || m.Latency.Max != 50 {
		t.Errorf("latency %+v, want p90 20 and max 50", m.Latency)
	}
	if m.AbortsByCause["read-watermark"] != 30 || m.AbortsByCause["timeout"] != 1 {
		t.Errorf("aborts by cause %v", m.AbortsByCause)
	}
	// A type only one run saw keeps that run's latency rather than being halved.
	if got := m.PerType["new-order"].Latency.P90; got != 12 {
		t.Errorf("new-order p90 %v, want 12", got)
	}
	if got := m.ProtocolMetrics.Counters["pushws"]; got != 6 {
		t.Errorf("pushws counter %d, want 6", got)
	}
	if d := m.ProtocolMetrics.Distributions["phase.read"]; d.Count != 20 || d.P90 != 2 {
		t.Errorf("phase.read %+v, want count 20 and p90 2", d)
	}
	// A run that committed nothing has no latency to average.
	idle := &Result{Protocol: "k2", Workload: "tpcc", Clients: 10, Summary: Summary{Aborted: 5}}
	if m, _ := MeanResult([]*Result{a, idle}); m.Latency.P90 != 10 {
		t.Errorf("p90 with an idle run %v, want 10 (the idle run left out)", m.Latency.P90)
	}
	if m.Consistency != "ok" {
		t.Errorf("consistency %q, want ok", m.Consistency)
	}
	b.Consistency = "tpcc check: warehouse 1: row missing"
	if m, _ := MeanResult([]*Result{a, b}); !strings.HasPrefix(m.Consistency, "seed 2: ") {
		t.Errorf("a failing seed must fail the mean, got %q", m.Consistency)
	}
	b.Protocol = "crdb"
	if _, err := MeanResult([]*Result{a, b}); err == nil {
		t.Error("averaging two protocols' runs must fail")
	}
	if _, err := MeanResult(nil); err == nil {
		t.Error("averaging nothing must fail")
	}
}
