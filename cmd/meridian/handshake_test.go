package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// bench and kv with a configuration that shares the running cluster's name but not its
// protocol or options are refused, naming both: bench with a crdb configuration against a k2
// cluster printed "crdb … serializable: valid", having checked k2's histories against crdb's
// weaker model.
func TestClientsRefusedByAClusterConfiguredOtherwise(t *testing.T) {
	dir := t.TempDir()
	config := freeClusterConfig(t, dir)
	data := filepath.Join(dir, "data")
	raw, err := os.ReadFile(config)
	if err != nil {
		t.Fatal(err)
	}
	text := string(raw)
	i := strings.Index(text, "[[node]]\nname = \"sh-oracle\"")
	if i < 0 {
		t.Fatal("no oracle node in the default configuration")
	}
	// K2 hands out no timestamp until an oracle reply arrives within ttl of its request. On a
	// machine loaded by other runs replies come late, and this test is about handshakes, not
	// speed: its batches live ten times the shipped 5ms.
	k2 := strings.Replace(text, `ttl = "5ms"`, `ttl = "50ms"`, 1)
	if k2 == text {
		t.Fatal("no ttl = \"5ms\" in the default configuration's [options.k2]")
	}
	writeFiles(t, dir, map[string]string{
		"cluster.toml": k2,
		"crdb.toml":    strings.Replace(text[:i], `protocol = "k2"`, `protocol = "crdb"`, 1),
		"ttl.toml":     strings.Replace(k2, `ttl = "50ms"`, `ttl = "2ms"`, 1),
	})
	if out, errs, code := runFor(t, 60*time.Second, "cluster", "start", "--config", config, "--data-dir", data); code != 0 {
		t.Fatalf("cluster start: exit %d\n%s%s", code, out, errs)
	}
	t.Cleanup(func() { _, _, _ = runFor(t, 60*time.Second, "cluster", "stop", "--config", config, "--data-dir", data) })
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "--config", filepath.Join(dir, "crdb.toml"), "--duration", "1s"}, "node sh-1 runs protocol k2 but the client's configuration has crdb"},
		{[]string{"kv", "get", "k", "--config", filepath.Join(dir, "crdb.toml")}, "node sh-1 runs protocol k2 but the client's configuration has crdb"},
		{[]string{"bench", "--config", filepath.Join(dir, "ttl.toml"), "--duration", "1s"}, "node sh-1 has option ttl 50ms but the client's configuration has 2ms"},
	} {
		out, errs, code := runFor(t, 60*time.Second, c.args...)
		line := strings.TrimSpace(errs)
		if code == 0 || out != "" || strings.Contains(line, "\n") || !strings.Contains(line, c.want) {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want one line mentioning %q", strings.Join(c.args, " "), code, out, errs, c.want)
		}
	}
	// The cluster's own configuration still works.
	if out, errs, code := runFor(t, 60*time.Second, "kv", "put", "k", "v", "--config", config); code != 0 {
		t.Fatalf("kv put with the cluster's configuration: exit %d\n%s%s", code, out, errs)
	}
}
