package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meridiandb/meridian/client"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/wire"
	"github.com/meridiandb/meridian/internal/workload/listappend"
	"github.com/meridiandb/meridian/internal/workload/memdb"
)

// kv exec and the list-append workload must name keys alike, or they would not see each other's
// data.
func TestExecKeysMatchListAppend(t *testing.T) {
	for _, preset := range []string{"k2-3region", "k2-5region", "single-dc"} {
		tp, err := topo.FromPreset(preset, topo.DefaultLayout())
		if err != nil {
			t.Fatal(err)
		}
		w, err := listappend.New(tp, listappend.Config{Keys: 200})
		if err != nil {
			t.Fatal(err)
		}
		for k := int64(0); k < 200; k++ {
			if got, want := laKey(tp, k), w.KeyName(k); got != want {
				t.Fatalf("%s: key %d: kv exec uses %q, list-append %q", preset, k, got, want)
			}
		}
	}
}

// kv exec answers every line, also one past its size bound, and goes on with the next.
func TestExecSurvivesOversizedLines(t *testing.T) {
	in := strings.Repeat("9", 3*maxExecLineBytes) + "\n" +
		"\n" + // blank lines get no answer
		"not json\r\n" +
		`{"value":[]}`
	var out bytes.Buffer
	// Every line here fails before a transaction starts, so no database is needed.
	if err := kvExec(strings.NewReader(in), &out, nil, nil, false); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	want := []string{"line longer than 1048576 bytes", "invalid character 'o' in literal null", "at least one micro-op"}
	if len(lines) != len(want) {
		t.Fatalf("got %d answers, want %d:\n%s", len(lines), len(want), out.String())
	}
	for i, w := range want {
		if !strings.Contains(lines[i], `"type":"fail"`) || !strings.Contains(lines[i], w) {
			t.Errorf("answer %d: %s, want a fail mentioning %q", i, lines[i], w)
		}
	}
}

// A list and a register are both varints, so the list [7] and the register 7 are the same bytes:
// kv exec's two modes must not share keys, or each reads the other's values as its own.
func TestExecModesDoNotMisreadEachOther(t *testing.T) {
	tp, err := topo.FromPreset("single-dc", topo.DefaultLayout())
	if err != nil {
		t.Fatal(err)
	}
	db := client.Open(memdb.New().Transport())
	exec := func(register bool, line string) string {
		t.Helper()
		var out bytes.Buffer
		if err := kvExec(strings.NewReader(line+"\n"), &out, db, tp, register); err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(out.String())
	}
	steps := []struct {
		register   bool
		line, want string
	}{
		{false, `{"value":[["append",7,7]]}`, `{"type":"ok","value":[["append",7,7]]}`},
		{true, `{"value":[["w",8,5]]}`, `{"type":"ok","value":[["w",8,5]]}`},
		{true, `{"value":[["r",7,null],["r",8,null]]}`, `{"type":"ok","value":[["r",7,null],["r",8,5]]}`},
		{false, `{"value":[["r",7,null],["r",8,null]]}`, `{"type":"ok","value":[["r",7,[7]],["r",8,null]]}`},
	}
	for i, s := range steps {
		if got := exec(s.register, s.line); got != s.want {
			t.Errorf("step %d (register %v) %s: got %s, want %s", i+1, s.register, s.line, got, s.want)
		}
	}
}

// exitCode is the status main gives err.
func exitCode(err error) int {
	var ee *exitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.code
	}
	return 1
}

// kv get, put, del and scan tell their outcomes apart by exit status: all failures exited 1,
// so a script could not tell an absent key from a cluster it could not reach, nor a put that
// did not apply from one that may have.
func TestKVExitCode(t *testing.T) {
	unknown := &client.UnknownError{Detail: "connection closed"}
	for _, tc := range []struct {
		err  error
		want int
	}{
		{nil, 0},
		{unknown, kvExitUnknown},
		// A later call on a transaction whose commit is unknown wraps how it ended.
		{fmt.Errorf("%w: %w", client.ErrTxnDone, unknown), kvExitUnknown},
		{client.ErrNotFound, kvExitNotFound},
		{&client.AbortError{Cause: "wound-wait"}, kvExitError},
		{fmt.Errorf("%w: dial: connection refused", client.ErrUnavailable), kvExitError},
		{fmt.Errorf("%w: empty key", client.ErrBadArgument), kvExitError},
		{errors.New("cluster config: open cluster.toml: no such file"), kvExitError},
	} {
		if got := kvExitCode(tc.err); got != tc.want {
			t.Errorf("%v: exit %d, want %d", tc.err, got, tc.want)
		}
	}
}

// losingAnswers is a memdb endpoint that loses the answer to every request of one kind after
// the store has handled it, as a connection that breaks at that moment would.
type losingAnswers struct {
	*memdb.Transport
	op wire.Op
}

func (l losingAnswers) RoundTrip(req *wire.ClientRequest) (*wire.ClientReply, error) {
	rep, err := l.Transport.RoundTrip(req)
	if err == nil && req.Op == l.op {
		return nil, errors.New("connection closed")
	}
	return rep, err
}

// A get of an absent key exits 2 after its transaction commits; a put whose commit answer is
// lost exits 3, since it applied here and might not have; one whose write answer is lost
// exits 1, since it was aborted before any commit.
func TestKVOutcomes(t *testing.T) {
	store := memdb.New()
	db := client.Open(store.Transport())
	if _, err := kvGet(db, "k"); exitCode(err) != kvExitNotFound || err.Error() != "k: not found" {
		t.Fatalf("get of an absent key: %v (exit %d), want \"k: not found\", exit %d", err, exitCode(err), kvExitNotFound)
	}
	put := func(db *client.DB, v string) error {
		return kvTxn(db, false, func(tx *client.Txn) error { return tx.Put("k", []byte(v)) })
	}
	if err := put(db, "1"); err != nil {
		t.Fatal(err)
	}
	if v, err := kvGet(db, "k"); err != nil || string(v) != "1" {
		t.Fatalf("get: %q, %v; want 1", v, err)
	}

	err := put(client.Open(losingAnswers{store.Transport(), wire.OpCommit}), "2")
	if exitCode(err) != kvExitUnknown || !strings.Contains(err.Error(), "outcome unknown") {
		t.Errorf("put whose commit answer is lost: %v (exit %d), want outcome unknown, exit %d", err, exitCode(err), kvExitUnknown)
	}
	if v, _ := store.Get("k"); string(v) != "2" {
		t.Fatalf("the put whose answer was lost holds %q, want it applied (2)", v)
	}

	err = put(client.Open(losingAnswers{store.Transport(), wire.OpPut}), "3")
	if exitCode(err) != kvExitError || !errors.Is(err, client.ErrUnavailable) {
		t.Errorf("put whose write answer is lost: %v (exit %d), want unavailable, exit %d", err, exitCode(err), kvExitError)
	}
	if v, _ := store.Get("k"); string(v) != "2" {
		t.Fatalf("the put aborted before its commit holds %q, want it not applied (2)", v)
	}
}

// The exit statuses as a script sees them, against a running cluster and then a stopped one.
func TestKVExitStatuses(t *testing.T) {
	_, config, data := runningCluster(t)
	big := strings.Repeat("x", client.MaxValueBytes)
	for _, tc := range []struct {
		args      []string
		code      int
		out, errs string
		in        string
	}{
		{args: []string{"put", "k", "v"}},
		// A value on standard input, byte for byte; and a value longer than a command line.
		{args: []string{"put", "stdin", "--value-file", "-"}, in: "line 1\nline\t2"},
		{args: []string{"put", "big", "--value-file", "-"}, in: big},
		{args: []string{"put", "bigger", "--value-file", "-"}, code: kvExitError, in: big + "x", errs: fmt.Sprintf("meridian: the value in standard input is longer than %d bytes\n", client.MaxValueBytes)},
		{args: []string{"get", "stdin"}, out: "line 1\nline\t2\n"},
		{args: []string{"get", "stdin", "--value-file", "-"}, out: "line 1\nline\t2"},
		{args: []string{"get", "stdin", "--value-file", ""}, code: kvExitError, errs: "meridian: --value-file: empty file name\n"},
		// Scan rows stay one line each: a value with a tab or a line break is quoted.
		{args: []string{"scan", "stdin", "stdin0"}, out: "stdin\t\"line 1\\nline\\t2\"\n"},
		{args: []string{"scan", "big", "big0"}, out: "big\t" + big + "\n"},
		{args: []string{"put", "k", "v"}},
		{[]string{"get", "k"}, 0, "v\n", "", ""},
		{[]string{"get", "absent"}, kvExitNotFound, "", "meridian: absent: not found\n", ""},
		{[]string{"scan", "absent", "absent0"}, 0, "", "", ""},
		{[]string{"del", "absent"}, 0, "", "", ""},
		{[]string{"del", "k"}, 0, "", "", ""},
		{[]string{"get", "k"}, kvExitNotFound, "", "meridian: k: not found\n", ""},
		{[]string{"put", "\xff", "v"}, kvExitError, "", "meridian: key \"\\xff\" is not valid UTF-8\n", ""},
	} {
		out, errs, code := runForInput(t, 30*time.Second, tc.in, append([]string{"kv", "--config", config}, tc.args...)...)
		if code != tc.code || out != tc.out || errs != tc.errs {
			t.Errorf("kv %q: exit %d, stdout %q, stderr %q; want exit %d, stdout %q, stderr %q", tc.args, code, out, errs, tc.code, tc.out, tc.errs)
		}
	}
	// A binary value goes in and comes out byte for byte (printed, it would gain a newline).
	binary := "\x00\xff\x89PNG\r\n\x1a\n"
	if _, errs, code := runForInput(t, 30*time.Second, binary, "kv", "--config", config, "put", "bin", "--value-file", "-"); code != 0 {
		t.Fatalf("put of a binary value: exit %d: %s", code, errs)
	}
	got := filepath.Join(t.TempDir(), "got.bin")
	if _, errs, code := runFor(t, 30*time.Second, "kv", "--config", config, "get", "bin", "--value-file", got); code != 0 {
		t.Fatalf("get --value-file: exit %d: %s", code, errs)
	}
	if b, err := os.ReadFile(got); err != nil || string(b) != binary {
		t.Errorf("get --value-file wrote %q (%v), want %q", b, err, binary)
	}
	// A key that is not there leaves the file as it was.
	if _, _, code := runFor(t, 30*time.Second, "kv", "--config", config, "get", "absent", "--value-file", got); code != kvExitNotFound {
		t.Errorf("get --value-file of an absent key: exit %d, want %d", code, kvExitNotFound)
	}
	if b, _ := os.ReadFile(got); string(b) != binary {
		t.Errorf("a failed get replaced the file with %q", b)
	}
	stopLeavesNoServer(t, data)
	_, errs, code := runFor(t, 30*time.Second, "kv", "--config", config, "get", "k")
	if code != kvExitError || !strings.Contains(errs, "is the cluster running?") {
		t.Errorf("kv get of a stopped cluster: exit %d, stderr %q; want exit %d, unreachable", code, errs, kvExitError)
	}
}

// kv scan prints a field as it is unless it could break the one-row-per-line, tab-separated
// output or be mistaken for a quoted one.
func TestScanField(t *testing.T) {
	for in, want := range map[string]string{
		"":            "",
		"plain text":  "plain text",
		"ключ/値":      "ключ/値",
		"a\tb":        `"a\tb"`,
		"two\nlines":  `"two\nlines"`,
		"\"quoted\"":  `"\"quoted\""`,
		"nul\x00":     `"nul\x00"`,
		"bad\xffutf8": `"bad\xffutf8"`,
		"cr\r":        `"cr\r"`,
	} {
		if got := scanField(in); got != want {
			t.Errorf("scanField(%q) = %s, want %s", in, got, want)
		}
	}
}
