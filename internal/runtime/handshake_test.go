package runtime

import (
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meridiandb/meridian/client"
	"github.com/meridiandb/meridian/internal/runtime/frame"
)

// variant parses cfg's own text (same ports) after edit, as a client with another copy of the
// configuration would.
func variant(t *testing.T, cfg *Config, edit func(string) string) *Config {
	t.Helper()
	text := edit(cfg.Text)
	if text == cfg.Text {
		t.Fatal("edit changed nothing")
	}
	dir := t.TempDir()
	v, err := Parse(filepath.Join(dir, "cluster.toml"), text, dir)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func replace(from, to string) func(string) string {
	return func(s string) string { return strings.Replace(s, from, to, 1) }
}

// A client whose configuration names the cluster but another protocol, other options or
// another layout is refused with one line naming both sides: a bench run with a crdb
// configuration against a k2 cluster reported "crdb", checked k2's histories against crdb's
// weaker model and called them valid. Per-process settings may differ.
func TestHandshakeRefusesAnotherConfiguration(t *testing.T) {
	cfg := testConfig(t, nil)
	startCluster(t, cfg)
	withoutOracles := func(s string) string {
		i := strings.Index(s, "[[node]]\nname = \"sh-oracle\"")
		if i < 0 {
			t.Fatal("no oracle node in the default configuration")
		}
		return strings.Replace(s[:i], `protocol = "k2"`, `protocol = "crdb"`, 1)
	}
	for _, tc := range []struct {
		name string
		opts []client.DialOption
		want string // "" for a connection that must be accepted
	}{
		{"same configuration", cfg.DialOptions(), ""},
		{"name only", []client.DialOption{client.WithCluster(cfg.Name)}, ""},
		// client.Dial without WithCluster names no cluster, and gRPC serves a session that
		// names none: over TCP it was refused with `this is cluster "k2-3region", not ""`.
		{"nothing", nil, ""},
		{"protocol without a name", []client.DialOption{client.WithProtocol("k2")}, ""},
		{"another protocol without a name", []client.DialOption{client.WithProtocol("crdb")},
			"node sh-1 runs protocol k2 but the client's configuration has crdb"},
		{"another cluster", []client.DialOption{client.WithCluster("elsewhere")},
			fmt.Sprintf(`this is cluster %q, not "elsewhere"`, cfg.Name)},
		{"another cluster, same configuration", append(cfg.DialOptions(), client.WithCluster("elsewhere")),
			fmt.Sprintf(`this is cluster %q, not "elsewhere"`, cfg.Name)},
		{"name and protocol", []client.DialOption{client.WithCluster(cfg.Name), client.WithProtocol("k2")}, ""},
		{"another timeout", variant(t, cfg, replace(`timeout = "10s"`, `timeout = "3s"`)).DialOptions(), ""},
		{"another data directory", variant(t, cfg, replace(`data_dir = "meridian-data"`, `data_dir = "elsewhere"`)).DialOptions(), ""},
		{"crdb", variant(t, cfg, withoutOracles).DialOptions(),
			"node sh-1 runs protocol k2 but the client's configuration has crdb"},
		{"spanner", variant(t, cfg, replace(`protocol = "k2"`, `protocol = "spanner"`)).DialOptions(),
			"node sh-1 runs protocol k2 but the client's configuration has spanner"},
		{"protocol only", []client.DialOption{client.WithCluster(cfg.Name), client.WithProtocol("crdb")},
			"node sh-1 runs protocol k2 but the client's configuration has crdb"},
		{"an option", variant(t, cfg, replace(`ttl = "5ms"`, `ttl = "2ms"`)).DialOptions(),
			"node sh-1 has option ttl 5ms but the client's configuration has 2ms"},
		{"epsilon", variant(t, cfg, replace(`epsilon = "1ms"`, `epsilon = "2ms"`)).DialOptions(),
			"node sh-1 has epsilon 1ms but the client's configuration has 2ms"},
		{"shards", variant(t, cfg, replace(`shards_per_node = 4`, `shards_per_node = 2`)).DialOptions(),
			"node sh-1 has placement 4 shards per node, replication primary, 0 backups but the client's configuration has 2 shards per node"},
		{"latency", variant(t, cfg, replace(`scale = 0.02`, `scale = 0.5`)).DialOptions(),
			"node sh-1 has latency emulation on, scale 0.02 but the client's configuration has on, scale 0.5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr, err := client.Dial(cfg.Nodes[0].Addr, append(tc.opts, client.WithRequestTimeout(5*time.Second))...)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				tr.Close()
				return
			}
			if err == nil {
				tr.Close()
				t.Fatalf("accepted; want a refusal containing %q", tc.want)
			}
			if msg := err.Error(); !strings.Contains(msg, tc.want) || strings.Contains(msg, "\n") {
				t.Fatalf("got %q, want one line containing %q", msg, tc.want)
			}
		})
	}
}

// A node refuses a peer that runs another protocol or other settings, or that does not say:
// the two would misread each other's messages.
func TestHandshakeRefusesAnotherNode(t *testing.T) {
	cfg := testConfig(t, nil)
	startCluster(t, cfg)
	other := variant(t, cfg, replace(`shards_per_node = 4`, `shards_per_node = 2`))
	for _, tc := range []struct {
		name  string
		hello frame.Hello
	}{
		{"another protocol", frame.Hello{From: 1, Cluster: cfg.Name, Protocol: "spanner", Setup: cfg.Setup()}},
		{"no protocol", frame.Hello{From: 1, Cluster: cfg.Name, Setup: cfg.Setup()}},
		{"no settings", frame.Hello{From: 1, Cluster: cfg.Name, Protocol: "k2"}},
		// Only a client may leave the cluster out; a node always names its own.
		{"no cluster", frame.Hello{From: 1, Protocol: "k2", Setup: cfg.Setup()}},
		{"another cluster", frame.Hello{From: 1, Cluster: "elsewhere", Protocol: "k2", Setup: cfg.Setup()}},
		{"other settings", frame.Hello{From: 1, Cluster: cfg.Name, Protocol: "k2", Setup: other.Setup()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("tcp", cfg.Nodes[0].Addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if err := frame.WriteMsg(c, 0, &tc.hello); err != nil {
				t.Fatal(err)
			}
			// A refused peer's connection is closed; an accepted one stays open (and silent,
			// since nodes answer peers on connections of their own).
			_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
			_, err = c.Read(make([]byte, 1))
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatal("the node kept the connection open")
			}
			if err != io.EOF && !errors.Is(err, net.ErrClosed) && !strings.Contains(err.Error(), "reset") {
				t.Fatalf("read after hello: %v, want the connection closed", err)
			}
		})
	}
}
