package main

import (
	"cmp"
	"fmt"
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

func clusterChaos(cmd *cobra.Command, cf *clusterFlags, pattern string, length time.Duration, seed uint64) error {
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
	cfg, err := cf.load()
	if err != nil {
		return err
	}
	dataNodes, _ := bench.Targets(cfg.Topology)
	if why := p.Fits(dataNodes, "data node", length); why != "" {
		return fmt.Errorf("--crashes %s: %s", pattern, why)
	}
	st, err := readState(cfg.DataDir)
	if err != nil {
		return err
	}
	for _, s := range statusOf(st) {
		if s.State != "running" {
			return fmt.Errorf("node %s is %s: cluster chaos needs every node running (meridian cluster start)", s.Name, s.State)
		}
	}
	var events []chaosEvent
	for _, c := range p.Crashes(cfg.Topology, seed, length) {
		name := cfg.Nodes[c.Node].Name
		events = append(events, chaosEvent{at: c.At, node: name}, chaosEvent{at: c.At + c.For, node: name, restart: true})
	}
	slices.SortStableFunc(events, func(a, b chaosEvent) int { return cmp.Compare(a.at, b.at) })
	out := cmd.OutOrStdout()
	fmt.Fprintf(out, "chaos: %d crashes of %s's data nodes over %s (--crashes %s, seed %d)\n", len(events)/2, cfg.Name, length, pattern, seed)

	interrupted := make(chan os.Signal, 1)
	signal.Notify(interrupted, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(interrupted)
	down := map[string]bool{} // killed and not restarted yet
	restart := func(at time.Duration, names ...string) error {
		only := map[string]bool{}
		for _, n := range names {
			only[n] = true
		}
		fmt.Fprintf(out, "%8.3fs  restarting %s\n", at.Seconds(), strings.Join(names, ", "))
		if err := startNodes(cmd, cf, only); err != nil {
			return err
		}
		for _, n := range names {
			delete(down, n)
		}
		return nil
	}
	start := time.Now()
	for _, ev := range events {
		select {
		case sig := <-interrupted:
			left := slices.Sorted(maps.Keys(down))
			if len(left) > 0 {
				if err := restart(time.Since(start), left...); err != nil {
					return fmt.Errorf("interrupted (%v), and restarting %v failed: %w", sig, left, err)
				}
			}
			return fmt.Errorf("interrupted (%v); every node it killed was restarted", sig)
		case <-time.After(time.Until(start.Add(ev.at))):
		}
		if ev.restart {
			if err := restart(time.Since(start), ev.node); err != nil {
				return err
			}
			continue
		}
		if err := killNode(cfg.DataDir, ev.node); err != nil {
			return err
		}
		down[ev.node] = true
		fmt.Fprintf(out, "%8.3fs  killed %s\n", time.Since(start).Seconds(), ev.node)
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

// killNode sends SIGKILL to node's server, as the cluster's state records it.
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
			return fmt.Errorf("node %s is not running (pid %d): was the cluster stopped or restarted meanwhile?", node, n.PID)
		}
		if err := syscall.Kill(n.PID, syscall.SIGKILL); err != nil {
			return fmt.Errorf("kill node %s (pid %d): %w", node, n.PID, err)
		}
		for alive(n.PID, n.Name, st.Config) { // gone before its restart may bind its ports
			time.Sleep(5 * time.Millisecond)
		}
		return nil
	}
	return fmt.Errorf("no node %s in the cluster's state", node)
}
