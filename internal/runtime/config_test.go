package runtime

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meridiandb/meridian/configs"
)

// Two node addresses spelled differently but naming one socket are refused at load, naming
// both nodes: compared as text they passed, and the second node could not listen while its
// peers and clients reached the first. cluster start refused them itself; a server did not.
func TestNodesSharingASocketRefused(t *testing.T) {
	bj := `addr = "127.0.0.1:7302"`
	for _, tc := range []struct {
		name  string
		edits []string // from, to, from, to ...
		want  string
	}{
		{"localhost", []string{bj, `addr = "localhost:7301"`},
			`c.toml:40: node sh-1's 127.0.0.1:7301 and node bj-1's localhost:7301 are one socket on this machine: give each its own port`},
		{"localhost in capitals, fully qualified", []string{bj, `addr = "LocalHost.:7301"`},
			`:40: node sh-1's 127.0.0.1:7301 and node bj-1's LocalHost.:7301 are one socket`},
		{"a subdomain of localhost", []string{bj, `addr = "db.localhost:7301"`},
			`:40: node sh-1's 127.0.0.1:7301 and node bj-1's db.localhost:7301 are one socket`},
		{"IPv4 wildcard", []string{bj, `addr = "0.0.0.0:7301"`},
			`:40: node sh-1's 127.0.0.1:7301 and node bj-1's 0.0.0.0:7301 are one socket`},
		{"IPv6 wildcard", []string{bj, `addr = "[::]:7301"`},
			`:40: node sh-1's 127.0.0.1:7301 and node bj-1's [::]:7301 are one socket`},
		{"IPv4-mapped IPv6", []string{bj, `addr = "[::ffff:127.0.0.1]:7301"`},
			`:40: node sh-1's 127.0.0.1:7301 and node bj-1's [::ffff:127.0.0.1]:7301 are one socket`},
		{"leading zero in the port", []string{bj, `addr = "127.0.0.1:07301"`},
			`:40: node sh-1's 127.0.0.1:7301 and node bj-1's 127.0.0.1:07301 are one socket`},
		{"a gRPC address on another node's transport", []string{`grpc_addr = "127.0.0.1:7403"`, `grpc_addr = "0.0.0.0:7311"`},
			`:56: node sg-1's 0.0.0.0:7311 and node sh-oracle's 127.0.0.1:7311 are one socket`},
		{"a wildcard beside a name only DNS could know", []string{`addr = "127.0.0.1:7301"`, `addr = "db1.invalid:7301"`, bj, `addr = "0.0.0.0:7301"`},
			`:40: node sh-1's db1.invalid:7301 and node bj-1's 0.0.0.0:7301 are one socket`},
		{"one name in two cases", []string{`addr = "127.0.0.1:7301"`, `addr = "DB1.invalid:7301"`, bj, `addr = "db1.invalid:7301"`},
			`:40: node sh-1's DB1.invalid:7301 and node bj-1's db1.invalid:7301 are one socket`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse("c.toml", editDefault(t, tc.edits...), "")
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("got %v, want one line containing %q", err, tc.want)
			}
		})
	}
	// Different sockets on one port pass.
	for _, tc := range []struct {
		name  string
		edits []string
	}{
		{"another loopback address", []string{bj, `addr = "127.0.0.2:7301"`}},
		{"IPv6 loopback beside IPv4's", []string{bj, `addr = "[::1]:7301"`}},
		{"names the local resolver does not know", []string{`addr = "127.0.0.1:7301"`, `addr = "db1.invalid:7301"`, bj, `addr = "db2.invalid:7301"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Parse("c.toml", editDefault(t, tc.edits...), ""); err != nil {
				t.Fatalf("refused: %v", err)
			}
		})
	}
}

// editDefault returns the shipped default with each from replaced (once) by its to.
func editDefault(t *testing.T, edits ...string) string {
	t.Helper()
	text := configs.Default
	for i := 0; i+1 < len(edits); i += 2 {
		if !strings.Contains(text, edits[i]) {
			t.Fatalf("edit %q not found in the default config", edits[i])
		}
		text = strings.Replace(text, edits[i], edits[i+1], 1)
	}
	return text
}

// The client timeout's bound is inclusive.
func TestClientTimeoutOfAnHourAccepted(t *testing.T) {
	cfg, err := Parse("c.toml", editDefault(t, `timeout = "10s"`, `timeout = "1h"`), "")
	if err != nil || cfg.ClientTimeout != MaxClientTimeout {
		t.Fatalf("timeout = \"1h\": %v, %v", cfg, err)
	}
}

// A relative data_dir is resolved against the directory of the config file that names it, not
// the directory meridian runs in (only the built-in default, which has no file, uses that), and
// the shipped file's comment says so: it said "relative to the directory `meridian cluster
// start` runs in", which was true of the built-in copy only.
func TestDataDirRelativeToTheConfigFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sub", "cluster.toml")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(configs.Default), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	cfg, err := Load(filepath.Join("sub", "cluster.toml"))
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "sub", "meridian-data"); cfg.DataDir != want || cfg.Nodes[0].DataDir != filepath.Join(want, "sh-1") {
		t.Errorf("--config sub/cluster.toml: data_dir %s, node sh-1 %s; want %s and under it", cfg.DataDir, cfg.Nodes[0].DataDir, want)
	}
	if cfg, err = Load(""); err != nil || cfg.DataDir != "meridian-data" {
		t.Errorf("built-in default: data_dir %q, %v; want meridian-data, relative to the working directory", cfg.DataDir, err)
	}
	var comment string
	for _, l := range strings.Split(configs.Default, "\n") {
		if strings.HasPrefix(l, "data_dir") {
			_, comment, _ = strings.Cut(l, "#")
		}
	}
	if !strings.Contains(comment, "this file's directory") {
		t.Errorf("the shipped data_dir comment %q does not say it is relative to the file's directory", comment)
	}
}

// A zero written for shards_per_node is refused as out of range, as its error says: it was
// taken as "not set" and the cluster ran with the default.
func TestShardsPerNodeZeroRefused(t *testing.T) {
	_, err := Parse("c.toml", editDefault(t, `shards_per_node = 4`, `shards_per_node = 0`), "")
	if err == nil || !strings.Contains(err.Error(), "shards_per_node 0: want 1..1024") {
		t.Fatalf("shards_per_node = 0: %v, want refused", err)
	}
}

// [disk] flush_delay slows every node's disk for crash reviews: a duration up to a second;
// anything else is refused on its line.
func TestDiskFlushDelay(t *testing.T) {
	add := func(v string) string {
		return editDefault(t, "[client]\n", "[disk]\nflush_delay = "+v+"\n\n[client]\n")
	}
	cfg, err := Parse("c.toml", add(`"10ms"`), "")
	if err != nil || cfg.FlushDelay != 10*time.Millisecond {
		t.Fatalf(`flush_delay = "10ms": %v, %v`, cfg, err)
	}
	if cfg, err = Parse("c.toml", configs.Default, ""); err != nil || cfg.FlushDelay != 0 {
		t.Fatalf("default: flush delay %v, %v; want none", cfg.FlushDelay, err)
	}
	for _, bad := range []string{`"2s"`, `"-1ms"`, `"soon"`} {
		_, err := Parse("c.toml", add(bad), "")
		if err == nil || !strings.Contains(err.Error(), "flush_delay") || !strings.Contains(err.Error(), "c.toml:") {
			t.Errorf("flush_delay = %s: %v, want a refusal naming the setting and its line", bad, err)
		}
	}
}
