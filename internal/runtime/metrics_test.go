package runtime

import (
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A node with a metrics_addr serves its protocol's counters and latencies, its transport's
// counters and the Go runtime's in Prometheus text format, and they move as transactions run:
// the counters meridian sim prints, from a real node.
func TestMetricsEndpoint(t *testing.T) {
	cfg := testConfig(t, nil)
	startCluster(t, cfg)
	n := cfg.Nodes[0]
	if n.MetricsAddr == "" {
		t.Fatal("the shipped configuration gives sh-1 no metrics_addr")
	}
	get := func(path string) string {
		t.Helper()
		resp, err := http.Get("http://" + n.MetricsAddr + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d, %v\n%s", path, resp.StatusCode, err, body)
		}
		return string(body)
	}
	scrape := func() string { return get("/metrics") }
	value := func(text, series string) float64 {
		t.Helper()
		m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` ([0-9.e+-]+)$`).FindStringSubmatch(text)
		if m == nil {
			return 0
		}
		v, err := strconv.ParseFloat(m[1], 64)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	before := scrape()
	db := dial(t, cfg, 0)
	for i := range 5 {
		if err := put(db, "metrics/k"+strconv.Itoa(i), "v"); err != nil {
			t.Fatal(err)
		}
	}
	after := scrape()
	for _, want := range []string{
		`meridian_node_info{node="sh-1",protocol="k2",region="SH",roles="data"} 1`,
		"go_goroutines ", "process_resident_memory_bytes ", "meridian_clients 1",
		`meridian_protocol_latency_seconds_count{name="phase.commit"}`,
	} {
		if !strings.Contains(after, want) {
			t.Errorf("no %q in the scrape:\n%s", want, after)
		}
	}
	commits := `meridian_protocol_events_total{name="commit"}`
	if got := value(after, commits) - value(before, commits); got < 5 {
		t.Errorf("%s went up by %v over 5 committed puts", commits, got)
	}
	if value(after, "meridian_transport_received_total") <= value(before, "meridian_transport_received_total") {
		t.Error("meridian_transport_received_total did not move")
	}
	if missed := value(after, "meridian_metrics_snapshot_missed_total"); missed != 0 {
		t.Errorf("%v scrapes missed the protocol's metrics on an idle node", missed)
	}
	// The node's own goroutines, profiled where it runs.
	if g := get("/debug/pprof/goroutine?debug=1"); !strings.Contains(g, "runtime.(*Server)") {
		t.Errorf("/debug/pprof/goroutine shows none of the node's goroutines:\n%.2000s", g)
	}
}

// Scrapes of a node whose event loop is stuck give up after their wait, and share one queued
// read rather than each queue another; once the loop moves, that read completes and the next
// scrape gets fresh metrics.
func TestMetricsSnapshotWhileLoopBusy(t *testing.T) {
	cfg := testConfig(t, nil)
	s := startCluster(t, cfg)[0]
	release := make(chan struct{})
	s.post(event{fn: func() { <-release }})
	var flights []*snapshotFlight
	for range 3 {
		if _, ok := s.protocolSnapshot(20 * time.Millisecond); ok {
			t.Fatal("a scrape read the protocol's metrics while the event loop was stuck")
		}
		s.snapMu.Lock()
		flights = append(flights, s.snapFlight)
		s.snapMu.Unlock()
	}
	if flights[0] == nil || flights[1] != flights[0] || flights[2] != flights[0] {
		t.Fatalf("reads queued by three scrapes: %p %p %p; want one, shared", flights[0], flights[1], flights[2])
	}
	close(release)
	<-flights[0].done
	if snap, ok := s.protocolSnapshot(2 * time.Second); !ok || snap.Counters == nil {
		t.Fatalf("after the loop moved: %v, %v", snap, ok)
	}
}
