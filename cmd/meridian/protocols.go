package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/meridiandb/meridian/internal/protocol"
	// Every protocol registers itself with internal/protocol when its package is linked in.
	_ "github.com/meridiandb/meridian/internal/protocol/crdb"
	_ "github.com/meridiandb/meridian/internal/protocol/k2"
	_ "github.com/meridiandb/meridian/internal/protocol/serial"
	_ "github.com/meridiandb/meridian/internal/protocol/spanner"
)

var protocolsCmd = &cobra.Command{
	Use:   "protocols [NAME]",
	Short: "List the protocols, the consistency model each promises, and its options (--opt key=value)",
	Args:  rangeArgs(0, 1),
	RunE: func(cmd *cobra.Command, args []string) error {
		names := protocol.Names()
		if len(args) == 1 {
			if _, err := protocol.Lookup(args[0]); err != nil {
				return err
			}
			names = args
		}
		out := cmd.OutOrStdout()
		for i, name := range names {
			p, err := protocol.Lookup(name)
			if err != nil {
				return err
			}
			if i > 0 {
				fmt.Fprintln(out)
			}
			fmt.Fprintf(out, "%s (promises %s)\n", name, p.Model())
			opts := p.Options()
			keys := make([]string, 0, len(opts))
			for k := range opts {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			width := 0
			for _, k := range keys {
				width = max(width, len(k))
			}
			for _, k := range keys {
				fmt.Fprintf(out, "  %-*s  %s\n", width, k, strings.TrimSpace(opts[k]))
			}
		}
		return nil
	},
}

func init() { rootCmd.AddCommand(protocolsCmd) }
