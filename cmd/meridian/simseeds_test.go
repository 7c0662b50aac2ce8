package main

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
)

// A sweep judges each seed as a run of that seed alone does: the same digest and the same
// verdict, whatever runs beside it. A mutant's sweep fails with exit 1 and names its failing
// seeds; the protocol without it passes every seed with exit 0.
func TestSimSeedSweep(t *testing.T) {
	base := []string{"sim", "--protocol", "crdb", "--workload", "list-append", "--keys", "20", "--clients", "6", "--duration", "2s"}
	mutant := append(append([]string{}, base...), "--opt", "mutant=no-refresh")

	out, errs, code := run(t, append(mutant, "--seed", "2", "--seeds", "3", "--parallel", "2")...)
	if code != 1 {
		t.Fatalf("mutant sweep: exit %d, want 1\n%s%s", code, out, errs)
	}
	lines := map[string]string{} // seed: its line
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 1 && regexp.MustCompile(`^[0-9a-f]{16}$`).MatchString(f[1]) {
			lines[f[0]] = l
		}
	}
	if len(lines) != 3 {
		t.Fatalf("want a line for each of seeds 2–4, got:\n%s", out)
	}
	var failed []string
	for _, seed := range []string{"2", "3", "4"} {
		alone, _, aloneCode := run(t, append(mutant, "--seed", seed)...)
		digest := regexp.MustCompile(`seed / digest +[0-9]+ / ([0-9a-f]+)`).FindStringSubmatch(alone)
		if digest == nil {
			t.Fatalf("seed %s alone printed no digest:\n%s", seed, alone)
		}
		line := lines[seed]
		if !strings.Contains(line, digest[1]) {
			t.Errorf("seed %s: sweep line %q, run alone digest %s", seed, line, digest[1])
		}
		if failedLine := strings.Contains(line, "failed: the history is not"); failedLine != (aloneCode == 1) {
			t.Errorf("seed %s: sweep line %q, run alone exit %d", seed, line, aloneCode)
		}
		if aloneCode == 1 {
			failed = append(failed, seed)
		}
	}
	if len(failed) == 0 {
		t.Fatal("the mutant was caught at no seed: the sweep's failure path is untested")
	}
	if want := "failed: " + strings.Join(failed, ", "); !strings.Contains(out, want) {
		t.Errorf("summary does not say %q:\n%s", want, out)
	}
	if !strings.Contains(errs, "failed: "+strings.Join(failed, ", ")) {
		t.Errorf("stderr %q does not name the failed seeds", errs)
	}

	out, errs, code = run(t, append(base, "--seeds", "3", "--json")...)
	if code != 0 {
		t.Fatalf("sweep without the mutant: exit %d\n%s%s", code, out, errs)
	}
	var sweep struct {
		Runs []struct {
			Seed   uint64
			Status string
			Result struct {
				Seed  uint64
				Check struct{ Verdict string }
			}
		}
		OK     int
		Failed []uint64
	}
	if err := json.Unmarshal([]byte(out), &sweep); err != nil {
		t.Fatalf("--seeds --json is not one JSON object: %v\n%s", err, out)
	}
	if sweep.OK != 3 || len(sweep.Failed) != 0 || len(sweep.Runs) != 3 {
		t.Fatalf("sweep %+v, want 3 runs ok", sweep)
	}
	for i, r := range sweep.Runs {
		if r.Seed != uint64(i+1) || r.Result.Seed != r.Seed || r.Status != "ok" || r.Result.Check.Verdict != "valid" {
			t.Errorf("run %d: %+v, want seed %d ok with a valid check", i, r, i+1)
		}
	}
}

// Flags that make no sweep, or belong to one run, are refused with one line.
func TestSimSeedSweepBadInput(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--seeds", "0"}, "--seeds 0: want 1 or more"},
		{[]string{"--seeds", "3", "--parallel", "-1"}, "--parallel -1"},
		{[]string{"--parallel", "2"}, "--parallel is for a sweep of several seeds"},
		{[]string{"--seeds", "2", "--history", "h.jsonl"}, "--history is for one run"},
		{[]string{"--seeds", "2", "--cpuprofile", "cpu.prof"}, "--cpuprofile is for one run"},
		{[]string{"--seed", fmt.Sprint(uint64(1<<64 - 1)), "--seeds", "2"}, "the last seed would pass"},
	} {
		out, errs, code := run(t, append([]string{"sim", "--duration", "1s"}, c.args...)...)
		line := strings.TrimSpace(errs)
		if code != 1 || out != "" || strings.Contains(line, "\n") || !strings.Contains(line, c.want) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 1 and one line with %q", c.args, code, out, errs, c.want)
		}
	}
}
