// Package e2e tests Meridian end to end as users run it: the meridian binary, a local cluster of
// separate server processes on loopback ports started with `meridian cluster start`, workloads
// run with `meridian bench`, scripted transactions with `meridian kv exec`, a node killed with
// SIGKILL and restarted, and `meridian cluster stop` leaving no process behind.
//
// The protocol under test is MERIDIAN_E2E_PROTOCOL (default k2); its history must check
// valid under the model the protocol promises.
package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meridiandb/meridian/configs"
	"github.com/meridiandb/meridian/internal/history"
	mrt "github.com/meridiandb/meridian/internal/runtime"
)

// cluster is a local cluster run through the binary.
type cluster struct {
	t       *testing.T
	bin     string
	config  string
	dataDir string
}

func protocolUnderTest() string {
	if p := os.Getenv("MERIDIAN_E2E_PROTOCOL"); p != "" {
		return p
	}
	return "k2"
}

var binPath string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "meridian-e2e-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binPath = filepath.Join(dir, "meridian")
	out, err := exec.Command("go", "build", "-o", binPath, "github.com/meridiandb/meridian/cmd/meridian").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "build meridian: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// newCluster writes the shipped default configuration with free ports, the protocol under test
// and emulated latencies scaled by latencyScale, and starts it. Cleanup stops it and kills any
// node process that is left.
func newCluster(t *testing.T, latencyScale float64) *cluster {
	t.Helper()
	text, err := mrt.WithFreePorts(configs.Default)
	if err != nil {
		t.Fatal(err)
	}
	text = regexp.MustCompile(`(?m)^protocol = "[^"]*"`).ReplaceAllString(text, fmt.Sprintf("protocol = %q", protocolUnderTest()))
	text = strings.Replace(text, "scale = 1.0", fmt.Sprintf("scale = %g", latencyScale), 1)
	text = strings.Replace(text, `timeout = "10s"`, `timeout = "3s"`, 1)
	dir := t.TempDir()
	c := &cluster{t: t, bin: binPath, config: filepath.Join(dir, "cluster.toml"), dataDir: filepath.Join(dir, "data")}
	if err := os.WriteFile(c.config, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = c.run(30*time.Second, nil, "cluster", "stop")
		for _, n := range c.status() {
			if n.PID > 0 && syscall.Kill(n.PID, 0) == nil {
				_ = syscall.Kill(n.PID, syscall.SIGKILL)
				t.Errorf("node %s (pid %d) survived cluster stop", n.Name, n.PID)
			}
		}
	})
	c.mustRun(60*time.Second, nil, "cluster", "start")
	return c
}

// run runs the binary with the cluster's flags, bounded by timeout.
func (c *cluster) run(timeout time.Duration, stdin []byte, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	args = append(args, "--config", c.config)
	if args[0] == "cluster" {
		args = append(args, "--data-dir", c.dataDir)
	}
	cmd := exec.CommandContext(ctx, c.bin, args...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("meridian %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return out, nil
}

func (c *cluster) mustRun(timeout time.Duration, stdin []byte, args ...string) []byte {
	c.t.Helper()
	out, err := c.run(timeout, stdin, args...)
	if err != nil {
		c.t.Fatal(err)
	}
	return out
}

type nodeStatus struct {
	Name  string `json:"name"`
	Roles string `json:"roles"`
	PID   int    `json:"pid"`
	State string `json:"state"`
}

// status is each node's state. Cluster status exits 2 or 3 when not every node runs, and
// lists every node all the same; any other failure fails the test, since the checks that
// range over the nodes would otherwise pass having checked none.
func (c *cluster) status() []nodeStatus {
	out, err := c.run(10*time.Second, nil, "cluster", "status", "--json")
	var ee *exec.ExitError
	if err != nil && !(errors.As(err, &ee) && (ee.ExitCode() == 2 || ee.ExitCode() == 3)) {
		c.t.Errorf("cluster status --json: %v", err)
		return nil
	}
	var st []nodeStatus
	if err := json.Unmarshal(out, &st); err != nil {
		c.t.Errorf("cluster status --json: %v", err)
	}
	return st
}

type answer struct {
	Type  string            `json:"type"`
	Value []history.MicroOp `json:"value"`
	Error string            `json:"error"`
}

func (c *cluster) exec(lines []string, extra ...string) []answer {
	c.t.Helper()
	out := c.mustRun(60*time.Second, []byte(strings.Join(lines, "\n")+"\n"), append([]string{"kv", "exec"}, extra...)...)
	var answers []answer
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var a answer
		if err := json.Unmarshal(sc.Bytes(), &a); err != nil {
			c.t.Fatalf("kv exec answered %q: %v", sc.Text(), err)
		}
		answers = append(answers, a)
	}
	if len(answers) != len(lines) {
		c.t.Fatalf("kv exec answered %d lines for %d transactions:\n%s", len(answers), len(lines), out)
	}
	return answers
}

func TestKVExec(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster of processes")
	}
	c := newCluster(t, 0.05)
	tests := []struct {
		name, in string
		register bool
		want     string // the answer's type, then its value or an error substring
	}{
		{"read absent", `{"value":[["r",1,null]]}`, false, `ok [["r",1,null]]`},
		{"append then read", `{"value":[["append",1,5],["r",1,null]]}`, false, `ok [["append",1,5],["r",1,[5]]]`},
		{"not json", `{"value":[["append",1`, false, `fail bad transaction`},
		{"write without --register", `{"value":[["w",1,3]]}`, false, `fail micro-op "w"`},
		{"empty", `{"value":[]}`, false, `fail at least one micro-op`},
		{"unknown function", `{"value":[["cas",1,2]]}`, false, `fail unknown function`},
		{"two keys", `{"value":[["append",1,6],["append",2,7],["r",1,null],["r",2,null]]}`, false,
			`ok [["append",1,6],["append",2,7],["r",1,[5,6]],["r",2,[7]]]`},
		{"read back", `{"value":[["r",2,null],["r",1,null]]}`, false, `ok [["r",2,[7]],["r",1,[5,6]]]`},
		{"register write", `{"value":[["w",100,3],["r",100,null],["r",101,null]]}`, true, `ok [["w",100,3],["r",100,3],["r",101,null]]`},
		{"register overwrite", `{"value":[["r",100,null],["w",100,4]]}`, true, `ok [["r",100,3],["w",100,4]]`},
		{"register append refused", `{"value":[["append",100,4]]}`, true, `fail micro-op "append"`},
		{"register read back", `{"value":[["r",100,null]]}`, true, `ok [["r",100,4]]`},
	}
	// Lines of one mode go through one kv exec process, so malformed lines are shown not to
	// stop it.
	for _, register := range []bool{false, true} {
		var lines []string
		var cases []int
		for i, tc := range tests {
			if tc.register == register {
				lines = append(lines, tc.in)
				cases = append(cases, i)
			}
		}
		var extra []string
		if register {
			extra = []string{"--register"}
		}
		answers := c.exec(lines, extra...)
		for j, a := range answers {
			tc := tests[cases[j]]
			typ, rest, _ := strings.Cut(tc.want, " ")
			if a.Type != typ {
				t.Errorf("%s: got %+v, want %s", tc.name, a, tc.want)
				continue
			}
			if typ == "ok" {
				got, _ := json.Marshal(a.Value)
				if string(got) != rest {
					t.Errorf("%s: got %s, want %s", tc.name, got, rest)
				}
			} else if !strings.Contains(a.Error, rest) {
				t.Errorf("%s: error %q does not mention %q", tc.name, a.Error, rest)
			}
		}
	}
}

// TestKVScan: kv scan over a running cluster returns the rows of its range in key order, from
// keys that live on different data nodes, bounded and limited.
func TestKVScan(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster of processes")
	}
	c := newCluster(t, 0.05)
	for _, k := range []string{"scan-a", "scan-b", "scan-c", "scan-d", "scao"} {
		c.mustRun(30*time.Second, nil, "kv", "put", k, "v"+k)
	}
	// Rows under one routing prefix live on one node: together they are over the scan cap, so
	// that node's share is refused there, before it could make a frame too large for the link.
	big := strings.Repeat("x", 100_000) // an argument may not exceed 128 KiB
	for i := range 45 {
		c.mustRun(30*time.Second, nil, "kv", "put", fmt.Sprintf("big/%02d", i), big)
	}
	if out, err := c.run(30*time.Second, nil, "kv", "scan", "big/", "big0"); err == nil || !strings.Contains(err.Error(), "scan answer larger than 4 MiB") || len(out) > 0 {
		t.Errorf("kv scan over the cap: err %v, output %d bytes; want the refusal naming 4 MiB and no rows", err, len(out))
	}
	if out := c.mustRun(30*time.Second, nil, "kv", "scan", "big/", "big0", "--limit", "2"); strings.Count(string(out), "\n") != 2 {
		t.Errorf("kv scan --limit 2 printed %d lines", strings.Count(string(out), "\n"))
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"scan-", "scan."}, "scan-a\tvscan-a\nscan-b\tvscan-b\nscan-c\tvscan-c\nscan-d\tvscan-d\n"},
		{[]string{"scan-b", "scan-d"}, "scan-b\tvscan-b\nscan-c\tvscan-c\n"},
		{[]string{"scan-", "--limit", "2"}, "scan-a\tvscan-a\nscan-b\tvscan-b\n"},
		{[]string{"--prefix", "scan-"}, "scan-a\tvscan-a\nscan-b\tvscan-b\nscan-c\tvscan-c\nscan-d\tvscan-d\n"},
		{[]string{"--prefix", "big/", "--limit", "1"}, "big/00\t" + big + "\n"}, // one routing prefix: one node
	} {
		got := string(c.mustRun(30*time.Second, nil, append([]string{"kv", "scan"}, tc.args...)...))
		if got != tc.want {
			t.Errorf("kv scan %v:\n%s\nwant\n%s", tc.args, got, tc.want)
		}
	}
}

type benchResult struct {
	Committed int64 `json:"committed"`
	Check     struct {
		Model     string            `json:"model"`
		Verdict   string            `json:"verdict"`
		Anomalies []json.RawMessage `json:"anomalies"`
	} `json:"check"`
}

// TestBenchKillRestart runs a list-append workload, kills a data node with SIGKILL in the middle,
// restarts it, and then checks the history and that every acknowledged append is readable.
func TestBenchKillRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster of processes and runs a workload for seconds")
	}
	const keys = 10
	c := newCluster(t, 0.05)
	historyPath := filepath.Join(t.TempDir(), "history.jsonl")
	benchDone := make(chan struct{})
	var (
		benchOut []byte
		benchErr error
	)
	go func() {
		defer close(benchDone)
		benchOut, benchErr = c.run(120*time.Second, nil, "bench", "--workload", "list-append", "--keys", fmt.Sprint(keys), "--namespace", "e2e",
			"--clients", "3", "--warmup", "0s", "--duration", "6s", "--history", historyPath, "--json")
	}()

	// The victim is the first data node: the serial protocol's only storage node, and a shard
	// primary under every protocol.
	time.Sleep(2 * time.Second)
	var victim nodeStatus
	for _, n := range c.status() {
		if n.Roles == "data" {
			victim = n
			break
		}
	}
	if victim.PID <= 0 || victim.State != "running" {
		t.Fatalf("no running data node to kill: %+v", victim)
	}
	if err := syscall.Kill(victim.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for i := 0; syscall.Kill(victim.PID, 0) == nil && i < 100; i++ {
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
	c.mustRun(60*time.Second, nil, "cluster", "start")
	for _, n := range c.status() {
		if n.State != "running" {
			t.Fatalf("after restart node %s is %s", n.Name, n.State)
		}
	}
	<-benchDone
	if benchErr != nil {
		t.Fatal(benchErr)
	}
	var res benchResult
	if err := json.Unmarshal(benchOut, &res); err != nil {
		t.Fatalf("bench JSON: %v\n%s", err, benchOut)
	}
	if res.Committed == 0 {
		t.Fatalf("no transaction committed:\n%s", benchOut)
	}
	if res.Check.Verdict != "valid" {
		t.Fatalf("history is %s under %s: %s", res.Check.Verdict, res.Check.Model, res.Check.Anomalies)
	}
	t.Logf("%d transactions committed; history %s under %s", res.Committed, res.Check.Verdict, res.Check.Model)

	// Every append the workload saw acknowledged must be in its key's list now.
	f, err := os.Open(historyPath)
	if err != nil {
		t.Fatal(err)
	}
	ops, err := history.Read(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	acked := map[int64][]int64{}
	for _, op := range ops {
		if op.Type != history.OK {
			continue
		}
		for _, m := range op.Value {
			if m.F == history.FAppend {
				acked[m.Key] = append(acked[m.Key], m.Value.Int)
			}
		}
	}
	if len(acked) == 0 {
		t.Fatal("the history has no acknowledged append")
	}
	var reads []string
	for k := 0; k < keys; k++ {
		reads = append(reads, fmt.Sprintf(`{"value":[["r",%d,null]]}`, k))
	}
	for _, region := range []string{"SH", "SG"} {
		answers := c.exec(reads, "--region", region, "--namespace", "e2e")
		for k, a := range answers {
			if a.Type != "ok" {
				t.Fatalf("reading key %d through %s: %+v", k, region, a)
			}
			have := map[int64]bool{}
			for _, v := range a.Value[0].Value.List {
				have[v] = true
			}
			for _, v := range acked[int64(k)] {
				if !have[v] {
					t.Errorf("key %d read through %s: acknowledged append %d is missing from %v", k, region, v, a.Value[0].Value.List)
				}
			}
		}
	}
}
