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
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/meridiandb/meridian/internal/bench"
)

// `meridian cluster chaos` is the kill script every real-cluster crash review wrote for itself:
// it kill -9's data nodes of a running local cluster on a schedule drawn from a seed, as
// `meridian sim --random-crashes` draws one, and restarts each after its outage from what it
// had persisted, so that a bench run alongside shows whether any acknowledged write was lost.

func newClusterChaosCmd(cf *clusterFlags) *cobra.Command {
	var (
		pattern string
		length  time.Duration
		seed    uint64
	)
	cmd := &cobra.Command{
		Use:   "chaos --crashes GAP/FOR --for D",
		Short: "Kill -9 and restart data nodes of the running cluster on a schedule drawn from a seed",
		Long: `Kill data nodes of the running cluster with SIGKILL and restart each after its outage, for
--for of wall-clock time, on a schedule drawn from --seed as meridian sim --random-crashes draws
one: after each gap (a duration, or a range A-B drawn uniformly) a data node that is up is
killed for an outage of up to FOR (or from a range); several are down at once when gaps are
shorter than outages. Every outage ends within --for, and the command returns with every node
running again (also when interrupted: it restarts what it killed first). Run a bench alongside,
with a window that outlasts the schedule, to check that no acknowledged write was lost:

  meridian cluster chaos --crashes 300ms-3s/1.5s --for 35s & meridian bench --duration 40s --read-back

Pair it with a slowed disk ([disk] flush_delay) so that a kill can fall between a write
acknowledged before it was durable and its flush. Each line says what it did and when, counted
from the command's start.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return clusterChaos(cmd, cf, pattern, length, seed)
		},
	}
	cmd.Flags().StringVar(&pattern, "crashes", "", "GAP/FOR: a crash after each gap, each node down for up to FOR; each a duration or a range A-B, e.g. 300ms-3s/1.5s (required)")
	cmd.Flags().DurationVar(&length, "for", 0, "how long to go on killing nodes (wall clock; required)")
	cmd.Flags().Uint64Var(&seed, "seed", 1, "seed of the schedule: the same seed gives the same schedule")
	return cmd
}

// chaosEvent is one step of the schedule: kill node, or restart it.
type chaosEvent struct {
	at      time.Duration
	node    string
	restart bool
}

// chaosLag is how late a kill may come before it is skipped (with its restart): restarts take
// tens of milliseconds, and with gaps shorter than that the schedule would run on past --for,
// past a bench sized to outlast it.
const chaosLag = 500 * time.Millisecond

func clusterChaos(cmd *cobra.Command, cf *clusterFlags, pattern string, length time.Duration, seed uint64) (err error) {
	if pattern == "" {
		return fmt.Errorf("--crashes is required (e.g. --crashes 300ms-3s/1.5s)")
	}
	if length <= 0 {
		return fmt.Errorf("--for %s: want a positive duration, how long to go on killing nodes", length)
	}
	p, err := bench.ParseFaultPattern(pattern)
	if err != nil {
		return fmt.Errorf("--crashes %s: %w", pattern, err)
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
	dataNodes, _ := bench.Targets(cfg.Topology)
	if why := p.Fits(dataNodes, "data node", length); why != "" {
		return fmt.Errorf("--crashes %s: %s", pattern, why)
	}
	var events []chaosEvent
	for _, c := range p.Crashes(cfg.Topology, seed, length) {
		name := cfg.Nodes[c.Node].Name
		events = append(events, chaosEvent{at: c.At, node: name}, chaosEvent{at: c.At + c.For, node: name, restart: true})
	}
	slices.SortStableFunc(events, func(a, b chaosEvent) int { return cmp.Compare(a.at, b.at) })
	out := cmd.OutOrStdout()
	fmt.Fprintf(out, "chaos: %s of %s's data nodes over %s (--crashes %s, seed %d)\n", counted(len(events)/2, "crash", "crashes"), cfg.Name, length, pattern, seed)

	interrupted := make(chan os.Signal, 1)
	signal.Notify(interrupted, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(interrupted)
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
	for _, ev := range events {
		select { // an interrupt is taken before the next step, however late that step is
		case sig := <-interrupted:
			return fmt.Errorf("interrupted (%v); every node it killed is restarted", sig)
		default:
		}
		select {
		case sig := <-interrupted:
			return fmt.Errorf("interrupted (%v); every node it killed is restarted", sig)
		case <-time.After(time.Until(start.Add(ev.at))):
		}
		switch {
		case ev.restart && skipped[ev.node]:
			delete(skipped, ev.node)
		case ev.restart:
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
		return fmt.Errorf("interrupted (%v) after the last restart; every node it killed was restarted", sig)
	}
	fmt.Fprintf(out, "chaos: done after %.1fs; every node it killed was restarted\n", time.Since(start).Seconds())
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

// killGrace bounds the wait for a killed node's process to be gone.
const killGrace = 10 * time.Second

// killNode sends SIGKILL to node's server, as the cluster's state records it, and waits until
// its process is gone: not only its main thread (which reads as a zombie while other threads
// still hold its ports), but the whole process, reaped if it is this command's child (a node
// chaos restarted).
func killNode(dataDir, node string) error {
	st, err := readState(dataDir)
	if err != nil {
		return err
	}
	for _, n := range st.Nodes {
		if n.Name != node {
			continue
		}
		if !alive(n.PID, n.Name, st.Config) {
			return fmt.Errorf("node %s is not running (pid %d): was it stopped or restarted meanwhile?", node, n.PID)
		}
		if err := syscall.Kill(n.PID, syscall.SIGKILL); err != nil {
			return fmt.Errorf("kill node %s (pid %d): %w", node, n.PID, err)
		}
		for deadline := time.Now().Add(killGrace); ; time.Sleep(2 * time.Millisecond) {
			if pid, _ := syscall.Wait4(n.PID, nil, syscall.WNOHANG, nil); pid == n.PID {
				return nil // our child, reaped
			}
			if exited(n.PID) {
				return nil
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("node %s (pid %d) still exists %v after SIGKILL", node, n.PID, killGrace)
			}
		}
	}
	return fmt.Errorf("no node %s in the cluster's state", node)
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
