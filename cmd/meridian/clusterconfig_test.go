package main

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/meridiandb/meridian/configs"
)

// threeRegions is a topology file with the regions of the k2-3region preset.
const threeRegions = `name = "three"
intra_rtt_ms = 0.2
[[region]]
name = "SH"
rtt_ms = { BJ = 27.3, SG = 69.3 }
[[region]]
name = "BJ"
rtt_ms = { SG = 77.6 }
[[region]]
name = "SG"
`

// relativeConfig rewrites a configuration's text so that its topology is the file
// topo/three.toml, its data directory ../data, and sh-1's data directory nodes/sh-1: paths
// relative to the configuration's directory, as Load resolves them.
func relativeConfig(t *testing.T, text string) string {
	t.Helper()
	for _, r := range []struct{ re, with string }{
		{`(?m)^topology = .*$`, `topology = "topo/three.toml"`},
		{`(?m)^data_dir = .*$`, `data_dir = "../data"`},
		{`(?m)^name = "sh-1"$`, "name = \"sh-1\"\ndata_dir = \"nodes/sh-1\""},
	} {
		re := regexp.MustCompile(r.re)
		if !re.MatchString(text) {
			t.Fatalf("no line matches %s", r.re)
		}
		text = re.ReplaceAllLiteralString(text, r.with)
	}
	return text
}

// The servers of cluster start run a copy of the configuration in the data directory, and a
// configuration's relative paths are relative to its file's directory. The copy was the text
// verbatim: its servers looked for a topology file beside the configuration in the data
// directory (no node started: "topology file: open <data>/topo/three.toml: no such file or
// directory"), and with a preset topology sh-1 stored its data in <data>/nodes/sh-1 while
// cluster start had checked <config dir>/nodes/sh-1, the directory meridian server run by hand
// uses too.
func TestClusterStartResolvesPathsAgainstTheConfigsDirectory(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "conf")
	if err := os.MkdirAll(filepath.Join(conf, "topo"), 0o755); err != nil {
		t.Fatal(err)
	}
	config := freeClusterConfig(t, conf)
	text, err := os.ReadFile(config)
	if err != nil {
		t.Fatal(err)
	}
	writeFiles(t, conf, map[string]string{"cluster.toml": relativeConfig(t, string(text)), "topo/three.toml": threeRegions})
	data := filepath.Join(dir, "data")
	t.Cleanup(func() {
		_, _, _ = runFor(t, 60*time.Second, "cluster", "stop", "--config", config)
		killServersOf(t, data)
	})
	out, errs, code := runFor(t, 60*time.Second, "cluster", "start", "--config", config)
	if code != 0 || !strings.Contains(out, "data and logs in "+data) {
		t.Fatalf("cluster start: exit %d, stderr %q\n%s", code, errs, out)
	}
	if _, errs, code := runFor(t, 30*time.Second, "kv", "put", "--config", config, "k", "v"); code != 0 {
		t.Errorf("kv put: exit %d, stderr %q", code, errs)
	}
	if _, err := os.Stat(filepath.Join(conf, "nodes", "sh-1", identityFile)); err != nil {
		t.Errorf("sh-1 has no store in the directory cluster start checked: %v", err)
	}
	if _, err := os.Stat(filepath.Join(data, "nodes")); err == nil {
		t.Errorf("a node stored its data in %s", filepath.Join(data, "nodes"))
	}
	if out, errs, code := runFor(t, 60*time.Second, "cluster", "stop", "--config", config); code != 0 || !strings.Contains(out, "sh-1         stopped") {
		t.Errorf("cluster stop: exit %d, stderr %q\n%s", code, errs, out)
	}
}

// A server loading the copy cluster start writes gets the configuration cluster start
// resolved, whatever the form of the file and wherever the data directory.
func TestServerConfigResolvesAsTheOriginal(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "conf")
	if err := os.MkdirAll(filepath.Join(conf, "topo"), 0o755); err != nil {
		t.Fatal(err)
	}
	inline := `protocol = "crdb"
topology = "topo/three.toml"
node = [
  { name = "sh-1", region = "SH", roles = ["data"], addr = "127.0.0.1:17301", data_dir = "n/sh" },
  { name = "bj-1", region = "BJ", roles = ["data"], addr = "127.0.0.1:17302" },
  { name = "sg-1", region = "SG", roles = ["data"], addr = "127.0.0.1:17303", data_dir = "meridian-data/sg" },
]
`
	writeFiles(t, conf, map[string]string{
		"relative.toml":   relativeConfig(t, configs.Default),
		"inline.toml":     inline,
		"topo/three.toml": threeRegions,
	})
	for _, c := range []struct{ name, config, dataDir string }{
		{"relative paths", filepath.Join(conf, "relative.toml"), ""},
		{"relative paths, --data-dir", filepath.Join(conf, "relative.toml"), filepath.Join(dir, "elsewhere")},
		{"inline node tables", filepath.Join(conf, "inline.toml"), ""},
		{"inline node tables, --data-dir", filepath.Join(conf, "inline.toml"), filepath.Join(dir, "other")},
		{"built-in", "", filepath.Join(dir, "builtin")},
	} {
		t.Run(c.name, func(t *testing.T) {
			want, err := (&clusterFlags{config: c.config, dataDir: c.dataDir}).locate()
			if err != nil {
				t.Fatal(err)
			}
			text, err := serverConfig(want)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(want.DataDir, 0o755); err != nil {
				t.Fatal(err)
			}
			cfgPath := filepath.Join(want.DataDir, configCopy)
			writeFiles(t, want.DataDir, map[string]string{configCopy: text})
			// As cluster start runs each server.
			got, err := (&clusterFlags{config: cfgPath, dataDir: want.DataDir}).locate()
			if err != nil {
				t.Fatalf("the servers' copy does not load: %v\n%s", err, text)
			}
			if got.DataDir != want.DataDir || !reflect.DeepEqual(got.Nodes, want.Nodes) {
				t.Errorf("servers' data directories: %s %+v, want %s %+v", got.DataDir, got.Nodes, want.DataDir, want.Nodes)
			}
			if !reflect.DeepEqual(got.Setup(), want.Setup()) {
				t.Errorf("servers' setup:\n%v\nwant\n%v", got.Setup(), want.Setup())
			}
			if got.Name != want.Name || got.Protocol.Name() != want.Protocol.Name() || got.ClientTimeout != want.ClientTimeout {
				t.Errorf("servers' cluster: %s %s %v, want %s %s %v", got.Name, got.Protocol.Name(), got.ClientTimeout,
					want.Name, want.Protocol.Name(), want.ClientTimeout)
			}
		})
	}
}

// The settings of two configuration copies are compared one by one, by name: node tables by
// their node's name, not their order; a client's own settings never; those the nodes' Setup
// compares only when the state has no Setup (written before it was recorded).
func TestCopyDiffs(t *testing.T) {
	was := `protocol = "k2"
[options.k2]
ttl = "5ms"
[client]
timeout = "10s"
[[node]]
name = "sh-1"
addr = "127.0.0.1:7301"
data_dir = "/d/sh-1"
[[node]]
name = "bj-1"
addr = "127.0.0.1:7302"
`
	now := `protocol = "k2"
node = [
  { name = "bj-1", addr = "127.0.0.1:7302", grpc_addr = "127.0.0.1:7402" },
  { name = "sh-1", addr = "127.0.0.1:7309", data_dir = "/e/sh-1" },
]
[options.k2]
ttl = "7ms"
[client]
timeout = "3s"
`
	a, err := copySettings(was)
	if err != nil {
		t.Fatal(err)
	}
	b, err := copySettings(now)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		setupKnown bool
		want       []string
	}{
		{true, []string{
			"without the node bj-1 grpc_addr 127.0.0.1:7402 this configuration adds",
			"with node sh-1 data_dir /d/sh-1, which this configuration changes to /e/sh-1",
		}},
		{false, []string{
			"without the node bj-1 grpc_addr 127.0.0.1:7402 this configuration adds",
			"with node sh-1 addr 127.0.0.1:7301, which this configuration changes to 127.0.0.1:7309",
			"with node sh-1 data_dir /d/sh-1, which this configuration changes to /e/sh-1",
			"with options.k2.ttl 5ms, which this configuration changes to 7ms",
		}},
	} {
		if got := copyDiffs(a, b, c.setupKnown); !reflect.DeepEqual(got, c.want) {
			t.Errorf("setup known %v:\n%q\nwant\n%q", c.setupKnown, got, c.want)
		}
	}
}
