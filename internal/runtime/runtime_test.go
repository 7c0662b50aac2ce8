package runtime

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meridiandb/meridian/client"
	"github.com/meridiandb/meridian/configs"
	_ "github.com/meridiandb/meridian/internal/protocol/crdb"
	_ "github.com/meridiandb/meridian/internal/protocol/k2"
	_ "github.com/meridiandb/meridian/internal/protocol/serial"
	_ "github.com/meridiandb/meridian/internal/protocol/spanner"
	"github.com/meridiandb/meridian/internal/runtime/frame"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/wire"
)

// testConfig is the shipped default on free ports, with latencies scaled down and data in a
// temporary directory.
func testConfig(t testing.TB, edit func(string) string) *Config {
	t.Helper()
	text, err := WithFreePorts(configs.Default)
	if err != nil {
		t.Fatal(err)
	}
	text = strings.Replace(text, "scale = 1.0", "scale = 0.02", 1)
	if edit != nil {
		text = edit(text)
	}
	dir := t.TempDir()
	cfg, err := Parse(filepath.Join(dir, "cluster.toml"), text, dir)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func startCluster(t testing.TB, cfg *Config) []*Server {
	t.Helper()
	servers, err := startAllRetryingPorts(t, cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { CloseAll(servers) })
	return servers
}

// startAllRetryingPorts is StartAll, choosing cfg's ports again (in place) when one was taken:
// WithFreePorts releases the ports it chose, and before the nodes listen another process may
// take one (other test binaries' connections draw from the same range). This failed a test
// about once in 30 runs of the whole suite ("bind: address already in use").
func startAllRetryingPorts(t testing.TB, cfg *Config, opts Options) ([]*Server, error) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		servers, err := StartAll(cfg, opts)
		if err == nil || attempt == 3 || !errors.Is(err, syscall.EADDRINUSE) {
			return servers, err
		}
		text, perr := WithFreePorts(cfg.Text)
		if perr != nil {
			t.Fatal(perr)
		}
		fresh, perr := Parse(cfg.Source, text, filepath.Dir(cfg.Source))
		if perr != nil {
			t.Fatal(perr)
		}
		*cfg = *fresh
	}
}

func dial(t testing.TB, cfg *Config, node int) *client.DB {
	t.Helper()
	tr, err := client.Dial(cfg.Nodes[node].Addr, append(cfg.DialOptions(), client.WithRequestTimeout(5*time.Second))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return client.Open(tr)
}

func put(db *client.DB, k, v string) error {
	return client.RunTxn(db, client.TxnOptions{}, func(tx *client.Txn) error { return tx.Put(k, []byte(v)) })
}

func get(db *client.DB, k string) (string, error) {
	var out string
	err := client.RunTxn(db, client.TxnOptions{ReadOnly: true}, func(tx *client.Txn) error {
		v, err := tx.Get(k)
		out = string(v)
		return err
	})
	return out, err
}

func TestTransactionsAcrossRegions(t *testing.T) {
	cfg := testConfig(t, nil)
	startCluster(t, cfg)
	dbs := []*client.DB{dial(t, cfg, 0), dial(t, cfg, 1), dial(t, cfg, 2)}
	for i, db := range dbs {
		if err := put(db, fmt.Sprintf("k%d", i), fmt.Sprintf("v%d", i)); err != nil {
			t.Fatalf("put through node %d: %v", i, err)
		}
	}
	for i, db := range dbs {
		for j := range dbs {
			got, err := get(db, fmt.Sprintf("k%d", j))
			if err != nil || got != fmt.Sprintf("v%d", j) {
				t.Fatalf("node %d reads k%d = %q, %v; want v%d", i, j, got, err, j)
			}
		}
	}
	if _, err := get(dbs[1], "absent"); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("absent key: got %v, want ErrNotFound", err)
	}
}

func TestCommitsSurviveRestart(t *testing.T) {
	cfg := testConfig(t, nil)
	servers, err := startAllRetryingPorts(t, cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	db := dial(t, cfg, 1)
	for i := 0; i < 20; i++ {
		if err := put(db, fmt.Sprintf("d%d", i), fmt.Sprint(i)); err != nil {
			t.Fatal(err)
		}
	}
	CloseAll(servers)
	startCluster(t, cfg)
	db = dial(t, cfg, 2)
	for i := 0; i < 20; i++ {
		if got, err := get(db, fmt.Sprintf("d%d", i)); err != nil || got != fmt.Sprint(i) {
			t.Fatalf("after restart d%d = %q, %v; want %d", i, got, err, i)
		}
	}
}

func TestConfigErrorsNameTheLine(t *testing.T) {
	base := configs.Default
	tests := []struct {
		name, from, to, want string
	}{
		{"unknown protocol", `protocol = "k2"`, `protocol = "nope"`, `:6: unknown protocol "nope"`},
		{"unknown region", `region = "BJ"`, `region = "XX"`, `:40: node bj-1: unknown region "XX"`},
		{"bad role", `roles = ["oracle"]`, `roles = ["clock"]`, `:56: node sh-oracle: unknown role "clock"`},
		{"duplicate address", `addr = "127.0.0.1:7302"`, `addr = "127.0.0.1:7301"`, `:40: node bj-1: address 127.0.0.1:7301 already used by node sh-1`},
		{"bad port", `addr = "127.0.0.1:7303"`, `addr = "127.0.0.1:99999"`, `:48: node sg-1: address "127.0.0.1:99999"`},
		{"metrics address taken", `metrics_addr = "127.0.0.1:7502"`, `metrics_addr = "127.0.0.1:7402"`, `:40: node bj-1: address 127.0.0.1:7402 already used by node bj-1`},
		{"bad metrics address", `metrics_addr = "127.0.0.1:7503"`, `metrics_addr = "port 9"`, `:48: node sg-1: address "port 9"`},
		{"bad epsilon", `epsilon = "1ms"`, `epsilon = "soon"`, `:9: epsilon "soon"`},
		{"unknown setting", `[latency]`, "[latency]\nspeed = 3", `unknown setting "latency.speed"`},
		{"syntax", `name = "k2-3region"`, `name = `, `:5:`},
		{"unknown option", `[options] `, "[options]\ncolour = \"blue\"", `:12: protocol k2: unknown option "colour"`},
		{"bad option value", `[options] `, "[options]\nmutant = \"nope\"", `:12: protocol k2: option mutant=nope`},
		{"oracles for a protocol without", `protocol = "k2"`, `protocol = "crdb"`, `:56: node sh-oracle: protocol crdb runs no oracle nodes`},
		{"NaN latency scale", `scale = 1.0`, `scale = nan`, `:26: latency scale NaN: want 0..100`},
		{"epsilon of millions of hours", `epsilon = "1ms"`, `epsilon = "2000000h"`, `:9: epsilon "2000000h": want a duration from 0 to 100s`},
		{"client timeout of millions of hours", `timeout = "10s"`, `timeout = "2000000h"`, `:29: client timeout "2000000h": want a positive duration up to 1h`},
		{"client timeout past an hour", `timeout = "10s"`, `timeout = "61m"`, `:29: client timeout "61m": want a positive duration up to 1h`},
		{"option duration of millions of hours", `ttl = "5ms"`, `ttl = "2000000h"`, `:18: protocol k2: option ttl=2000000h: want a duration from 0 to 1000h`},
		{"option set both ways", `[options] `, "[options]\nttl = \"2ms\"", `:19: option ttl is set both in [options] and in [options.k2]: keep one`},
		{"options of an unknown protocol", `[options.k2]`, `[options.k3]`, `:13: [options.k3]: unknown protocol "k3"`},
		{"option not a string", `ttl = "5ms"`, `ttl = 5`, `:18: option ttl in [options.k2]: want a quoted string`},
		{"unknown option in the protocol's table", `ttl = "5ms"`, `colour = "blue"`, `:18: [options.k2]: protocol k2 has no option "colour"`},
		{"unknown option in a dotted key", `[options] `, "[options]\nk2.colour = \"blue\"", `:12: [options.k2]: protocol k2 has no option "colour"`},
		{"unknown option in another protocol's table", `[options.k2]`, "[options.crdb]\ncolour = \"blue\"\n[options.k2]",
			`:14: [options.crdb]: protocol crdb has no option "colour" (known: `},
		{"option not a string in another protocol's table", `[options.k2]`, "[options.crdb]\ngc-ttl = 5\n[options.k2]",
			`:14: option gc-ttl in [options.crdb]: want a quoted string`},
		{"backups under default replication", `replication = "primary"      #`, `backups = 1 #`,
			`:22: backups = 1 needs replication = "backups" (replication is "primary")`},
		{"backups under all-regions", `replication = "primary"      #`, "replication = \"all-regions\"\nbackups = 1 #",
			`:23: backups = 1 needs replication = "backups" (replication is "all-regions")`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			text := strings.Replace(base, tc.from, tc.to, 1)
			if text == base {
				t.Fatalf("edit %q not found in the default config", tc.from)
			}
			_, err := Parse("c.toml", text, "")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
	if _, err := Parse("c.toml", base, ""); err != nil {
		t.Fatalf("the shipped default does not parse: %v", err)
	}
}

// The options tables written otherwise than as tables of strings are refused with the line that
// sets them. The TOML decoder gives a map no error for a value that is not a table, so
// options = "..." and [[options]] ran the cluster on default options without a word.
func TestOptionsOtherThanTablesRefused(t *testing.T) {
	base := configs.Default
	from, to := strings.Index(base, "[options]"), strings.Index(base, "[placement]")
	if from < 0 || to < from {
		t.Fatal("no [options] ... [placement] in the default config")
	}
	head, tail := base[:from], base[to:]
	lineOf := func(text, s string) int { return strings.Count(text[:strings.Index(text, s)], "\n") + 1 }
	for _, tc := range []struct{ name, options, at, want string }{
		{"a string", "options = \"ttl=5ms\"\n", "options", "options: want a table [options]"},
		{"an integer", "options = 5\n", "options", "options: want a table [options]"},
		{"an array", "options = [\"ttl=5ms\"]\n", "options", "options: want a table [options]"},
		{"an array of tables", "[[options]]\nttl = \"5ms\"\n", "[[options]]", "options: want a table [options]"},
		// Without an [options] header the error still names the line that sets the option.
		{"only a protocol table", "[options.k2]\nttl = 5\n", "ttl", "option ttl in [options.k2]: want a quoted string"},
		{"only an inline table", "options = { k2 = { ttl = 5 } }\n", "options", "option ttl in [options.k2]: want a quoted string"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			text := head + tc.options + "\n" + tail
			want := fmt.Sprintf("c.toml:%d: %s", lineOf(text, "\n"+tc.at)+1, tc.want)
			_, err := Parse("c.toml", text, "")
			if err == nil || !strings.HasPrefix(err.Error(), want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("got %v, want one line starting %q", err, want)
			}
		})
	}
	if cfg, err := Parse("c.toml", head+"options = { k2 = { ttl = \"7ms\" } }\n\n"+tail, ""); err != nil || cfg.Options["ttl"] != "7ms" {
		t.Fatalf("inline tables: %v, options %v", err, cfg.Options)
	}
}

// A frame that does not decode is dropped and logged; the connection and the node carry on.
func TestUndecodableFrameIsDropped(t *testing.T) {
	cfg := testConfig(t, nil)
	servers := startCluster(t, cfg)
	c, err := net.Dial("tcp", cfg.Nodes[0].Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// Pose as node 1, then send garbage: an unknown kind, a bad version, a corrupt body.
	if err := frame.WriteMsg(c, 0, &frame.Hello{From: 1, Cluster: cfg.Name, Protocol: cfg.Protocol.Name(), Setup: cfg.Setup()}); err != nil {
		t.Fatal(err)
	}
	for _, junk := range [][]byte{{wire.Version, 0xff, 0xff, 0xa0}, {99, 0, 1}, {wire.Version, 0, 1, 0xff, 0x00}} {
		if err := frame.Write(c, 0, junk); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for servers[0].Stats().DecodeErrors < 3 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := servers[0].Stats().DecodeErrors; got != 3 {
		t.Fatalf("decode errors = %d, want 3", got)
	}
	if err := put(dial(t, cfg, 0), "after", "junk"); err != nil {
		t.Fatalf("node stopped serving after junk: %v", err)
	}
}

// A client request the node cannot decode (a key that is not UTF-8, sent by a client that does
// not check, or a batch far over its bound) is answered with a bad-argument error: it used to be dropped, and the client waited
// out its timeout and reported the outcome unknown.
func TestUndecodableClientRequestAnswered(t *testing.T) {
	cfg := testConfig(t, nil)
	startCluster(t, cfg)
	c, err := net.Dial("tcp", cfg.Nodes[0].Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	read := func() wire.Msg {
		t.Helper()
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, payload, err := frame.Read(r)
		if err != nil {
			t.Fatalf("no answer: %v", err)
		}
		m, err := wire.Decode(payload)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	if err := frame.WriteMsg(c, 0, &frame.Hello{Client: true, Cluster: cfg.Name}); err != nil {
		t.Fatal(err)
	}
	wel, ok := read().(*frame.Welcome)
	if !ok || wel.Error != "" {
		t.Fatalf("welcome: %+v", wel)
	}
	for seq, req := range []*wire.ClientRequest{
		{Op: wire.OpPut, Key: "bad\xff", Value: []byte("v")},
		{Op: wire.OpBatch, Batch: []wire.BatchOp{{Op: wire.OpGet, Key: "a"}, {Op: wire.OpGet, Key: "\xfe"}}},
		{Op: wire.OpGet, Key: "k", Label: "\xc3("},
	} {
		req.Txn, req.Seq = 7, uint32(seq)
		if err := frame.WriteMsg(c, wel.Node, req); err != nil {
			t.Fatal(err)
		}
		rep, ok := read().(*wire.ClientReply)
		if !ok || rep.Txn != 7 || rep.Seq != uint32(seq) || rep.Code != wire.CodeBadArgument || !strings.Contains(rep.Error, "UTF-8") {
			t.Fatalf("request %d: got %+v, want a bad-argument reply about UTF-8 for txn 7 seq %d", seq, rep, seq)
		}
	}
	// A batch of far more operations than a batch may hold is refused before they are decoded,
	// and answered as well.
	if err := frame.WriteMsg(c, wel.Node, &wire.ClientRequest{Txn: 9, Op: wire.OpBatch, Batch: make([]wire.BatchOp, 20*wire.MaxBatchOps)}); err != nil {
		t.Fatal(err)
	}
	if rep, ok := read().(*wire.ClientReply); !ok || rep.Txn != 9 || rep.Code != wire.CodeBadArgument || !strings.Contains(rep.Error, "could not decode") {
		t.Fatalf("a batch of %d operations: got %+v, want a bad-argument reply", 20*wire.MaxBatchOps, rep)
	}
	// The connection still serves.
	if err := frame.WriteMsg(c, wel.Node, &wire.ClientRequest{Txn: 8, Op: wire.OpGet, Key: "fine"}); err != nil {
		t.Fatal(err)
	}
	if rep, ok := read().(*wire.ClientReply); !ok || rep.Txn != 8 || rep.Code != wire.CodeOK {
		t.Fatalf("after the refusals: got %+v", rep)
	}
}

// Every address WithFreePorts writes is distinct: a cluster whose two nodes were given the same
// port failed to start ("address … already used by node …").
func TestWithFreePortsDistinct(t *testing.T) {
	var in strings.Builder
	for i := range 300 {
		fmt.Fprintf(&in, "addr%d = \"127.0.0.1:7%03d\"\n", i, i)
	}
	out, err := WithFreePorts(in.String())
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		_, addr, _ := strings.Cut(line, " = ")
		if seen[addr] {
			t.Fatalf("address %s given twice", addr)
		}
		seen[addr] = true
	}
	if len(seen) != 300 {
		t.Fatalf("%d addresses, want 300", len(seen))
	}
}

// TestSupersededPeerConnectionDropped: once a peer's newer connection is accepted, a frame that
// arrives on its older one is dropped and that connection closed, so a peer's messages are never
// taken out of order across a reconnection (the older frame would land after the newer ones).
func TestSupersededPeerConnectionDropped(t *testing.T) {
	cfg := testConfig(t, nil)
	servers := startCluster(t, cfg)
	// Posing as an oracle of another region, which never sends node 0 anything of its own, so
	// node 0 receives only the test's frames.
	from := -1
	for i, n := range cfg.Nodes {
		if n.Roles == topo.RoleOracle && n.Region != cfg.Nodes[0].Region {
			from = i
		}
	}
	if from < 0 {
		t.Fatal("the default cluster has no oracle outside node 0's region")
	}
	hello := &frame.Hello{From: topo.NodeID(from), Cluster: cfg.Name, Protocol: cfg.Protocol.Name(), Setup: cfg.Setup()}
	// A message node 0's protocol takes from a peer and does nothing visible with.
	msg, err := wire.Encode(&wire.ClientReply{Txn: 1})
	if err != nil {
		t.Fatal(err)
	}
	connect := func() net.Conn {
		t.Helper()
		c, err := net.Dial("tcp", cfg.Nodes[0].Addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if err := frame.WriteMsg(c, 0, hello); err != nil {
			t.Fatal(err)
		}
		return c
	}
	received := func(want uint64) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for servers[0].Stats().Received < want && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		if got := servers[0].Stats().Received; got != want {
			t.Fatalf("node 0 received %d messages, want %d", got, want)
		}
	}
	base := servers[0].Stats().Received
	old := connect()
	if err := frame.Write(old, 0, msg); err != nil {
		t.Fatal(err)
	}
	received(base + 1)
	current := connect()
	if err := frame.Write(current, 0, msg); err != nil {
		t.Fatal(err)
	}
	received(base + 2) // the newer connection is accepted and current
	if err := frame.Write(old, 0, msg); err != nil {
		t.Fatal(err)
	}
	_ = old.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := old.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the older connection was not closed after a frame arrived on it: %v", err)
	}
	if err := frame.Write(current, 0, msg); err != nil {
		t.Fatal(err)
	}
	received(base + 3) // the older connection's frame was not taken
}

// The test clusters' start chooses ports again when one it was given is taken by then.
func TestStartRetriesTakenPorts(t *testing.T) {
	cfg := testConfig(t, nil)
	taken, err := net.Listen("tcp", cfg.Nodes[len(cfg.Nodes)-1].Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	servers := startCluster(t, cfg)
	if len(servers) != len(cfg.Nodes) || cfg.Nodes[len(cfg.Nodes)-1].Addr == taken.Addr().String() {
		t.Fatalf("%d servers, last node at %s (taken: %s)", len(servers), cfg.Nodes[len(cfg.Nodes)-1].Addr, taken.Addr())
	}
	if err := put(dial(t, cfg, 0), "k", "v"); err != nil {
		t.Fatal(err)
	}
}
