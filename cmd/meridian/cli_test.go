package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/meridiandb/meridian/internal/bench"
)

var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "meridian-cli")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "meridian")
	if out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput(); err != nil {
		os.Stderr.Write(out)
		panic(err)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// run executes the built binary and returns stdout, stderr and the exit code.
func run(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), code
}

func simJSON(t *testing.T, args ...string) map[string]any {
	t.Helper()
	out, errs, code := run(t, append([]string{"sim", "--json"}, args...)...)
	if code != 0 {
		t.Fatalf("sim %v: exit %d: %s", args, code, errs)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("sim output is not JSON: %v\n%s", err, out)
	}
	return m
}

func TestSimSameSeedSameDigest(t *testing.T) {
	a := simJSON(t, "--protocol", "serial", "--seed", "7")
	b := simJSON(t, "--protocol", "serial", "--seed", "7")
	c := simJSON(t, "--protocol", "serial", "--seed", "8")
	if a["trace_digest"] != b["trace_digest"] {
		t.Fatalf("seed 7 twice: digests %v and %v", a["trace_digest"], b["trace_digest"])
	}
	if a["trace_digest"] == c["trace_digest"] {
		t.Fatalf("seeds 7 and 8 gave the same digest %v", a["trace_digest"])
	}
	for _, f := range []string{"protocol", "seed", "virtual_seconds", "wall_seconds", "events", "committed", "aborted",
		"throughput_tps", "latency_ms", "trace_digest", "workload", "abort_rate", "aborts_by_cause", "per_type", "check"} {
		if _, ok := a[f]; !ok {
			t.Errorf("sim --json lacks %q", f)
		}
	}
	lat := a["latency_ms"].(map[string]any)
	for _, p := range []string{"p50", "p90", "p99", "mean"} {
		if _, ok := lat[p]; !ok {
			t.Errorf("latency_ms lacks %q", p)
		}
	}
	if ch := a["check"].(map[string]any); ch["verdict"] != "valid" || ch["model"] != "strict-serializable" {
		t.Errorf("serial's history: check %v, want strict-serializable valid", ch)
	}
}

func TestSimTPCCJSON(t *testing.T) {
	m := simJSON(t, "--protocol", "serial", "--workload", "tpcc", "--warehouses", "10", "--clients", "1", "--duration", "20s", "--warmup", "0s")
	if m["workload"] != "tpcc" || m["consistency"] != "ok" {
		t.Fatalf("tpcc run: workload %v consistency %v", m["workload"], m["consistency"])
	}
	if m["committed"].(float64) == 0 {
		t.Fatal("no TPC-C transaction committed")
	}
	if _, ok := m["per_type"].(map[string]any)["new-order"]; !ok {
		t.Fatalf("per_type lacks new-order: %v", m["per_type"])
	}
}

// A mutant's run prints its result, judged invalid, and exits 1 saying so, as meridian check
// does for an invalid history: a script running sim learned of the violation only by reading
// the output.
func TestMutantIsCaught(t *testing.T) {
	args := []string{"sim", "--json", "--protocol", "serial", "--opt", "mutant=no-lock", "--clients", "4"}
	out, errs, code := run(t, args...)
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("sim output is not JSON: %v\n%s", err, out)
	}
	if v := m["check"].(map[string]any)["verdict"]; v != "invalid" {
		t.Fatalf("serial without its lock: verdict %v, want invalid", v)
	}
	if want := "the history is not strict-serializable: "; code != 1 || !strings.Contains(errs, want) {
		t.Fatalf("exit %d, stderr %q: want exit 1 and %q", code, errs, want)
	}
	// The table form too; a valid run exits 0 (simJSON).
	out, _, code = run(t, append([]string{"sim"}, args[2:]...)...)
	if code != 1 || !strings.Contains(out, "invalid") {
		t.Fatalf("without --json: exit %d, output\n%s", code, out)
	}
}

// A run whose history the checker cannot judge prints its result and exits 2, as meridian
// check does for "unknown": it exited 0, and a script took an unchecked run for a checked one.
// Only appends, and no final read of the keys, so no committed transaction reads anything.
func TestUnjudgedHistoryExits2(t *testing.T) {
	out, errs, code := run(t, "sim", "--protocol", "k2", "--workload", "list-append", "--write-ratio", "1", "--warmup", "0s", "--duration", "300ms", "--verify=false")
	if !strings.Contains(out, "unknown") {
		t.Fatalf("output does not give the verdict unknown:\n%s", out)
	}
	if want := "could not be judged strict-serializable: no committed transaction observed a value"; code != 2 || !strings.Contains(errs, want) || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
		t.Fatalf("exit %d, stderr %q: want exit 2 and one line with %q", code, errs, want)
	}
}

func TestBadInputOneLineError(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.toml")
	if err := os.WriteFile(bad, []byte("[[region]]\nname = \"A\"\nrtt_ms = { B = 3 }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"sim", "--protocol", "nope"}, "unknown protocol"},
		{[]string{"sim", "--protocol", "serial", "--topology", bad}, "bad.toml:3"},
		{[]string{"sim", "--protocol", "serial", "--topology", "mars-3region"}, "unknown topology"},
		{[]string{"sim", "--duration", "-3s"}, "--duration must be positive"},
		{[]string{"sim", "--clients", "0"}, "--clients must be 1..100000"},
		{[]string{"sim", "--protocol", "serial", "--opt", "colour=blue"}, "unknown option"},
		{[]string{"sim", "--protocol", "serial", "--workload", "nope"}, "unknown workload"},
		{[]string{"sim", "--protocol", "serial", "--check", "nope"}, "--check"},
		{[]string{"sim", "--workload", "tpcc", "--tpcc-items", "5"}, "TPC-C items must be 100..100000"},
		{[]string{"sim", "--protocol", "spanner", "--opt", "lock-policy=sometimes"}, "lock-policy"},
		{[]string{"nope"}, "unknown command"},
	}
	for _, c := range cases {
		_, errs, code := run(t, c.args...)
		if code == 0 {
			t.Errorf("%v: exit 0, want an error", c.args)
			continue
		}
		line := strings.TrimSpace(errs)
		if strings.Contains(line, "\n") || strings.Contains(errs, "panic") || strings.Contains(errs, "goroutine") {
			t.Errorf("%v: want one line, got:\n%s", c.args, errs)
		}
		if !strings.Contains(line, c.want) {
			t.Errorf("%v: error %q, want it to mention %q", c.args, line, c.want)
		}
	}
}

// TestProtocolsListsOptions: `meridian protocols` names every protocol with the model it
// promises and every option it takes, so users need not learn them from error messages; an
// unknown name is a one-line error.
func TestProtocolsListsOptions(t *testing.T) {
	out, errs, code := run(t, "protocols")
	if code != 0 {
		t.Fatalf("protocols: exit %d: %s", code, errs)
	}
	for _, want := range []string{"k2 (promises strict-serializable)", "crdb (promises serializable-no-stale-reads)", "spanner (promises", "serial (promises",
		"  read-mark ", "  read-refresh ", "  lock-policy ", "  mutant "} {
		if !strings.Contains(out, want) {
			t.Errorf("protocols output lacks %q:\n%s", want, out)
		}
	}
	out, _, code = run(t, "protocols", "k2")
	if code != 0 || strings.Contains(out, "crdb (") || !strings.Contains(out, "  ttl ") {
		t.Errorf("protocols k2: exit %d, output:\n%s", code, out)
	}
	_, errs, code = run(t, "protocols", "nope")
	if code == 0 || strings.Count(strings.TrimSpace(errs), "\n") != 0 || !strings.Contains(errs, `unknown protocol "nope"`) {
		t.Errorf("protocols nope: exit %d, stderr %q; want one line naming the protocol", code, errs)
	}
}

// A run that failed its consistency check, or could not be checked, exits 1 naming why: a
// list-append bench whose drain ran out said "the workload's consistency check did not pass",
// though list-append has no such check (review).
func TestFailedConsistencySaysWhy(t *testing.T) {
	for _, c := range []struct{ consistency, want string }{
		{"", ""},
		{"ok", ""},
		{"not checked: some clients were still running when the drain period ended", "consistency: not checked: some clients were still running"},
		{"tpcc: 3 consistency violations; 3.3.2.1: warehouse 1", "consistency: tpcc: 3 consistency violations"},
	} {
		err := failedConsistency(&bench.Result{Consistency: c.consistency})
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%q: %v, want none", c.consistency, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%q: %v, want an error mentioning %q", c.consistency, err, c.want)
		}
	}
}

// meridian check - reads the history from standard input and judges it as from the file.
func TestCheckReadsStandardInput(t *testing.T) {
	path := filepath.Join(t.TempDir(), "h.jsonl")
	if _, errs, code := run(t, "sim", "--protocol", "k2", "--workload", "list-append", "--duration", "1s", "--history", path, "--check", "none"); code != 0 {
		t.Fatalf("sim: exit %d: %s", code, errs)
	}
	fromFile, _, code := run(t, "check", path)
	if code != 0 {
		t.Fatalf("check %s: exit %d", path, code)
	}
	h, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	fromStdin, errs, code := runForInput(t, time.Minute, string(h), "check", "-")
	if code != 0 || fromStdin != fromFile {
		t.Errorf("check -: exit %d, stderr %q, report\n%s\nwant the file's\n%s", code, errs, fromStdin, fromFile)
	}
}

// A list-append run ends with a final read of every key, with --check none too. K2 with its SH
// oracle 300 ms behind true time (far outside ε) reads stale: the final read misses acknowledged
// appends that a second read 1 s later finds, and says so rather than calling them lost.
func TestFinalReadTellsStaleFromLost(t *testing.T) {
	args := []string{"sim", "--protocol", "k2", "--workload", "list-append", "--clients", "6", "--seed", "1", "--check", "none"}
	out, errs, code := run(t, args...)
	if code != 0 || !strings.Contains(out, "durability") || !strings.Contains(out, "found every acknowledged write") {
		t.Fatalf("honest clocks: exit %d, stderr %q, output\n%s", code, errs, out)
	}
	out, errs, code = run(t, append(args, "--clock-skew", "sh-oracle@0s=-300ms")...)
	if code != 1 || !strings.Contains(out, "a stale read") || strings.Contains(out, "lost") || !strings.Contains(errs, "durability: ") {
		t.Fatalf("a stale oracle: exit %d, stderr %q, output\n%s", code, errs, out)
	}
}

// A history with no times has no real-time order: strict-serializable (the default model) is not
// confirmed on the strength of the edges missing (it was "valid", exit 0), and serializable, which
// needs none, still is. The same history with times is a stale read.
func TestCheckUntimedHistory(t *testing.T) {
	dir := t.TempDir()
	lines := []string{
		`{"index":0,"type":"invoke","process":0@,"value":[["append",1,1]]}`,
		`{"index":1,"type":"ok","process":0@,"value":[["append",1,1]]}`,
		`{"index":2,"type":"invoke","process":1@,"value":[["r",1,null]]}`,
		`{"index":3,"type":"ok","process":1@,"value":[["r",1,[]]]}`,
		`{"index":4,"type":"invoke","process":2@,"value":[["r",1,null]]}`,
		`{"index":5,"type":"ok","process":2@,"value":[["r",1,[1]]]}`,
	}
	var untimed, timed strings.Builder
	for i, l := range lines {
		untimed.WriteString(strings.Replace(l, "@", "", 1) + "\n")
		timed.WriteString(strings.Replace(l, "@", `,"time":`+strconv.Itoa(10*i), 1) + "\n")
	}
	writeFiles(t, dir, map[string]string{"untimed.jsonl": untimed.String(), "timed.jsonl": timed.String()})
	for _, c := range []struct {
		file, model string
		code        int
		want        string
	}{
		{"untimed.jsonl", "strict-serializable", 2, "note:         the history has no times, so the real-time order strict-serializable needs was not checked"},
		{"untimed.jsonl", "rls", 2, "verdict:      unknown"},
		{"untimed.jsonl", "serializable", 0, "verdict:      valid"},
		{"timed.jsonl", "strict-serializable", 1, "G-single-realtime"},
	} {
		out, errs, code := run(t, "check", "--model", c.model, filepath.Join(dir, c.file))
		if code != c.code || !strings.Contains(out, c.want) {
			t.Errorf("check --model %s %s: exit %d (want %d), stderr %q, report\n%s\nwant it to mention %q", c.model, c.file, code, c.code, errs, out, c.want)
		}
	}
}
