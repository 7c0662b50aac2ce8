package main

import (
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// Every malformed or impossible --crash fails at once, before loading, with one line naming
// what is wrong.
func TestSimCrashBadInput(t *testing.T) {
	cases := []struct {
		crash []string
		want  string
	}{
		{[]string{"0@1s"}, "want NODE@AT/FOR"},
		{[]string{"0"}, "want NODE@AT/FOR"},
		{[]string{"@1s/300ms"}, "want NODE@AT/FOR"},
		{[]string{"0@soon/300ms"}, `crash time "soon" is not a duration`},
		{[]string{"0@1s/"}, `outage length "" is not a duration`},
		{[]string{"0@1s/300"}, `outage length "300" is not a duration`},
		{[]string{"nowhere@1s/300ms"}, `no node "nowhere"`},
		{[]string{"sh-2@1s/300ms"}, "region SH's data nodes are sh-1 to sh-1"},
		{[]string{"12@1s/300ms"}, "no node 12 in topology k2-5region: its servers are 0..9 (higher ids are clients)"},
		{[]string{"-1@1s/300ms"}, "no node -1"},
		{[]string{"5@1s/300ms"}, "node 5 (sh-oracle) is a TrueTime oracle, not a data node"},
		{[]string{"bj-oracle@1s/300ms"}, "is a TrueTime oracle"},
		{[]string{"0@-1s/300ms"}, "the crash time must not be negative"},
		{[]string{"0@1s/0s"}, "the outage must last a positive time"},
		{[]string{"0@1s/-300ms"}, "the outage must last a positive time"},
		{[]string{"0@3s/300ms"}, "crash of sh-1 at 3s for 300ms: the run ends at 3s"},
		{[]string{"0@2.9s/300ms"}, "the node must be back by the end of the run at 3s"},
		{[]string{"0@1s/300ms", "sh-1@1.2s/100ms"}, "the node is down until 1.3s (crash of sh-1 at 1s for 300ms)"},
		{[]string{"0@1.3s/100ms", "0@1s/300ms"}, "must not overlap or touch"},
	}
	for _, c := range cases {
		args := []string{"sim", "--protocol", "k2", "--duration", "2s", "--warmup", "1s"}
		for _, cr := range c.crash {
			args = append(args, "--crash", cr)
		}
		out, errs, code := run(t, args...)
		if code == 0 {
			t.Errorf("%v: exit 0, want an error", c.crash)
			continue
		}
		line := strings.TrimSpace(errs)
		if strings.Contains(line, "\n") || out != "" {
			t.Errorf("%v: want one line on stderr and nothing on stdout, got:\n%s%s", c.crash, out, errs)
		}
		if !strings.Contains(line, "--crash") || !strings.Contains(line, c.want) {
			t.Errorf("%v: error %q, want it to name --crash and mention %q", c.crash, line, c.want)
		}
	}
}

// A run with crashes checks valid, says in its result what it crashed, and counts the
// transactions the outages failed; its trace is the same whatever order the crashes are
// given in (two of them at one instant), and differs from the run without them.
func TestSimCrashRun(t *testing.T) {
	base := []string{"--workload", "list-append", "--duration", "2s", "--warmup", "1s", "--clients", "3", "--seed", "3"}
	want := []any{
		map[string]any{"node": 0.0, "name": "sh-1", "at": "1s", "for": "300ms"},
		map[string]any{"node": 1.0, "name": "bj-1", "at": "1s", "for": "400ms"},
		map[string]any{"node": 0.0, "name": "sh-1", "at": "2s", "for": "300ms"},
	}
	for _, p := range []string{"k2", "spanner", "crdb"} {
		t.Run(p, func(t *testing.T) {
			args := append([]string{"--protocol", p}, base...)
			m := simJSON(t, append(args, "--crash", "0@1s/300ms", "--crash", "bj-1@1s/400ms", "--crash", "sh-1@2s/300ms")...)
			if v := m["check"].(map[string]any)["verdict"]; v != "valid" {
				t.Errorf("verdict %v under crashes, want valid", v)
			}
			if !reflect.DeepEqual(m["crashes"], want) {
				t.Errorf("crashes %v, want %v", m["crashes"], want)
			}
			// Each crash resets its clients' connections: the request in flight and the dials
			// refused while the node is down fail as unavailable.
			if m["unavailable"].(float64) == 0 {
				t.Errorf("no transaction found its coordinator unavailable (aborted %v, failed %v)", m["aborted"], m["failed"])
			}
			if m["committed"].(float64) == 0 {
				t.Error("nothing committed")
			}
			again := simJSON(t, append(args, "--crash", "sh-1@2s/300ms", "--crash", "bj-1@1s/400ms", "--crash", "0@1s/300ms")...)
			if m["trace_digest"] != again["trace_digest"] {
				t.Errorf("same crashes in another order: digest %v, then %v", m["trace_digest"], again["trace_digest"])
			}
			none := simJSON(t, args...)
			if none["trace_digest"] == m["trace_digest"] {
				t.Errorf("the crashes left the trace unchanged (digest %v)", m["trace_digest"])
			}
			if _, ok := none["crashes"]; ok {
				t.Errorf("a run without --crash reports crashes %v", none["crashes"])
			}
			t.Logf("committed %v, aborted %v, failed %v (unavailable %v, unknown %v), digest %v", m["committed"], m["aborted"],
				m["failed"], m["unavailable"], m["unknown_outcome"], m["trace_digest"])
		})
	}
}

// TestDurabilityMutantsCaughtByCrashes: each durability mutant answers a commit before it is
// durable (crdb's early-stage: a record holder answers a STAGING record; k2's early-commit: a
// recorder answers the commit), a bug only a crash shows: the same run without crashes is valid
// and loses nothing, and with three crashes during 400 ms flushes it loses acknowledged
// commits, which the final read and the checker both report. These are the controls crash
// reviews of the record paths need; the isolation mutants fail without any fault.
func TestDurabilityMutantsCaughtByCrashes(t *testing.T) {
	crashes := []string{"--crash", "1@1s/200ms", "--crash", "2@1500ms/200ms", "--crash", "3@2s/200ms"}
	result := func(args ...string) (verdict string, lost int, code int) {
		out, errs, code := run(t, args...)
		var m struct {
			Check      struct{ Verdict string }
			Durability struct {
				Lost   []string
				NotRun string `json:"not_run"`
			}
		}
		if err := json.Unmarshal([]byte(out), &m); err != nil {
			t.Fatalf("sim %v: output is not JSON (%v): %s", args, err, errs)
		}
		if m.Durability.NotRun != "" {
			t.Fatalf("sim %v: durability not checked: %s", args, m.Durability.NotRun)
		}
		return m.Check.Verdict, len(m.Durability.Lost), code
	}
	for _, p := range []struct{ protocol, mutant, seed string }{
		{"crdb", "early-stage", "2"},
		{"k2", "early-commit", "1"},
	} {
		t.Run(p.protocol, func(t *testing.T) {
			args := []string{"sim", "--json", "--protocol", p.protocol, "--workload", "list-append", "--read-back",
				"--keys", "10", "--clients", "8", "--flush-latency", "400ms", "--duration", "3s", "--seed", p.seed}
			mutant := []string{"--opt", "mutant=" + p.mutant}
			for _, c := range []struct {
				name   string
				args   []string
				broken bool
			}{
				{"mutant, crashes", append(append(slices.Clone(args), mutant...), crashes...), true},
				{"mutant, no crash", append(slices.Clone(args), mutant...), false},
				{"crashes, no mutant", append(slices.Clone(args), crashes...), false},
			} {
				verdict, lost, code := result(c.args...)
				if got := verdict == "invalid" && lost > 0 && code == 1; got != c.broken {
					t.Errorf("%s: verdict %s, %d acknowledged writes lost, exit %d; want broken=%v", c.name, verdict, lost, code, c.broken)
				}
				if !c.broken && (verdict != "valid" || lost != 0 || code != 0) {
					t.Errorf("%s: verdict %s, %d lost, exit %d; want valid, none lost, exit 0", c.name, verdict, lost, code)
				}
			}
		})
	}
}
