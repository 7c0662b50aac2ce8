// Command meridian is Meridian's single command-line tool: simulate, benchmark, reproduce paper
// experiments, check histories, and run servers and local clusters.
//
// Each subcommand lives in its own file and adds itself to rootCmd in an init function.
//
// default.pgo is a CPU profile of representative simulations (k2 TPC-C at 5×5 nodes, k2
// YCSB-T, crdb TPC-C); the Go toolchain uses it for profile-guided optimization, which makes
// simulations about 8% faster. Regenerate it after large changes to the simulator or protocols:
//
//	meridian sim --protocol k2 --workload tpcc --warehouses 50 --nodes-per-region 5 --clients 100 \
//	    --duration 3s --verify=false --cpuprofile /tmp/a.prof   # and a few other runs
//	go tool pprof -proto /tmp/a.prof /tmp/b.prof ... > cmd/meridian/default.pgo
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/spf13/cobra"
)

var rootCmd = &cobra.Command{
	Use:           "meridian",
	Short:         "Meridian: a multi-region transactional key-value store ordered by synchronized clocks",
	SilenceUsage:  true,
	SilenceErrors: true,
}

// exitError carries a specific exit code out of a command (e.g. `check`: 1 invalid, 2 unknown).
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }

// helpCmd replaces cobra's help command, which answers an unknown topic with the whole usage
// and exit status 0.
var helpCmd = &cobra.Command{
	Use:   "help [command]",
	Short: "Help about any command",
	RunE: func(cmd *cobra.Command, args []string) error {
		target, rest, err := rootCmd.Find(args)
		if err != nil || len(rest) > 0 {
			return fmt.Errorf("help: unknown command %q (meridian --help lists them)", strings.Join(args, " "))
		}
		return target.Help()
	},
}

func init() {
	rootCmd.SetHelpCommand(helpCmd)
	rootCmd.SuggestionsMinimumDistance = 2 // cobra's default, which it sets only for its own check
	// Cobra's own check of the root's arguments printed its suggestions on four more lines,
	// and passed an empty command name (an unset shell variable) to print the whole usage
	// and exit 0.
	rootCmd.Args = func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return nil
		}
		hint := "meridian --help lists the commands"
		// After "--" a command's own name is an argument, and no suggestion; "" is a prefix
		// of every name.
		s := slices.DeleteFunc(cmd.SuggestionsFor(args[0]), func(s string) bool { return s == args[0] })
		if len(s) > 0 && args[0] != "" {
			hint = "did you mean " + strings.Join(s, " or ") + "?"
		}
		return fmt.Errorf("unknown command %q for %q (%s)", args[0], cmd.CommandPath(), hint)
	}
	rootCmd.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
}

func main() {
	// Simulations allocate many short-lived messages; trading memory (plentiful) for fewer GC
	// cycles cuts their wall time noticeably. GOGC in the environment still wins.
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(300)
	}
	// GOGC=300 lets the heap grow to four times what is live, which a large simulation (TPC-C
	// with hundreds of warehouses) cannot afford: a soft limit below the machine's memory makes
	// the collector work harder near it instead of the run being killed. GOMEMLIMIT still wins.
	if os.Getenv("GOMEMLIMIT") == "" {
		if limit := memoryLimit(); limit > 0 {
			debug.SetMemoryLimit(heapLimit(limit))
		}
	}
	rootCmd.InitDefaultCompletionCmd()
	guardGroups(rootCmd)
	if err := rootCmd.Execute(); err != nil {
		code := 1
		var ee *exitError
		if errors.As(err, &ee) {
			code = ee.code
			if ee.err == nil {
				os.Exit(code)
			}
		}
		printError(stderr, err)
		os.Exit(code)
	}
}

// printError prints err as the one line an error gets.
func printError(w io.Writer, err error) {
	// The client library's errors carry their own "meridian:" prefix.
	fmt.Fprintln(w, "meridian:", shorten(oneLine(strings.TrimPrefix(err.Error(), "meridian: "))))
}

// oneLine joins the lines of an error message with "; ". Some errors span lines: Pebble's
// report of a damaged store names each missing file on a line of its own, and a node that
// failed to start then printed a second line that `cluster start`, which quotes the last line
// of the node's log, showed alone.
func oneLine(msg string) string {
	lines := strings.FieldsFunc(msg, func(r rune) bool { return r == '\n' || r == '\r' })
	var kept []string
	for _, l := range lines {
		if l = strings.TrimSpace(l); l != "" {
			kept = append(kept, l)
		}
	}
	return strings.Join(kept, "; ")
}
