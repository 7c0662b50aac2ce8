package main

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"

	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"

	"github.com/meridiandb/meridian/internal/repro"
)

type reproCommand struct {
	list     bool
	scale    string
	seed     uint64
	seeds    int
	out      string
	parallel int
}

func newReproCmd() *cobra.Command {
	c := &reproCommand{}
	cmd := &cobra.Command{
		Use:   "repro NAME",
		Short: "Reproduce a named paper experiment in the simulator (CSV, plots, report beside the paper's numbers)",
		Long: `Reproduce a paper's figure or table in the simulator. Each experiment sweeps one parameter
over several protocols and writes <out>/<name>/ with results.csv, plots (PNG and SVG) and
report.md, which puts the paper's reported numbers beside ours. 'meridian repro --list' names them.`,
		Args: func(cmd *cobra.Command, args []string) error {
			switch {
			case c.list && len(args) > 0:
				return fmt.Errorf("repro --list takes no experiment name, got %q", args)
			case c.list:
				// --list runs nothing, so a run flag beside it would be ignored without a word.
				for _, name := range []string{"scale", "seed", "seeds", "out", "parallel"} {
					if cmd.Flags().Changed(name) {
						return fmt.Errorf("repro --list takes no --%s: it only names the experiments", name)
					}
				}
			case !c.list && len(args) != 1:
				return fmt.Errorf("usage: meridian repro NAME (%d names given, want one; meridian repro --list names them)", len(args))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error { return c.run(cmd, args) },
	}
	cmd.Flags().BoolVar(&c.list, "list", false, "list the experiments")
	cmd.Flags().StringVar(&c.scale, "scale", "quick", "quick (seconds to about 5 minutes per figure on 2 cores with --seeds 3) or paper (5 data nodes per region, 200 clients per region; up to about 20 minutes per figure)")
	cmd.Flags().Uint64Var(&c.seed, "seed", 1, "random seed (the first, with --seeds)")
	cmd.Flags().IntVar(&c.seeds, "seeds", 1, "run every point with this many seeds (--seed, --seed+1, …) and report their mean; the CSV adds each column's range")
	cmd.Flags().StringVar(&c.out, "out", "repro-out", "output directory")
	cmd.Flags().IntVar(&c.parallel, "parallel", 0, "simulations run at once (0: one per CPU at --scale quick, one at --scale paper)")
	return cmd
}

func init() { rootCmd.AddCommand(newReproCmd()) }

func (c *reproCommand) run(cmd *cobra.Command, args []string) error {
	out := cmd.OutOrStdout()
	if c.list {
		width := 0
		for _, e := range repro.List() {
			width = max(width, len(e.Name))
		}
		for _, e := range repro.List() {
			fmt.Fprintf(out, "%-*s  %s\n", width, e.Name, e.Paper)
		}
		return nil
	}
	e, err := repro.Lookup(args[0])
	if err != nil {
		return err
	}
	sc, err := repro.ScaleByName(c.scale)
	if err != nil {
		return err
	}
	// Each simulation is single-threaded: more at once than CPUs only multiplies the memory
	// (several GB each at --scale paper).
	if n := runtime.NumCPU(); c.parallel < 0 || c.parallel > n {
		return fmt.Errorf("--parallel must be 0..%d (0: automatic; at most one simulation per CPU), got %d", n, c.parallel)
	}
	if c.seeds < 1 || c.seeds > maxReproSeeds {
		return fmt.Errorf("--seeds must be 1..%d, got %d", maxReproSeeds, c.seeds)
	}
	// The seeds run are --seed to --seed+N-1; past the largest they wrapped to 0, and the
	// report named the range "18446744073709551615–0".
	if c.seed > math.MaxUint64-uint64(c.seeds-1) {
		return fmt.Errorf("--seed %d with --seeds %d: the seeds would pass %d; give a smaller --seed", c.seed, c.seeds, uint64(math.MaxUint64))
	}
	// filepath.Join drops an empty directory, and the report went to the working directory.
	if c.out == "" {
		return fmt.Errorf("--out is empty: give the report a directory")
	}
	// The report is written after every simulation has run, which can take hours; a directory
	// that cannot be made should fail now.
	if err := os.MkdirAll(filepath.Join(c.out, e.Name), 0o755); err != nil {
		return fmt.Errorf("--out: %w", err)
	}
	for _, name := range []string{"report.md", "results.csv"} {
		if fi, err := os.Stat(filepath.Join(c.out, e.Name, name)); err == nil && !fi.Mode().IsRegular() {
			return fmt.Errorf("--out: %s is not a regular file, and the report writes it", filepath.Join(c.out, e.Name, name))
		}
	}
	var bar *progressbar.ProgressBar
	barMax := 0
	path, err := repro.Execute(e, repro.Options{Scale: sc, Seed: c.seed, Seeds: c.seeds, Out: c.out, Parallel: c.parallel,
		Progress: func(done, total int) {
			// An extension round raises the total; the bar of the rounds before it has
			// finished (and cleared), so a new one counts on from where it stopped.
			if bar == nil || total != barMax {
				bar, barMax = nil, total
			}
			if bar == nil {
				bar = progressbar.NewOptions(total, progressbar.OptionSetWriter(os.Stderr),
					progressbar.OptionSetDescription(e.Name), progressbar.OptionShowCount(),
					progressbar.OptionSetVisibility(isTerminal(os.Stderr)), progressbar.OptionClearOnFinish())
			}
			_ = bar.Set(done)
		}})
	if err != nil {
		return err
	}
	body, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "%s\nWritten: %s\n", body, path)
	return nil
}

// maxReproSeeds bounds --seeds: a paper-scale experiment takes up to an hour per seed.
const maxReproSeeds = 100

func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
