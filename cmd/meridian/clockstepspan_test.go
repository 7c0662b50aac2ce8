package main

import (
	"fmt"
	"strings"
	"testing"
)

// A K2 coordinator's clock stepped back and forth within ε must not shorten its commit waits or
// stretch its batches' TTL: K2 counts both as spans of local time, which a step is not. They were
// measured with the steppable clock: with the oracles ±17 ms off (on TrueTime errors up to the
// simulator's 8 ms ε, so within the 25 ms K2 assumes) and coordinator 0 stepped +20 ms and back
// every 10 ms, seeds 6-8 of 8 were not strictly serializable (review). K2 now measures spans with
// Env.Elapsed, which no step moves; the same steps with no commit wait are still caught.
func TestK2CoordinatorClockStepsWithinEpsilon(t *testing.T) {
	args := []string{"sim", "--protocol", "k2", "--topology", "uniform:2:2", "--epsilon", "8ms", "--truetime-error", "full",
		"--opt", "epsilon=25ms", "--workload", "list-append", "--keys", "10", "--clients", "20", "--duration", "8s", "--warmup", "200ms",
		"--clock-skew", "2@0s=17ms", "--clock-skew", "3@0s=-17ms", "--seed", "6", "--seeds", "3"}
	for at := 0; at < 8200; at += 20 {
		args = append(args, "--clock-skew", fmt.Sprintf("0@%dms=20ms", at), "--clock-skew", fmt.Sprintf("0@%dms=-20ms", at+10))
	}
	if out, errs, code := run(t, args...); code != 0 {
		t.Fatalf("k2 under coordinator steps within ε: exit %d\n%s%s", code, out, errs)
	}
	out, errs, code := run(t, append(args, "--opt", "mutant=no-commit-wait")...)
	if code != 1 || !strings.Contains(out, "failed") {
		t.Fatalf("the no-commit-wait mutant under the same steps: exit %d, want 1\n%s%s", code, out, errs)
	}
}
