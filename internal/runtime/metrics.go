package runtime

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/http/pprof"
	"slices"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/meridiandb/meridian/internal/protocol"
)

// A node with a metrics_addr serves Prometheus metrics at http://<metrics_addr>/metrics: the
// protocol's own counters and latency distributions (the ones `meridian sim` prints, which
// otherwise only a simulation could see), the transport's counters, and the Go runtime's and
// process's. The protocol's metrics belong to the event loop, so a scrape reads them there,
// between two events, and waits at most snapshotWait for its turn: a node too busy to answer
// in that time reports the rest and counts the miss.
//
// The same address serves Go's profiles under /debug/pprof/ (CPU, heap, allocations,
// goroutines, execution traces; the mutex and block profiles stay empty, their sampling off),
// so that a real node under load can be profiled where it runs, as `meridian sim --cpuprofile`
// profiles a simulated one: `go tool pprof http://<metrics_addr>/debug/pprof/profile`.

const snapshotWait = 2 * time.Second

// metricsServer is a node's metrics endpoint.
type metricsServer struct {
	srv  *http.Server
	done chan struct{}
}

func startMetrics(s *Server, addr string) (*metricsServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("node %s: metrics: %w", s.me.Name, err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		&nodeCollector{s: s})
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorLog: slogErrors{s}}))
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	m := &metricsServer{srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		if err := m.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Warn("metrics endpoint stopped", "err", err)
		}
	}()
	return m, nil
}

func (m *metricsServer) stop() {
	_ = m.srv.Close()
	<-m.done
}

// slogErrors hands promhttp's errors to the node's log.
type slogErrors struct{ s *Server }

func (l slogErrors) Println(v ...any) { l.s.log.Warn("metrics: " + fmt.Sprint(v...)) }

var (
	descInfo = prometheus.NewDesc("meridian_node_info", "The node: always 1, with its name, region, roles and protocol.",
		[]string{"node", "region", "roles", "protocol"}, nil)
	descEvents = prometheus.NewDesc("meridian_protocol_events_total",
		"The protocol's counters (what meridian sim prints as protocol metrics: aborts and commits by cause, pushes, recoveries...), by name.",
		[]string{"name"}, nil)
	descLatency = prometheus.NewDesc("meridian_protocol_latency_seconds",
		"The protocol's latency distributions (per-phase times of transactions, waits), by name; quantiles since the node started.",
		[]string{"name"}, nil)
	descMissed = prometheus.NewDesc("meridian_metrics_snapshot_missed_total",
		"Scrapes that could not read the protocol's metrics in time (the event loop too busy, or the node stopping).", nil, nil)
	descReceived    = prometheus.NewDesc("meridian_transport_received_total", "Messages delivered to the handler from the network.", nil, nil)
	descSent        = prometheus.NewDesc("meridian_transport_sent_total", "Frames written to sockets.", nil, nil)
	descDecodeErr   = prometheus.NewDesc("meridian_transport_decode_errors_total", "Frames that failed to decode (dropped).", nil, nil)
	descDropped     = prometheus.NewDesc("meridian_transport_dropped_total", "Frames dropped for want of a connection or queue space.", nil, nil)
	descClients     = prometheus.NewDesc("meridian_clients", "Client connections open now.", nil, nil)
	descClockOffset = prometheus.NewDesc("meridian_clock_offset_seconds",
		"The latest measured offset of a peer data node's clock from this node's (the peer's minus this node's), for protocols that bound the nodes' clocks (crdb's max-offset); a node stops when it is beyond 80% of the bound from most of its peers.",
		[]string{"peer"}, nil)
	descDiskSlow = prometheus.NewDesc("meridian_disk_slow_total",
		"Episodes of slow operations on the node's disk (a write, sync or file operation of its store under way longer than the slow threshold), each logged once.", nil, nil)
)

// slowDiskStore is a store that counts the episodes of slowness of its disk.
type slowDiskStore interface{ SlowDiskEpisodes() uint64 }

// nodeCollector reads a node's metrics for a scrape; scrapes may run concurrently.
type nodeCollector struct {
	s      *Server
	misses atomic.Uint64
}

func (c *nodeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descInfo, descEvents, descLatency, descMissed, descReceived, descSent, descDecodeErr, descDropped, descClients, descDiskSlow, descClockOffset} {
		ch <- d
	}
}

func (c *nodeCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.s
	ch <- prometheus.MustNewConstMetric(descInfo, prometheus.GaugeValue, 1, s.me.Name, s.cfg.Topology.Regions[s.me.Region].Name,
		s.me.Roles.String(), s.cfg.Protocol.Name())
	st := s.Stats()
	for _, v := range []struct {
		d *prometheus.Desc
		t prometheus.ValueType
		v float64
	}{{descReceived, prometheus.CounterValue, float64(st.Received)}, {descSent, prometheus.CounterValue, float64(st.Sent)},
		{descDecodeErr, prometheus.CounterValue, float64(st.DecodeErrors)}, {descDropped, prometheus.CounterValue, float64(st.Dropped)},
		{descClients, prometheus.GaugeValue, float64(st.Clients)}} {
		ch <- prometheus.MustNewConstMetric(v.d, v.t, v.v)
	}
	if st, ok := s.store.(slowDiskStore); ok {
		ch <- prometheus.MustNewConstMetric(descDiskSlow, prometheus.CounterValue, float64(st.SlowDiskEpisodes()))
	}
	offsets := s.ClockOffsets()
	for _, peer := range slices.Sorted(maps.Keys(offsets)) {
		ch <- prometheus.MustNewConstMetric(descClockOffset, prometheus.GaugeValue, offsets[peer].Seconds(), s.cfg.Nodes[peer].Name)
	}
	snap, ok := s.protocolSnapshot(snapshotWait)
	if !ok {
		c.misses.Add(1)
	}
	ch <- prometheus.MustNewConstMetric(descMissed, prometheus.CounterValue, float64(c.misses.Load()))
	for _, name := range sortedKeys(snap.Counters) {
		ch <- prometheus.MustNewConstMetric(descEvents, prometheus.CounterValue, float64(snap.Counters[name]), name)
	}
	for _, name := range sortedKeys(snap.Distributions) {
		d := snap.Distributions[name]
		sec := func(ms float64) float64 { return ms / 1000 }
		ch <- prometheus.MustNewConstSummary(descLatency, uint64(d.Count), sec(d.Mean)*float64(d.Count),
			map[float64]float64{0.5: sec(d.P50), 0.9: sec(d.P90), 0.99: sec(d.P99)}, name)
	}
}

// protocolSnapshot reads the protocol's metrics on the event loop, waiting at most wait for
// its turn; ok is false (and the snapshot empty) if the loop did not get to it in time or the
// node is stopping. Scrapes share one read in flight: each costs the loop a pass over every
// histogram, and a scrape that gave up leaves its read queued, so concurrent or repeated
// scrapes of a busy node would otherwise pile reads up in its inbox.
func (s *Server) protocolSnapshot(wait time.Duration) (protocol.Snapshot, bool) {
	src, keeps := s.h.(protocol.MetricsSource)
	if !keeps {
		return protocol.Snapshot{}, true
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	s.snapMu.Lock()
	f := s.snapFlight
	if f == nil {
		f = &snapshotFlight{done: make(chan struct{})}
		s.snapFlight = f
		s.snapMu.Unlock()
		read := event{fn: func() {
			f.snap = src.Metrics().Snapshot()
			s.snapMu.Lock()
			s.snapFlight = nil
			s.snapMu.Unlock()
			close(f.done)
		}}
		select {
		case s.inbox <- read:
		case <-timer.C:
			s.abandon(f)
			return protocol.Snapshot{}, false
		case <-s.stop:
			s.abandon(f)
			return protocol.Snapshot{}, false
		}
	} else {
		s.snapMu.Unlock()
	}
	select {
	case <-f.done:
		return f.snap, true
	case <-timer.C:
		return protocol.Snapshot{}, false
	case <-s.stop:
		return protocol.Snapshot{}, false
	}
}

// snapshotFlight is a read of the protocol's metrics queued on the event loop; done is closed
// once snap holds it.
type snapshotFlight struct {
	done chan struct{}
	snap protocol.Snapshot
}

// abandon forgets a read that never reached the loop, so the next scrape queues its own.
func (s *Server) abandon(f *snapshotFlight) {
	s.snapMu.Lock()
	if s.snapFlight == f {
		s.snapFlight = nil
	}
	s.snapMu.Unlock()
}
