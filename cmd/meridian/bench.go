package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/meridiandb/meridian/client"
	"github.com/meridiandb/meridian/internal/bench"
	"github.com/meridiandb/meridian/internal/check"
	"github.com/meridiandb/meridian/internal/protocol"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/workload/listappend"
)

func newBenchCmd() *cobra.Command {
	var (
		cf        clusterFlags
		wf        workloadFlags
		clients   int
		duration  time.Duration
		warmup    time.Duration
		seed      uint64
		history   string
		check     string
		asJSON    bool
		namespace string
	)
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Run a workload against a running cluster and report it like `meridian sim`",
		Long: `Run closed-loop clients (one connection each, --clients per region, each talking to a data
node of its region) against a running cluster for --warmup + --duration of wall-clock time, then
print throughput, latency and aborts — the same report and JSON as ` + "`meridian sim`" + ` — with the
checker's verdict on the recorded history for list-append and rw-register, and the workload's
own check for TPC-C (its consistency conditions) and YCSB-T with --rmw (every key written holds a
counter between its committed increments and those plus the increments whose outcome is unknown;
such a run keeps its keys under a fresh namespace, so that its counters start at 0).

` + runExitStatuses + ` A run whose clients still found a data node unreachable when the window
ended exits 1 as well (the result names the nodes): the cluster stopped answering.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkRunTime(warmup, duration); err != nil {
				return err
			}
			if err := checkClients(clients); err != nil {
				return err
			}
			cfg, err := cf.load()
			if err != nil {
				return err
			}
			if err := checkConnections(clients, len(cfg.Topology.Regions)); err != nil {
				return err
			}
			if err := checkNamespace(namespace, cfg.Topology); err != nil {
				return err
			}
			// Each run checks its own keys: a cluster keeps the data of earlier runs, whose
			// values would otherwise read as writes nobody in this history made.
			wf.p.Namespace = namespace
			if namespace == "" {
				wf.p.Namespace = strconv.FormatInt(time.Now().UnixNano(), 36)
			}
			wl, err := wf.build(cfg.Topology)
			if err != nil {
				return err
			}
			// Only list-append and rw-register keep their keys under a namespace; another
			// workload would ignore it without a word.
			if cmd.Flags().Changed("namespace") && !checkable(wl) {
				return fmt.Errorf("--namespace does not apply to --workload %s (only to list-append, rw-register)", wl.Name())
			}
			if err := checkHistoryFlag(history, wl); err != nil {
				return err
			}
			model, err := modelFor(check, protocol.PromisedModel(cfg.Protocol, cfg.Options), wl)
			if err != nil {
				return err
			}
			// The driver holds the whole initial database while it loads it.
			if err := checkMemory(wl, cfg.Topology, clients); err != nil {
				return err
			}
			inputs := []input{{what: "the cluster configuration", path: cf.config},
				{what: "the cluster's data directory", path: cfg.DataDir, dir: true}}
			for _, n := range cfg.Nodes {
				inputs = append(inputs, input{what: "node " + n.Name + "'s data directory", path: n.DataDir, dir: true})
			}
			if err := checkNotInput("--history", history, inputs); err != nil {
				return err
			}
			if err := checkOutputPath("--history", history); err != nil {
				return err
			}
			// The driver builds the whole initial database before it connects; a cluster that
			// is not running should be reported before that, not minutes later.
			probe, err := dialNode(cfg, cfg.Coordinator(0, 0).ID)
			if err != nil {
				return err
			}
			if cmd.Flags().Changed("namespace") && checkable(wl) {
				err = checkNamespaceUnused(probe, cfg.Topology, namespace, wl.Name() == "rw-register")
			}
			_ = probe.Close()
			if err != nil {
				return err
			}
			before, failedBefore := scrapeNodes(cfg)
			var tally *counterTally
			stopTally, tallyDone := make(chan struct{}), (<-chan struct{})(nil)
			if len(before)+len(failedBefore) > 0 {
				tally = newCounterTally(cfg, before, failedBefore)
				tallyDone = tallyWhile(tally, stopTally)
			}
			res, err := bench.RealRun(bench.RealConfig{
				Topology: cfg.Topology, Protocol: cfg.Protocol.Name(), Seed: seed,
				Dial: func(coord topo.NodeID) (client.Transport, error) { return dialNode(cfg, coord) },
			}, bench.Spec{Workload: wl, ClientsPerRegion: clients, Warmup: warmup, Duration: duration,
				Record: model != "" || history != "" || checkable(wl), OneOpAtATime: wf.oneOp})
			if tally != nil {
				close(stopTally)
				<-tallyDone
			}
			if err != nil {
				return err
			}
			if checkable(wl) {
				res.Namespace = wf.p.Namespace
			}
			if tally != nil {
				tally.observe(scrapeNodes(cfg))
				res.NodeCounters, res.NodeCountersNote = tally.result()
			}
			if history != "" {
				if err := writeHistory(history, res.History); err != nil {
					return err
				}
			}
			if model != "" {
				if err := attachCheck(res, model); err != nil {
					return err
				}
			}
			if asJSON {
				if err := writeJSON(cmd.OutOrStdout(), res); err != nil {
					return err
				}
				return failedRun(res)
			}
			printResult(cmd.OutOrStdout(), res)
			printFirstAnomaly(cmd.OutOrStdout(), res, history)
			return failedRun(res)
		},
	}
	cf.register(cmd.Flags(), false)
	wf.register(cmd.Flags())
	cmd.Flags().IntVar(&clients, "clients", 4, "closed-loop clients per region")
	cmd.Flags().DurationVar(&duration, "duration", 5*time.Second, "measured wall-clock time")
	cmd.Flags().DurationVar(&warmup, "warmup", time.Second, "warm-up before measuring")
	cmd.Flags().Uint64Var(&seed, "seed", 1, "seed of the clients' transaction generators")
	cmd.Flags().StringVar(&history, "history", "", "write the recorded history (Elle JSON lines) to this file")
	cmd.Flags().StringVar(&namespace, "namespace", "", "list-append key namespace (default: a fresh one per run, so each run's history is judged on its own keys; YCSB-T with --rmw always takes a fresh one)")
	cmd.Flags().StringVar(&check, "check", "auto", "check the history: auto (the protocol's promised model), a model name, or none")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object")
	return cmd
}

func init() { rootCmd.AddCommand(newBenchCmd()) }

// failedRun is failedConsistency, and then a cluster that stopped answering: its history may
// check valid (transactions that never reached a node took no effect), but the run measured an
// outage, not the cluster.
func failedRun(r *bench.Result) error {
	if _, verdict, _ := checkVerdict(r); verdict != check.Invalid && len(r.UnreachableAtEnd) > 0 {
		// Before what the workload's checks could not do because of it.
		return &exitError{code: 1, err: fmt.Errorf("the cluster stopped answering: %s unreachable when the run ended",
			strings.Join(r.UnreachableAtEnd, ", "))}
	}
	return failedConsistency(r)
}

// checkNamespaceUnused refuses a namespace an earlier run wrote under. Its values would read,
// in this run's history, as writes nobody in it made, and the checker would judge a healthy
// cluster invalid. The workload's first keys (each on a shard of its own) are probed.
func checkNamespaceUnused(t client.Transport, tp *topo.Topology, ns string, register bool) error {
	keys := make([]string, 16)
	for k := range keys {
		keys[k] = listappend.StorageKey(tp, ns, int64(k), register)
	}
	var used string
	err := client.RunTxn(client.Open(t), client.TxnOptions{ReadOnly: true}, func(tx *client.Txn) error {
		reads, err := tx.GetMany(keys)
		for i, r := range reads {
			if r.Found {
				used = keys[i]
				break
			}
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("--namespace %s: could not tell whether an earlier run used it: %w", ns, err)
	}
	if used != "" {
		return fmt.Errorf("--namespace %s already holds an earlier run's data (key %s): this run's history would read values it did not write, and be judged invalid; give a fresh namespace, or omit --namespace for one", ns, used)
	}
	return nil
}
