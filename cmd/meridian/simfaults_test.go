package main

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/meridiandb/meridian/internal/bench"
	"github.com/meridiandb/meridian/internal/check"
)

// Every malformed or impossible network fault fails at once, before loading, with one line
// naming the flag and what is wrong.
func TestSimFaultBadInput(t *testing.T) {
	cases := []struct {
		args []string
		flag string
		want string
	}{
		{[]string{"--loss", "1"}, "--loss", "want a probability in [0, 1)"},
		{[]string{"--loss", "-0.1"}, "--loss", "want a probability in [0, 1)"},
		{[]string{"--loss", "NaN"}, "--loss", "want a probability in [0, 1)"},
		{[]string{"--loss", "often"}, "--loss", "invalid argument"},
		{[]string{"--duplicate", "1.5"}, "--duplicate", "want a probability in [0, 1)"},
		{[]string{"--duplicate-delay", "10ms"}, "--duplicate-delay", "without --duplicate"},
		{[]string{"--duplicate", "0.1", "--duplicate-delay", "0s"}, "--duplicate-delay", "must be positive"},
		{[]string{"--duplicate", "0.1", "--duplicate-delay", "-1ms"}, "--duplicate-delay", "must be positive"},
		// The largest duration overflowed the simulator's draw of a copy's delay: a panic.
		{[]string{"--duplicate", "0.1", "--duplicate-delay", "2562047h47m16.854775807s"}, "--duplicate-delay", "must be at most 100s"},
		{[]string{"--duplicate", "0.1", "--duplicate-delay", "101s"}, "--duplicate-delay", "must be at most 100s"},
		{[]string{"--partition", "SH|BJ"}, "--partition", "want A|B@AT/FOR"},
		{[]string{"--partition", "SH@1s/1s"}, "--partition", "no pair of regions"},
		{[]string{"--partition", "SH|@1s/1s"}, "--partition", "no pair of regions"},
		{[]string{"--partition", "SH|BJ@1s"}, "--partition", "no partition length"},
		{[]string{"--partition", "SH|BJ@soon/1s"}, "--partition", `partition time "soon" is not a duration`},
		{[]string{"--partition", "SH|BJ@1s/1"}, "--partition", `partition length "1" is not a duration`},
		{[]string{"--partition", "SH|XX@1s/1s"}, "--partition", `no region "XX" in topology k2-5region: its regions are SH, BJ, GZ, GY, SG`},
		{[]string{"--partition", "sh|SH@1s/1s"}, "--partition", "SH twice"},
		{[]string{"--partition", "SH|BJ@-1s/1s"}, "--partition", "the partition time must not be negative"},
		{[]string{"--partition", "SH|BJ@1s/0s"}, "--partition", "the partition must last a positive time"},
		{[]string{"--partition", "SH|BJ@3s/1s"}, "--partition", "partition SH|BJ at 3s for 1s: the run ends at 3s"},
		{[]string{"--partition", "SH|BJ@2.5s/1s"}, "--partition", "must be healed by the end of the run at 3s"},
		{[]string{"--partition", "SH|BJ@1s/1s", "--partition", "BJ|SH@1.5s/100ms"}, "--partition",
			"partition SH|BJ at 1.5s for 100ms: the regions are cut until 2s (partition SH|BJ at 1s for 1s)"},
		{[]string{"--partition", "SH|BJ@2s/500ms", "--partition", "bj|sh@1s/1s"}, "--partition", "must not overlap or touch"},
		{[]string{"--clock-skew", "sh-oracle@0s"}, "--clock-skew", "no skew: want NODE@AT=BY"},
		{[]string{"--clock-skew", "0s=20ms"}, "--clock-skew", "want NODE@AT=BY"},
		{[]string{"--clock-skew", "xx-oracle@0s=1ms"}, "--clock-skew", `no node "xx-oracle" in topology k2-5region: give a node id or a name such as sh-1 or sh-oracle`},
		{[]string{"--clock-skew", "sh-2@0s=1ms"}, "--clock-skew", `region SH's data nodes are sh-1 to sh-1`},
		{[]string{"--clock-skew", "99@0s=1ms"}, "--clock-skew", "no node 99 in topology k2-5region"},
		{[]string{"--clock-skew", "sh-oracle@soon=1ms"}, "--clock-skew", `skew time "soon" is not a duration`},
		{[]string{"--clock-skew", "sh-oracle@0s=lots"}, "--clock-skew", `skew "lots" is not a duration`},
		{[]string{"--clock-skew", "sh-oracle@-1s=1ms"}, "--clock-skew", "the skew time must not be negative"},
		{[]string{"--clock-skew", "sh-oracle@3s=1ms"}, "--clock-skew", "clock skew of sh-oracle at 3s by 1ms: the run ends at 3s"},
		{[]string{"--clock-skew", "bj-1@1s=0s"}, "--clock-skew", "a skew of zero changes nothing"},
		{[]string{"--clock-skew", "sh-oracle@0s=-2h"}, "--clock-skew", "a skew must be within ±1h0m0s"},
	}
	for _, c := range cases {
		args := append([]string{"sim", "--protocol", "k2", "--duration", "2s", "--warmup", "1s"}, c.args...)
		out, errs, code := run(t, args...)
		if code == 0 {
			t.Errorf("%v: exit 0, want an error", c.args)
			continue
		}
		line := strings.TrimSpace(errs)
		if strings.Contains(line, "\n") || out != "" {
			t.Errorf("%v: want one line on stderr and nothing on stdout, got:\n%s%s", c.args, out, errs)
		}
		if !strings.Contains(line, c.flag) || !strings.Contains(line, c.want) {
			t.Errorf("%v: error %q, want it to name %s and mention %q", c.args, line, c.flag, c.want)
		}
	}
}

// A run under loss, duplication and a partition checks valid for every protocol, says in its
// result what faults it ran under, and is deterministic: the same flags give the same trace,
// whatever the order and spelling of the partitions, and differ from the run without them.
func TestSimFaultRun(t *testing.T) {
	base := []string{"--workload", "list-append", "--duration", "2s", "--warmup", "1s", "--clients", "3", "--seed", "2"}
	faults := []string{"--loss", "0.01", "--duplicate", "0.05", "--partition", "SH|BJ@1s/500ms", "--partition", "GZ|SH@2s/300ms"}
	want := map[string]any{
		"loss": 0.01, "duplicate": 0.05, "duplicate_delay": "100ms",
		"partitions": []any{
			map[string]any{"regions": []any{"SH", "BJ"}, "at": "1s", "for": "500ms"},
			map[string]any{"regions": []any{"SH", "GZ"}, "at": "2s", "for": "300ms"},
		},
	}
	for _, p := range []string{"k2", "spanner", "crdb", "serial"} {
		t.Run(p, func(t *testing.T) {
			args := append([]string{"--protocol", p}, base...)
			m := simJSON(t, append(args, faults...)...)
			check := m["check"].(map[string]any)
			if v := check["verdict"]; v != "valid" {
				t.Errorf("verdict %v under network faults, want valid", v)
			}
			// Checked over what completed, warm-up included: faults may stall a protocol for the
			// whole window, but something must have run for the verdict to mean anything.
			if ok := check["counts"].(map[string]any)["ok"].(float64); ok == 0 {
				t.Error("no transaction completed: the verdict checked nothing")
			}
			if !reflect.DeepEqual(m["network_faults"], want) {
				t.Errorf("network faults %v, want %v", m["network_faults"], want)
			}
			if again := simJSON(t, append(args, faults...)...); m["trace_digest"] != again["trace_digest"] {
				t.Errorf("same flags twice: digest %v, then %v", m["trace_digest"], again["trace_digest"])
			}
			reordered := simJSON(t, append(args, "--partition", "SH|gz@2s/300ms", "--duplicate", "0.05", "--partition", "bj|SH@1s/500ms",
				"--loss", "0.01")...)
			if m["trace_digest"] != reordered["trace_digest"] {
				t.Errorf("same faults in another order: digest %v, then %v", m["trace_digest"], reordered["trace_digest"])
			}
			none := simJSON(t, args...)
			if none["trace_digest"] == m["trace_digest"] {
				t.Errorf("the faults left the trace unchanged (digest %v)", m["trace_digest"])
			}
			if _, ok := none["network_faults"]; ok {
				t.Errorf("a run without network faults reports %v", none["network_faults"])
			}
			t.Logf("committed %v, aborted %v, failed %v, checked ok %v, digest %v (without faults: committed %v)", m["committed"],
				m["aborted"], m["failed"], check["counts"].(map[string]any)["ok"], m["trace_digest"], none["committed"])
		})
	}
}

// The text report lists the network faults after the run's figures.
func TestSimFaultText(t *testing.T) {
	out, errs, code := run(t, "sim", "--protocol", "serial", "--workload", "list-append", "--duration", "1s", "--warmup", "500ms",
		"--clients", "2", "--loss", "0.01", "--duplicate", "0.05", "--duplicate-delay", "20ms", "--partition", "BJ|SH@1s/200ms")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, line := range []string{
		"loss: 0.01 of messages between nodes\n",
		"duplicate: 0.05 of messages between nodes, copies up to 20ms late\n",
		"partition: SH|BJ at 1s for 200ms\n",
	} {
		if !strings.Contains(out, line) {
			t.Errorf("report lacks %q:\n%s", line, out)
		}
	}
}

// A clock skew is how a user sees a commit-wait mutant caught: k2 assuming an ε of 25 ms stays
// strict-serializable with its SH oracle 20 ms ahead, and the same run without commit wait is
// caught with a real-time anomaly (exit 1). The result names the skew, and a skew changes the
// trace.
func TestSimClockSkewCatchesMutant(t *testing.T) {
	args := []string{"--protocol", "k2", "--workload", "list-append", "--clients", "6", "--duration", "2s", "--seed", "1",
		"--opt", "epsilon=25ms"}
	skew := []string{"--clock-skew", "SH-oracle@0s=20ms"}
	correct := simJSON(t, append(args, skew...)...)
	if v := correct["check"].(map[string]any)["verdict"]; v != "valid" {
		t.Errorf("k2 with a skew within its ε: verdict %v, want valid", v)
	}
	want := []any{map[string]any{"node": float64(5), "name": "sh-oracle", "at": "0s", "by": "20ms"}}
	if !reflect.DeepEqual(correct["clock_skews"], want) {
		t.Errorf("clock skews %v, want %v", correct["clock_skews"], want)
	}
	if none := simJSON(t, args...); none["trace_digest"] == correct["trace_digest"] {
		t.Errorf("the skew left the trace unchanged (digest %v)", none["trace_digest"])
	}
	mutant := append(append(slices.Clone(args), skew...), "--opt", "mutant=no-commit-wait")
	out, errs, code := run(t, append([]string{"sim"}, mutant...)...)
	if code != 1 || !strings.Contains(out, "strict-serializable: invalid") || !strings.Contains(out, "clock skew: node 5 (sh-oracle) at 0s by 20ms\n") {
		t.Errorf("k2 without commit wait under the skew: exit %d, want 1 with an invalid verdict and the skew listed:\n%s%s", code, out, errs)
	}
	// The text result explains the first anomaly, whose cycle has a real-time edge.
	for _, want := range []string{"\nfirst anomaly: G-single-realtime\n", "(realtime)"} {
		if !strings.Contains(out, want) {
			t.Errorf("result lacks %q:\n%s", want, out)
		}
	}
}

// Past the first anomaly, the result says how many more there are and how to list them: with
// the history the run wrote, or by writing one.
func TestFirstAnomalyPointsToTheRest(t *testing.T) {
	rep := &check.Report{Model: "serializable", Verdict: check.Invalid, Omitted: 3,
		Anomalies: []check.Anomaly{{Type: "G1c", Explanation: "a cycle\nof two"}, {Type: "G2", Explanation: "another"}}}
	for _, c := range []struct{ history, want string }{
		{"", "first anomaly: G1c\n  a cycle\n  of two\n4 more anomalies: run again with --history FILE, then meridian check --model serializable FILE\n"},
		{"h.jsonl", "first anomaly: G1c\n  a cycle\n  of two\n4 more anomalies: meridian check --model serializable h.jsonl\n"},
	} {
		var b strings.Builder
		printFirstAnomaly(&b, &bench.Result{Check: rep}, c.history)
		if got := strings.TrimPrefix(b.String(), "\n"); got != c.want {
			t.Errorf("history %q: printed\n%s\nwant\n%s", c.history, got, c.want)
		}
	}
	var b strings.Builder
	printFirstAnomaly(&b, &bench.Result{Check: &check.Report{Verdict: check.Valid}}, "")
	if b.Len() != 0 {
		t.Errorf("a valid history printed %q", b.String())
	}
}

// A skew of a clock the protocol never reads is said to have had no effect: spanner reads
// TrueTime on its data nodes, and its oracles sit idle (review: a spanner run skewing an oracle
// looked like an experiment under a clock fault and was an honest run). The data node's 1 ms step
// stays within a 5 ms ε: past the default 100 µs, spanner's commit waits end early and its
// timestamps lie past its replies (timestamp-lifetime).
func TestSimClockSkewUnread(t *testing.T) {
	m := simJSON(t, "--protocol", "spanner", "--workload", "list-append", "--clients", "2", "--duration", "1s", "--epsilon", "5ms",
		"--clock-skew", "sh-oracle@0s=20ms", "--clock-skew", "sh-1@0s=1ms")
	want := []any{
		map[string]any{"node": float64(0), "name": "sh-1", "at": "0s", "by": "1ms"},
		map[string]any{"node": float64(5), "name": "sh-oracle", "at": "0s", "by": "20ms", "unread": true},
	}
	if !reflect.DeepEqual(m["clock_skews"], want) {
		t.Errorf("clock skews %v, want %v", m["clock_skews"], want)
	}
}
