package main

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/meridiandb/meridian/internal/bench"
	mrt "github.com/meridiandb/meridian/internal/runtime"
	"github.com/meridiandb/meridian/internal/topo"
)

// `meridian cluster chaos` is the kill script every real-cluster crash review wrote for itself:
// it kill -9's data nodes of a running local cluster on a schedule drawn from a seed, as
// `meridian sim --random-crashes` draws one, and restarts each after its outage from what it
// had persisted, so that a bench run alongside shows whether any acknowledged write was lost.
// It also cuts regions off from each other, steps servers' clocks and slows the links between
// regions, as --random-partitions, --random-skews and --random-slowdowns do in the simulator.

// chaosFlags are what `cluster chaos` is asked to strike, and for how long.
type chaosFlags struct {
	crashes, partitions, skews, slowdowns string
	skewBy, slowBy, length                time.Duration
	seed                                  uint64
}

func newClusterChaosCmd(cf *clusterFlags) *cobra.Command {
	var f chaosFlags
	cmd := &cobra.Command{
		Use:   "chaos [--crashes GAP/FOR] [--partitions GAP/FOR] [--skews GAP/FOR --skew-by D] [--slowdowns GAP/FOR --slow-by D] --for D",
		Short: "Kill -9 and restart data nodes, cut regions off from each other, step clocks, or slow links between regions, on a schedule drawn from a seed",
		Long: `Strike the running cluster for --for of wall-clock time on a schedule drawn from --seed, as
meridian sim --random-crashes, --random-partitions, --random-skews and --random-slowdowns draw
one: after each gap
(a duration, or a range A-B drawn uniformly) something not already struck is struck for up to
FOR (or for a length from a range); several at once when gaps are shorter than lengths.

  --crashes     a data node that is up is killed with SIGKILL and restarted after its outage
                from what it had persisted.
  --partitions  two regions that are not cut off from each other are: their nodes stop talking
                to each other (connections closed, frames dropped, no redial) until the cut
                heals; clients keep their connections to their own region's nodes.
  --skews       a server (data node or oracle) whose clock is not stepped is: its local clock
                and TrueTime readings move by an offset drawn from [-D, D] (--skew-by D) until
                it is stepped back. Within the ε the cluster declares, a protocol that trusts
                TrueTime must keep its promise; a step adds to the machine clock's own error,
                and two servers stepped opposite ways are 2D apart.
  --slowdowns   two regions whose links are not slowed are: every frame their nodes send each
                other waits up to D more (--slow-by D, at most 10s, drawn per slowdown), links
                still FIFO, so messages arrive late, after the timeouts a cut would trip,
                rather than never. Each ends D before --for does, so that every slowed frame
                has arrived by then.

Every fault ends within --for, and the command returns with every node running, every cut
healed, every clock stepped back and every slowdown ended (also when interrupted: it undoes
them first; frames already slowed then still arrive up to D late). Run a bench alongside, with
a window that outlasts the schedule, to check that no acknowledged write was lost and the
history holds:

  meridian cluster chaos --crashes 300ms-3s/1.5s --for 35s & meridian bench --duration 40s --read-back

Pair crashes with a slowed disk ([disk] flush_delay) so that a kill can fall between a write
acknowledged before it was durable and its flush, but not clock steps: a slow flush delays
every commit's answer, a commit wait of its own that hides a protocol's missing one. Each line
says what it did and when, counted from the command's start.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return clusterChaos(cmd, cf, f)
		},
	}
	cmd.Flags().StringVar(&f.crashes, "crashes", "", "GAP/FOR: a crash after each gap, each node down for up to FOR; each a duration or a range A-B, e.g. 300ms-3s/1.5s")
	cmd.Flags().StringVar(&f.partitions, "partitions", "", "GAP/FOR: a cut between two regions after each gap, each healed after up to FOR, e.g. 500ms-3s/2s")
	cmd.Flags().StringVar(&f.skews, "skews", "", "GAP/FOR: a server's clock stepped by up to ±--skew-by after each gap, stepped back after up to FOR, e.g. 200ms-1s/1s")
	cmd.Flags().DurationVar(&f.skewBy, "skew-by", 0, "with --skews: the largest step, e.g. 20ms")
	cmd.Flags().StringVar(&f.slowdowns, "slowdowns", "", "GAP/FOR: the links between two regions slowed by up to --slow-by after each gap, for up to FOR, e.g. 500ms-3s/2s")
	cmd.Flags().DurationVar(&f.slowBy, "slow-by", 0, "with --slowdowns: the largest extra delay, e.g. 500ms")
	cmd.Flags().DurationVar(&f.length, "for", 0, "how long to go on striking the cluster (wall clock; required)")
	cmd.Flags().Uint64Var(&f.seed, "seed", 1, "seed of the schedule: the same seed gives the same schedule")
	return cmd
}

// chaosKind is what a step of the schedule does.
type chaosKind int

const (
	chaosKill chaosKind = iota
	chaosRestart
	chaosCut
	chaosHeal
	chaosStep
	chaosSlow
	chaosUnslow
)

// chaosEvent is one step of the schedule: kill or restart node, cut or heal the pair of
// regions, step node's clock by by (back, when by undoes its step), or slow the pair's links by
// by (or end it).
type chaosEvent struct {
	at   time.Duration
	kind chaosKind
	node string
	pair [2]topo.RegionID
	by   time.Duration
}

// chaosLag is how late a kill may come before it is skipped (with its restart): restarts take
// tens of milliseconds, and with gaps shorter than that the schedule would run on past --for,
// past a bench sized to outlast it.
const chaosLag = 500 * time.Millisecond

// chaosMaxFaults bounds the faults of each kind a run may draw (its --for over its mean gap),
// about a day of one a second: each drawn fault holds about 0.5 KB until the run ends.
const chaosMaxFaults = 100_000

func clusterChaos(cmd *cobra.Command, cf *clusterFlags, f chaosFlags) (err error) {
	crashes, partitions, skews, slowdowns, length, seed := f.crashes, f.partitions, f.skews, f.slowdowns, f.length, f.seed
	if crashes == "" && partitions == "" && skews == "" && slowdowns == "" {
		return fmt.Errorf("--crashes, --partitions, --skews or --slowdowns is required (e.g. --crashes 300ms-3s/1.5s)")
	}
	if length <= 0 {
		return fmt.Errorf("--for %s: want a positive duration, how long to go on striking the cluster", length)
	}
	switch {
	case skews == "" && f.skewBy != 0:
		return fmt.Errorf("--skew-by %s without --skews: give the steps' schedule too (e.g. --skews 200ms-1s/1s)", f.skewBy)
	case skews != "" && f.skewBy <= 0:
		return fmt.Errorf("--skews %s needs --skew-by, a positive largest step (e.g. --skew-by 20ms)", skews)
	case f.skewBy > mrt.MaxEpsilon || skews != "" && f.skewBy < time.Microsecond:
		return fmt.Errorf("--skew-by %s: want a step from 1µs to %s", f.skewBy, mrt.MaxEpsilon)
	case slowdowns == "" && f.slowBy != 0:
		return fmt.Errorf("--slow-by %s without --slowdowns: give the slowdowns' schedule too (e.g. --slowdowns 500ms-3s/2s)", f.slowBy)
	case slowdowns != "" && f.slowBy <= 0:
		return fmt.Errorf("--slowdowns %s needs --slow-by, a positive largest extra delay (e.g. --slow-by 500ms)", slowdowns)
	case f.slowBy > mrt.MaxSlowdown || slowdowns != "" && f.slowBy < time.Microsecond:
		return fmt.Errorf("--slow-by %s: want an extra delay from 1µs to %s", f.slowBy, mrt.MaxSlowdown)
	case slowdowns != "" && f.slowBy >= length:
		return fmt.Errorf("--slow-by %s with --for %s: frames slowed near the end would arrive after it; lengthen --for past --slow-by", f.slowBy, length)
	}
	var crashPattern, cutPattern, skewPattern, slowPattern bench.FaultPattern
	for _, c := range []struct {
		flag, text string
		p          *bench.FaultPattern
	}{{"--crashes", crashes, &crashPattern}, {"--partitions", partitions, &cutPattern}, {"--skews", skews, &skewPattern}, {"--slowdowns", slowdowns, &slowPattern}} {
		if c.text == "" {
			continue
		}
		if *c.p, err = bench.ParseFaultPattern(c.text); err != nil {
			return fmt.Errorf("%s %s: %w", c.flag, c.text, err)
		}
	}
	// A schedule is drawn whole before the run: gaps of a millisecond over hours drew hundreds
	// of millions of faults and the command died out of memory, with a Go runtime dump.
	for _, c := range []struct {
		flag, text string
		p          bench.FaultPattern
	}{{"--crashes", crashes, crashPattern}, {"--partitions", partitions, cutPattern}, {"--skews", skews, skewPattern}, {"--slowdowns", slowdowns, slowPattern}} {
		if c.text == "" {
			continue
		}
		mean := max((c.p.GapMin+c.p.GapMax)/2, time.Millisecond)
		if about := length / mean; about > chaosMaxFaults {
			return fmt.Errorf("%s %s: gaps of %s on average over --for %s would draw about %d faults, past the %d a run may: lengthen the gaps or shorten --for",
				c.flag, c.text, mean, length, about, chaosMaxFaults)
		}
	}
	dataDir, err := cf.stateDir()
	if err != nil {
		return err
	}
	// The whole run holds the data directory's lock: a start, stop or second chaos meanwhile
	// would bring back a node it stopped, or leave one down it had killed.
	st, unlock, err := lockedState(cf, dataDir, func(dir string) string { return "meridian cluster chaos --data-dir " + dir + " runs on them" })
	if err != nil {
		return err
	}
	defer unlock()
	for _, s := range statusOf(st) {
		if s.State != "running" {
			return fmt.Errorf("node %s is %s: cluster chaos needs every node running (meridian cluster start)", s.Name, s.State)
		}
	}
	// Nodes restart from the copy the cluster runs with, whatever --config names now: an edited
	// file would have every restart refused, the node left down.
	running := &clusterFlags{config: st.Config, dataDir: dataDir}
	cfg, err := running.load()
	if err != nil {
		return fmt.Errorf("the running cluster's configuration: %w", err)
	}
	dataNodes, regionPairs := bench.Targets(cfg.Topology)
	var events []chaosEvent
	if crashes != "" {
		if why := crashPattern.Fits(dataNodes, "data node", length); why != "" {
			return fmt.Errorf("--crashes %s: %s", crashes, why)
		}
		for _, c := range crashPattern.Crashes(cfg.Topology, seed, length) {
			name := cfg.Nodes[c.Node].Name
			events = append(events, chaosEvent{at: c.At, kind: chaosKill, node: name}, chaosEvent{at: c.At + c.For, kind: chaosRestart, node: name})
		}
	}
	if partitions != "" {
		if why := cutPattern.Fits(regionPairs, "second region to cut off from the first", length); why != "" {
			return fmt.Errorf("--partitions %s: %s", partitions, why)
		}
		for _, p := range cutPattern.Partitions(cfg.Topology, seed, length) {
			pair := [2]topo.RegionID{p.A, p.B}
			events = append(events, chaosEvent{at: p.At, kind: chaosCut, pair: pair}, chaosEvent{at: p.At + p.For, kind: chaosHeal, pair: pair})
		}
	}
	if skews != "" {
		if why := skewPattern.Fits(len(cfg.Nodes), "server", length); why != "" {
			return fmt.Errorf("--skews %s: %s", skews, why)
		}
		// A node refuses a step that would put its clocks past ±MaxEpsilon with its
		// clock_offset (SetClockStep): the run would print steps no node took, and a node
		// crashed while so stepped would not restart.
		for _, n := range cfg.Nodes {
			if off := max(n.ClockOffset, -n.ClockOffset); off+f.skewBy > mrt.MaxEpsilon {
				return fmt.Errorf("--skew-by %s: node %s's clock_offset %s and a step of up to %s would put its clocks past ±%s, which the node refuses: keep --skew-by within %s",
					f.skewBy, n.Name, n.ClockOffset, f.skewBy, mrt.MaxEpsilon, mrt.MaxEpsilon-off)
			}
		}
		for _, k := range skewPattern.Skews(cfg.Topology, seed, length, f.skewBy) {
			events = append(events, chaosEvent{at: k.At, kind: chaosStep, node: cfg.Nodes[k.Node].Name, by: k.By})
		}
	}
	if slowdowns != "" {
		// Every slowdown ends --slow-by before --for does: a frame sent as one ends keeps its
		// delay (and those behind it wait for it), and every frame must have left by the time
		// the command says every link is back to its usual delay.
		if why := slowPattern.Fits(regionPairs, "second region to slow the links to", length-f.slowBy); why != "" {
			return fmt.Errorf("--slowdowns %s: %s (each slowdown ends --slow-by before --for does)", slowdowns, why)
		}
		for _, d := range slowPattern.Slowdowns(cfg.Topology, seed, length-f.slowBy, f.slowBy) {
			pair := [2]topo.RegionID{d.A, d.B}
			events = append(events, chaosEvent{at: d.At, kind: chaosSlow, pair: pair, by: d.By}, chaosEvent{at: d.At + d.For, kind: chaosUnslow, pair: pair})
		}
	}
	slices.SortStableFunc(events, func(a, b chaosEvent) int { return cmp.Compare(a.at, b.at) })
	var kills, cuts, steps, slows int
	stepping := map[string]bool{}
	for _, ev := range events {
		switch {
		case ev.kind == chaosKill:
			kills++
		case ev.kind == chaosCut:
			cuts++
		case ev.kind == chaosSlow:
			slows++
		case ev.kind == chaosStep && !stepping[ev.node]:
			steps++
			stepping[ev.node] = true
		case ev.kind == chaosStep:
			stepping[ev.node] = false // stepped back: one step is two events
		}
	}
	// A pattern that fits may still draw nothing that ends within --for (lengths up to 100h):
	// a run that struck nothing would report a review that never happened.
	if crashes != "" && kills == 0 {
		return fmt.Errorf("--crashes %s: seed %d draws no crash that ends within --for %s: shorten the outages or lengthen --for", crashes, seed, length)
	}
	if partitions != "" && cuts == 0 {
		return fmt.Errorf("--partitions %s: seed %d draws no cut that heals within --for %s: shorten the cuts or lengthen --for", partitions, seed, length)
	}
	if skews != "" && steps == 0 {
		return fmt.Errorf("--skews %s: seed %d draws no clock step within --for %s: shorten the gaps or lengthen --for", skews, seed, length)
	}
	if slowdowns != "" && slows == 0 {
		return fmt.Errorf("--slowdowns %s: seed %d draws no slowdown that ends within --for %s: shorten the slowdowns or lengthen --for", slowdowns, seed, length)
	}
	out := cmd.OutOrStdout()
	var what []string
	if crashes != "" {
		what = append(what, fmt.Sprintf("%s of %s's data nodes (--crashes %s)", counted(kills, "crash", "crashes"), cfg.Name, crashes))
	}
	if partitions != "" {
		what = append(what, fmt.Sprintf("%s between %s's regions (--partitions %s)", counted(cuts, "cut", "cuts"), cfg.Name, partitions))
	}
	if skews != "" {
		what = append(what, fmt.Sprintf("%s of %s's servers' clocks by up to ±%s (--skews %s, ε %s)", counted(steps, "step", "steps"), cfg.Name, f.skewBy, skews, cfg.Epsilon))
	}
	if slowdowns != "" {
		what = append(what, fmt.Sprintf("%s of the links between %s's regions by up to %s (--slowdowns %s)", counted(slows, "slowdown", "slowdowns"), cfg.Name, f.slowBy, slowdowns))
	}
	fmt.Fprintf(out, "chaos: %s over %s, seed %d\n", strings.Join(what, " and "), length, seed)

	// undone says what every exit has undone, for the kinds of fault this run strikes.
	var undone []string
	for _, u := range []struct {
		on   bool
		what string
	}{
		{crashes != "", "every node it killed restarted"},
		{partitions != "", "every cut healed"},
		{skews != "", "every clock stepped back"},
		{slowdowns != "", "every slowdown ended"},
	} {
		if u.on {
			undone = append(undone, u.what)
		}
	}
	undoneText := strings.Join(undone, ", ")
	interrupted := make(chan os.Signal, 1)
	signal.Notify(interrupted, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(interrupted)
	// Output piped to a reader that quit (| head) must not kill the run before it heals and
	// restarts: ignored, SIGPIPE turns the writes into errors, which Fprintf drops.
	signal.Ignore(syscall.SIGPIPE)
	start := time.Now()
	down := map[string]bool{}    // killed and not restarted yet
	skipped := map[string]bool{} // kills skipped as overdue: their restarts are skipped too
	restart := func(names ...string) error {
		fmt.Fprintf(out, "%8.3fs  restarting %s\n", time.Since(start).Seconds(), strings.Join(names, ", "))
		only := map[string]bool{}
		for _, n := range names {
			only[n] = true
		}
		err := startNodes(cmd, running, only, true)
		for _, n := range names {
			if nodeRunning(dataDir, n) {
				delete(down, n)
			}
		}
		for _, n := range names {
			if down[n] {
				return err // an interrupt that cut a start short, once every node is back, is taken below
			}
		}
		return nil
	}
	// Whatever ends the run, every node it killed is restarted first, and an error names any
	// it could not bring back.
	defer func() {
		if len(down) == 0 {
			return
		}
		// One at a time: a start checks every node's address first, and one taken kept the
		// others from restarting.
		var failed []string
		for _, n := range slices.Sorted(maps.Keys(down)) {
			if rerr := restart(n); rerr != nil || down[n] {
				if rerr == nil {
					rerr = errors.New("not running")
				}
				failed = append(failed, fmt.Sprintf("%s (%v)", n, rerr))
			}
		}
		if len(failed) > 0 {
			err = fmt.Errorf("%v; then restarting failed, left down (meridian cluster start brings them back): %s", err, strings.Join(failed, "; "))
		}
	}()
	// Cuts and steps are kept in the nodes' partition and clock-step files; each node whose
	// files changed is told to read them again, except one that is down, which reads them as it
	// restarts.
	cut := map[[2]topo.RegionID]bool{}
	stepped := map[string]time.Duration{}          // by node name; absent for a clock not stepped
	slowed := map[[2]topo.RegionID]time.Duration{} // by pair of regions; absent for links not slowed
	regionName := func(r topo.RegionID) string { return cfg.Topology.Regions[r].Name }
	// A node that cannot be told (not running, its directory unwritable) does not stop the
	// others from being told: a heal that stopped at the first left the rest of the cluster cut,
	// some pairs one-sided.
	// undoing: the files now name no cut and no step, as a node that is not running (killed by
	// hand meanwhile) reads them when it starts: it needs no telling, and an undo that counted
	// it as failed reported every other clock and cut as left.
	undoing := false
	apply := func(pick func(mrt.NodeConfig) bool) error {
		var failed []string
		for _, n := range cfg.Nodes {
			if !pick(n) {
				continue
			}
			var from []string
			for r := range cfg.Topology.Regions {
				if cut[[2]topo.RegionID{min(n.Region, topo.RegionID(r)), max(n.Region, topo.RegionID(r))}] {
					from = append(from, regionName(topo.RegionID(r)))
				}
			}
			if err := writePartition(n.DataDir, from); err != nil {
				failed = append(failed, fmt.Sprintf("node %s: %v", n.Name, err))
				continue
			}
			if err := writeClockStep(n.DataDir, stepped[n.Name]); err != nil {
				failed = append(failed, fmt.Sprintf("node %s: %v", n.Name, err))
				continue
			}
			slow := map[string]time.Duration{}
			for r := range cfg.Topology.Regions {
				if by := slowed[[2]topo.RegionID{min(n.Region, topo.RegionID(r)), max(n.Region, topo.RegionID(r))}]; by > 0 {
					slow[regionName(topo.RegionID(r))] = by
				}
			}
			if err := writeSlowdown(n.DataDir, slow); err != nil {
				failed = append(failed, fmt.Sprintf("node %s: %v", n.Name, err))
				continue
			}
			if !down[n.Name] && !(undoing && !nodeRunning(dataDir, n.Name)) {
				if err := tellNode(dataDir, n.Name); err != nil {
					failed = append(failed, err.Error())
				}
			}
		}
		if len(failed) > 0 {
			return errors.New(strings.Join(failed, "; "))
		}
		return nil
	}
	every := func(mrt.NodeConfig) bool { return true }
	// struck: some node's chaos files may name a cut or a step, so every exit undoes them all
	// (an undo that failed part-way has already dropped its cut or step from the maps).
	struck := false
	// Files left by a chaos that was killed (SIGKILL, SIGPIPE) still cut or step the running
	// nodes that read them: undo them before striking, or they outlive this run too.
	var left []string
	for _, n := range cfg.Nodes {
		if what := leftByChaos(n.DataDir); what != "" {
			left = append(left, n.Name+": "+what)
		}
	}
	if len(left) > 0 {
		struck = true
		if err := apply(every); err != nil {
			return fmt.Errorf("undoing what a cluster chaos left (%s): %v", strings.Join(left, "; "), err)
		}
		fmt.Fprintf(out, "%8.3fs  undid what a cluster chaos left: %s\n", time.Since(start).Seconds(), strings.Join(left, "; "))
	}
	// Run before the restarts above (defers run last first): whatever ends the run, every cut
	// heals and every clock steps back, and a node restarted then starts with neither.
	defer func() {
		if len(cut) == 0 && len(stepped) == 0 && len(slowed) == 0 && (!struck || err == nil) {
			return // every cut healed, every clock stepped back and every slowdown ended as scheduled
		}
		var what []string
		if len(cut) > 0 {
			var pairs []string
			for pair := range cut {
				pairs = append(pairs, regionName(pair[0])+"|"+regionName(pair[1]))
			}
			slices.Sort(pairs)
			what = append(what, "the cuts "+strings.Join(pairs, ", "))
		}
		if len(stepped) > 0 {
			what = append(what, "the clocks of "+strings.Join(slices.Sorted(maps.Keys(stepped)), ", "))
		}
		if len(slowed) > 0 {
			var pairs []string
			for pair := range slowed {
				pairs = append(pairs, regionName(pair[0])+"|"+regionName(pair[1]))
			}
			slices.Sort(pairs)
			what = append(what, "the slowdowns "+strings.Join(pairs, ", ")+" (frames sent during them still arrive up to "+f.slowBy.String()+" late)")
		}
		if len(what) == 0 {
			what = []string{"every cut, clock and slowdown"} // an undo that failed part-way dropped its own
		}
		clear(cut)
		clear(stepped)
		clear(slowed)
		undoing = true
		if herr := apply(every); herr != nil {
			err = fmt.Errorf("%v; then undoing %s failed (meridian cluster start undoes what chaos left): %v", err, strings.Join(what, " and "), herr)
			return
		}
		fmt.Fprintf(out, "%8.3fs  undid %s\n", time.Since(start).Seconds(), strings.Join(what, " and "))
	}()
	for _, ev := range events {
		select { // an interrupt is taken before the next step, however late that step is
		case sig := <-interrupted:
			return fmt.Errorf("interrupted (%v); %s", sig, undoneText)
		default:
		}
		select {
		case sig := <-interrupted:
			return fmt.Errorf("interrupted (%v); %s", sig, undoneText)
		case <-time.After(time.Until(start.Add(ev.at))):
		}
		switch {
		case ev.kind == chaosCut || ev.kind == chaosHeal:
			struck = true
			if ev.kind == chaosCut {
				cut[ev.pair] = true
			} else {
				delete(cut, ev.pair)
			}
			if err := apply(func(n mrt.NodeConfig) bool { return n.Region == ev.pair[0] || n.Region == ev.pair[1] }); err != nil {
				return err
			}
			did := map[chaosKind]string{chaosCut: "cut", chaosHeal: "healed"}[ev.kind]
			fmt.Fprintf(out, "%8.3fs  %s %s|%s\n", time.Since(start).Seconds(), did, regionName(ev.pair[0]), regionName(ev.pair[1]))
		case ev.kind == chaosSlow || ev.kind == chaosUnslow:
			struck = true
			if ev.kind == chaosSlow {
				slowed[ev.pair] = ev.by
			} else {
				delete(slowed, ev.pair)
			}
			if err := apply(func(n mrt.NodeConfig) bool { return n.Region == ev.pair[0] || n.Region == ev.pair[1] }); err != nil {
				return err
			}
			if ev.kind == chaosSlow {
				fmt.Fprintf(out, "%8.3fs  slowed %s|%s by %s\n", time.Since(start).Seconds(), regionName(ev.pair[0]), regionName(ev.pair[1]), ev.by)
			} else {
				fmt.Fprintf(out, "%8.3fs  ended the slowdown of %s|%s\n", time.Since(start).Seconds(), regionName(ev.pair[0]), regionName(ev.pair[1]))
			}
		case ev.kind == chaosStep:
			struck = true
			if step := stepped[ev.node] + ev.by; step != 0 {
				stepped[ev.node] = step
			} else {
				delete(stepped, ev.node)
			}
			if err := apply(func(n mrt.NodeConfig) bool { return n.Name == ev.node }); err != nil {
				return err
			}
			if step, ok := stepped[ev.node]; ok {
				fmt.Fprintf(out, "%8.3fs  stepped %s's clock %s\n", time.Since(start).Seconds(), ev.node, signedDuration(step))
			} else {
				fmt.Fprintf(out, "%8.3fs  stepped %s's clock back\n", time.Since(start).Seconds(), ev.node)
			}
		case ev.kind == chaosRestart && skipped[ev.node]:
			delete(skipped, ev.node)
		case ev.kind == chaosRestart:
			if err := restart(ev.node); err != nil {
				return err
			}
		case time.Since(start) > ev.at+chaosLag:
			skipped[ev.node] = true
			fmt.Fprintf(out, "%8.3fs  skipped the kill of %s due at %.3fs: behind schedule\n", time.Since(start).Seconds(), ev.node, ev.at.Seconds())
		default:
			if err := killNode(dataDir, ev.node); err != nil {
				return err
			}
			down[ev.node] = true
			fmt.Fprintf(out, "%8.3fs  killed %s\n", time.Since(start).Seconds(), ev.node)
		}
	}
	// The command lasts --for, whenever the schedule's last restart fell, so that a bench run
	// alongside can be sized to outlast it.
	select {
	case <-time.After(time.Until(start.Add(length))):
	case sig := <-interrupted:
		return fmt.Errorf("interrupted (%v) after the last fault; %s", sig, undoneText)
	}
	fmt.Fprintf(out, "chaos: done after %.1fs; %s\n", time.Since(start).Seconds(), undoneText)
	return nil
}

// nodeRunning reports whether the cluster's state lists node's process as running.
func nodeRunning(dataDir, node string) bool {
	st, err := readState(dataDir)
	if err != nil {
		return false
	}
	for _, n := range st.Nodes {
		if n.Name == node {
			return alive(n.PID, n.Name, st.Config)
		}
	}
	return false
}

// runningPID returns the pid of node's server as the cluster's state records it, refusing one
// that no longer runs.
func runningPID(dataDir, node string) (int, error) {
	st, err := readState(dataDir)
	if err != nil {
		return 0, err
	}
	for _, n := range st.Nodes {
		if n.Name != node {
			continue
		}
		if !alive(n.PID, n.Name, st.Config) {
			if why := exitReason(n.Log); why != "" {
				return 0, fmt.Errorf("node %s is not running (pid %d): it exited: %s", node, n.PID, why)
			}
			return 0, fmt.Errorf("node %s is not running (pid %d): was it stopped or restarted meanwhile?", node, n.PID)
		}
		return n.PID, nil
	}
	return 0, fmt.Errorf("no node %s in the cluster's state", node)
}

// tellNode has node's server read its partition file again (SIGUSR1).
func tellNode(dataDir, node string) error {
	pid, err := runningPID(dataDir, node)
	if err != nil {
		return err
	}
	return tellPID(node, pid)
}

// tellPID sends SIGUSR1 to a node's process once it can take it. In the first moments after
// exec, before Go's runtime has set its signal handlers, SIGUSR1 kills the process; a node that
// has not set them yet has not read its partition file either (it reads it after), so it is
// left to read it then. Without /proc the signal is sent.
func tellPID(node string, pid int) error {
	if status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
		for _, line := range strings.Split(string(status), "\n") {
			if mask, ok := strings.CutPrefix(line, "SigCgt:"); ok {
				caught, err := strconv.ParseUint(strings.TrimSpace(mask), 16, 64)
				if err == nil && caught&(1<<(syscall.SIGUSR1-1)) == 0 {
					return nil
				}
			}
		}
	}
	if err := syscall.Kill(pid, syscall.SIGUSR1); err != nil {
		return fmt.Errorf("signal node %s (pid %d): %w", node, pid, err)
	}
	return nil
}

// killGrace bounds the wait for a killed node's process to be gone.
const killGrace = 10 * time.Second

// killNode sends SIGKILL to node's server and waits until its process is gone: not only its
// main thread (which reads as a zombie while other threads still hold its ports), but the
// whole process, reaped if it is this command's child (a node chaos restarted).
func killNode(dataDir, node string) error {
	pid, err := runningPID(dataDir, node)
	if err != nil {
		return err
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("kill node %s (pid %d): %w", node, pid, err)
	}
	for deadline := time.Now().Add(killGrace); ; time.Sleep(2 * time.Millisecond) {
		if got, _ := syscall.Wait4(pid, nil, syscall.WNOHANG, nil); got == pid {
			return nil // our child, reaped
		}
		if exited(pid) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("node %s (pid %d) still exists %v after SIGKILL", node, pid, killGrace)
		}
	}
}

// exited reports whether every thread of process pid has exited, which is when its sockets are
// closed and its ports free: a process that is gone, or a zombie waiting for its parent (one
// not this command) to reap it. Its main thread reads as a zombie before the others have gone.
func exited(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	if _, err := os.Stat("/proc/self/task"); err != nil {
		return false // no /proc: only a process that is gone counts
	}
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return errors.Is(err, fs.ErrNotExist) // gone meanwhile
	}
	for _, t := range tasks {
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/stat", pid, t.Name()))
		if err != nil {
			continue // that thread is gone
		}
		// The state field follows the parenthesised command name.
		i := strings.LastIndexByte(string(stat), ')')
		if i < 0 || i+2 >= len(stat) || (stat[i+2] != 'Z' && stat[i+2] != 'X') {
			return false
		}
	}
	return true
}
