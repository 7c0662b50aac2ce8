// Package repro reproduces the papers' experiments in the simulator: each named experiment is a
// sweep of one parameter over several protocols (or protocol variants), run as independent
// deterministic simulations, written out as a CSV, plots (PNG and SVG) with the paper's axes,
// and a markdown report that puts the paper's reported numbers beside ours.
//
// Experiments never tune the model toward the paper: they use the simulator's defaults (K2's
// clock parameters, 5 µs per message, 0.5 ms flushes) and the paper's workload parameters, and the
// report says where and why our numbers differ.
package repro

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/meridiandb/meridian/internal/bench"
	"github.com/meridiandb/meridian/internal/report"
)

// Scale sizes an experiment.
type Scale struct {
	Name             string
	NodesPerRegion   int
	ClientsPerRegion int
	Warmup, Duration time.Duration
}

// Scales: quick runs in minutes on two cores; paper matches the papers' deployments more
// closely (5 data nodes per region) and takes much longer.
var (
	Quick = Scale{Name: "quick", NodesPerRegion: 1, ClientsPerRegion: 20, Warmup: 500 * time.Millisecond, Duration: 2 * time.Second}
	Paper = Scale{Name: "paper", NodesPerRegion: 5, ClientsPerRegion: 200, Warmup: time.Second, Duration: 5 * time.Second}
)

// ScaleByName finds a scale.
func ScaleByName(name string) (Scale, error) {
	switch name {
	case "quick":
		return Quick, nil
	case "paper":
		return Paper, nil
	}
	return Scale{}, fmt.Errorf("unknown scale %q (want quick or paper)", name)
}

// Run is one simulation of an experiment: a point X of series Series.
type Run struct {
	Series string
	X      float64
	Deploy bench.Deployment
	Spec   bench.Spec
	Params bench.WorkloadParams
	// Result is the run's result; with several seeds, the mean of PerSeed (bench.MeanResult).
	Result *bench.Result
	// PerSeed holds each seed's result when the experiment ran with more than one.
	PerSeed []*bench.Result
}

// Experiment is a named reproduction.
type Experiment struct {
	Name  string
	Paper string // which paper and figure
	About string
	// Plan lists the runs at a scale.
	Plan func(sc Scale, seed uint64) []*Run
	// NodesPerRegion, if set, is the data nodes per region the plan uses whatever the scale
	// (the report's header says so instead of the scale's).
	NodesPerRegion int
	// Report turns finished runs into files in dir and returns the markdown body.
	Report func(runs []*Run, dir string) (string, error)
	// Extend, if set, is asked after the planned runs (and after each extension) for more runs
	// of one seed's plan, given the means over seeds so far: a load sweep continues past an edge
	// where a series is still at its best, so that a peak is measured rather than bounded. It
	// must decide from means alone, so that every seed's plan grows alike, and return nil when
	// done; Execute asks at most maxExtensions times.
	Extend func(sc Scale, means, plan []*Run) []*Run
}

// maxExtensions bounds how often Execute extends a plan, since each extension runs every seed
// again at a load the plan did not foresee (at paper scale, minutes and gigabytes each).
const maxExtensions = 2

var experiments = map[string]*Experiment{}

func register(e *Experiment) { experiments[e.Name] = e }

// List returns the experiments sorted by name.
func List() []*Experiment {
	out := make([]*Experiment, 0, len(experiments))
	for _, e := range experiments {
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Lookup finds an experiment by name.
func Lookup(name string) (*Experiment, error) {
	if e, ok := experiments[name]; ok {
		return e, nil
	}
	var names []string
	for _, e := range List() {
		names = append(names, e.Name)
	}
	return nil, fmt.Errorf("unknown experiment %q (known: %s)", name, strings.Join(names, ", "))
}

// Options control a reproduction.
type Options struct {
	Scale Scale
	Seed  uint64
	// Seeds, if above 1, runs every point with seeds Seed, Seed+1, … and reports their mean.
	Seeds    int
	Out      string // directory; the experiment writes into Out/<name>
	Parallel int    // simulations at once (0: number of CPUs)
	// Progress is called after each run with (done, total), counted over every round: an
	// extension round raises total by the runs it adds.
	Progress func(done, total int)
}

// Execute runs an experiment and writes its report. It returns the report's path.
func Execute(e *Experiment, o Options) (string, error) {
	seeds := max(o.Seeds, 1)
	plans := make([][]*Run, seeds)
	var all []*Run
	for i := range plans {
		plans[i] = e.Plan(o.Scale, o.Seed+uint64(i))
		all = append(all, plans[i]...)
	}
	if o.Parallel <= 0 {
		o.Parallel = runtime.NumCPU()
		if o.Scale.Name == "paper" {
			// A paper-scale simulation holds several GB (k2-fig18 peaked at ~10 GB per run);
			// two at once came within reach of this machine's 24 GB.
			o.Parallel = 1
		}
	}
	// Rounds count on from the runs before them, so that progress covers the extensions too
	// (at paper scale they hold the longest runs).
	doneBefore, planned, report := 0, len(all), o.Progress
	if report != nil {
		o.Progress = func(done, _ int) { report(doneBefore+done, planned) }
	}
	if err := runAll(e, all, o); err != nil {
		return "", err
	}
	doneBefore += len(all)
	runs, err := meanOverSeeds(plans)
	if err != nil {
		return "", err
	}
	for round := 0; e.Extend != nil && round < maxExtensions; round++ {
		var more []*Run
		for i := range plans {
			extra := e.Extend(o.Scale, runs, plans[i])
			plans[i] = append(plans[i], extra...)
			more = append(more, extra...)
		}
		if len(more) == 0 {
			break
		}
		planned += len(more)
		if err := runAll(e, more, o); err != nil {
			return "", err
		}
		doneBefore += len(more)
		if runs, err = meanOverSeeds(plans); err != nil {
			return "", err
		}
	}
	dir := filepath.Join(o.Out, e.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	body, err := e.Report(runs, dir)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# %s — %s\n\n%s\n\n", e.Name, e.Paper, e.About)
	nodes := o.Scale.NodesPerRegion
	if e.NodesPerRegion > 0 {
		nodes = e.NodesPerRegion
	}
	seedsText, seedsFlag := fmt.Sprintf("seed %d", o.Seed), ""
	if seeds > 1 {
		seedsText = fmt.Sprintf("seeds %d–%d: every number is the mean of the %d runs of its point (an abort rate pools their attempts: all aborted over all attempted), and the CSV adds each column's lowest and highest (a seed drives the simulator and the clients' random choices; the initial database is the same for every seed)", o.Seed, o.Seed+uint64(seeds)-1, seeds)
		seedsFlag = fmt.Sprintf(" --seeds %d", seeds)
	}
	if rev := buildRevision(); rev != "" {
		fmt.Fprintf(&b, "Built from commit `%s`. ", rev)
	}
	fmt.Fprintf(&b, "Scale `%s` (%d data nodes per region, %d clients per region, %v warm-up, %v measured, virtual time), %s. "+
		"Reproduce with `meridian repro %s --scale %s --seed %d%s`.\n\n", o.Scale.Name, nodes, o.Scale.ClientsPerRegion,
		o.Scale.Warmup, o.Scale.Duration, seedsText, e.Name, o.Scale.Name, o.Seed, seedsFlag)
	b.WriteString(body)
	path := filepath.Join(dir, "report.md")
	return path, os.WriteFile(path, []byte(b.String()), 0o644)
}

// runAll runs every simulation, o.Parallel at a time.
func runAll(e *Experiment, runs []*Run, o Options) error {
	var (
		mu       sync.Mutex
		firstErr error
		done     int
		wg       sync.WaitGroup
		next     = make(chan *Run)
	)
	// Each simulation is single-threaded and deterministic; independent ones run side by side.
	for w := 0; w < o.Parallel; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range next {
				err := execute(r)
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = fmt.Errorf("%s at %s=%g (seed %d): %w", e.Name, r.Series, r.X, r.Deploy.Seed, err)
				}
				done++
				if o.Progress != nil {
					o.Progress(done, len(runs))
				}
				mu.Unlock()
			}
		}()
	}
	for _, r := range runs {
		next <- r
	}
	close(next)
	wg.Wait()
	return firstErr
}

// meanOverSeeds folds the plans of several seeds into copies of the first's runs, each holding
// the mean of its point's results and every seed's own. The plans keep their own results, so
// that it can be called again after they grow.
func meanOverSeeds(plans [][]*Run) ([]*Run, error) {
	if len(plans) == 1 {
		return plans[0], nil
	}
	runs := make([]*Run, len(plans[0]))
	for j, r := range plans[0] {
		per := make([]*bench.Result, len(plans))
		for i, p := range plans {
			if len(p) != len(plans[0]) || p[j].Series != r.Series || p[j].X != r.X {
				return nil, fmt.Errorf("repro: the plan differs between seeds at %s=%g", r.Series, r.X)
			}
			per[i] = p[j].Result
		}
		mean, err := bench.MeanResult(per)
		if err != nil {
			return nil, err
		}
		m := *r
		m.Result, m.PerSeed = mean, per
		runs[j] = &m
	}
	return runs, nil
}

// buildRevision names the commit the binary was built from (with "+changes" if the tree had
// uncommitted changes), so that a committed report says which code produced it; "" when the
// build carries no version control information (go test, or a build outside a checkout).
func buildRevision() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	var rev string
	dirty := false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if rev != "" && dirty {
		rev += "+changes"
	}
	return rev
}

func execute(r *Run) error {
	cfg, err := bench.SimConfig(r.Deploy)
	if err != nil {
		return err
	}
	wl, err := bench.BuildWorkload(cfg.Topology, r.Params)
	if err != nil {
		return err
	}
	spec := r.Spec
	spec.Workload = wl
	r.Result, err = bench.SimRun(cfg, spec)
	return err
}

// seriesOf groups runs by series in first-appearance order, each sorted by X.
func seriesOf(runs []*Run) (names []string, by map[string][]*Run) {
	by = map[string][]*Run{}
	for _, r := range runs {
		if _, ok := by[r.Series]; !ok {
			names = append(names, r.Series)
		}
		by[r.Series] = append(by[r.Series], r)
	}
	for _, rs := range by {
		sort.Slice(rs, func(i, j int) bool { return rs[i].X < rs[j].X })
	}
	return names, by
}

// metric extracts one number from a run.
type metric struct {
	column, axis, file string
	logY               bool
	get                func(*Run) float64
}

// sweepReport writes the CSV and one line chart per metric, and returns the markdown table.
// With several seeds the table and charts show the means, and the CSV adds each metric's lowest
// and highest value over the seeds.
func sweepReport(runs []*Run, dir, xName, xAxis, title string, metrics []metric) (string, error) {
	names, by := seriesOf(runs)
	var cols []string
	var gets []func(*Run) float64
	for _, m := range metrics {
		cols, gets = append(cols, m.column), append(gets, m.get)
	}
	tbl, csv := rangedTables(runs, []string{"series", xName}, cols)
	for _, n := range names {
		for _, r := range by[n] {
			addRanged(tbl, csv, r, []any{n, r.X}, gets)
		}
	}
	if err := csv.WriteCSV(filepath.Join(dir, "results.csv")); err != nil {
		return "", err
	}
	var b strings.Builder
	for _, m := range metrics {
		var ss []report.Series
		for _, n := range names {
			s := report.Series{Name: n}
			for _, r := range by[n] {
				s.X = append(s.X, r.X)
				s.Y = append(s.Y, m.get(r))
			}
			ss = append(ss, s)
		}
		if err := report.LineChart(filepath.Join(dir, m.file), report.Chart{Title: title, XLabel: xAxis, YLabel: m.axis, LogY: m.logY}, ss); err != nil {
			return "", err
		}
		fmt.Fprintf(&b, "![%s](%s.png)\n", m.axis, m.file)
	}
	return tbl.Markdown() + "\n" + b.String(), nil
}

// rangedTables starts a report's markdown table and its CSV: both have the fixed columns and
// then cols; with several seeds the CSV follows each of cols with its lowest and highest.
func rangedTables(runs []*Run, fixed, cols []string) (tbl, csv *report.Table) {
	tbl = &report.Table{Columns: slices.Clone(fixed)}
	csv = &report.Table{Columns: slices.Clone(fixed)}
	seeded := len(runs) > 0 && len(runs[0].PerSeed) > 1
	for _, c := range cols {
		tbl.Columns = append(tbl.Columns, c)
		csv.Columns = append(csv.Columns, c)
		if seeded {
			csv.Columns = append(csv.Columns, c+" min", c+" max")
		}
	}
	return tbl, csv
}

// addRanged adds r's row to tables made by rangedTables: the fixed values, then each of gets
// on r (the mean over seeds), in the CSV followed by its lowest and highest over the seeds.
func addRanged(tbl, csv *report.Table, r *Run, fixed []any, gets []func(*Run) float64) {
	row, csvRow := slices.Clone(fixed), slices.Clone(fixed)
	seeded := len(csv.Columns) > len(tbl.Columns)
	for _, get := range gets {
		row = append(row, get(r))
		csvRow = append(csvRow, get(r))
		if seeded {
			vs := overSeeds(r, get)
			csvRow = append(csvRow, slices.Min(vs), slices.Max(vs))
		}
	}
	tbl.Add(row...)
	csv.Add(csvRow...)
}

// overSeeds evaluates get on each seed's result of r (on r's own when it ran with one seed).
func overSeeds(r *Run, get func(*Run) float64) []float64 {
	if len(r.PerSeed) == 0 {
		return []float64{get(r)}
	}
	out := make([]float64, len(r.PerSeed))
	for i, res := range r.PerSeed {
		c := *r
		c.Result, c.PerSeed = res, nil
		out[i] = get(&c)
	}
	return out
}

// Common metric extractors.
func throughput(r *Run) float64 { return r.Result.Throughput }
func p90(r *Run) float64        { return r.Result.Latency.P90 }
func meanLatency(r *Run) float64 {
	return r.Result.Latency.Mean
}
func abortRate(r *Run) float64 { return 100 * r.Result.AbortRate }

// counter returns a protocol metrics counter, 0 if absent. Over several seeds it is the mean
// of each seed's count: the averaged result rounds counters to integers, which a scaled count
// (deadlocks per 30 s from a 2 s window) would multiply into an error of several.
func counter(r *Run, name string) float64 {
	if len(r.PerSeed) > 1 {
		vs := overSeeds(r, func(c *Run) float64 { return counter(c, name) })
		sum := 0.0
		for _, v := range vs {
			sum += v
		}
		return sum / float64(len(vs))
	}
	if r.Result.ProtocolMetrics == nil {
		return 0
	}
	return float64(r.Result.ProtocolMetrics.Counters[name])
}

// dist returns a protocol metrics distribution's p90 in ms, 0 if absent.
func distP90(r *Run, name string) float64 {
	if r.Result.ProtocolMetrics == nil {
		return 0
	}
	return r.Result.ProtocolMetrics.Distributions[name].P90
}

// distP50 returns a protocol metrics distribution's median in ms, 0 if absent.
func distP50(r *Run, name string) float64 {
	if r.Result.ProtocolMetrics == nil {
		return 0
	}
	return r.Result.ProtocolMetrics.Distributions[name].P50
}

// typeP90 returns the p90 latency of one transaction type.
func typeP90(r *Run, typ string) float64 { return r.Result.PerType[typ].Latency.P90 }

// per30s scales a window count to a 30-second window (K2 Fig. 17d counts deadlocks in 30 s).
func per30s(r *Run, n float64) float64 {
	secs := r.Spec.Duration.Seconds()
	if secs <= 0 {
		return 0
	}
	return n * 30 / secs
}

// distCount returns how many samples a protocol metrics distribution holds, 0 if absent.
func distCount(r *Run, name string) int64 {
	if r.Result.ProtocolMetrics == nil {
		return 0
	}
	return r.Result.ProtocolMetrics.Distributions[name].Count
}
