package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/meridiandb/meridian/client"
	"github.com/meridiandb/meridian/internal/topo"
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
