package main

import (
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/meridiandb/meridian/internal/bench"
	"github.com/meridiandb/meridian/internal/protocol"
	"github.com/meridiandb/meridian/internal/sim"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/workload"
)

type simCommand struct {
	sf               simFlags
	wf               workloadFlags
	clients          int
	duration         time.Duration
	warmup           time.Duration
	history          string
	check            string
	json             bool
	cpuProf          string
	memProf          string
	verify           bool
	crashes          []string
	randomCrashes    string
	randomPartitions string
	randomSkews      string
	skewBy           time.Duration
	randomSlowdowns  string
	slowBy           time.Duration
	skews            []string
	seeds            int
	parallel         int

	loss, duplicate float64
	duplicateDelay  time.Duration
	partitions      []string
}

func newSimCmd() *cobra.Command {
	c := &simCommand{}
	cmd := &cobra.Command{
		Use:   "sim",
		Short: "Run one deterministic simulation of a protocol under a workload",
		Long: `Run one deterministic simulation: a whole multi-region deployment, its network, clocks,
disks and closed-loop clients, in virtual time. The same seed always gives the same trace
(compare trace_digest). Durations are virtual time.

--crash NODE@AT/FOR crashes a data node AT after the clients start (the warm-up counts, loading
does not) and restarts it FOR later from what it had persisted; its clients' connections reset.
NODE is a node id of the topology (data nodes are numbered region by region from 0, oracles
after them) or a name as in cluster configurations, region and place in it from 1: sh-1 is
region SH's first data node. The result lists the crashes it ran under.
--random-crashes GAP/FOR draws the schedule from the seed instead, as a crash review's kill
script makes one: after each gap (a duration, or a range A-B drawn uniformly) a data node that
is up crashes for an outage drawn up to FOR (or from a range), several nodes down at once when
gaps are shorter than outages; --random-partitions GAP/FOR does the same with cuts between
pairs of regions, and --random-slowdowns GAP/FOR with --slow-by D with slowdowns between pairs
of regions: every message between them, both ways, takes an extra delay drawn up to D (links
stay FIFO), so that messages arrive late, after the timeouts a cut would also trip, rather than
never. With --seeds each seed runs its own schedules:
  meridian sim --protocol crdb --workload list-append --read-back --flush-latency 100ms --random-crashes 300ms-3s/1.5s --duration 20s --seeds 10

--loss P and --duplicate P drop, or deliver twice, each message between nodes with probability
P, from the clients' start to the end of the run (drain and verification included). A copy
arrives after its original by an extra delay drawn from the seed, uniform up to
--duplicate-delay, and may overtake messages sent after it. Clients are spared: a real client
talks TCP to a node of its own region, and its messages are only ever cut off with the
connection (--crash). --partition A|B@AT/FOR cuts regions A and B (names as the topology gives
them: SH, BJ) from each other AT after the clients start, for FOR: messages between their nodes
sent meanwhile are lost. The result lists the network faults it ran under.

--clock-skew NODE@AT=BY moves a server's clocks (its TrueTime source and local clock) BY, ahead
or behind (-5ms), AT after the clients start, for the rest of the run; NODE as for --crash, or
an oracle: sh-oracle. The simulator's clocks otherwise stay within their ε, offset and drift
bounds, and a protocol must stay correct there; a skew past the ε a protocol assumes is what
lets a mutant that skips a commit wait show as a cycle (its timestamps give it away on honest
clocks too: a writer replies before true time reaches its timestamp, timestamp-lifetime). To see
k2's caught by a cycle (the same skew within an ε of 25ms that k2 assumes, by --opt epsilon,
leaves k2 itself valid):
  meridian sim --protocol k2 --workload list-append --clients 6 --opt epsilon=25ms --opt mutant=no-commit-wait --clock-skew sh-oracle@0s=20ms
--random-skews GAP/FOR with --skew-by D draws clock steps from the seed: after each gap a server
(data node or oracle) whose clock is not moved is moved by an offset drawn up to ±D, and moved
back after up to FOR. The step adds to the honest clocks' own error (TrueTime strays up to about
0.6ε, or ε with --truetime-error full), and two servers may step opposite ways (2D apart, which
crdb's max-offset must cover). Within what is left of the bound a protocol assumes, every
protocol must stay correct:
  meridian sim --protocol k2 --workload list-append --keys 10 --clients 6 --opt epsilon=25ms --random-skews 200ms-1s/1s --skew-by 20ms --duration 10s --seeds 20
With every clock honest it shows as a cycle where several coordinators share an oracle and
commits are fast (on k2-5region each region's one coordinator hands out increasing timestamps:
with --opt epsilon=25ms only the timestamps' lifetimes show it, and with the default ε nothing
does, its commits ending later than the wait they skip):
  meridian sim --protocol k2 --topology single-dc --nodes-per-region 3 --flush-latency 20us --truetime-error full --workload list-append --keys 10 --zipf 0.99 --clients 8 --max-writes-per-key 32 --opt mutant=no-commit-wait

` + runExitStatuses,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return c.run(cmd) },
	}
	c.sf.register(cmd.Flags())
	c.wf.register(cmd.Flags())
	cmd.Flags().IntVar(&c.clients, "clients", 10, "closed-loop clients per region")
	cmd.Flags().DurationVar(&c.duration, "duration", 5*time.Second, "measured virtual time")
	cmd.Flags().DurationVar(&c.warmup, "warmup", time.Second, "virtual warm-up before measuring")
	cmd.Flags().StringVar(&c.history, "history", "", "write the recorded history (Elle JSON lines) to this file")
	cmd.Flags().StringVar(&c.check, "check", "auto", "check the history: auto (the protocol's promised model), a model name, or none")
	cmd.Flags().BoolVar(&c.json, "json", false, "print one JSON object")
	cmd.Flags().BoolVar(&c.verify, "verify", true, "after the run, verify the workload's own invariants (TPC-C's consistency conditions; list-append's and rw-register's final read of every key, which must find every acknowledged write; YCSB-T with --rmw: each written key's counter must be at least its committed increments and at most those plus the increments of transactions whose outcome is unknown — blind writes are not checked)")
	cmd.Flags().StringVar(&c.randomCrashes, "random-crashes", "", "crash data nodes on a schedule drawn from the seed, as GAP/FOR: after each gap a node that is up crashes for up to FOR; each a duration or a range A-B, e.g. 300ms-3s/1.5s")
	cmd.Flags().StringVar(&c.randomPartitions, "random-partitions", "", "cut pairs of regions on a schedule drawn from the seed, as GAP/FOR: after each gap a pair not cut is cut for up to FOR; each a duration or a range A-B, e.g. 1s-5s/2s")
	cmd.Flags().StringVar(&c.randomSkews, "random-skews", "", "move servers' clocks on a schedule drawn from the seed, as GAP/FOR: after each gap a server whose clock is not moved is moved by up to ±--skew-by for up to FOR, e.g. 200ms-1s/1s")
	cmd.Flags().DurationVar(&c.skewBy, "skew-by", 0, "with --random-skews: the largest clock step, ahead or behind (e.g. 20ms)")
	cmd.Flags().StringVar(&c.randomSlowdowns, "random-slowdowns", "", "slow pairs of regions on a schedule drawn from the seed, as GAP/FOR: after each gap a pair not slowed has every message between its regions delayed by up to --slow-by more for up to FOR, e.g. 500ms-2s/2s")
	cmd.Flags().DurationVar(&c.slowBy, "slow-by", 0, "with --random-slowdowns: the largest extra one-way delay (e.g. 1s)")
	cmd.Flags().StringArrayVar(&c.crashes, "crash", nil, "crash data node NODE at virtual time AT (from the clients' start, warm-up included) for FOR, as NODE@AT/FOR, e.g. 0@1s/300ms or sh-1@1s/300ms (repeatable)")
	cmd.Flags().StringArrayVar(&c.skews, "clock-skew", nil, "move server NODE's clocks BY (ahead, or behind if negative) at virtual time AT (from the clients' start, warm-up included), as NODE@AT=BY, e.g. sh-oracle@0s=20ms or 3@1s=-5ms (repeatable; skews of one node add up)")
	cmd.Flags().Float64Var(&c.loss, "loss", 0, "probability in [0, 1) that a message between nodes is lost")
	cmd.Flags().Float64Var(&c.duplicate, "duplicate", 0, "probability in [0, 1) that a message between nodes is delivered twice")
	cmd.Flags().DurationVar(&c.duplicateDelay, "duplicate-delay", sim.DefaultDuplicateDelay, "with --duplicate: a copy arrives up to this long after its original (uniform, seeded)")
	cmd.Flags().StringArrayVar(&c.partitions, "partition", nil, "cut regions A and B from each other at virtual time AT (from the clients' start, warm-up included) for FOR, as A|B@AT/FOR, e.g. SH|BJ@2s/1s (repeatable)")
	cmd.Flags().IntVar(&c.seeds, "seeds", 1, "run seeds --seed, --seed+1, … (this many), each judged as one run is: a line per seed and a summary; exit 1 if any failed, else 2 if any could not be judged")
	cmd.Flags().IntVar(&c.parallel, "parallel", 0, "with --seeds: simulations at once (0: one per CPU, as memory allows; a number given is not capped by memory); one run ignores it")
	cmd.Flags().StringVar(&c.cpuProf, "cpuprofile", "", "write a Go CPU profile of the run to this file")
	cmd.Flags().StringVar(&c.memProf, "memprofile", "", "write a Go heap profile, taken as the measured window ends, to this file")
	return cmd
}

func init() { rootCmd.AddCommand(newSimCmd()) }

// randomFaults returns each seed's schedule of one kind of fault: the one given by its scripted
// flag (scripted), or, given a pattern by its --random- flag (randomFlag, pattern), one drawn
// from the seed by draw, striking targets things (what names them). A pattern that can strike
// nothing in the run is refused whatever the seed; one seed may still draw nothing.
func randomFaults[F any](randomFlag, pattern, scripted string, given []F, targets int, what string, runLength time.Duration,
	draw func(p bench.FaultPattern, seed uint64) []F) (func(seed uint64) []F, error) {
	if pattern == "" {
		return func(uint64) []F { return given }, nil
	}
	if len(given) > 0 {
		return nil, fmt.Errorf("%s draws the whole schedule: give it or %s, not both", randomFlag, scripted)
	}
	p, err := bench.ParseFaultPattern(pattern)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", randomFlag, pattern, err)
	}
	if why := p.Fits(targets, what, runLength); why != "" {
		return nil, fmt.Errorf("%s %s: %s (a run is its warm-up and its duration)", randomFlag, pattern, why)
	}
	return func(seed uint64) []F { return draw(p, seed) }, nil
}

// printFaults lists the faults of one kind a run ran under, as kind: what(i), the first
// maxListedFaults of them: a pattern of short gaps draws thousands. A random flag (flag, pattern)
// that drew none for this seed says so, rather than nothing.
func printFaults(out io.Writer, kind, flag, pattern string, n int, what func(i int) string) {
	if n == 0 && pattern != "" {
		fmt.Fprintf(out, "%s: none (%s %s drew none for this seed)\n", kind, flag, pattern)
	}
	for i := range min(n, maxListedFaults) {
		fmt.Fprintf(out, "%s: %s\n", kind, what(i))
	}
	if n > maxListedFaults {
		fmt.Fprintf(out, "%s: and %d more (--json lists every one)\n", kind, n-maxListedFaults)
	}
}

const maxListedFaults = 20

// maxSeeds bounds a sweep: it keeps every seed's result (about 16 KB each) for its summary.
const maxSeeds = 10_000

// checkSeeds refuses --seeds and --parallel values that make no sweep, and the outputs that
// belong to one run.
func (c *simCommand) checkSeeds() error {
	switch {
	case c.seeds < 1 || c.seeds > maxSeeds:
		return fmt.Errorf("--seeds %d: want 1..%d", c.seeds, maxSeeds)
	case c.parallel < 0:
		return fmt.Errorf("--parallel %d: want 0 (one per CPU) or more", c.parallel)
	case c.sf.seed > math.MaxUint64-uint64(c.seeds-1):
		return fmt.Errorf("--seed %d with --seeds %d: the last seed would pass %d", c.sf.seed, c.seeds, uint64(math.MaxUint64))
	case c.seeds == 1:
		// --parallel bounds a sweep; one run is within any bound. Accepted, so that a sweep's
		// command rerun with --seed N in place of --seeds, as its summary says, still runs.
		return nil
	}
	for _, o := range []struct{ flag, path string }{{"--history", c.history}, {"--cpuprofile", c.cpuProf}, {"--memprofile", c.memProf}} {
		if o.path != "" {
			return fmt.Errorf("%s is for one run: give it with --seed, not --seeds", o.flag)
		}
	}
	return nil
}

func (c *simCommand) run(cmd *cobra.Command) error {
	if err := checkRunTime(c.warmup, c.duration); err != nil {
		return err
	}
	if err := checkClients(c.clients); err != nil {
		return err
	}
	cfg, err := c.sf.config()
	if err != nil {
		return err
	}
	crashes, err := parseCrashes(c.crashes, cfg.Topology, c.warmup+c.duration)
	if err != nil {
		return err
	}
	runLength, tp := c.warmup+c.duration, cfg.Topology
	dataNodes, regionPairs := bench.Targets(tp)
	crashesOf, err := randomFaults("--random-crashes", c.randomCrashes, "--crash", crashes, dataNodes, "data node", runLength,
		func(p bench.FaultPattern, seed uint64) []bench.Crash { return p.Crashes(tp, seed, runLength) })
	if err != nil {
		return err
	}
	network, err := c.netFaults(cmd, cfg.Topology)
	if err != nil {
		return err
	}
	partitionsOf, err := randomFaults("--random-partitions", c.randomPartitions, "--partition", network.Partitions, regionPairs, "pair of regions to cut", runLength,
		func(p bench.FaultPattern, seed uint64) []bench.Partition { return p.Partitions(tp, seed, runLength) })
	if err != nil {
		return err
	}
	switch {
	case c.randomSlowdowns != "" && !cmd.Flags().Changed("slow-by"):
		return fmt.Errorf("--random-slowdowns %s needs --slow-by, the largest extra delay (e.g. --slow-by 1s)", c.randomSlowdowns)
	case c.randomSlowdowns != "" && (c.slowBy < time.Microsecond || c.slowBy > bench.MaxSlowdown || c.slowBy%time.Microsecond != 0):
		return fmt.Errorf("--slow-by %s: --random-slowdowns needs the largest extra delay in whole microseconds, from 1µs to %s (e.g. --slow-by 1s)", c.slowBy, bench.MaxSlowdown)
	case c.randomSlowdowns == "" && cmd.Flags().Changed("slow-by"):
		return fmt.Errorf("--slow-by %s: it sizes --random-slowdowns' delays, and none was given", c.slowBy)
	}
	slowdownsOf, err := randomFaults("--random-slowdowns", c.randomSlowdowns, "", []bench.Slowdown(nil), regionPairs, "pair of regions to slow", runLength,
		func(p bench.FaultPattern, seed uint64) []bench.Slowdown {
			return p.Slowdowns(tp, seed, runLength, c.slowBy)
		})
	if err != nil {
		return err
	}
	networkOf := func(seed uint64) bench.NetFaults {
		n := network
		n.Partitions = partitionsOf(seed)
		n.Slowdowns = slowdownsOf(seed)
		return n
	}
	skews, err := parseClockSkews(c.skews, cfg.Topology, c.warmup+c.duration)
	if err != nil {
		return err
	}
	switch {
	case c.randomSkews != "" && !cmd.Flags().Changed("skew-by"):
		return fmt.Errorf("--random-skews %s needs --skew-by, the largest step (e.g. --skew-by 20ms)", c.randomSkews)
	case c.randomSkews != "" && (c.skewBy < time.Microsecond || c.skewBy > time.Hour || c.skewBy%time.Microsecond != 0):
		return fmt.Errorf("--skew-by %s: --random-skews needs the largest step in whole microseconds, from 1µs to 1h (e.g. --skew-by 20ms)", c.skewBy)
	case c.randomSkews == "" && cmd.Flags().Changed("skew-by"):
		return fmt.Errorf("--skew-by %s: it sizes --random-skews' steps, and none was given", c.skewBy)
	}
	skewsOf, err := randomFaults("--random-skews", c.randomSkews, "--clock-skew", skews, len(tp.Nodes), "server", runLength,
		func(p bench.FaultPattern, seed uint64) []bench.ClockSkew {
			return p.Skews(tp, seed, runLength, c.skewBy)
		})
	if err != nil {
		return err
	}
	wl, err := c.wf.build(cfg.Topology)
	if err != nil {
		return err
	}
	if err := checkHistoryFlag(c.history, wl); err != nil {
		return err
	}
	model, err := modelFor(c.check, protocol.PromisedModel(cfg.Protocol, cfg.Options), wl)
	if err != nil {
		return err
	}
	if err := checkMemory(wl, cfg.Topology, c.clients); err != nil {
		return err
	}
	if err := c.checkSeeds(); err != nil {
		return err
	}
	spec := func(wl workload.Workload, seed uint64) bench.Spec {
		return bench.Spec{
			Workload: wl, ClientsPerRegion: c.clients, Warmup: c.warmup, Duration: c.duration,
			Record: model != "" || c.history != "" || (c.verify && checkable(wl)), SkipVerify: !c.verify, OneOpAtATime: c.wf.oneOp, Crashes: crashesOf(seed), Network: networkOf(seed), ClockSkews: skewsOf(seed),
		}
	}
	if c.seeds > 1 {
		var mu sync.Mutex // building reads and fills the flags' structs
		build := func(seed uint64) (simPlan, error) {
			mu.Lock()
			defer mu.Unlock()
			f := c.sf
			f.seed = seed
			cfg, err := f.config()
			if err != nil {
				return simPlan{}, err
			}
			wl, err := c.wf.build(cfg.Topology)
			if err != nil {
				return simPlan{}, err
			}
			return simPlan{cfg: cfg, spec: spec(wl, seed)}, nil
		}
		need, _, _ := memoryNeed(wl, cfg.Topology, c.clients)
		return c.runSeeds(cmd.OutOrStdout(), sweepParallel(c.parallel, need, c.seeds), build, model)
	}
	// The history and heap profile are written when the run ends: a path that cannot be
	// written should fail now, not after the run.
	outputs := []struct{ flag, path string }{{"--history", c.history}, {"--cpuprofile", c.cpuProf}, {"--memprofile", c.memProf}}
	if err := checkDistinctOutputs(outputs); err != nil {
		return err
	}
	var inputs []input
	if strings.HasSuffix(c.sf.topology, ".toml") {
		inputs = append(inputs, input{what: "the --topology file", path: c.sf.topology})
	}
	for _, o := range outputs {
		if err := checkNotInput(o.flag, o.path, inputs); err != nil {
			return err
		}
		if err := checkOutputPath(o.flag, o.path); err != nil {
			return err
		}
	}
	stopCPUProfile := func() error { return nil }
	if c.cpuProf != "" {
		if stopCPUProfile, err = startCPUProfile(c.cpuProf); err != nil {
			return err
		}
		// Stops the profile on an early return; the run's own path reports its error.
		defer func() { _ = stopCPUProfile() }()
	}
	// Building a large database (TPC-C with hundreds of warehouses) takes minutes before the
	// first virtual second runs; say so on a terminal rather than sit silent.
	bar := newRunBar()
	var profErr error
	one := spec(wl, c.sf.seed)
	one.Progress, one.AtWindowEnd = bar.running, func() {
		if c.memProf != "" {
			profErr = writeHeapProfile(c.memProf)
		}
	}
	res, err := bench.SimRun(cfg, one)
	bar.done()
	if err != nil {
		return optionError(err)
	}
	if profErr != nil {
		return profErr
	}
	if c.history != "" {
		if err := writeHistory(c.history, res.History); err != nil {
			return err
		}
	}
	if model != "" {
		if err := attachCheck(res, model); err != nil {
			return err
		}
	}
	if err := stopCPUProfile(); err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	if c.json {
		if err := writeJSON(out, res); err != nil {
			return err
		}
		return failedConsistency(res)
	}
	printResult(out, res)
	printFaults(out, "crash", "--random-crashes", c.randomCrashes, len(res.Crashes), func(i int) string {
		cr := res.Crashes[i]
		return fmt.Sprintf("node %d (%s) at %s for %s", cr.Node, cr.Name, cr.At, cr.For)
	})
	printFaults(out, "clock skew", "--random-skews", c.randomSkews, len(res.ClockSkews), func(i int) string {
		k, unread := res.ClockSkews[i], ""
		if k.Unread {
			unread = " (no effect: the protocol never read this node's clock after it)"
		}
		return fmt.Sprintf("node %d (%s) at %s by %s%s", k.Node, k.Name, k.At, k.By, unread)
	})
	if n := res.Network; n != nil {
		if n.Loss > 0 {
			fmt.Fprintf(out, "loss: %g of messages between nodes\n", n.Loss)
		}
		if n.Duplicate > 0 {
			fmt.Fprintf(out, "duplicate: %g of messages between nodes, copies up to %s late\n", n.Duplicate, n.DuplicateDelay)
		}
	}
	var partitions []bench.PartitionRecord
	if res.Network != nil {
		partitions = res.Network.Partitions
	}
	printFaults(out, "partition", "--random-partitions", c.randomPartitions, len(partitions), func(i int) string {
		p := partitions[i]
		return fmt.Sprintf("%s|%s at %s for %s", p.Regions[0], p.Regions[1], p.At, p.For)
	})
	var slowdowns []bench.SlowdownRecord
	if res.Network != nil {
		slowdowns = res.Network.Slowdowns
	}
	printFaults(out, "slowdown", "--random-slowdowns", c.randomSlowdowns, len(slowdowns), func(i int) string {
		d := slowdowns[i]
		return fmt.Sprintf("%s|%s by %s at %s for %s", d.Regions[0], d.Regions[1], d.By, d.At, d.For)
	})
	printFirstAnomaly(out, res, c.history)
	return failedConsistency(res)
}

// netFaults reads the network fault flags, and checks them for a run of warm-up plus duration
// before loading starts.
func (c *simCommand) netFaults(cmd *cobra.Command, tp *topo.Topology) (bench.NetFaults, error) {
	f := bench.NetFaults{Loss: c.loss, Duplicate: c.duplicate, DuplicateDelay: c.duplicateDelay}
	for _, p := range []struct {
		flag string
		v    float64
	}{{"--loss", c.loss}, {"--duplicate", c.duplicate}} {
		if !(p.v >= 0 && p.v < 1) { // also rejects NaN
			return f, fmt.Errorf("%s %g: want a probability in [0, 1)", p.flag, p.v)
		}
	}
	if cmd.Flags().Changed("duplicate-delay") {
		switch {
		case c.duplicateDelay <= 0:
			return f, fmt.Errorf("--duplicate-delay %s: must be positive", c.duplicateDelay)
		// Like every other simulated delay: the simulator adds it to the clock, and at the
		// largest duration drawing it overflowed and panicked.
		case c.duplicateDelay > maxModelDelay:
			return f, fmt.Errorf("--duplicate-delay %s: must be at most %s", human(c.duplicateDelay), human(maxModelDelay))
		case c.duplicate == 0:
			return f, fmt.Errorf("--duplicate-delay %s without --duplicate: no message is duplicated", c.duplicateDelay)
		}
	}
	for _, text := range c.partitions {
		p, err := bench.ParsePartition(tp, text)
		if err != nil {
			return f, fmt.Errorf("--partition %s: %w", text, err)
		}
		f.Partitions = append(f.Partitions, p)
	}
	if err := bench.CheckNetFaults(tp, f, c.warmup+c.duration); err != nil {
		return f, fmt.Errorf("--partition: %w", err)
	}
	return f, nil
}

// parseClockSkews reads the --clock-skew flags and checks them for a run of runLength.
func parseClockSkews(texts []string, tp *topo.Topology, runLength time.Duration) ([]bench.ClockSkew, error) {
	return parseFaultFlags("--clock-skew", texts, tp, runLength, bench.ParseClockSkew, bench.CheckClockSkews)
}

// parseCrashes reads the --crash flags, and checks them as a schedule for a run of runLength
// before loading starts, which can take minutes.
func parseCrashes(texts []string, tp *topo.Topology, runLength time.Duration) ([]bench.Crash, error) {
	return parseFaultFlags("--crash", texts, tp, runLength, bench.ParseCrash, bench.CheckCrashes)
}

// parseFaultFlags parses each of a repeatable fault flag's values, then checks them together
// as a schedule for a run of runLength; an error names the flag (and the value at fault).
func parseFaultFlags[F any](flag string, texts []string, tp *topo.Topology, runLength time.Duration,
	parse func(*topo.Topology, string) (F, error), check func(*topo.Topology, []F, time.Duration) error) ([]F, error) {
	var faults []F
	for _, text := range texts {
		f, err := parse(tp, text)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", flag, text, err)
		}
		faults = append(faults, f)
	}
	if err := check(tp, faults, runLength); err != nil {
		return nil, fmt.Errorf("%s: %w", flag, err)
	}
	return faults, nil
}

// startCPUProfile starts a CPU profile into path and returns the function that stops it and
// reports whether the whole profile was written. pprof drops the errors of its writes, so a
// full disk left a truncated profile and the run exited 0.
func startCPUProfile(path string) (stop func() error, err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--cpuprofile %s: %w", path, err)
	}
	w := &errWriter{w: f}
	if err := pprof.StartCPUProfile(w); err != nil {
		f.Close()
		return nil, fmt.Errorf("--cpuprofile %s: %w", path, err)
	}
	stopped := false
	return func() error {
		if stopped {
			return nil
		}
		stopped = true
		pprof.StopCPUProfile()
		err := w.err
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("--cpuprofile %s: %w", path, err)
		}
		return nil
	}, nil
}

// errWriter keeps the first error of its writes.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	n, err := e.w.Write(p)
	if err != nil && e.err == nil {
		e.err = err
	}
	return n, err
}

// writeHeapProfile writes the heap as of the last garbage collection, which ran while the
// simulation's state was still reachable, so "inuse" shows what the run held at its end.
func writeHeapProfile(path string) error {
	err := func() error {
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		runtime.GC() // the profile shows the heap as of the last collection: make that now
		if err := pprof.WriteHeapProfile(f); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	}()
	if err != nil {
		return fmt.Errorf("--memprofile %s: %w", path, err)
	}
	return nil
}

// runBar shows on a terminal that a simulation is loading, then how much of its virtual time
// has run. It is nil (and silent) when standard error is not a terminal.
type runBar struct{ bar *progressbar.ProgressBar }

func newRunBar() *runBar {
	if !isTerminal(os.Stderr) {
		return nil
	}
	b := progressbar.NewOptions(1000, progressbar.OptionSetWriter(os.Stderr), progressbar.OptionSetDescription("loading"),
		progressbar.OptionClearOnFinish())
	_ = b.RenderBlank()
	return &runBar{bar: b}
}

func (r *runBar) running(done float64) {
	if r == nil {
		return
	}
	r.bar.Describe("running")
	_ = r.bar.Set(int(done * 1000))
}

func (r *runBar) done() {
	if r != nil {
		_ = r.bar.Finish()
	}
}
