package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/meridiandb/meridian/internal/check"
	"github.com/meridiandb/meridian/internal/history"
	"github.com/spf13/cobra"
)

var checkFlags struct {
	model string
	json  bool
}

var checkCmd = &cobra.Command{
	Use:   "check [--model M] [--json] HISTORY",
	Short: "Check a recorded history (Elle JSON lines) against a consistency model",
	Long: "Check a recorded history against a consistency model and explain every anomaly with a cycle.\n\n" +
		"Models: " + strings.Join(check.Models(), ", ") + ".\n" +
		"HISTORY - reads it from standard input.\n" +
		"Either every operation carries a \"time\" or none does: without times there is no real-time order,\n" +
		"and a model that needs it can be found invalid but not valid.\n" +
		"A meta line {\"type\":\"meta\",\"timestamp_order\":true} (which sim and bench write for k2, spanner and crdb)\n" +
		"declares that commit timestamps, given on ok lines as \"commit_ts\":{\"wall\":W,\"logical\":L,\"origin\":O},\n" +
		"order the transactions: every dependency must run to a higher timestamp (a read may share its writer's),\n" +
		"and under a model with real-time order a writer that completed before another began must hold the lower\n" +
		"(anomalies timestamp-order, timestamp-realtime). Where the meta line also says \"true_time\":true (sim's\n" +
		"histories: times and timestamps count one clock), a writer's timestamp must fall within its run\n" +
		"(timestamp-lifetime: a commit wait skipped).\n" +
		"Exit codes: 0 valid, 1 anomalies found, 2 unknown (not enough information), 3 error.",
	// A usage error must not exit 1, which here means "anomalies found".
	Args: func(cmd *cobra.Command, args []string) error {
		if err := exactArgs(1)(cmd, args); err != nil {
			return &exitError{code: 3, err: err}
		}
		return nil
	},
	RunE: runCheck,
}

func init() {
	// Nor may a flag error: cobra reports it before Args runs.
	checkCmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &exitError{code: 3, err: err} })
	checkCmd.Flags().StringVar(&checkFlags.model, "model", "strict-serializable", "consistency model: "+strings.Join(check.Models(), ", "))
	checkCmd.Flags().BoolVar(&checkFlags.json, "json", false, "print the report as JSON")
	rootCmd.AddCommand(checkCmd)
}

func runCheck(cmd *cobra.Command, args []string) error {
	if !slices.Contains(check.Models(), checkFlags.model) {
		return &exitError{code: 3, err: fmt.Errorf("--model %q: want one of %s", checkFlags.model, strings.Join(check.Models(), ", "))}
	}
	in := io.Reader(cmd.InOrStdin())
	if args[0] != "-" {
		f, err := os.Open(args[0])
		if err != nil {
			return &exitError{code: 3, err: err}
		}
		defer f.Close()
		if st, err := f.Stat(); err == nil && st.IsDir() {
			return &exitError{code: 3, err: fmt.Errorf("%s is a directory, not a history file", args[0])}
		}
		in = f
	}
	ops, err := history.Read(in)
	if err != nil {
		return &exitError{code: 3, err: fmt.Errorf("%s: %w", args[0], err)}
	}
	report, err := check.Check(ops, checkFlags.model)
	if err != nil {
		return &exitError{code: 3, err: fmt.Errorf("%s: %w", args[0], err)}
	}
	out := cmd.OutOrStdout()
	if checkFlags.json {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(report); err != nil {
			return &exitError{code: 3, err: err}
		}
	} else {
		fmt.Fprint(out, report.String())
	}
	switch report.Verdict {
	case check.Invalid:
		return &exitError{code: 1}
	case check.Unknown:
		return &exitError{code: 2}
	}
	return nil
}
