package main

import (
	"fmt"
	"io"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/meridiandb/meridian/internal/bench"
	"github.com/meridiandb/meridian/internal/check"
	"github.com/meridiandb/meridian/internal/sim"
)

// A seed sweep (sim --seeds N) runs one deployment, workload and fault schedule under N seeds
// and judges each run as a single sim does: a reviewer looking for the rare interleaving that
// breaks a protocol, or showing that a mutant is caught, sweeps seeds without a shell loop and
// gets the failing seeds to rerun alone.

// simPlan is one simulation to run: its deployment and what runs on it.
type simPlan struct {
	cfg  sim.Config
	spec bench.Spec
}

// seedRun is one seed's run in a sweep: its result, and what failedConsistency made of it.
type seedRun struct {
	Seed   uint64        `json:"seed"`
	Status string        `json:"status"`          // ok, failed or unknown (exit status 0, 1 or 2 alone)
	Error  string        `json:"error,omitempty"` // why it failed, or why it could not be judged
	Result *bench.Result `json:"result"`          // nil if the run panicked
}

// seedSweep is a sweep's JSON: every run, then the seeds that failed and that could not be
// judged.
type seedSweep struct {
	Runs    []*seedRun `json:"runs"`
	OK      int        `json:"ok"`
	Failed  []uint64   `json:"failed"`
	Unknown []uint64   `json:"unknown"`
}

// seedStatus judges one run as its exit status would, and says every way it failed in one
// line (a run alone prints each in full).
func seedStatus(res *bench.Result) *seedRun {
	r := &seedRun{Seed: res.Seed, Status: "ok", Result: res}
	err := failedConsistency(res)
	if err == nil {
		return r
	}
	if e, ok := err.(*exitError); ok && e.code == 2 {
		r.Status, r.Error = "unknown", err.Error()
		return r
	}
	r.Status = "failed"
	var why []string
	if model, verdict, n := checkVerdict(res); verdict == check.Invalid {
		w := fmt.Sprintf("the history is not %s: %s", model, counted(n, "anomaly", "anomalies"))
		if rep := res.Check.(*check.Report); len(rep.Anomalies) > 0 {
			w += " (first: " + rep.Anomalies[0].Type + ")"
		}
		why = append(why, w)
	}
	if res.Consistency != "" && res.Consistency != "ok" {
		why = append(why, "consistency: "+res.Consistency)
	}
	if d := res.Durability; d.Err() != nil {
		if d.NotRun != "" {
			why = append(why, "durability not checked: "+d.NotRun)
		} else {
			why = append(why, fmt.Sprintf("durability VIOLATED: %d of %d acknowledged writes lost, %d read stale, %d of %d failed writes took effect",
				len(d.Lost), d.Acknowledged, len(d.Stale), len(d.Undone), d.Failed))
		}
	}
	r.Error = strings.Join(why, "; ")
	return r
}

// sweepParallel is how many of a sweep's simulations run at once: asked, or one per CPU as
// far as memory allows. memoryNeed is a lower bound (a run measured ~1.4 times it), so two
// of it per run keep a sweep clear of the machine's limit.
func sweepParallel(asked int, need int64, seeds int) int {
	if asked > 0 {
		return min(asked, seeds)
	}
	n := runtime.NumCPU()
	if avail := heapLimit(memoryLimit()); avail > 0 && need > 0 {
		n = min(n, int(max(avail/(2*need), 1)))
	}
	return max(min(n, seeds), 1)
}

// runSeeds runs seeds c.sf.seed … c.sf.seed+c.seeds-1, parallel at a time, and prints each
// run's line in seed order as soon as the runs before it are done. build returns a seed's
// deployment and spec (each run its own workload: a workload keeps state across a run). The
// exit status is 1 if any run failed, else 2 if any could not be judged.
func (c *simCommand) runSeeds(out io.Writer, parallel int, build func(seed uint64) (simPlan, error), model string) error {
	first := c.sf.seed
	runs := make([]*seedRun, c.seeds)
	var (
		mu       sync.Mutex
		firstErr error
		printed  int
		wg       sync.WaitGroup
		next     = make(chan int)
	)
	if !c.json {
		fmt.Fprintf(out, "seeds %d–%d, %s\n", first, first+uint64(c.seeds)-1, sweepChecks(model, c.verify))
		fmt.Fprintf(out, seedLineFormat, "seed", "digest", "committed", "aborts", "crashes", "cuts", "steps", "slows", "result")
	}
	for range parallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				run, err := runSeed(build, first+uint64(i), model)
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = fmt.Errorf("seed %d: %w", first+uint64(i), err)
				}
				runs[i] = run
				// Lines leave in seed order: each waits for the runs before it.
				for ; printed < len(runs) && runs[printed] != nil && !c.json; printed++ {
					printSeedLine(out, runs[printed])
				}
				mu.Unlock()
			}
		}()
	}
	for i := range runs {
		mu.Lock()
		stop := firstErr != nil
		mu.Unlock()
		if stop {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
	if firstErr != nil {
		return firstErr
	}
	sweep := &seedSweep{Runs: runs, Failed: []uint64{}, Unknown: []uint64{}}
	for _, r := range runs {
		switch r.Status {
		case "ok":
			sweep.OK++
		case "failed":
			sweep.Failed = append(sweep.Failed, r.Seed)
		default:
			sweep.Unknown = append(sweep.Unknown, r.Seed)
		}
	}
	if c.json {
		if err := writeJSON(out, sweep); err != nil {
			return err
		}
	} else {
		printSweepSummary(out, sweep)
	}
	switch {
	case len(sweep.Failed) > 0:
		return &exitError{code: 1, err: fmt.Errorf("%s of %d failed: %s", counted(len(sweep.Failed), "run", "runs"), len(runs), seedList(sweep.Failed))}
	case len(sweep.Unknown) > 0:
		return &exitError{code: 2, err: fmt.Errorf("%s of %d could not be judged: %s", counted(len(sweep.Unknown), "run", "runs"), len(runs), seedList(sweep.Unknown))}
	}
	return nil
}

// runSeed runs and judges one seed. The history is dropped once checked: a sweep of many
// seeds would otherwise hold every one. A run that panics (a protocol's broken invariant) fails
// its seed, named, rather than take the sweep down with it: a sweep is where one is found.
func runSeed(build func(seed uint64) (simPlan, error), seed uint64, model string) (run *seedRun, err error) {
	defer func() {
		if p := recover(); p != nil {
			run, err = &seedRun{Seed: seed, Status: "failed", Error: fmt.Sprintf("panic: %v", p)}, nil
		}
	}()
	plan, err := build(seed)
	if err != nil {
		return nil, err
	}
	res, err := bench.SimRun(plan.cfg, plan.spec)
	if err != nil {
		return nil, optionError(err)
	}
	if model != "" {
		if err := attachCheck(res, model); err != nil {
			return nil, err
		}
	}
	res.History = nil
	return seedStatus(res), nil
}

// sweepChecks says what every run of a sweep is judged by.
func sweepChecks(model string, verify bool) string {
	var checks []string
	if model != "" {
		checks = append(checks, "each history checked "+model)
	}
	if verify {
		checks = append(checks, "the workload's own checks")
	}
	if len(checks) == 0 {
		return "nothing checked (--check none --verify=false)"
	}
	return strings.Join(checks, ", and ")
}

// seedLineFormat lays a sweep's lines out in fixed columns: they are printed one by one, as
// their runs end.
const seedLineFormat = "%-6v  %-16v  %9v  %6v  %7v  %4v  %5v  %5v  %v\n"

func printSeedLine(w io.Writer, r *seedRun) {
	result := r.Status
	if r.Error != "" {
		result += ": " + r.Error
	}
	if r.Result == nil { // the run panicked
		fmt.Fprintf(w, seedLineFormat, r.Seed, "-", "-", "-", "-", "-", "-", "-", result)
		return
	}
	cuts, slows := 0, 0
	if r.Result.Network != nil {
		cuts, slows = len(r.Result.Network.Partitions), len(r.Result.Network.Slowdowns)
	}
	fmt.Fprintf(w, seedLineFormat, r.Seed, r.Result.TraceDigest, r.Result.Committed, fmt.Sprintf("%.1f%%", 100*r.Result.AbortRate),
		len(r.Result.Crashes), cuts, clockSteps(r.Result.ClockSkews), slows, result)
}

// clockSteps counts the skews that move a server's clock away from honest (a --random-skews
// step, not its return): a sweep line shows a seed that drew no step.
func clockSteps(skews []bench.ClockSkewRecord) int {
	off := map[int]time.Duration{}
	n := 0
	for _, k := range skews { // by time
		by, err := time.ParseDuration(k.By)
		if err != nil {
			continue
		}
		if off[k.Node] += by; off[k.Node] != 0 {
			n++
		}
	}
	return n
}

func printSweepSummary(w io.Writer, s *seedSweep) {
	fmt.Fprintf(w, "\n%d ok, %d failed, %d could not be judged", s.OK, len(s.Failed), len(s.Unknown))
	if len(s.Failed) > 0 {
		fmt.Fprintf(w, "; failed: %s", seedList(s.Failed))
	}
	if len(s.Unknown) > 0 {
		fmt.Fprintf(w, "; not judged: %s", seedList(s.Unknown))
	}
	fmt.Fprintln(w)
	if bad := append(s.Failed, s.Unknown...); len(bad) > 0 {
		fmt.Fprintf(w, "to see one: the same command with --seed %d in place of --seeds (and --history FILE to keep its history)\n", bad[0])
	}
}

func seedList(seeds []uint64) string {
	parts := make([]string, len(seeds))
	for i, s := range seeds {
		parts[i] = strconv.FormatUint(s, 10)
	}
	return strings.Join(parts, ", ")
}
