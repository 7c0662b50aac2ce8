package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/meridiandb/meridian/client"
	"github.com/meridiandb/meridian/configs"
	mrt "github.com/meridiandb/meridian/internal/runtime"
	"github.com/meridiandb/meridian/internal/storage/durable"
	"github.com/meridiandb/meridian/internal/topo"
)

// clusterFlags locate a cluster: its configuration (the built-in default when omitted) and,
// for commands that touch disk, its data directory.
type clusterFlags struct {
	config  string
	dataDir string
	flag    *pflag.Flag // --config, which tells whether f.config came from $MERIDIAN_CONFIG
}

func (f *clusterFlags) register(fs *pflag.FlagSet, withData bool) {
	fs.StringVar(&f.config, "config", os.Getenv("MERIDIAN_CONFIG"),
		"cluster configuration: a TOML file or a built-in one ("+strings.Join(configs.Names(), ", ")+"); default: $MERIDIAN_CONFIG, else k2-3region")
	f.flag = fs.Lookup("config")
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
		return nil, f.fromEnv(err)
	}
	return cfg, nil
}

// fromEnv says of an error in the configuration that it was named by $MERIDIAN_CONFIG, when it
// was: a command given no --config otherwise named a file the user never typed there.
func (f *clusterFlags) fromEnv(err error) error {
	if f.config == "" || f.flag == nil || f.flag.Changed {
		return err
	}
	return fmt.Errorf("$MERIDIAN_CONFIG=%s: %w (unset it or give --config)", f.config, err)
}

// locate reads the configuration only to find the cluster's data directory and nodes, which
// is all that status and stop need: they must still work for a cluster whose configuration
// load would now refuse.
func (f *clusterFlags) locate() (*mrt.Config, error) {
	cfg, err := mrt.Load(f.config)
	if err != nil {
		return nil, f.fromEnv(err)
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

// dialNode opens a client endpoint on a data node of cfg. The node checks that it runs cfg's
// protocol and settings: a client of another protocol would check histories against that
// protocol's model and report results as its.
func dialNode(cfg *mrt.Config, id topo.NodeID) (*client.NetTransport, error) {
	n := cfg.Nodes[id]
	t, err := client.Dial(n.Addr, cfg.DialOptions()...)
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
		maxSync  time.Duration
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
			if maxSync < time.Second {
				return fmt.Errorf("--max-sync-duration %v: want 1s or more, such as 20s (the disk is checked every 2s)", maxSync)
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
			if err := checkListen(n); err != nil {
				return err
			}
			me := identityOf(cfg, n)
			mark, err := claimNodeDir(n.DataDir, me)
			if err != nil {
				return err
			}
			// Caught from before the store opens: a node stopped while starting still closes it.
			sig := make(chan os.Signal, 1)
			signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
			// SIGUSR1: cluster chaos changed the partition, clock-step or slowdown file. Asked for before
			// the files are read, so a change made after that read is signalled here, not lost.
			reread := make(chan os.Signal, 1)
			signal.Notify(reread, syscall.SIGUSR1)
			cut, err := readPartition(n.DataDir)
			if err != nil {
				return fmt.Errorf("node %s: %w", n.Name, err)
			}
			step, err := readClockStep(n.DataDir)
			if err != nil {
				return fmt.Errorf("node %s: %w", n.Name, err)
			}
			slow, err := readSlowdown(n.DataDir)
			if err != nil {
				return fmt.Errorf("node %s: %w", n.Name, err)
			}
			log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
			s, err := mrt.Start(cfg, n.ID, mrt.Options{Logger: log, Cut: cut, ClockStep: step, Slowdown: slow, MaxSyncDuration: maxSync})
			if errors.Is(err, durable.ErrInUse) {
				// Most often the node runs already, under a configuration that moved its
				// addresses (else checkListen would have refused it): say so as checkListen does.
				return fmt.Errorf("%w (is node %s already running? meridian cluster status)", err, n.Name)
			}
			if err != nil {
				return err
			}
			if mark {
				if err := writeIdentity(n.DataDir, me); err != nil {
					s.Close()
					return fmt.Errorf("node %s: %w", n.Name, err)
				}
			}
			for stopped := false; !stopped; {
				select {
				case got := <-sig:
					log.Info("signal received; stopping", "signal", got.String())
					stopped = true
				case <-reread:
					cut, err := readPartition(n.DataDir)
					if err == nil {
						err = s.SetCut(cut)
					}
					if err != nil {
						log.Error("partition file not applied; the node's cut stays as it was", "err", err)
					}
					step, err := readClockStep(n.DataDir)
					if err == nil {
						err = s.SetClockStep(step)
					}
					if err != nil {
						log.Error("clock-step file not applied; the node's clock stays as it was", "err", err)
					}
					slow, err := readSlowdown(n.DataDir)
					if err == nil {
						err = s.SetSlowdown(slow)
					}
					if err != nil {
						log.Error("slowdown file not applied; the node's links stay as they were", "err", err)
					}
				case <-s.Done():
					stopped = true
				}
			}
			s.Close()
			return s.Err()
		},
	}
	cf.register(cmd.Flags(), true)
	cmd.Flags().StringVar(&nodeName, "node", "", "node to run: its name or numeric id in the configuration")
	cmd.Flags().StringVar(&logLevel, "log-level", "info", "log level: debug, info, warn, error")
	cmd.Flags().DurationVar(&maxSync, "max-sync-duration", durable.DefaultMaxSyncDuration,
		"stop the node (exit non-zero) once one write or sync of its disk has been under way this long: a disk that hangs makes the node down rather than hung")
	return cmd
}

func init() { rootCmd.AddCommand(newServerCmd()) }

// checkListen fails if the node cannot listen on its addresses. The runtime opens the node's
// store before it listens, so a taken address (most often: the node is already running) would
// otherwise be reported only after a fresh store had been created, or as the store's lock.
func checkListen(n mrt.NodeConfig) error {
	for _, addr := range []string{n.Addr, n.GRPCAddr, n.MetricsAddr} {
		if addr == "" {
			continue
		}
		fd, err := bindOnly(addr)
		if err != nil {
			if errors.Is(err, syscall.EADDRINUSE) {
				return fmt.Errorf("node %s: %v (is node %s already running? meridian cluster status)", n.Name, err, n.Name)
			}
			return fmt.Errorf("node %s: %w", n.Name, err)
		}
		_ = syscall.Close(fd)
	}
	return nil
}

// bindOnly binds a TCP socket to addr without listening, and returns it. A port that listens,
// however briefly, accepts connections, and `cluster start` takes a port that accepts for a
// node that has started: a trial net.Listen let it report a node that then failed as running.
// Like Go's listeners it sets SO_REUSEADDR, so only a socket listening on addr refuses it.
func bindOnly(addr string) (int, error) {
	fail := func(err error) (int, error) { return -1, fmt.Errorf("listen tcp %s: %w", addr, err) }
	ta, err := net.ResolveTCPAddr("tcp", addr)
	if err != nil {
		return fail(err)
	}
	family, sa := syscall.AF_INET, syscall.Sockaddr(&syscall.SockaddrInet4{Port: ta.Port})
	if ip4 := ta.IP.To4(); ip4 != nil {
		copy(sa.(*syscall.SockaddrInet4).Addr[:], ip4)
	} else if ta.IP != nil {
		a := &syscall.SockaddrInet6{Port: ta.Port}
		copy(a.Addr[:], ta.IP.To16())
		family, sa = syscall.AF_INET6, a
	}
	fd, err := syscall.Socket(family, syscall.SOCK_STREAM, 0)
	if err != nil {
		return fail(os.NewSyscallError("socket", err))
	}
	syscall.CloseOnExec(fd)
	if err := syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_REUSEADDR, 1); err != nil {
		_ = syscall.Close(fd)
		return fail(os.NewSyscallError("setsockopt", err))
	}
	if err := syscall.Bind(fd, sa); err != nil {
		_ = syscall.Close(fd)
		return fail(os.NewSyscallError("bind", err))
	}
	return fd, nil
}

// nodeIdentity says whose data a node's data directory holds. The store records only its
// format, so without this a node given another node's directory (a data_dir copied between
// [[node]] tables), another cluster's (two configurations with one data_dir) or its own under
// another protocol would open that data as its own and write to it.
type nodeIdentity struct {
	Cluster  string `json:"cluster"`
	Node     string `json:"node"`
	Protocol string `json:"protocol"`
	// Placement says which keys the node's store holds: its region, its place among the
	// region's data nodes, and each shard it holds with its place among the shard's replicas,
	// of how many shards. A key's shard is its routing prefix's hash modulo the count, and a
	// protocol finds a shard's data on its replicas in order, so a configuration that changes
	// any of it (the node moved to another region, regions reordered, nodes or shards added)
	// has the node's keys looked for where they are not, and answered "not found". Empty for
	// a node that holds no keys, and in identities written before it was recorded: those take
	// the placement they are next started with.
	Placement string `json:"placement,omitempty"`
	// The shards the node held and of how many, which identities recorded for a while before
	// Placement: a node that has them is held to them.
	Shards     []topo.ShardID `json:"shards,omitempty"`
	ShardCount int            `json:"shard_count,omitempty"`
}

// noKeys is the placement of a node that holds no keys (an oracle).
const noKeys = "no keys (not a data node)"

// identityOf is what node n of cfg records in its data directory.
func identityOf(cfg *mrt.Config, n mrt.NodeConfig) nodeIdentity {
	id := nodeIdentity{Cluster: cfg.Name, Node: n.Name, Protocol: cfg.Protocol.Name()}
	if n.Roles&topo.RoleData == 0 {
		// Said, not left empty: a data node's directory given to an oracle (or the reverse)
		// would otherwise pass as one recorded before placements were.
		id.Placement = noKeys
		return id
	}
	tp := cfg.Topology
	id.Shards, id.ShardCount = tp.ShardsOn(n.ID), len(tp.Shards)
	nodes := tp.DataNodes(n.Region)
	var b strings.Builder
	fmt.Fprintf(&b, "region %s (#%d), data node %d of %d there; of %d shards, replica",
		tp.Regions[n.Region].Name, n.Region, slices.Index(nodes, n.ID)+1, len(nodes), len(tp.Shards))
	for _, sh := range tp.ShardsOn(n.ID) {
		fmt.Fprintf(&b, " %d of shard %d,", slices.Index(tp.Shards[sh].Replicas, n.ID)+1, sh)
	}
	id.Placement = strings.TrimSuffix(b.String(), ",")
	return id
}

func (id nodeIdentity) owner() string {
	return fmt.Sprintf("node %s of cluster %q (protocol %s)", id.Node, id.Cluster, id.Protocol)
}

// identityFile holds a nodeIdentity, in the node's store directory (the store ignores it).
const identityFile = "MERIDIAN-NODE"

// claimNodeDir refuses a data directory that is not the node's: one whose identity names
// another node, cluster or protocol, or one holding files that are not a store. It reports
// whether the identity is still to be written, which is done once the store exists: the store
// takes a directory with files in it for an existing store. A store that predates identity
// files is taken as the node's own.
func claimNodeDir(dir string, me nodeIdentity) (mark bool, err error) {
	refuse := func(format string, args ...any) error {
		return fmt.Errorf("node %s: data directory %s %s: give the node its own --data-dir", me.Node, dir, fmt.Sprintf(format, args...))
	}
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("node %s: data directory: %w", me.Node, err)
	}
	data, err := os.ReadFile(filepath.Join(dir, identityFile))
	switch {
	case err == nil:
		var got nodeIdentity
		if json.Unmarshal(data, &got) != nil || got.Node == "" {
			return false, refuse("has a %s that names no node", identityFile)
		}
		if got.owner() != me.owner() {
			return false, refuse("holds %s, not %s", got.owner(), me.owner())
		}
		// Identities of a while recorded every node's shards and their count, oracles' too (no
		// shards): an oracle is held only to holding none.
		if got.Placement == "" && got.ShardCount > 0 && (len(got.Shards) > 0 || me.Placement != noKeys) {
			if got.ShardCount != me.ShardCount || !slices.Equal(got.Shards, me.Shards) {
				return false, fmt.Errorf("node %s: data directory %s holds shards %v of %d, but this configuration places the node as %s: "+
					"its keys would be looked for where they are not; start it with its former regions, nodes and shards_per_node, or give it a new data directory",
					me.Node, dir, got.Shards, got.ShardCount, me.Placement)
			}
		}
		if got.Placement == "" {
			return true, nil // recorded before placements were: record this one
		}
		if got.Placement != me.Placement {
			return false, fmt.Errorf("node %s: data directory %s was written as %s, but this configuration places the node as %s: "+
				"its keys would be looked for where they are not (Meridian does not move data between nodes or shards); "+
				"start it with its former regions, nodes and shards_per_node, or give it a new data directory",
				me.Node, dir, got.Placement, me.Placement)
		}
		return false, nil
	case !errors.Is(err, fs.ErrNotExist):
		return false, fmt.Errorf("node %s: %w", me.Node, err)
	}
	for _, e := range ents {
		if isStoreFile(e.Name()) {
			return true, nil
		}
	}
	if len(ents) > 0 {
		return false, refuse("holds files that are not a Meridian store (%s)", ents[0].Name())
	}
	return true, nil
}

// isStoreFile reports whether name is one of the files that make a directory a Pebble store.
// The lock file is the first one Pebble creates: a first start killed just after it leaves it
// alone, and the store creates itself again over it.
func isStoreFile(name string) bool {
	return name == "CURRENT" || name == "LOCK" || strings.HasPrefix(name, "MANIFEST-") || strings.HasPrefix(name, "marker.manifest.")
}

// writeIdentity records me in dir, whole or not at all, and durably: a crash must not leave
// an empty identity that would refuse the node its own data.
func writeIdentity(dir string, me nodeIdentity) error {
	data, err := json.Marshal(me)
	if err != nil {
		return err
	}
	if err := writeFileDurably(dir, identityFile, append(data, '\n')); err != nil {
		return fmt.Errorf("data directory identity: %w", err)
	}
	return nil
}

// writeFileDurably replaces dir/name with data, whole or not at all, and syncs it and the
// directory before returning.
func writeFileDurably(dir, name string, data []byte) error {
	tmp := filepath.Join(dir, name+".tmp")
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
