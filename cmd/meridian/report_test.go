package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/meridiandb/meridian/internal/bench"
	"github.com/meridiandb/meridian/internal/check"
)

// TestCheckLineClaimsFinalReadOnlyIfItRan: a run whose final read could not finish (a node
// still down when the run ended) must not say its checked history includes one.
func TestCheckLineClaimsFinalReadOnlyIfItRan(t *testing.T) {
	for _, c := range []struct {
		name string
		d    *bench.Durability
		want string
	}{
		{"ran", &bench.Durability{Keys: 3}, "warm-up, drain and final read included)"},
		{"not run", &bench.Durability{NotRun: "sh-1 unreachable"}, "warm-up and drain included; the final read did not finish)"},
		{"no final read", nil, "warm-up and drain included)"},
	} {
		r := &bench.Result{Durability: c.d, Check: &check.Report{Model: "serializable", Verdict: check.Valid}}
		var out bytes.Buffer
		printResult(&out, r)
		var line string
		for l := range strings.Lines(out.String()) {
			if strings.HasPrefix(l, "check") {
				line = l
			}
		}
		if !strings.HasSuffix(strings.TrimSpace(line), c.want) {
			t.Errorf("%s: check line %q, want it to end %q", c.name, line, c.want)
		}
	}
}

// A check that held transactions to their commit timestamps says so on a line of its own.
func TestTimestampsLine(t *testing.T) {
	for _, n := range []int{0, 42} {
		r := &bench.Result{Check: &check.Report{Model: "serializable", Verdict: check.Valid, Counts: check.Counts{Timestamped: n}}}
		var out bytes.Buffer
		printResult(&out, r)
		has := strings.Contains(out.String(), "42 committed transactions held to their commit timestamps")
		if has != (n > 0) {
			t.Errorf("timestamped %d: printed\n%s", n, out.String())
		}
	}
}
