package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/meridiandb/meridian/internal/bench"
	"github.com/meridiandb/meridian/internal/check"
	"github.com/meridiandb/meridian/internal/protocol"
	"github.com/meridiandb/meridian/internal/report"
)

type demoCommand struct {
	out       string
	seed      uint64
	duration  time.Duration
	clients   int
	protocols []string
}

func newDemoCmd() *cobra.Command {
	c := &demoCommand{}
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Compare every protocol on the simulated five-region K2 deployment, with checked consistency",
		Long: `Run a short YCSB-T comparison of every implemented protocol on the simulator's k2-5region
deployment (K2's Table 1 latencies), then a contended list-append run of each whose history is
checked against the consistency model the protocol promises. Prints a table and writes a report
(markdown, CSV and plots) to --out.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return c.run(cmd) },
	}
	cmd.Flags().StringVar(&c.out, "out", "meridian-demo", "directory for the report")
	cmd.Flags().Uint64Var(&c.seed, "seed", 1, "random seed")
	cmd.Flags().DurationVar(&c.duration, "duration", 10*time.Second, "measured virtual time per run")
	cmd.Flags().IntVar(&c.clients, "clients", 20, "closed-loop clients per region")
	cmd.Flags().StringSliceVar(&c.protocols, "protocols", nil, "protocols to compare (default: all)")
	return cmd
}

func init() { rootCmd.AddCommand(newDemoCmd()) }

type demoRow struct {
	protocol, model, verdict string
	perf                     *bench.Result
	checkRes                 *bench.Result
	anomalies                int
	lost                     error // what the final read found lost or undone, if anything
}

func (c *demoCommand) run(cmd *cobra.Command) error {
	if err := checkRunTime(0, c.duration); err != nil {
		return err
	}
	if err := checkClients(c.clients); err != nil {
		return err
	}
	names := c.protocols
	if len(names) == 0 {
		// An empty --protocols, as from an unset shell variable, names none: running all of
		// them instead would take minutes no one asked for.
		if cmd.Flags().Changed("protocols") {
			return fmt.Errorf("--protocols is empty: name at least one of %s, or leave it out for all", strings.Join(protocol.Names(), ", "))
		}
		names = protocol.Names()
	}
	if c.out == "" {
		return fmt.Errorf("--out is empty: give the report a directory")
	}
	seen := map[string]bool{}
	for _, n := range names {
		if _, err := protocol.Lookup(n); err != nil {
			return fmt.Errorf("--protocols: %w", err)
		}
		if seen[n] {
			return fmt.Errorf("--protocols names %s twice: give each protocol once", n)
		}
		seen[n] = true
	}
	// The report is written after every run; a directory that cannot be made should fail now.
	if err := os.MkdirAll(c.out, 0o755); err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	out := cmd.OutOrStdout()
	fmt.Fprintf(out, "Meridian demo: %d protocols on the simulated k2-5region deployment (SH, BJ, GZ, GY, SG), seed %d\n\n", len(names), c.seed)
	var rows []demoRow
	wallStart := time.Now()
	for _, name := range names {
		row, err := c.runOne(name)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		// Progress only (the table below has the numbers), and not on standard output, which
		// a script may read.
		fmt.Fprintf(cmd.ErrOrStderr(), "  ran %s (%d of %d)\n", name, len(rows)+1, len(names))
		rows = append(rows, row)
	}
	tbl := demoTable(rows)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(tbl.Columns, "\t"))
	for _, r := range tbl.Rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	tw.Flush()
	if err := c.writeReport(tbl, rows); err != nil {
		return err
	}
	fmt.Fprintf(out, "\nReport: %s (report.md, results.csv, throughput.png/svg, latency.png/svg). %.1f s wall.\n",
		filepath.Join(c.out, "report.md"), time.Since(wallStart).Seconds())
	for _, r := range rows {
		if r.lost != nil {
			return &exitError{code: 1, err: fmt.Errorf("%s: %w", r.protocol, r.lost)}
		}
		if r.verdict == check.Invalid {
			return &exitError{code: 1, err: fmt.Errorf("%s violated %s", r.protocol, r.model)}
		}
	}
	for _, r := range rows {
		if r.verdict == check.Unknown {
			return &exitError{code: 2, err: fmt.Errorf("%s: its history could not be judged %s (the report says why)", r.protocol, r.model)}
		}
	}
	return nil
}

func (c *demoCommand) runOne(name string) (demoRow, error) {
	sf := simFlags{}
	sf.register(newFlagSet())
	sf.protocol, sf.seed = name, c.seed
	cfg, err := sf.config()
	if err != nil {
		return demoRow{}, err
	}
	row := demoRow{protocol: name, model: protocol.PromisedModel(cfg.Protocol, cfg.Options)}
	perfWl, err := bench.BuildWorkload(cfg.Topology, bench.DefaultWorkloadParams("ycsbt"))
	if err != nil {
		return row, err
	}
	row.perf, err = bench.SimRun(cfg, bench.Spec{Workload: perfWl, ClientsPerRegion: c.clients, Warmup: 500 * time.Millisecond, Duration: c.duration})
	if err != nil {
		return row, err
	}
	checkWl, err := bench.BuildWorkload(cfg.Topology, bench.WorkloadParams{Name: "list-append", Keys: 10, WriteRatio: -1, Zipf: -1, CRTRatio: -1, RemoteItemRatio: -1})
	if err != nil {
		return row, err
	}
	row.checkRes, err = bench.SimRun(cfg, bench.Spec{Workload: checkWl, ClientsPerRegion: 4, Warmup: 0, Duration: c.duration, Record: true})
	if err != nil {
		return row, err
	}
	if err := attachCheck(row.checkRes, row.model); err != nil {
		return row, err
	}
	_, row.verdict, row.anomalies = checkVerdict(row.checkRes)
	switch d := row.checkRes.Durability; {
	case d != nil && !d.Holds():
		// Writes lost, read stale or undone break every model's promise, whatever the checker
		// made of them.
		row.verdict, row.lost = check.Invalid, d.Err()
	case d.Err() != nil && row.verdict == check.Valid:
		row.verdict = check.Unknown // the final read could not run: half the check is missing
	}
	return row, nil
}

func demoTable(rows []demoRow) *report.Table {
	t := &report.Table{Columns: []string{"protocol", "throughput (txn/s)", "p50 ms", "p99 ms", "abort rate", "promised model", "verdict", "checked txns"}}
	for _, r := range rows {
		t.Add(r.protocol, fmt.Sprintf("%.0f", r.perf.Throughput), fmt.Sprintf("%.1f", r.perf.Latency.P50),
			fmt.Sprintf("%.1f", r.perf.Latency.P99), fmt.Sprintf("%.1f%%", 100*r.perf.AbortRate), r.model, r.verdict,
			fmt.Sprint(checkedTxns(r.checkRes)))
	}
	return t
}

func (c *demoCommand) writeReport(tbl *report.Table, rows []demoRow) error {
	if err := os.MkdirAll(c.out, 0o755); err != nil {
		return err
	}
	if err := tbl.WriteCSV(filepath.Join(c.out, "results.csv")); err != nil {
		return err
	}
	var tput, p99 []report.Bar
	for _, r := range rows {
		tput = append(tput, report.Bar{Label: r.protocol, Value: r.perf.Throughput})
		p99 = append(p99, report.Bar{Label: r.protocol, Value: r.perf.Latency.P99})
	}
	if err := report.BarChart(filepath.Join(c.out, "throughput"), report.Chart{Title: "YCSB-T (K2 preset) on k2-5region", YLabel: "throughput (txn/s)"}, tput); err != nil {
		return err
	}
	if err := report.BarChart(filepath.Join(c.out, "latency"), report.Chart{Title: "YCSB-T p99 latency on k2-5region", YLabel: "p99 latency (ms)"}, p99); err != nil {
		return err
	}
	var b strings.Builder
	b.WriteString("# Meridian demo\n\n")
	fmt.Fprintf(&b, "Simulated `k2-5region` (K2 Table 1 round trips), seed %d, %d clients per region, %v measured per run.\n", c.seed, c.clients, c.duration)
	b.WriteString("Throughput and latency: YCSB-T with K2's preset (3 ops, 50% writes, scrambled Zipf 0.8).\n")
	b.WriteString("Verdict: a contended list-append run (10 keys, 4 clients per region) checked against the protocol's promised model, " +
		"and its final read of every key, which must find every acknowledged append and no failed one (invalid otherwise).\n\n")
	b.WriteString(tbl.Markdown())
	b.WriteString("\n![throughput](throughput.png)\n\n![p99 latency](latency.png)\n")
	return os.WriteFile(filepath.Join(c.out, "report.md"), []byte(b.String()), 0o644)
}

// checkedTxns is how many transactions the checker judged (committed, failed and unknown).
func checkedTxns(r *bench.Result) int {
	if rep, ok := r.Check.(*check.Report); ok && rep != nil {
		return rep.Counts.OK + rep.Counts.Fail + rep.Counts.Info
	}
	return 0
}
