package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/meridiandb/meridian/client"
	mrt "github.com/meridiandb/meridian/internal/runtime"
	"github.com/meridiandb/meridian/internal/topo"
)

// clusterFlags locate a cluster: its configuration (the built-in default when omitted) and,
// for commands that touch disk, its data directory.
type clusterFlags struct {
	config  string
	dataDir string
}

func (f *clusterFlags) register(fs *pflag.FlagSet, withData bool) {
	fs.StringVar(&f.config, "config", "", "cluster configuration (TOML); default: the built-in 3-region k2-3region cluster")
	if withData {
		fs.StringVar(&f.dataDir, "data-dir", "", "data directory (default: the configuration's data_dir)")
	}
}

// load reads the configuration for a command that runs or uses the cluster, and refuses
// values no node can run with.
func (f *clusterFlags) load() (*mrt.Config, error) {
	cfg, err := f.locate()
	if err != nil {
		return nil, err
	}
	if err := checkClusterConfig(cfg.Source, cfg.Options, cfg.Epsilon, cfg.LatencyScale); err != nil {
		return nil, err
	}
	return cfg, nil
}

// locate reads the configuration only to find the cluster's data directory and nodes, which
// is all that status and stop need: they must still work for a cluster whose configuration
// load would now refuse.
func (f *clusterFlags) locate() (*mrt.Config, error) {
	cfg, err := mrt.Load(f.config)
	if err != nil {
		return nil, err
	}
	if f.dataDir != "" {
		abs, err := filepath.Abs(f.dataDir)
		if err != nil {
			return nil, err
		}
		cfg.SetDataDir(abs)
	} else if !filepath.IsAbs(cfg.DataDir) {
		abs, err := filepath.Abs(cfg.DataDir)
		if err != nil {
			return nil, err
		}
		cfg.SetDataDir(abs)
	}
	return cfg, nil
}

// dialNode opens a client endpoint on a data node of cfg.
func dialNode(cfg *mrt.Config, id topo.NodeID) (*client.NetTransport, error) {
	n := cfg.Nodes[id]
	t, err := client.Dial(n.Addr, client.WithCluster(cfg.Name), client.WithRequestTimeout(cfg.ClientTimeout))
	if errors.Is(err, syscall.ECONNREFUSED) {
		// The usual cause is simply that the cluster is not running; say so.
		return nil, fmt.Errorf("node %s at %s refused the connection: is the cluster running? (meridian cluster status)", n.Name, n.Addr)
	}
	return t, err
}

func newServerCmd() *cobra.Command {
	var (
		cf       clusterFlags
		nodeName string
		logLevel string
	)
	cmd := &cobra.Command{
		Use:   "server --config F --node ID",
		Short: "Run one node of a cluster",
		Long: `Run one node of a cluster until SIGTERM or SIGINT: its protocol handler, its transport on the
node's address (and gRPC client API on grpc_addr, for data nodes), and its durable store under
the data directory. A node killed with SIGKILL and started again recovers every commit it
acknowledged.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var level slog.Level
			if err := level.UnmarshalText([]byte(logLevel)); err != nil {
				return fmt.Errorf("--log-level %q: want debug, info, warn or error", logLevel)
			}
			cfg, err := cf.load()
			if err != nil {
				return err
			}
			if nodeName == "" {
				return fmt.Errorf("--node is required (a node name or id from %s)", cfg.Source)
			}
			n, err := cfg.NodeByName(nodeName)
			if err != nil {
				return err
			}
			log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
			s, err := mrt.Start(cfg, n.ID, mrt.Options{Logger: log})
			if err != nil {
				return err
			}
			sig := make(chan os.Signal, 1)
			signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
			select {
			case got := <-sig:
				log.Info("signal received; stopping", "signal", got.String())
			case <-s.Done():
			}
			s.Close()
			return s.Err()
		},
	}
	cf.register(cmd.Flags(), true)
	cmd.Flags().StringVar(&nodeName, "node", "", "node to run: its name or numeric id in the configuration")
	cmd.Flags().StringVar(&logLevel, "log-level", "info", "log level: debug, info, warn, error")
	return cmd
}

func init() { rootCmd.AddCommand(newServerCmd()) }
