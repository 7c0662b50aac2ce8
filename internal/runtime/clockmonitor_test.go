package runtime

import (
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/meridiandb/meridian/configs"
	"github.com/meridiandb/meridian/internal/runtime/frame"
	"github.com/meridiandb/meridian/internal/topo"
)

// A node stops when its clock is beyond the tolerated offset from more than half of its peers,
// by more than each measurement's uncertainty; not for one outlier peer, a tie, a measurement
// too uncertain to tell, or one too old to count. With one peer it cannot tell whose clock is
// off: it says so instead.
func TestClockMonitorVotes(t *testing.T) {
	ms := time.Millisecond
	t0 := time.Unix(1000, 0)
	const ok, warns, stops = "ok", "warns", "stops"
	for _, tc := range []struct {
		name    string
		samples []clockSample // from peers 1, 2, …, in order, as many as the node has; the last one decides
		want    string
	}{
		{"all within", []clockSample{{offset: 5 * ms, at: t0}, {offset: -30 * ms, at: t0}}, ok},
		{"one of three peers beyond", []clockSample{{offset: 90 * ms, at: t0}, {offset: 1 * ms, at: t0}, {offset: 2 * ms, at: t0}}, ok},
		{"one of two peers beyond: a tie", []clockSample{{offset: 90 * ms, at: t0}, {offset: 1 * ms, at: t0}}, ok},
		{"two of two beyond", []clockSample{{offset: 90 * ms, at: t0}, {offset: -60 * ms, at: t0}}, stops},
		{"two of three beyond", []clockSample{{offset: 1 * ms, at: t0}, {offset: 90 * ms, at: t0}, {offset: 90 * ms, at: t0}}, stops},
		{"two of two at the tolerance exactly (80% of 50 ms)", []clockSample{{offset: 40 * ms, at: t0}, {offset: -40 * ms, at: t0}}, ok},
		{"two of two beyond by less than the uncertainty", []clockSample{{offset: 90 * ms, at: t0}, {offset: 60 * ms, uncertainty: 25 * ms, at: t0}}, ok},
		{"two of two beyond by more than the uncertainty", []clockSample{{offset: 90 * ms, at: t0}, {offset: 60 * ms, uncertainty: 5 * ms, at: t0}}, stops},
		{"a peer beyond measured too long ago", []clockSample{{offset: 90 * ms, at: t0}, {offset: 1 * ms, at: t0.Add(clockSampleLife)}, {offset: 90 * ms, at: t0.Add(clockSampleLife + time.Second)}}, ok},
		{"two of three beyond, within the sample life", []clockSample{{offset: 90 * ms, at: t0}, {offset: 1 * ms, at: t0}, {offset: 90 * ms, at: t0.Add(clockSampleLife)}}, stops},
		{"the only peer beyond", []clockSample{{offset: 90 * ms, at: t0}}, warns},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newClockMonitor(50*ms, len(tc.samples), func(n topo.NodeID) string { return fmt.Sprint("n", n) })
			var stop bool
			var err error
			for i, smp := range tc.samples {
				if stop, err = c.record(topo.NodeID(i+1), smp); err != nil && i < len(tc.samples)-1 {
					t.Fatalf("decided at sample %d of %d: %v", i+1, len(tc.samples), err)
				}
			}
			got := map[bool]string{false: ok, true: warns}[err != nil]
			if stop {
				got = stops
			}
			if got != tc.want {
				t.Fatalf("record: stop %v, %v; want the node to be %s", stop, err, tc.want)
			}
			if err != nil && !strings.HasPrefix(err.Error(), "clock: ") {
				t.Fatalf("error %q does not say it is the clock", err)
			}
		})
	}
}

// With one peer a node says once per episode that it cannot tell whose clock is off.
func TestClockMonitorWarnsOncePerEpisode(t *testing.T) {
	ms := time.Millisecond
	c := newClockMonitor(50*ms, 1, func(topo.NodeID) string { return "n1" })
	t0 := time.Unix(1000, 0)
	var said []bool
	for i, off := range []time.Duration{90 * ms, 95 * ms, 1 * ms, 90 * ms} {
		stop, err := c.record(1, clockSample{offset: off, at: t0.Add(time.Duration(i) * time.Second)})
		if stop {
			t.Fatalf("sample %d: a node with one peer stopped: %v", i, err)
		}
		said = append(said, err != nil)
	}
	if want := []bool{true, false, false, true}; !slices.Equal(said, want) {
		t.Fatalf("said %v, want %v (once, then again after the clocks came back within)", said, want)
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
		if off.Abs() > 100*time.Millisecond {
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
	// The others go on (node 0 stopped before they measured its step: that a node stays up for
	// one peer beyond is TestClockMonitorVotes's).
	time.Sleep(3 * clockPingEvery)
	for _, s := range servers[1:] {
		select {
		case <-s.Done():
			t.Fatalf("node %d stopped too: %v", s.ID(), s.Err())
		default:
		}
	}
}

// A peer whose last dial failed is not pinged until it is back (it pings us, our pong redials
// it): each ping to it would be a dial refused and a dropped frame logged.
func TestUnreachablePeerNotPinged(t *testing.T) {
	cfg := testConfig(t, nil)
	s := &Server{cfg: cfg, id: 0, startMono: time.Now(), stop: make(chan struct{})}
	s.clocks = newClockMonitor(time.Second, dataPeers(cfg, 0), func(topo.NodeID) string { return "" })
	s.peers = make([]*link, len(cfg.Nodes))
	var data []topo.NodeID
	for _, n := range cfg.Nodes {
		if n.ID != 0 {
			s.peers[n.ID] = &link{s: s, peer: n.ID, q: make(chan outFrame, 4)}
			if n.Roles&topo.RoleData != 0 {
				data = append(data, n.ID)
			}
		}
	}
	if len(data) < 2 {
		t.Fatalf("the default configuration has %d other data nodes; the test needs two", len(data))
	}
	down, up := data[0], data[1]
	s.peers[down].unreachable.Store(true)
	s.pingPeers()
	if got := len(s.peers[down].q); got != 0 {
		t.Errorf("%d pings queued for an unreachable peer", got)
	}
	if got := len(s.peers[up].q); got != 1 {
		t.Errorf("%d pings queued for a reachable peer, want 1", got)
	}
	for _, n := range cfg.Nodes {
		if n.Roles&topo.RoleData == 0 && len(s.peers[n.ID].q) != 0 {
			t.Errorf("node %s, which holds no data, was pinged", n.Name)
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

// A pong's offset is the peer's reading against the midpoint of the round trip, give or take
// half of it: a ping sent 100 ms ago answered with our clock now puts the peer 50 ms ± 50 ms
// ahead (it read its clock somewhere within those 100 ms).
func TestClockPongArithmetic(t *testing.T) {
	s := &Server{startMono: time.Now().Add(-time.Second), stop: make(chan struct{})}
	s.clocks = newClockMonitor(time.Second, 2, func(topo.NodeID) string { return "" })
	sent := time.Since(s.startMono) - 100*time.Millisecond
	s.clocks.asked[1] = clockPing{at: time.Now(), sent: int64(sent)}
	s.onClockPong(1, &frame.ClockPong{Sent: int64(sent), Clock: (*env)(s).Now()})
	smp := s.clocks.samples[1]
	if (smp.offset-50*time.Millisecond).Abs() > 10*time.Millisecond || (smp.uncertainty-50*time.Millisecond).Abs() > 10*time.Millisecond {
		t.Errorf("offset %v ± %v, want 50ms ± 50ms", smp.offset, smp.uncertainty)
	}
}

// A pong that answers no ping of this life is ignored: one held in a slowed link past the node's
// restart answers a ping its previous life sent, and read against this life's start it made an
// exact clock look seconds off (a crdb node stopped for it, its clock fine).
func TestClockPongOfAnotherLifeIgnored(t *testing.T) {
	s := &Server{startMono: time.Now().Add(-time.Second), stop: make(chan struct{})}
	s.clocks = newClockMonitor(500*time.Millisecond, 4, func(topo.NodeID) string { return "" })
	// The previous life pinged at its 0.9s mark, 3.1s ago; the peer read its exact clock then.
	s.onClockPong(1, &frame.ClockPong{Sent: int64(900 * time.Millisecond), Clock: (*env)(s).Now() - int64(3100*time.Millisecond)})
	if smp, ok := s.clocks.samples[1]; ok {
		t.Errorf("a pong to another life's ping was taken: offset %v ± %v", smp.offset, smp.uncertainty)
	}
}
