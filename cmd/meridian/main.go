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
	"os"
	"runtime/debug"
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

func init() { rootCmd.SetHelpCommand(helpCmd) }

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
		// The client library's errors carry their own "meridian:" prefix.
		fmt.Fprintln(os.Stderr, "meridian:", shorten(strings.TrimPrefix(err.Error(), "meridian: ")))
		os.Exit(code)
	}
}
