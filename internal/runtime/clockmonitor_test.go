package runtime

import (
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/meridiandb/meridian/configs"
	"github.com/meridiandb/meridian/internal/topo"
)

// A node stops when its clock is beyond the tolerated offset from more than half of the peers
// measured lately, by more than each measurement's uncertainty; not for one outlier peer, a
// tie, a measurement too uncertain to tell, or one too old to count.
func TestClockMonitorVotes(t *testing.T) {
	ms := time.Millisecond
	t0 := time.Unix(1000, 0)
	for _, tc := range []struct {
		name    string
		samples []clockSample // from peers 1, 2, …, in order; the last one decides
		stops   bool
	}{
		{"all within", []clockSample{{offset: 5 * ms, at: t0}, {offset: -30 * ms, at: t0}}, false},
		{"one of three peers beyond", []clockSample{{offset: 90 * ms, at: t0}, {offset: 1 * ms, at: t0}, {offset: 2 * ms, at: t0}}, false},
		{"one of two peers beyond: a tie", []clockSample{{offset: 90 * ms, at: t0}, {offset: 1 * ms, at: t0}}, false},
		{"two of two beyond", []clockSample{{offset: 90 * ms, at: t0}, {offset: -60 * ms, at: t0}}, true},
		{"two of three beyond", []clockSample{{offset: 1 * ms, at: t0}, {offset: 90 * ms, at: t0}, {offset: 90 * ms, at: t0}}, true},
		{"the only peer beyond", []clockSample{{offset: 41 * ms, at: t0}}, true},
		{"beyond by less than the uncertainty", []clockSample{{offset: 60 * ms, uncertainty: 25 * ms, at: t0}}, false},
		{"beyond by more than the uncertainty", []clockSample{{offset: 60 * ms, uncertainty: 15 * ms, at: t0}}, true},
		{"a peer beyond measured too long ago", []clockSample{{offset: 90 * ms, at: t0}, {offset: 1 * ms, at: t0.Add(clockSampleLife)}, {offset: 90 * ms, at: t0.Add(clockSampleLife + time.Second)}}, false},
		{"two of three beyond, within the sample life", []clockSample{{offset: 90 * ms, at: t0}, {offset: 1 * ms, at: t0}, {offset: 90 * ms, at: t0.Add(clockSampleLife)}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newClockMonitor(50*ms, len(tc.samples), func(n topo.NodeID) string { return fmt.Sprint("n", n) })
			var err error
			for i, smp := range tc.samples {
				if err = c.record(topo.NodeID(i+1), smp); err != nil && i < len(tc.samples)-1 {
					t.Fatalf("stopped at sample %d of %d: %v", i+1, len(tc.samples), err)
				}
			}
			if (err != nil) != tc.stops {
				t.Fatalf("record: %v, want stop %v", err, tc.stops)
			}
			if err != nil && !strings.Contains(err.Error(), "clock") {
				t.Fatalf("error %q does not say it is the clock", err)
			}
		})
	}
}

// crdbCluster starts the built-in crdb cluster in-process on free ports, with max-offset as
// given and latency scaled down, and returns its servers and configuration.
func crdbCluster(t *testing.T, maxOffset string) ([]*Server, *Config) {
	t.Helper()
	text, _, ok := configs.Builtin("crdb-3region")
	if !ok {
		t.Fatal("no built-in crdb-3region")
	}
	text, err := WithFreePorts(text)
	if err != nil {
		t.Fatal(err)
	}
	text = strings.Replace(text, "scale = 1.0", "scale = 0.1", 1)
	text = strings.Replace(text, "[options]", "[options]\nmax-offset = \""+maxOffset+"\"", 1)
	dir := t.TempDir()
	cfg, err := Parse(filepath.Join(dir, "cluster.toml"), text, dir)
	if err != nil {
		t.Fatal(err)
	}
	return startCluster(t, cfg), cfg
}

// A crdb node whose clock is stepped past max-offset stops, naming its clock, while the others
// go on; before the step every node measured the others within a few milliseconds.
func TestNodeWithAClockPastMaxOffsetStops(t *testing.T) {
	servers, _ := crdbCluster(t, "100ms")
	deadline := time.Now().Add(20 * time.Second)
	for len(servers[0].ClockOffsets()) < 2 || len(servers[1].ClockOffsets()) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("no measurements of both peers after 20 s: %v, %v", servers[0].ClockOffsets(), servers[1].ClockOffsets())
		}
		time.Sleep(50 * time.Millisecond)
	}
	for peer, off := range servers[0].ClockOffsets() {
		if off.Abs() > 20*time.Millisecond {
			t.Errorf("node 0 measured node %d's clock %v off; the clocks are one machine's", peer, off)
		}
	}
	if err := servers[0].SetClockStep(300 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	select {
	case <-servers[0].Done():
	case <-time.After(20 * time.Second):
		t.Fatal("node 0, its clock 300 ms ahead of a 100 ms max-offset, still running 20 s later")
	}
	if err := servers[0].Err(); err == nil || !strings.Contains(err.Error(), "clock") {
		t.Fatalf("node 0 stopped with %v, want an error naming its clock", err)
	}
	// The others measured node 0 beyond the bound too, but each was within it of the third.
	time.Sleep(3 * clockPingEvery)
	for _, s := range servers[1:] {
		select {
		case <-s.Done():
			t.Fatalf("node %d stopped too: %v", s.ID(), s.Err())
		default:
		}
	}
}

// A step within the tolerated share of max-offset leaves every node running, and the peers'
// metrics show it.
func TestClockWithinMaxOffsetKeepsRunning(t *testing.T) {
	servers, cfg := crdbCluster(t, "500ms")
	if err := servers[0].SetClockStep(200 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		off := servers[1].ClockOffsets()[servers[0].ID()]
		if off > 150*time.Millisecond {
			break // node 1 has measured the step
		}
		if time.Now().After(deadline) {
			t.Fatalf("node 1 never measured node 0's step: %v", servers[1].ClockOffsets())
		}
		time.Sleep(50 * time.Millisecond)
	}
	resp, err := http.Get("http://" + cfg.Nodes[1].MetricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^meridian_clock_offset_seconds\{peer="` + cfg.Nodes[0].Name + `"\} ([0-9.e+-]+)$`).FindSubmatch(body)
	if m == nil {
		t.Fatalf("no meridian_clock_offset_seconds for peer %s in node 1's metrics", cfg.Nodes[0].Name)
	}
	if v, err := strconv.ParseFloat(string(m[1]), 64); err != nil || v < 0.15 || v > 0.25 {
		t.Errorf("node 1's metric of node 0's offset: %s, want about 0.2 (s)", m[1])
	}
	time.Sleep(2 * clockPingEvery)
	for _, s := range servers {
		select {
		case <-s.Done():
			t.Fatalf("node %d stopped: %v", s.ID(), s.Err())
		default:
		}
	}
}
