package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/meridiandb/meridian/internal/bench"
	"github.com/meridiandb/meridian/internal/check"
)

// printResult prints a run's result for people.
func printResult(w io.Writer, r *bench.Result) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "protocol\t%s\n", r.Protocol)
	fmt.Fprintf(tw, "workload\t%s on %s, %d clients\n", r.Workload, r.Topology, r.Clients)
	if r.Namespace != "" {
		fmt.Fprintf(tw, "namespace\t%s (meridian kv exec --namespace %s reads its keys)\n", r.Namespace, r.Namespace)
	}
	if r.TraceDigest != "" {
		fmt.Fprintf(tw, "seed / digest\t%d / %s\n", r.Seed, r.TraceDigest)
		fmt.Fprintf(tw, "time\t%.1f virtual s in %.2f wall s (%d events, %.0f events/s)\n", r.VirtualSeconds, r.WallSeconds, r.Events, r.EventsPerSec)
	} else {
		fmt.Fprintf(tw, "time\t%.2f wall s", r.WallSeconds)
		if r.LoadSeconds >= 1 {
			// Loading TPC-C takes seconds before any client starts; say where the time went.
			fmt.Fprintf(tw, " (%.1f s of them loading the database)", r.LoadSeconds)
		}
		fmt.Fprintln(tw)
	}
	fmt.Fprintf(tw, "throughput\t%.1f txn/s (%d committed, %d aborted attempts, abort rate %.1f%%)\n", r.Throughput, r.Committed, r.Aborted, 100*r.AbortRate)
	fmt.Fprintf(tw, "latency ms\tp50 %.2f  p90 %.2f  p99 %.2f  mean %.2f\n", r.Latency.P50, r.Latency.P90, r.Latency.P99, r.Latency.Mean)
	if r.WindowMessages > 0 && r.Committed > 0 {
		// Per committed transaction, aborted attempts included: what the protocol costs the nodes.
		fmt.Fprintf(tw, "work per commit\t%.1f messages, %.2f disk flushes (window)\n",
			float64(r.WindowMessages)/float64(r.Committed), float64(r.WindowFlushes)/float64(r.Committed))
	}
	for _, c := range sortedKeys(r.AbortsByCause) {
		fmt.Fprintf(tw, "aborts: %s\t%d\n", c, r.AbortsByCause[c])
	}
	for _, t := range sortedKeys(r.PerType) {
		s := r.PerType[t]
		fmt.Fprintf(tw, "type %s\t%d committed, p50 %.2f p90 %.2f p99 %.2f ms\n", t, s.Committed, s.Latency.P50, s.Latency.P90, s.Latency.P99)
	}
	if len(r.UnreachableAtEnd) > 0 {
		fmt.Fprintf(tw, "unreachable at end\t%s (clients still found these nodes unreachable when the window ended)\n", strings.Join(r.UnreachableAtEnd, ", "))
	}
	if r.Failed > 0 {
		fmt.Fprintf(tw, "failed\t%d (%d with unknown outcome, %d finding the coordinator unreachable)\n", r.Failed, r.Unknown, r.Unavailable)
	}
	if r.NodeCounters != nil {
		note := ""
		if r.NodeCountersNote != "" {
			note = "; " + r.NodeCountersNote
		}
		fmt.Fprintf(tw, "node counters\t%d protocol counters from the nodes' /metrics, warm-up to final read (in --json)%s\n", len(r.NodeCounters), note)
	}
	if r.Consistency != "" {
		fmt.Fprintf(tw, "consistency\t%s\n", r.Consistency)
	}
	if r.Durability != nil {
		fmt.Fprintf(tw, "durability\t%s\n", r.Durability)
	}
	if model, verdict, n := checkVerdict(r); model != "" {
		// The checker judges every transaction the history holds, warm-up, drain and final read included,
		// so its count is not the window's committed count.
		rep := r.Check.(*check.Report)
		fmt.Fprintf(tw, "check\t%s: %s (%s among the history's %d transactions, %s)\n", model, verdict,
			counted(n, "anomaly", "anomalies"), rep.Counts.OK+rep.Counts.Fail+rep.Counts.Info, historySpan(r.Durability))
		if rep.Counts.Timestamped > 0 {
			fmt.Fprintf(tw, "timestamps\t%d committed transactions held to their commit timestamps (meridian check --help)\n", rep.Counts.Timestamped)
		}
	}
	tw.Flush()
}

// historySpan says what the checked history covers beyond the measured window: a final read
// only if one ran to the end (a node down when the run ended stops it, and the check must not
// claim it).
func historySpan(d *bench.Durability) string {
	switch {
	case d == nil:
		return "warm-up and drain included"
	case d.NotRun != "":
		return "warm-up and drain included; the final read did not finish"
	}
	return "warm-up, drain and final read included"
}

// printFirstAnomaly explains the first anomaly of an invalid history, the cycle that shows it,
// and says how to see the rest: a verdict with only a count leaves the user nowhere to start.
func printFirstAnomaly(w io.Writer, r *bench.Result, historyPath string) {
	rep, ok := r.Check.(*check.Report)
	if !ok || rep == nil || rep.Verdict != check.Invalid || len(rep.Anomalies) == 0 {
		return
	}
	a := rep.Anomalies[0]
	fmt.Fprintf(w, "\nfirst anomaly: %s\n", a.Type)
	for _, line := range strings.Split(a.Explanation, "\n") {
		fmt.Fprintf(w, "  %s\n", line)
	}
	if more := len(rep.Anomalies) + rep.Omitted - 1; more > 0 {
		how := "run again with --history FILE, then meridian check --model " + rep.Model + " FILE"
		if historyPath != "" {
			how = "meridian check --model " + rep.Model + " " + historyPath
		}
		fmt.Fprintf(w, "%s: %s\n", counted(more, "more anomaly", "more anomalies"), how)
	}
}

// counted is "1 anomaly", "2 anomalies".
func counted(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}
