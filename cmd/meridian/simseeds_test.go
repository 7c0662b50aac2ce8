package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/meridiandb/meridian/client"
	"github.com/meridiandb/meridian/internal/bench"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/workload"
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
		// As the summary's hint says: the same command, --seed in place of --seeds.
		alone, _, aloneCode := run(t, append(mutant, "--seed", seed, "--parallel", "2")...)
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
		{[]string{"--seeds", "0"}, "--seeds 0: want 1..10000"},
		// A sweep keeps every seed's result: too many seeds panicked making the slice for
		// them, or ran out of memory part-way.
		{[]string{"--seeds", "9223372036854775807"}, "--seeds 9223372036854775807: want 1..10000"},
		{[]string{"--seeds", "10001"}, "--seeds 10001: want 1..10000"},
		{[]string{"--seeds", "3", "--parallel", "-1"}, "--parallel -1"},
		{[]string{"--seeds", "2", "--history", "h.jsonl"}, "--history is for one run"},
		{[]string{"--seeds", "2", "--cpuprofile", "cpu.prof"}, "--cpuprofile is for one run"},
		{[]string{"--seed", fmt.Sprint(uint64(1<<64 - 1)), "--seeds", "2"}, "the last seed would pass"},
	} {
		expectSimRefused(t, c.args, c.want)
	}
}

// --random-crashes draws each seed's crash schedule: a run lists the crashes it ran, the same
// for one seed, and a sweep's seeds run different ones. Under them the k2 recorder that
// answers a commit before it is durable is caught, and k2 itself is not.
func TestSimRandomCrashes(t *testing.T) {
	base := []string{"--protocol", "k2", "--workload", "list-append", "--read-back", "--keys", "10", "--clients", "8",
		"--flush-latency", "400ms", "--random-crashes", "300ms-3s/1.5s", "--duration", "10s"}
	expectOneSchedulePerSeed(t, base, "crash", func(m map[string]any) any { return m["crashes"] })
	out, errs, code := run(t, append(append([]string{"sim"}, base...), "--seeds", "5")...)
	if code != 0 {
		t.Fatalf("k2 under random crashes: exit %d\n%s%s", code, out, errs)
	}
	out, errs, code = run(t, append(append([]string{"sim"}, base...), "--seeds", "5", "--opt", "mutant=early-commit")...)
	if code != 1 || !strings.Contains(out, "durability VIOLATED") {
		t.Fatalf("early-commit under random crashes: exit %d, want 1 with acknowledged writes lost\n%s%s", code, out, errs)
	}
}

func TestSimRandomCrashesBadInput(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--random-crashes", "1s"}, "want GAP/FOR"},
		{[]string{"--random-crashes", "1s/later"}, `length "later" is not a duration`},
		{[]string{"--random-crashes", "2s-1s/1s"}, "want 0 ≤ A ≤ B"},
		{[]string{"--random-crashes", "10s/1s"}, "no fault fits a run of 2s: shorten the gap or the length (a run is its warm-up and its duration)"},
		{[]string{"--random-crashes", "1s/1s", "--crash", "0@1s/100ms"}, "give it or --crash, not both"},
	} {
		expectSimRefused(t, c.args, "--random-crashes", c.want)
	}
}

// --random-partitions draws each seed's partitions as --random-crashes draws crashes.
func TestSimRandomPartitions(t *testing.T) {
	base := []string{"--protocol", "crdb", "--workload", "list-append", "--clients", "4", "--random-partitions", "500ms-2s/1s", "--duration", "6s"}
	expectOneSchedulePerSeed(t, base, "partition", func(m map[string]any) any {
		net, _ := m["network_faults"].(map[string]any)
		return net["partitions"]
	})
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--random-partitions", "1s/1s", "--partition", "SH|BJ@1s/1s"}, "give it or --partition, not both"},
		{[]string{"--random-partitions", "1s-x/1s"}, `gap "1s-x" is not a duration`},
		{[]string{"--random-partitions", "500ms/1s", "--topology", "single-dc"}, "the topology has no pair of regions to cut"},
	} {
		expectSimRefused(t, c.args, "--random-partitions", c.want)
	}
}

// expectOneSchedulePerSeed runs sim with base at seeds 1, 1 and 2 and expects the faults pick
// finds in each result (a list of what) to be the same for one seed and to differ between two:
// a random fault flag draws each seed's schedule, and draws some.
func expectOneSchedulePerSeed(t *testing.T, base []string, what string, pick func(m map[string]any) any) {
	t.Helper()
	faultsOf := func(seed string) []any {
		m := simJSON(t, append(base, "--seed", seed)...)
		fs, _ := pick(m).([]any)
		if len(fs) == 0 {
			t.Fatalf("seed %s ran no %s: %v", seed, what, pick(m))
		}
		return fs
	}
	one, again, other := faultsOf("1"), faultsOf("1"), faultsOf("2")
	if !reflect.DeepEqual(one, again) || reflect.DeepEqual(one, other) {
		t.Errorf("seed 1 ran %v then %v; seed 2 ran %v: want one schedule per seed", one, again, other)
	}
}

// expectSimRefused runs sim with args and expects it refused: exit 1, nothing on standard
// output, and one line on standard error holding every one of wants.
func expectSimRefused(t *testing.T, args []string, wants ...string) {
	t.Helper()
	out, errs, code := run(t, append([]string{"sim", "--duration", "1s"}, args...)...)
	line := strings.TrimSpace(errs)
	ok := code == 1 && out == "" && !strings.Contains(line, "\n")
	for _, w := range wants {
		ok = ok && strings.Contains(line, w)
	}
	if !ok {
		t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 1 and one line with %q", args, code, out, errs, wants)
	}
}

// panickingWorkload breaks inside the run, as a protocol's violated invariant would.
type panickingWorkload struct{}

func (panickingWorkload) Name() string { return "panicking" }
func (panickingWorkload) Load(*client.DB) error {
	panic("broken invariant")
}
func (panickingWorkload) NewClient(int, topo.RegionID, *rand.Rand) workload.Client { return nil }

// A run that panics fails its own seed, named, and the sweep goes on.
func TestSeedRunPanicFailsItsSeed(t *testing.T) {
	cfg, err := bench.SimConfig(bench.Deployment{Protocol: "k2", Topology: "k2-5region", NodesPerRegion: 1, ShardsPerNode: 1, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	build := func(uint64) (simPlan, error) {
		return simPlan{cfg: cfg, spec: bench.Spec{Workload: panickingWorkload{}, ClientsPerRegion: 1, Duration: time.Second}}, nil
	}
	run, err := runSeed(build, 7, "")
	if err != nil || run == nil || run.Seed != 7 || run.Status != "failed" || !strings.Contains(run.Error, "panic: broken invariant") {
		t.Fatalf("runSeed: %+v, %v; want seed 7 failed with the panic", run, err)
	}
	var b strings.Builder
	printSeedLine(&b, run)
	if !strings.HasPrefix(b.String(), "7 ") || !strings.Contains(b.String(), "failed: panic: broken invariant") {
		t.Errorf("line %q", b.String())
	}
}

// --random-skews steps servers' clocks by up to ±--skew-by on a schedule drawn from the seed:
// within the 25 ms ε k2 is told to assume, k2 stays strictly serializable; its mutant without
// commit wait, which honest clocks never expose here, is caught.
func TestSimRandomSkews(t *testing.T) {
	base := []string{"--protocol", "k2", "--workload", "list-append", "--keys", "10", "--clients", "6", "--opt", "epsilon=25ms",
		"--random-skews", "200ms-1s/1s", "--skew-by", "20ms", "--duration", "10s"}
	expectOneSchedulePerSeed(t, base, "clock skew", func(m map[string]any) any { return m["clock_skews"] })
	out, errs, code := run(t, append(append([]string{"sim"}, base...), "--seeds", "6")...)
	if code != 0 {
		t.Fatalf("k2 under clock steps within its ε: exit %d\n%s%s", code, out, errs)
	}
	out, errs, code = run(t, append(append([]string{"sim"}, base...), "--seeds", "6", "--opt", "mutant=no-commit-wait")...)
	if code != 1 || !strings.Contains(out, "realtime") {
		t.Fatalf("no-commit-wait under clock steps: exit %d, want 1 with a real-time anomaly\n%s%s", code, out, errs)
	}
	// On honest clocks no cycle and no real-time inversion shows it: the steps, not the seeds,
	// expose those. Its timestamps still lie past its replies (timestamp-lifetime).
	out, errs, code = run(t, "sim", "--protocol", "k2", "--workload", "list-append", "--keys", "10", "--clients", "6",
		"--opt", "epsilon=25ms", "--opt", "mutant=no-commit-wait", "--duration", "10s", "--seeds", "6")
	if code != 1 || strings.Count(out, "(first: timestamp-lifetime)") != 6 {
		t.Fatalf("no-commit-wait on honest clocks: exit %d, want 1 with every seed's first anomaly timestamp-lifetime\n%s%s", code, out, errs)
	}
}

// TestTimestampOrderCatchesWhatCyclesMiss: k2 without commit wait under the clock steps above, at a
// seed where no read witnesses the stale order, so the model's cycle search finds nothing. The
// history's commit timestamps still give it away: a writer that completed before another began
// holds the higher timestamp (timestamp-realtime), which k2's commit wait exists to prevent, and
// writers reply before true time reaches their timestamps (timestamp-lifetime).
func TestTimestampOrderCatchesWhatCyclesMiss(t *testing.T) {
	out, errs, code := run(t, "sim", "--protocol", "k2", "--workload", "list-append", "--keys", "10", "--clients", "6", "--opt", "epsilon=25ms",
		"--opt", "mutant=no-commit-wait", "--random-skews", "200ms-1s/1s", "--skew-by", "20ms", "--duration", "10s", "--seed", "8", "--json")
	var r struct {
		Check struct {
			Verdict      string   `json:"verdict"`
			AnomalyTypes []string `json:"anomaly_types"`
		} `json:"check"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("exit %d, no JSON result: %v\n%s%s", code, err, out, errs)
	}
	if code != 1 || r.Check.Verdict != "invalid" || !slices.Equal(r.Check.AnomalyTypes, []string{"timestamp-lifetime", "timestamp-realtime"}) {
		t.Fatalf("exit %d, verdict %s, anomalies %v: want exit 1, invalid, only timestamp-lifetime and timestamp-realtime", code, r.Check.Verdict, r.Check.AnomalyTypes)
	}
}

func TestSimRandomSkewsBadInput(t *testing.T) {
	for _, c := range []struct {
		args []string
		flag string
		want string
	}{
		{[]string{"--random-skews", "1s/1s"}, "--skew-by", "needs --skew-by, the largest step"},
		{[]string{"--random-skews", "1s/1s", "--skew-by", "1500ns"}, "--skew-by", "whole microseconds"},
		{[]string{"--random-skews", "1s/1s", "--skew-by", "0"}, "--skew-by", "from 1µs to 1h"},
		{[]string{"--skew-by", "5ms"}, "--skew-by", "none was given"},
		{[]string{"--skew-by", "0"}, "--skew-by", "none was given"},
		{[]string{"--random-skews", "1s/1s", "--skew-by", "2h"}, "--skew-by", "from 1µs to 1h"},
		{[]string{"--random-skews", "1s/1s", "--skew-by", "5ms", "--clock-skew", "0@1s=1ms"}, "--random-skews", "give it or --clock-skew, not both"},
		{[]string{"--random-skews", "10s/1s", "--skew-by", "5ms"}, "--random-skews", "no fault fits a run of 2s"},
	} {
		expectSimRefused(t, c.args, c.flag, c.want)
	}
}

// A sweep's line counts each seed's clock steps, as it counts crashes and cuts: a seed that
// drew none (a gap past the run) shows 0, not an "ok" that says nothing about clocks.
func TestSimRandomSkewsSweepCountsSteps(t *testing.T) {
	out, errs, code := run(t, "sim", "--protocol", "k2", "--workload", "list-append", "--keys", "10", "--clients", "2",
		"--opt", "epsilon=25ms", "--random-skews", "3s-12s/1s", "--skew-by", "20ms", "--duration", "10s", "--seeds", "3", "--parallel", "1")
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errs)
	}
	steps := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) >= 8 && (f[1] == "digest" || len(f[1]) == 16) {
			steps[f[0]] = f[6]
		}
	}
	if steps["seed"] != "steps" || steps["1"] != "1" || steps["3"] != "0" {
		t.Errorf("want a steps column, 1 for seed 1 and 0 for seed 3 (which draws none): %v\n%s", steps, out)
	}
}

// --random-slowdowns slows pairs of regions on a seed's schedule: one run lists each slowdown,
// a sweep counts them per seed, and correct protocols stay valid through them (messages that
// arrive seconds late, after the timeouts a cut would trip).
func TestSimRandomSlowdowns(t *testing.T) {
	args := []string{"sim", "--workload", "list-append", "--read-back", "--keys", "8", "--clients", "4",
		"--random-slowdowns", "300ms-1s/1500ms", "--slow-by", "3s", "--duration", "5s"}
	for _, p := range []string{"k2", "spanner", "crdb"} {
		out, errs, code := run(t, append(args, "--protocol", p, "--seeds", "2", "--parallel", "1")...)
		if code != 0 {
			t.Fatalf("%s: exit %d\n%s%s", p, code, out, errs)
		}
		slows := map[string]string{}
		for _, line := range strings.Split(out, "\n") {
			if f := strings.Fields(line); len(f) >= 9 && (f[1] == "digest" || len(f[1]) == 16) {
				slows[f[0]] = f[7]
			}
		}
		if slows["seed"] != "slows" || slows["1"] == "" || slows["1"] == "0" {
			t.Errorf("%s: want a slows column counting seed 1's slowdowns: %v\n%s", p, slows, out)
		}
	}
	out, errs, code := run(t, append(args, "--protocol", "k2", "--seed", "1")...)
	if code != 0 || !regexp.MustCompile(`(?m)^slowdown: [A-Z]+\|[A-Z]+ by [0-9.]+m?s at [0-9.]+m?s for [0-9.]+m?s$`).MatchString(out) {
		t.Errorf("one run: exit %d, want its slowdowns listed\n%s%s", code, out, errs)
	}
	digest := regexp.MustCompile(`(?m)^seed / digest.*$`)
	if again, _, _ := run(t, append(args, "--protocol", "k2", "--seed", "1")...); digest.FindString(again) != digest.FindString(out) || digest.FindString(out) == "" {
		t.Errorf("one seed, two traces under slowdowns: %q and %q", digest.FindString(out), digest.FindString(again))
	}
}

func TestSimRandomSlowdownsBadInput(t *testing.T) {
	for _, c := range []struct {
		args []string
		flag string
		want string
	}{
		{[]string{"--random-slowdowns", "1s/1s"}, "--slow-by", "needs --slow-by"},
		{[]string{"--random-slowdowns", "1s/1s", "--slow-by", "1500ns"}, "--slow-by", "whole microseconds"},
		{[]string{"--random-slowdowns", "1s/1s", "--slow-by", "11s"}, "--slow-by", "from 1µs to 10s"},
		{[]string{"--slow-by", "5ms"}, "--slow-by", "none was given"},
		{[]string{"--random-slowdowns", "10s/1s", "--slow-by", "5ms"}, "--random-slowdowns", "no fault fits a run of 2s"},
		{[]string{"--random-slowdowns", "1s/1s", "--slow-by", "5ms", "--topology", "single-dc"}, "--random-slowdowns", "no pair of regions to slow"},
	} {
		expectSimRefused(t, c.args, c.flag, c.want)
	}
}
