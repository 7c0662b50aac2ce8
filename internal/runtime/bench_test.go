package runtime

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/meridiandb/meridian/client"
	"github.com/meridiandb/meridian/configs"
	"github.com/meridiandb/meridian/internal/bench"
	"github.com/meridiandb/meridian/internal/clock"
	"github.com/meridiandb/meridian/internal/node"
	"github.com/meridiandb/meridian/internal/protocol"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/wire"
)

// tsBench is a protocol for measuring the oracle over the real transport: a client request with
// Key = N asks a data node to obtain N timestamps from its region's oracle through a K2-TB
// Batcher, keeping `window` transactions waiting at once; the node answers when done.
type tsBench struct{}

const tsWindow = 64

func (tsBench) Name() string                     { return "ts-bench" }
func (tsBench) Model() string                    { return "serializable" }
func (tsBench) Options() map[string]string       { return map[string]string{"batching": "true or false"} }
func (tsBench) Layout(l topo.Layout) topo.Layout { return l }
func (tsBench) NewNode(cfg node.Config) (node.Handler, error) {
	bc := clock.K2BatcherConfig(uint32(cfg.Env.Self()))
	// Loopback through goroutines and sockets takes tens of µs; a 1 ms TTL keeps batches usable.
	bc.TTL = time.Millisecond
	bc.Batching = cfg.Options["batching"] != "false"
	b, err := clock.NewBatcher(bc)
	if err != nil {
		return nil, err
	}
	return &tsNode{env: cfg.Env, b: b}, nil
}

type tsNode struct {
	env     node.Env
	b       *clock.Batcher
	waiting []int64 // start times of transactions waiting for a timestamp
	want    int
	taken   int
	client  node.ID
	req     wire.ClientRequest
}

func (n *tsNode) Handle(from node.ID, m wire.Msg) {
	switch m := m.(type) {
	case *wire.ClientRequest:
		n.want, _ = strconv.Atoi(m.Key)
		n.taken, n.client, n.req = 0, from, *m
		now := n.env.Now()
		n.waiting = n.waiting[:0]
		for i := 0; i < tsWindow; i++ {
			n.waiting = append(n.waiting, now)
		}
		n.pump()
	case *clock.TSBatchReply:
		n.b.OnReply(n.env.Now(), m)
		n.pump()
	}
}

func (n *tsNode) pump() {
	if n.want == 0 {
		return
	}
	now := n.env.Now()
	// Oldest first, as Take asks: a served transaction leaves the head, the next one joins
	// the tail.
	for n.taken < n.want {
		if _, _, ok := n.b.Take(n.waiting[0], now); !ok {
			break
		}
		n.taken++
		n.waiting = append(n.waiting[1:], now)
	}
	if n.taken >= n.want {
		n.want = 0
		n.env.Send(n.client, &wire.ClientReply{Txn: n.req.Txn, Seq: n.req.Seq, Code: wire.CodeOK})
		return
	}
	oracle := n.env.Topology().Oracle(n.env.Topology().RegionOf(n.env.Self()))
	for n.b.NeedRequest(now, len(n.waiting)) {
		n.env.Send(oracle, n.b.StartRequest(now))
	}
	if n.b.NeedPrefetch(now) { // as k2's coordinator does
		n.env.Send(oracle, n.b.StartRequest(now))
	}
}

func init() { protocol.Register(tsBench{}) }

func benchConfig(b *testing.B, protocolName, options string, dataNodes int) *Config {
	b.Helper()
	text := configs.Default
	text = regexp.MustCompile(`(?m)^protocol = "[^"]*"`).ReplaceAllString(text, fmt.Sprintf("protocol = %q", protocolName))
	text = strings.Replace(text, `topology = "k2-3region"`, `topology = "single-dc"`, 1)
	text = strings.Replace(text, "[options]", "[options]\n"+options, 1)
	// One region: keep the first data node and oracle, renamed into it, plus extra data nodes.
	var nodes strings.Builder
	for i := 0; i < dataNodes; i++ {
		fmt.Fprintf(&nodes, "[[node]]\nname = \"d%d\"\nregion = \"DC\"\nroles = [\"data\"]\naddr = \"127.0.0.1:1\"\n\n", i)
	}
	nodes.WriteString("[[node]]\nname = \"oracle\"\nregion = \"DC\"\nroles = [\"oracle\"]\naddr = \"127.0.0.1:1\"\n")
	text = text[:strings.Index(text, "[[node]]")] + nodes.String()
	text, err := WithFreePorts(text)
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	cfg, err := Parse(filepath.Join(dir, "bench.toml"), text, dir)
	if err != nil {
		b.Fatal(err)
	}
	return cfg
}

// BenchmarkOracleTimestamps measures timestamps per second one coordinator gets from its oracle
// over loopback, with one oracle request per timestamp and with K2-TB batching.
func BenchmarkOracleTimestamps(b *testing.B) {
	for _, batching := range []bool{false, true} {
		b.Run(fmt.Sprintf("batching=%v", batching), func(b *testing.B) {
			cfg := benchConfig(b, "ts-bench", fmt.Sprintf("batching = \"%v\"", batching), 1)
			servers, err := StartAll(cfg, Options{InMemory: true})
			if err != nil {
				b.Fatal(err)
			}
			defer CloseAll(servers)
			tr, err := client.Dial(cfg.Nodes[0].Addr, client.WithCluster(cfg.Name), client.WithRequestTimeout(time.Minute))
			if err != nil {
				b.Fatal(err)
			}
			defer tr.Close()
			b.ResetTimer()
			start := time.Now()
			rep, err := tr.RoundTrip(&wire.ClientRequest{Txn: 1, Op: wire.OpGet, Key: strconv.Itoa(b.N)})
			if err != nil || rep.Code != wire.CodeOK {
				b.Fatalf("%v %v", rep, err)
			}
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "timestamps/s")
			b.ReportMetric(float64(servers[1].Stats().Received)/time.Since(start).Seconds(), "oracle-requests/s")
		})
	}
}

// BenchmarkYCSBT measures single-region YCSB-T transactions per second against real servers
// (Pebble on disk, one process) with 1 and 3 data nodes. Each iteration is a 3-second run.
// BenchmarkYCSBT runs single-region YCSB-T against real in-process servers with 1 and 3 data
// nodes; MERIDIAN_BENCH_PROTOCOL picks the protocol (default k2).
func BenchmarkYCSBT(b *testing.B) {
	proto := os.Getenv("MERIDIAN_BENCH_PROTOCOL")
	if proto == "" {
		proto = "k2"
	}
	for _, dataNodes := range []int{1, 3} {
		b.Run(fmt.Sprintf("%s/data-nodes=%d", proto, dataNodes), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				cfg := benchConfig(b, proto, "", dataNodes)
				servers, err := StartAll(cfg, Options{})
				if err != nil {
					b.Fatal(err)
				}
				p := bench.DefaultWorkloadParams("ycsbt")
				p.Keys = 100_000
				wl, err := bench.BuildWorkload(cfg.Topology, p)
				if err != nil {
					b.Fatal(err)
				}
				res, err := bench.RealRun(bench.RealConfig{Topology: cfg.Topology, Protocol: proto, Seed: 1,
					Dial: func(c topo.NodeID) (client.Transport, error) {
						return client.Dial(cfg.Nodes[c].Addr, client.WithCluster(cfg.Name))
					}}, bench.Spec{Workload: wl, ClientsPerRegion: 16, Warmup: 500 * time.Millisecond, Duration: 3 * time.Second})
				CloseAll(servers)
				if err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(res.Throughput, "txn/s")
				b.ReportMetric(res.Latency.P50, "p50-ms")
			}
		})
	}
}
