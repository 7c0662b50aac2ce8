package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meridiandb/meridian/configs"
	mrt "github.com/meridiandb/meridian/internal/runtime"
)

// tailLine reads a log's last line from its end, whatever precedes it and however it ends.
func TestTailLine(t *testing.T) {
	dir := t.TempDir()
	long := strings.Repeat("x", 100<<10)
	for name, c := range map[string]struct{ text, want string }{
		"one line":            {"only\n", "only"},
		"no final newline":    {"a\nb", "b"},
		"blank lines at end":  {"a\nlast\n\n\n", "last"},
		"longer than a tail":  {long + "\nmeridian: bye\n", "meridian: bye"},
		"last line very long": {"a\n" + long + "\n", long[:64<<10-1]},
		"empty":               {"", ""},
	} {
		path := filepath.Join(dir, strings.ReplaceAll(name, " ", "-"))
		if err := os.WriteFile(path, []byte(c.text), 0o644); err != nil {
			t.Fatal(err)
		}
		if got, err := tailLine(path); err != nil || got != c.want {
			t.Errorf("%s: tailLine = %.40q (%d bytes), %v; want %.40q (%d bytes)", name, got, len(got), err, c.want, len(c.want))
		}
	}
}

// A crdb node whose clock is far past max-offset from its peers stops, and cluster status says
// why beside "stopped"; the other nodes run on.
func TestStatusSaysWhyANodeExited(t *testing.T) {
	text, _, ok := configs.Builtin("crdb-3region")
	if !ok {
		t.Fatal("no built-in crdb-3region")
	}
	text, err := mrt.WithFreePorts(text)
	if err != nil {
		t.Fatal(err)
	}
	skewed := strings.Replace(text, "name = \"sh-1\"\n", "name = \"sh-1\"\nclock_offset = \"2s\"\n", 1)
	if skewed == text {
		t.Fatal("no sh-1 in crdb-3region")
	}
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"cluster.toml": skewed})
	config, data := filepath.Join(dir, "cluster.toml"), filepath.Join(dir, "data")
	// sh-1 may stop before start has seen it run; what matters is what status says after.
	_, _, _ = runFor(t, 60*time.Second, "cluster", "start", "--config", config, "--data-dir", data)
	t.Cleanup(func() { _, _, _ = runFor(t, 60*time.Second, "cluster", "stop", "--data-dir", data) })
	var nodes []nodeStatus
	for deadline := time.Now().Add(30 * time.Second); ; {
		out, errs, _ := runFor(t, 30*time.Second, "cluster", "status", "--json", "--data-dir", data)
		if err := json.Unmarshal([]byte(out), &nodes); err != nil {
			t.Fatalf("status --json: %v\n%s%s", err, out, errs)
		}
		if nodes[0].State == "stopped" && nodes[0].Exited != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sh-1, its clock 2 s ahead of crdb's 500 ms max-offset, did not exit with a reason in 30 s: %+v", nodes[0])
		}
		time.Sleep(200 * time.Millisecond)
	}
	if !strings.HasPrefix(nodes[0].Exited, "clock: ") {
		t.Errorf("sh-1 exited with %q, want its clock named", nodes[0].Exited)
	}
	for _, n := range nodes[1:] {
		if n.State != "running" || n.Exited != "" {
			t.Errorf("%s: %s %q, want running", n.Name, n.State, n.Exited)
		}
	}
	out, _, code := runFor(t, 30*time.Second, "cluster", "status", "--data-dir", data)
	if code != statusSomeRunning || !strings.Contains(out, "stopped, exited: clock: ") {
		t.Errorf("status: exit %d, want %d and sh-1's reason:\n%s", code, statusSomeRunning, out)
	}
}
