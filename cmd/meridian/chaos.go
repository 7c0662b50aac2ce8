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
	"github.com/meridiandb/meridian/internal/topo"
)

// `meridian cluster chaos` is the kill script every real-cluster crash review wrote for itself:
// it kill -9's data nodes of a running local cluster on a schedule drawn from a seed, as
// `meridian sim --random-crashes` draws one, and restarts each after its outage from what it
// had persisted, so that a bench run alongside shows whether any acknowledged write was lost.

func newClusterChaosCmd(cf *clusterFlags) *cobra.Command {
	var (
		crashes, partitions string
		length              time.Duration
		seed                uint64
	)
	cmd := &cobra.Command{
		Use:   "chaos [--crashes GAP/FOR] [--partitions GAP/FOR] --for D",
		Short: "Kill -9 and restart data nodes, or cut regions off from each other, on a schedule drawn from a seed",
		Long: `Strike the running cluster for --for of wall-clock time on a schedule drawn from --seed, as
meridian sim --random-crashes and --random-partitions draw one: after each gap (a duration, or a
range A-B drawn uniformly) something not already struck is struck for up to FOR (or for a
length from a range); several at once when gaps are shorter than lengths.

  --crashes     a data node that is up is killed with SIGKILL and restarted after its outage
                from what it had persisted.
  --partitions  two regions that are not cut off from each other are: their nodes stop talking
                to each other (connections closed, frames dropped, no redial) until the cut
                heals; clients keep their connections to their own region's nodes.

Every fault ends within --for, and the command returns with every node running and every cut
healed (also when interrupted: it heals and restarts first). Run a bench alongside, with a
window that outlasts the schedule, to check that no acknowledged write was lost and the history
holds:

  meridian cluster chaos --crashes 300ms-3s/1.5s --for 35s & meridian bench --duration 40s --read-back

Pair crashes with a slowed disk ([disk] flush_delay) so that a kill can fall between a write
acknowledged before it was durable and its flush. Each line says what it did and when, counted
from the command's start.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return clusterChaos(cmd, cf, crashes, partitions, length, seed)
		},
	}
	cmd.Flags().StringVar(&crashes, "crashes", "", "GAP/FOR: a crash after each gap, each node down for up to FOR; each a duration or a range A-B, e.g. 300ms-3s/1.5s")
	cmd.Flags().StringVar(&partitions, "partitions", "", "GAP/FOR: a cut between two regions after each gap, each healed after up to FOR, e.g. 500ms-3s/2s")
	cmd.Flags().DurationVar(&length, "for", 0, "how long to go on striking the cluster (wall clock; required)")
	cmd.Flags().Uint64Var(&seed, "seed", 1, "seed of the schedule: the same seed gives the same schedule")
	return cmd
}

// chaosKind is what a step of the schedule does.
type chaosKind int

const (
	chaosKill chaosKind = iota
	chaosRestart
	chaosCut
	chaosHeal
)

// chaosEvent is one step of the schedule: kill or restart node, or cut or heal the pair of
// regions.
type chaosEvent struct {
	at   time.Duration
	kind chaosKind
	node string
	pair [2]topo.RegionID
}

// chaosLag is how late a kill may come before it is skipped (with its restart): restarts take
// tens of milliseconds, and with gaps shorter than that the schedule would run on past --for,
// past a bench sized to outlast it.
const chaosLag = 500 * time.Millisecond

func clusterChaos(cmd *cobra.Command, cf *clusterFlags, crashes, partitions string, length time.Duration, seed uint64) (err error) {
	if crashes == "" && partitions == "" {
		return fmt.Errorf("--crashes or --partitions is required (e.g. --crashes 300ms-3s/1.5s)")
	}
	if length <= 0 {
		return fmt.Errorf("--for %s: want a positive duration, how long to go on striking the cluster", length)
	}
	var crashPattern, cutPattern bench.FaultPattern
	if crashes != "" {
		if crashPattern, err = bench.ParseFaultPattern(crashes); err != nil {
			return fmt.Errorf("--crashes %s: %w", crashes, err)
		}
	}
	if partitions != "" {
		if cutPattern, err = bench.ParseFaultPattern(partitions); err != nil {
			return fmt.Errorf("--partitions %s: %w", partitions, err)
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
	slices.SortStableFunc(events, func(a, b chaosEvent) int { return cmp.Compare(a.at, b.at) })
	var kills, cuts int
	for _, ev := range events {
		switch ev.kind {
		case chaosKill:
			kills++
		case chaosCut:
			cuts++
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
	out := cmd.OutOrStdout()
	var what []string
	if crashes != "" {
		what = append(what, fmt.Sprintf("%s of %s's data nodes (--crashes %s)", counted(kills, "crash", "crashes"), cfg.Name, crashes))
	}
	if partitions != "" {
		what = append(what, fmt.Sprintf("%s between %s's regions (--partitions %s)", counted(cuts, "cut", "cuts"), cfg.Name, partitions))
	}
	fmt.Fprintf(out, "chaos: %s over %s, seed %d\n", strings.Join(what, " and "), length, seed)

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
	// Cuts are kept in the nodes' partition files; each node of a region whose cuts changed
	// is told to read its file again, except one that is down, which reads it as it restarts.
	cut := map[[2]topo.RegionID]bool{}
	regionName := func(r topo.RegionID) string { return cfg.Topology.Regions[r].Name }
	// A node that cannot be told (not running, its directory unwritable) does not stop the
	// others from being told: a heal that stopped at the first left the rest of the cluster cut,
	// some pairs one-sided.
	applyCuts := func(regions ...topo.RegionID) error {
		var failed []string
		for _, n := range cfg.Nodes {
			if !slices.Contains(regions, n.Region) {
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
			if !down[n.Name] {
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
	var all []topo.RegionID
	for r := range cfg.Topology.Regions {
		all = append(all, topo.RegionID(r))
	}
	// struck: some node's partition file may name a cut, so every exit heals them all (a heal
	// that failed part-way has already dropped its pair from cut).
	struck := false
	// A partition file left by a chaos that was killed (SIGKILL, SIGPIPE) still cuts the running
	// nodes that read it: heal it before striking, or its cuts outlive this run too.
	var left []string
	for _, n := range cfg.Nodes {
		if from, _ := readPartition(n.DataDir); len(from) > 0 {
			left = append(left, n.Name+" from "+strings.Join(from, ","))
		}
	}
	if len(left) > 0 {
		struck = true
		if err := applyCuts(all...); err != nil {
			return fmt.Errorf("healing the cuts a cluster chaos left (%s): %v", strings.Join(left, "; "), err)
		}
		fmt.Fprintf(out, "%8.3fs  healed the cuts a cluster chaos left: %s\n", time.Since(start).Seconds(), strings.Join(left, "; "))
	}
	// Run before the restarts above (defers run last first): whatever ends the run, every cut
	// heals, and a node restarted then starts with none.
	defer func() {
		if len(cut) == 0 && (!struck || err == nil) {
			return // every cut healed as scheduled
		}
		what := "every cut" // a heal that failed part-way has dropped its pair from cut
		if len(cut) > 0 {
			var pairs []string
			for pair := range cut {
				pairs = append(pairs, regionName(pair[0])+"|"+regionName(pair[1]))
			}
			slices.Sort(pairs)
			what = strings.Join(pairs, ", ")
		}
		clear(cut)
		if herr := applyCuts(all...); herr != nil {
			err = fmt.Errorf("%v; then healing %s failed (meridian cluster start heals what chaos left): %v", err, what, herr)
			return
		}
		fmt.Fprintf(out, "%8.3fs  healed %s\n", time.Since(start).Seconds(), what)
	}()
	for _, ev := range events {
		select { // an interrupt is taken before the next step, however late that step is
		case sig := <-interrupted:
			return fmt.Errorf("interrupted (%v); every node it killed is restarted, every cut healed", sig)
		default:
		}
		select {
		case sig := <-interrupted:
			return fmt.Errorf("interrupted (%v); every node it killed is restarted, every cut healed", sig)
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
			if err := applyCuts(ev.pair[0], ev.pair[1]); err != nil {
				return err
			}
			did := map[chaosKind]string{chaosCut: "cut", chaosHeal: "healed"}[ev.kind]
			fmt.Fprintf(out, "%8.3fs  %s %s|%s\n", time.Since(start).Seconds(), did, regionName(ev.pair[0]), regionName(ev.pair[1]))
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
		return fmt.Errorf("interrupted (%v) after the last fault; every node it killed was restarted, every cut healed", sig)
	}
	fmt.Fprintf(out, "chaos: done after %.1fs; every node it killed was restarted, every cut healed\n", time.Since(start).Seconds())
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
