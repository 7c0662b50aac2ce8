package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/spf13/cobra"

	mrt "github.com/meridiandb/meridian/internal/runtime"
	"github.com/meridiandb/meridian/internal/runtime/frame"
	"github.com/meridiandb/meridian/internal/topo"
)

// clusterState is what `cluster start` leaves in the data directory for status and stop.
type clusterState struct {
	Name   string      `json:"name"`
	Config string      `json:"config"` // the copy of the configuration the servers run with
	Nodes  []nodeState `json:"nodes"`
	// Setup is what the nodes check of each other (runtime.Config.Setup) as they were started
	// with it. The copy names a topology file by its path, and the file may have been edited
	// since: a node restarted then ran with round trips its peers refused.
	Setup []frame.Setting `json:"setup,omitempty"`
}

type nodeState struct {
	Name  string `json:"name"`
	ID    int    `json:"id"`
	Roles string `json:"roles"`
	Addr  string `json:"addr"`
	PID   int    `json:"pid"`
	Log   string `json:"log"`
}

// nodeStatus is one line of `cluster status`.
type nodeStatus struct {
	nodeState
	State string `json:"state"` // running, starting (process up, port closed), stopped
	// CutFrom names the regions a cluster chaos has cut the node off from (its partition file).
	CutFrom []string `json:"cut_from,omitempty"`
	// ClockStep is how far a cluster chaos has stepped the node's clock (its clock-step file),
	// as a duration such as "-12.5ms".
	ClockStep string `json:"clock_step,omitempty"`
	// ClockStepError says why a clock-step file that is there could not be read (edited by
	// hand): the node keeps its clock as it was, and would not start with it.
	ClockStepError string `json:"clock_step_error,omitempty"`
	// SlowedTo is how much a cluster chaos has slowed the node's frames to each region (its
	// slowdown file), as durations such as "300ms".
	SlowedTo map[string]string `json:"slowed_to,omitempty"`
	// SlowdownError says why a slowdown file that is there could not be read.
	SlowdownError string `json:"slowdown_error,omitempty"`
	// Exited is the error a stopped node's process ended on, from the end of its log: a disk
	// that failed, a clock that left its protocol's bound, a start that failed.
	Exited string `json:"exited,omitempty"`
}

const (
	stateFile       = "cluster.json"
	configCopy      = "cluster.toml"
	readyTimeout    = 20 * time.Second
	stopGracePeriod = 10 * time.Second
)

func newClusterCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "cluster",
		Short: "Start, inspect and stop a local cluster (one process per node, loopback ports), or strike it with crashes, cuts and clock steps",
	}
	var cf clusterFlags
	cf.register(cmd.PersistentFlags(), true)
	cmd.AddCommand(&cobra.Command{
		Use:   "start",
		Short: "Start every node of the cluster that is not running (a restarted node recovers its data)",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return clusterStart(cmd, &cf) },
	})
	var asJSON bool
	status := &cobra.Command{
		Use:   "status",
		Short: "Report each node: running, starting or stopped, and any cut or clock step chaos put on it",
		Long: `Report each node of the cluster started in the data directory: running (its process answers
on its address), starting (its process runs, its address does not answer yet) or stopped, and
the regions a cluster chaos has cut it off from, if any.

Exit status, with --json too: 0 every node is running; 2 some nodes are running, not all;
3 no node is running; 1 an error: no cluster was started in the data directory, its state
cannot be read, or a node listed stopped has its address answered all the same (most often by
the nodes of the cluster started from another data directory, which the error names).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return clusterStatus(cmd, &cf, asJSON) },
	}
	status.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.AddCommand(status)
	cmd.AddCommand(newClusterChaosCmd(&cf))
	cmd.AddCommand(&cobra.Command{
		Use:   "stop",
		Short: "Stop every node (SIGTERM, then SIGKILL after a grace period)",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return clusterStop(cmd, &cf) },
	})
	return cmd
}

func init() { rootCmd.AddCommand(newClusterCmd()) }

// readState reads the state a start left in dataDir, for status and stop.
func readState(dataDir string) (*clusterState, error) {
	st, err := readStateFile(dataDir)
	if err != nil {
		return nil, err
	}
	// Stop would report such a cluster stopped having signalled nothing.
	if st.Name == "" || st.Config == "" {
		return nil, fmt.Errorf("%s names no cluster: not a cluster's state", filepath.Join(dataDir, stateFile))
	}
	return st, nil
}

func readStateFile(dataDir string) (*clusterState, error) {
	data, err := os.ReadFile(filepath.Join(dataDir, stateFile))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("no cluster was started in %s (run `meridian cluster start`)", dataDir)
		}
		return nil, err
	}
	var st clusterState
	if err := json.Unmarshal(data, &st); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dataDir, stateFile), err)
	}
	return &st, nil
}

// writeState records st durably: a state file cut short by a crash would leave the cluster's
// processes unknown to status and stop, and its data directory refused by start.
func writeState(dataDir string, st *clusterState) error {
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	return writeFileDurably(dataDir, stateFile, append(data, '\n'))
}

// lockDataDir keeps two cluster commands that change a cluster's processes (start, stop) from
// working on one data directory at once. Two starts at once each spawned every node; the
// nodes of one lost the store's lock and exited, but that start, seeing the other's nodes
// accept on the ports, recorded its own dead pids, so that status and stop lost the live ones.
// The lock is the directory's own (flock), so that a start refused leaves no file behind.
func lockDataDir(dataDir string) (unlock func(), err error) {
	d, err := os.Open(dataDir) // close-on-exec: the nodes do not inherit it
	if err != nil {
		return nil, fmt.Errorf("data directory lock: %w", err)
	}
	if err := syscall.Flock(int(d.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		d.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("another meridian cluster start, stop or chaos is at work on %s: try again when it has ended", dataDir)
		}
		return nil, fmt.Errorf("data directory lock %s: %w", dataDir, err)
	}
	return func() { d.Close() }, nil
}

// alive reports whether pid is the running server of node, started by `cluster start` with
// configuration config (not a zombie, not a reused pid). A state file can name pids long gone
// (after a reboot, say) that the system has since given to other processes, which stop must
// not signal; matching only "server" in a command line matched redis-server too.
func alive(pid int, node, config string) bool {
	if pid <= 0 {
		return false
	}
	// EPERM: the process exists but another user runs it (status run by someone else).
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err == nil {
		// The state field follows the parenthesised command name.
		if i := strings.LastIndexByte(string(stat), ')'); i >= 0 && i+2 < len(stat) && stat[i+2] == 'Z' {
			return false
		}
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return true // no /proc: trust kill(0)
	}
	return isServerOf(strings.Split(strings.TrimSuffix(string(cmdline), "\x00"), "\x00"), node, config)
}

// isServerOf reports whether argv is the command line clusterStart gives node's server.
func isServerOf(argv []string, node, config string) bool {
	if len(argv) < 2 || argv[1] != "server" {
		return false
	}
	var gotNode, gotConfig bool
	for i := 2; i+1 < len(argv); i++ {
		switch argv[i] {
		case "--node":
			gotNode = argv[i+1] == node
		case "--config":
			gotConfig = argv[i+1] == config
		}
	}
	return gotNode && gotConfig
}

func accepting(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
	if err != nil {
		return false
	}
	_ = c.Close()
	return true
}

func clusterStart(cmd *cobra.Command, cf *clusterFlags) error { return startNodes(cmd, cf, nil, false) }

// startNodes starts the nodes of the cluster that are not running: all of them, or if only is
// set, those it names (cluster chaos restarts the one it killed, leaving another it killed
// down until its own time). locked says the caller holds the data directory's lock already
// (cluster chaos holds it for its whole run).
func startNodes(cmd *cobra.Command, cf *clusterFlags, only map[string]bool, locked bool) (err error) {
	cfg, err := cf.load()
	if err != nil {
		return err
	}
	// A refused start leaves no trace: the data directory it had to create to lock is removed
	// again while empty (os.Remove refuses one that is not).
	if _, statErr := os.Stat(cfg.DataDir); errors.Is(statErr, fs.ErrNotExist) {
		defer func() {
			if err != nil {
				_ = os.Remove(cfg.DataDir)
			}
		}()
	}
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return fmt.Errorf("data directory: %w", err)
	}
	if !locked {
		unlock, err := lockDataDir(cfg.DataDir)
		if err != nil {
			return err
		}
		defer unlock()
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	cfgPath := filepath.Join(cfg.DataDir, configCopy)
	cfgText, err := serverConfig(cfg)
	if err != nil {
		return err
	}
	st := &clusterState{}
	if _, err := os.Stat(filepath.Join(cfg.DataDir, stateFile)); err == nil {
		// Whatever holds the state file's name but cannot be read as one is not ours to
		// replace.
		if st, err = readStateFile(cfg.DataDir); err != nil {
			return fmt.Errorf("%w: not a cluster's state, so left alone: choose another --data-dir", err)
		}
		if st.Name == "" || st.Config == "" {
			return fmt.Errorf("%s names no cluster, so it is left alone: choose another --data-dir", filepath.Join(cfg.DataDir, stateFile))
		}
	} else if data, err := os.ReadFile(cfgPath); err == nil && !sameSettings(string(data), cfgText) {
		// No cluster was started here, so this is not our copy of a configuration.
		return fmt.Errorf("%s exists and is not this cluster's configuration; starting would overwrite it: choose another --data-dir", cfgPath)
	}
	if st.Name != "" && st.Name != cfg.Name {
		return fmt.Errorf("%s holds cluster %q, not %q: choose another --data-dir", cfg.DataDir, st.Name, cfg.Name)
	}
	// Each server refuses a data directory that is not its own; asking first keeps the state
	// and configuration copy of the cluster that is there.
	for _, n := range cfg.Nodes {
		if _, err := claimNodeDir(n.DataDir, identityOf(cfg, n)); err != nil {
			return err
		}
	}
	if err := checkNoOrphans(cfg); err != nil {
		return err
	}
	prev := map[string]nodeState{}
	var running []nodeState
	for _, n := range st.Nodes {
		prev[n.Name] = n
		if alive(n.PID, n.Name, st.Config) {
			running = append(running, n)
		}
	}
	if err := checkNoLostStore(cfg, prev); err != nil {
		return err
	}
	// A node started now with other settings than the running ones would be refused by them
	// (peers check each other's settings) while status showed the cluster whole; and the copy
	// the running nodes were started from would no longer say what they run with.
	if len(running) > 0 {
		if err := sameAsRunning(st, cfg, cfgText); err != nil {
			return fmt.Errorf("cluster %s is running (%s) %v: stop it first (meridian cluster stop), then start it with %s",
				cfg.Name, processes(running), err, cfg.Source)
		}
	}
	// Every node is listed with the pid of a node that still runs, and the state is written
	// again as each node starts, so that whatever stops this command part-way, the state names
	// every process it leaves running: a node started before a later one failed ran on
	// unrecorded, which neither status nor stop knew, and its port then kept the next start
	// from starting it.
	next := &clusterState{Name: cfg.Name, Config: cfgPath, Nodes: make([]nodeState, len(cfg.Nodes)), Setup: cfg.Setup()}
	out := cmd.OutOrStdout()
	var toStart []int
	for i, n := range cfg.Nodes {
		next.Nodes[i] = nodeState{Name: n.Name, ID: int(n.ID), Roles: n.Roles.String(), Addr: n.Addr,
			Log: filepath.Join(cfg.DataDir, n.Name+".log")}
		if p, ok := prev[n.Name]; ok && alive(p.PID, n.Name, st.Config) {
			next.Nodes[i].PID = p.PID
			if only == nil {
				fmt.Fprintf(out, "%-12s already running (pid %d)\n", n.Name, p.PID)
			}
			continue
		}
		if only != nil && !only[n.Name] {
			continue
		}
		toStart = append(toStart, i)
	}
	// Checked before anything is written: a start refused here leaves the data directory as
	// it was (it left a configuration copy that then refused the corrected configuration).
	for _, i := range toStart {
		if ns := next.Nodes[i]; accepting(ns.Addr) {
			h := holdersOf([]string{ns.Addr})[ns.Addr]
			msg := fmt.Sprintf("node %s: address %s is already in use by %s", ns.Name, ns.Addr, h.describe(cfg.DataDir))
			if dir := h.dataDir(); dir != "" && filepath.Clean(dir) != cfg.DataDir {
				msg += fmt.Sprintf(": stop that cluster first (meridian cluster stop --data-dir %s), or use it as it is with --data-dir %s", dir, dir)
			}
			return errors.New(msg)
		}
	}
	// A node started here starts whole: a partition, clock-step or slowdown file is chaos's, and one
	// still there was left by a chaos that could not undo it (killed, or its node's directory
	// unwritable). Chaos's own restarts (locked) keep them, so a node restarted during a cut or
	// a step stays cut or stepped. A node already running that read such a file is told to read
	// it again.
	if !locked {
		starting := map[int]bool{}
		for _, i := range toStart {
			starting[i] = true
		}
		for i, n := range cfg.Nodes {
			pid := next.Nodes[i].PID
			left := leftByChaos(n.DataDir)
			if left == "" || !starting[i] && pid == 0 {
				continue
			}
			if err := writePartition(n.DataDir, nil); err != nil {
				return fmt.Errorf("node %s: a partition left by cluster chaos: %w", n.Name, err)
			}
			if err := writeClockStep(n.DataDir, 0); err != nil {
				return fmt.Errorf("node %s: a clock step left by cluster chaos: %w", n.Name, err)
			}
			if err := writeSlowdown(n.DataDir, nil); err != nil {
				return fmt.Errorf("node %s: a slowdown left by cluster chaos: %w", n.Name, err)
			}
			if starting[i] {
				fmt.Fprintf(out, "%-12s starts without the %s a cluster chaos left\n", n.Name, left)
				continue
			}
			if err := tellPID(n.Name, pid); err != nil {
				return fmt.Errorf("undoing the %s a cluster chaos left: %w", left, err)
			}
			fmt.Fprintf(out, "%-12s healed of the %s a cluster chaos left\n", n.Name, left)
		}
	}
	hadCopy := fileExists(cfgPath)
	// With every node running none is started from the copy, which stays what they were started
	// from: this configuration may differ from it in settings no node shares (clientOnly).
	if len(toStart) > 0 || !hadCopy {
		if err := os.WriteFile(cfgPath, []byte(cfgText), 0o644); err != nil {
			return err
		}
	}
	if err := writeState(cfg.DataDir, next); err != nil {
		if !hadCopy && st.Name == "" {
			_ = os.Remove(cfgPath)
		}
		return err
	}
	// An interrupt (^C reaches the whole foreground process group, but the nodes have their
	// own) is taken once the node being started is recorded, so that the state still names it.
	interrupted := make(chan os.Signal, 1)
	signal.Notify(interrupted, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(interrupted)
	var started []nodeState
	startErr := func() error {
		for _, i := range toStart {
			select {
			case sig := <-interrupted:
				return fmt.Errorf("interrupted (%v)", sig)
			default:
			}
			ns := &next.Nodes[i]
			logf, err := os.OpenFile(ns.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
			if err != nil {
				return fmt.Errorf("node %s: %w", ns.Name, err)
			}
			c := exec.Command(self, "server", "--config", cfgPath, "--node", ns.Name, "--data-dir", cfg.DataDir)
			c.Stdout, c.Stderr = logf, logf
			// Its own process group: the node outlives this command and ignores its terminal's ^C.
			c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			err = c.Start()
			logf.Close()
			if err != nil {
				return fmt.Errorf("node %s: %w", ns.Name, err)
			}
			ns.PID = c.Process.Pid
			_ = c.Process.Release()
			started = append(started, *ns)
			if err := writeState(cfg.DataDir, next); err != nil {
				return fmt.Errorf("%w; started and running unrecorded: %s", err, processes(started))
			}
			if spawnPause > 0 {
				time.Sleep(spawnPause)
			}
		}
		return nil
	}()
	if startErr != nil {
		if len(started) > 0 {
			return fmt.Errorf("%w; started before it and running: %s (meridian cluster stop stops them)", startErr, processes(started))
		}
		return startErr
	}
	deadline := time.Now().Add(readyTimeout)
	// The nodes this start leaves running, for an error that stops it part-way.
	leftRunning := func() string {
		var running []nodeState
		for _, n := range started {
			if alive(n.PID, n.Name, cfgPath) {
				running = append(running, n)
			}
		}
		if len(running) == 0 {
			return ""
		}
		return "; started and running: " + processes(running) + " (meridian cluster stop stops them)"
	}
	for _, ns := range started {
		// Alive first: a port accepting is this node's only if its process still runs.
		for alive(ns.PID, ns.Name, cfgPath) && !listeningItself(ns) {
			if time.Now().After(deadline) {
				return fmt.Errorf("node %s did not accept connections on %s within %v; see %s%s", ns.Name, ns.Addr, readyTimeout, ns.Log, leftRunning())
			}
			select {
			case sig := <-interrupted:
				return fmt.Errorf("interrupted (%v) while nodes were starting; they are recorded: meridian cluster status, meridian cluster stop", sig)
			case <-time.After(20 * time.Millisecond):
			}
		}
		if !alive(ns.PID, ns.Name, cfgPath) {
			return fmt.Errorf("node %s exited while starting: %s (log: %s)%s", ns.Name, lastLine(ns.Log), ns.Log, leftRunning())
		}
		fmt.Fprintf(out, "%-12s started (pid %d) on %s\n", ns.Name, ns.PID, ns.Addr)
	}
	if only == nil {
		fmt.Fprintf(out, "cluster %s (protocol %s) is running; data and logs in %s\n", cfg.Name, cfg.Protocol.Name(), cfg.DataDir)
	}
	return nil
}

// listeningItself reports whether node ns serves its address itself: accepting there is not
// enough, since another start of the same configuration in another data directory may have
// bound it a moment before, and ns is then about to fail its bind.
func listeningItself(ns nodeState) bool {
	if !accepting(ns.Addr) {
		return false
	}
	h := holdersOf([]string{ns.Addr})[ns.Addr]
	return h.pid == 0 || h.pid == ns.PID // 0: not seen (no /proc): trust the port
}

// checkNoOrphans refuses a configuration that leaves behind, in the data directory, the store
// of one of the cluster's data nodes: a data node renamed (its default data_dir follows its
// name) or given another data_dir starts empty, and the keys it held answer "not found".
func checkNoOrphans(cfg *mrt.Config) error {
	ents, err := os.ReadDir(cfg.DataDir)
	if err != nil {
		return nil // nothing there yet
	}
	// Compared as files, not paths: a node's data_dir may reach its directory another way
	// (through a symbolic link).
	var used []os.FileInfo
	for _, n := range cfg.Nodes {
		if fi, err := os.Stat(n.DataDir); err == nil {
			used = append(used, fi)
		}
	}
	for _, e := range ents {
		dir := filepath.Join(cfg.DataDir, e.Name())
		fi, err := os.Stat(dir)
		if err != nil || !fi.IsDir() || slices.ContainsFunc(used, func(u os.FileInfo) bool { return os.SameFile(u, fi) }) {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, identityFile))
		var id nodeIdentity
		if err != nil || json.Unmarshal(data, &id) != nil || id.Cluster != cfg.Name {
			continue
		}
		// Only a store known to hold keys: an oracle's holds none, and an identity from before
		// placements were recorded may be either.
		if id.Placement == noKeys || id.Placement == "" && len(id.Shards) == 0 {
			continue
		}
		// By name exactly: NodeByName also takes a number for a position, and a node may be named "1".
		if i := slices.IndexFunc(cfg.Nodes, func(n mrt.NodeConfig) bool { return n.Name == id.Node }); i >= 0 {
			n := cfg.Nodes[i]
			return fmt.Errorf("%s holds the data of node %s of cluster %s, whose data_dir is now %s: its keys there would answer not found; "+
				"give it its data_dir back, or move the directory out of %s", dir, id.Node, cfg.Name, n.DataDir, cfg.DataDir)
		}
		return fmt.Errorf("%s holds the data of node %s of cluster %s, which this configuration does not have (renamed, or given another data_dir?): "+
			"its keys would answer not found; give the node its name and data_dir back, or move the directory out of %s", dir, id.Node, cfg.Name, cfg.DataDir)
	}
	return nil
}

// checkNoLostStore refuses to start a data node the cluster started before whose data
// directory is gone. The server would take the missing directory for a new node's and start
// empty, as its first life: its keys would answer not found, and the transaction ids it hands
// out, numbered by life, would be those of its lost first life, which other nodes' records and
// intents may still hold (review). A node that never got as far as making its directory is
// started once its directory is made empty by hand.
func checkNoLostStore(cfg *mrt.Config, started map[string]nodeState) error {
	for _, n := range cfg.Nodes {
		if _, ok := started[n.Name]; !ok || n.Roles&topo.RoleData == 0 {
			continue
		}
		if _, err := os.Stat(n.DataDir); errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("node %s: its data directory %s is gone, though the cluster started the node before: started empty, "+
				"its keys would answer not found and it would reuse its lost life's transaction ids; restore the directory, "+
				"start a new cluster in another --data-dir, or, if the node never ran, make the directory empty (mkdir -p %s)",
				n.Name, n.DataDir, n.DataDir)
		}
	}
	return nil
}

// sameAsRunning says how cfg, whose copy would be cfgText, differs from what the running nodes
// of st were started with, naming every setting that does, or returns nil if none does. Only
// the first was named, and a difference in the copy alone not at all ("whose settings differ").
func sameAsRunning(st *clusterState, cfg *mrt.Config, cfgText string) error {
	var diffs []string
	if st.Setup != nil { // states written before it was recorded have only the copy to go by
		diffs = setupDiffs(st.Setup, cfg.Setup())
	}
	data, err := os.ReadFile(st.Config)
	if err != nil {
		return fmt.Errorf("from a copy of its configuration that cannot be read (%v)", err)
	}
	was, err1 := copySettings(string(data))
	now, err2 := copySettings(cfgText)
	switch {
	case err1 == nil && err2 == nil:
		diffs = append(diffs, copyDiffs(was, now, st.Setup != nil)...)
	case !sameSettings(string(data), cfgText):
		diffs = append(diffs, fmt.Sprintf("from a copy of its configuration (%s) whose settings differ from this one's", st.Config))
	}
	if len(diffs) == 0 {
		return nil
	}
	return errors.New(strings.Join(diffs, "; "))
}

// setupDiffs names each setting of now (cfg.Setup) that differs from was, the running nodes'.
func setupDiffs(was, now []frame.Setting) []string {
	var diffs []string
	values := make(map[string]string, len(now))
	for _, x := range now {
		values[x.Name] = x.Value
	}
	for _, w := range was {
		if v, ok := values[w.Name]; !ok {
			diffs = append(diffs, fmt.Sprintf("with %s %s, which this configuration drops", w.Name, w.Value))
		} else if v != w.Value {
			diffs = append(diffs, fmt.Sprintf("with %s %s, which this configuration changes to %s", w.Name, w.Value, v))
		}
		delete(values, w.Name)
	}
	for _, x := range now { // in Setup's order, not the map's
		if _, added := values[x.Name]; added {
			diffs = append(diffs, fmt.Sprintf("without the %s %s this configuration adds", x.Name, x.Value))
		}
	}
	return diffs
}

// copySettings lists the settings of a configuration copy (serverConfig) by name: "protocol",
// "options.k2.ttl", "node sh-1 grpc_addr".
func copySettings(text string) (map[string]string, error) {
	var raw map[string]any
	if _, err := toml.Decode(text, &raw); err != nil {
		return nil, err
	}
	out := map[string]string{}
	// Node tables by name: node sh-1's grpc_addr is its setting whatever the nodes' order.
	named := func(k string, t map[string]any) {
		name := fmt.Sprint(t["name"])
		for field, x := range t {
			if field != "name" {
				out[k+" "+name+" "+field] = fmt.Sprint(x)
			}
		}
	}
	var walk func(prefix string, table map[string]any)
	walk = func(prefix string, table map[string]any) {
		for k, v := range table {
			switch v := v.(type) {
			case map[string]any:
				walk(prefix+k+".", v)
			case []map[string]any: // [[node]]
				for _, t := range v {
					named(prefix+k, t)
				}
			case []any: // node = [{ … }, …]; roles = ["data"]
				if len(v) > 0 && slices.IndexFunc(v, func(x any) bool { _, ok := x.(map[string]any); return !ok }) < 0 {
					for _, t := range v {
						named(prefix+k, t.(map[string]any))
					}
					continue
				}
				out[prefix+k] = fmt.Sprint(v)
			default:
				out[prefix+k] = fmt.Sprint(v)
			}
		}
	}
	walk("", raw)
	return out, nil
}

// clientOnly reports whether a copy's setting is one the nodes do not share: [client] timeout
// is each process's own (runtime.Config.Setup leaves it out; a node uses its own to bound how
// long it waits on a client that hung up), so nodes run with different ones, and a node started
// with another than its peers' is not refused by them.
func clientOnly(setting string) bool { return strings.HasPrefix(setting, "client.") }

// inSetup reports whether a copy's setting is one that runtime.Config.Setup compares as the
// nodes run it: the options that apply to the protocol, ε, latencies, placement, each node's
// region, roles and address.
func inSetup(setting string) bool {
	for _, p := range []string{"options.", "latency.", "placement."} {
		if strings.HasPrefix(setting, p) {
			return true
		}
	}
	if rest, ok := strings.CutPrefix(setting, "node "); ok {
		field := rest[strings.LastIndexByte(rest, ' ')+1:]
		return field == "region" || field == "roles" || field == "addr"
	}
	return setting == "epsilon"
}

// copyDiffs names each setting of now, a configuration copy, that differs from was, the running
// nodes', besides those no node shares and, when the nodes' Setup is known (setupDiffs names
// those as the nodes run them), those in it.
func copyDiffs(was, now map[string]string, setupKnown bool) []string {
	var names []string
	for k := range was {
		names = append(names, k)
	}
	for k := range now {
		if _, ok := was[k]; !ok {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	var diffs []string
	for _, k := range names {
		if clientOnly(k) || setupKnown && inSetup(k) {
			continue
		}
		w, inWas := was[k]
		v, inNow := now[k]
		switch {
		case !inNow:
			diffs = append(diffs, fmt.Sprintf("with %s %s, which this configuration drops", k, w))
		case !inWas:
			diffs = append(diffs, fmt.Sprintf("without the %s %s this configuration adds", k, v))
		case v != w:
			diffs = append(diffs, fmt.Sprintf("with %s %s, which this configuration changes to %s", k, w, v))
		}
	}
	return diffs
}

// sameSettings reports whether two configuration copies (serverConfig) hold the same settings:
// their first line names the file they were read from, which may be named another way.
func sameSettings(a, b string) bool {
	_, a, _ = strings.Cut(a, "\n")
	_, b, _ = strings.Cut(b, "\n")
	return a == b
}

// spawnPause, from $MERIDIAN_TEST_SPAWN_PAUSE, holds cluster start after each node it spawns,
// so that a test can interrupt it there: spawning takes about a millisecond.
var spawnPause, _ = time.ParseDuration(os.Getenv("MERIDIAN_TEST_SPAWN_PAUSE"))

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// serverConfig is the configuration the servers of a cluster run with, which cluster start
// writes to the data directory: a file whether the configuration came from one or is the
// built-in, and one path the servers' command lines share, by which status and stop know them.
// A configuration's relative paths are relative to its file's directory, which for the copy is
// the data directory, so the copy names every path absolute, as this command resolved it.
// Written verbatim, a node's data_dir = "nodes/sh-1" was <config dir>/nodes/sh-1 to cluster
// start (the directory it checked) and to the same node run by hand with meridian server, but
// <data dir>/nodes/sh-1 to the cluster's server, and a topology file beside the configuration
// was looked for in the data directory. The copy is the configuration re-encoded, without its
// comments: the settings are the same, and so is every node's Setup.
func serverConfig(cfg *mrt.Config) (string, error) {
	var raw map[string]any
	if _, err := toml.Decode(cfg.Text, &raw); err != nil {
		return "", fmt.Errorf("%s: %w", cfg.Source, err)
	}
	abs := func(path string) (string, error) {
		if !strings.HasPrefix(cfg.Source, "built-in ") && !filepath.IsAbs(path) {
			path = filepath.Join(filepath.Dir(cfg.Source), path)
		}
		return filepath.Abs(path) // the built-in's paths are relative to the working directory
	}
	var err error
	if raw["data_dir"], err = abs(cfg.DataDir); err != nil {
		return "", err
	}
	if t, ok := raw["topology"].(string); ok && strings.HasSuffix(t, ".toml") { // else a preset's name
		if raw["topology"], err = abs(t); err != nil {
			return "", err
		}
	}
	dirs := map[string]string{}
	for _, n := range cfg.Nodes {
		if dirs[n.Name], err = abs(n.DataDir); err != nil {
			return "", err
		}
	}
	var tables []map[string]any
	switch nodes := raw["node"].(type) {
	case []map[string]any: // [[node]] tables
		tables = nodes
	case []any: // node = [{ … }, …]
		for _, n := range nodes {
			if t, ok := n.(map[string]any); ok {
				tables = append(tables, t)
			}
		}
	}
	for _, t := range tables {
		name, _ := t["name"].(string)
		if dir, ok := dirs[name]; ok {
			t["data_dir"] = dir
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# What the servers run with: %q as meridian cluster start read it, with every path resolved.\n\n", cfg.Source)
	if err := toml.NewEncoder(&b).Encode(raw); err != nil {
		return "", fmt.Errorf("%s: %w", cfg.Source, err)
	}
	return b.String(), nil
}

// processes names the nodes and their pids, for an error that must say what it leaves running.
func processes(nodes []nodeState) string {
	var parts []string
	for _, n := range nodes {
		parts = append(parts, fmt.Sprintf("%s (pid %d)", n.Name, n.PID))
	}
	return strings.Join(parts, ", ")
}

// lastLine is the last line of a node's log: a node that fails to start says why there, on
// one line ("meridian: …"), and an error quoting more would not be one line.
func lastLine(path string) string {
	line, err := tailLine(path)
	if err != nil {
		return "its log cannot be read: " + err.Error()
	}
	return strings.TrimPrefix(line, "meridian: ")
}

// tailLine returns the last line of the file at path, reading only its end: a node's log grows
// for as long as the cluster lives.
func tailLine(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	const tail = 64 << 10
	end, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return "", err
	}
	start := max(end-tail, 0)
	buf := make([]byte, end-start)
	if _, err := f.ReadAt(buf, start); err != nil && err != io.EOF {
		return "", err
	}
	text := strings.TrimRight(string(buf), "\n")
	return text[strings.LastIndexByte(text, '\n')+1:], nil
}

// exitReason is why a stopped node's process ended, if it ended on an error: the process's last
// words are a "meridian: …" line at the end of its log (a node stopped by cluster stop or a
// signal ends on "node stopped", one killed on whatever it was writing).
func exitReason(logPath string) string {
	line, err := tailLine(logPath)
	if err != nil || !strings.HasPrefix(line, "meridian: ") {
		return ""
	}
	return strings.TrimPrefix(line, "meridian: ")
}

func statusOf(st *clusterState) []nodeStatus {
	out := make([]nodeStatus, len(st.Nodes))
	for i, n := range st.Nodes {
		s := nodeStatus{nodeState: n, State: "stopped"}
		if alive(n.PID, n.Name, st.Config) {
			s.State = "starting"
			if accepting(n.Addr) {
				s.State = "running"
			}
		} else {
			s.Exited = exitReason(n.Log)
		}
		out[i] = s
	}
	return out
}

// stateDir is the data directory whose state status and stop read. Given --data-dir they need
// no configuration: the state names the nodes, their pids and the copy they run with, so a
// configuration that no longer loads (edited since) cannot keep a running cluster from being
// stopped.
func (f *clusterFlags) stateDir() (string, error) {
	if f.dataDir != "" {
		return filepath.Abs(f.dataDir)
	}
	cfg, err := f.locate()
	if err != nil {
		return "", fmt.Errorf("%w (give --data-dir to reach a cluster's state without its configuration)", err)
	}
	return cfg.DataDir, nil
}

func clusterStatus(cmd *cobra.Command, cf *clusterFlags, asJSON bool) error {
	dataDir, err := cf.stateDir()
	if err != nil {
		return err
	}
	hint := func(dir string) string { return "give --data-dir " + dir }
	st, err := readState(dataDir)
	if err != nil {
		return noClusterHere(cf, dataDir, err, hint)
	}
	nodes := statusOf(st)
	// Where each node keeps its partition file is in the copy it runs with; for a copy that no
	// longer loads, the default place, under the data directory.
	cfg, cfgErr := (&clusterFlags{config: st.Config, dataDir: dataDir}).locate()
	for i := range nodes {
		dir := filepath.Join(dataDir, nodes[i].Name)
		if cfgErr == nil {
			if n, err := cfg.NodeByName(nodes[i].Name); err == nil {
				dir = n.DataDir
			}
		}
		nodes[i].CutFrom, _ = readPartition(dir)
		switch step, err := readClockStep(dir); {
		case err != nil:
			nodes[i].ClockStepError = err.Error()
		case step != 0:
			nodes[i].ClockStep = signedDuration(step)
		}
		switch slow, err := readSlowdown(dir); {
		case err != nil:
			nodes[i].SlowdownError = err.Error()
		case len(slow) > 0:
			nodes[i].SlowedTo = map[string]string{}
			for r, by := range slow {
				nodes[i].SlowedTo[r] = by.String()
			}
		}
	}
	// A node listed stopped whose address answers all the same fails the command, once the
	// nodes are listed: 2 or 3 would tell a script the cluster is down while clients reach it.
	servedOrExit := func() error {
		var stopped []nodeState
		for _, n := range nodes {
			if n.State == "stopped" {
				stopped = append(stopped, n.nodeState)
			}
		}
		if msg := servedElsewhere(dataDir, stopped, hint); msg != "" {
			return fmt.Errorf("cluster %s in %s: %s", st.Name, dataDir, msg)
		}
		return statusExit(nodes)
	}
	if asJSON {
		if err := writeJSON(cmd.OutOrStdout(), nodes); err != nil {
			return err
		}
		return servedOrExit()
	}
	tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tID\tROLES\tADDRESS\tPID\tSTATE")
	for _, n := range nodes {
		pid := "-"
		if n.State != "stopped" {
			pid = fmt.Sprint(n.PID)
		}
		state := n.State
		if len(n.CutFrom) > 0 {
			state += ", cut off from " + strings.Join(n.CutFrom, ", ")
		}
		if n.ClockStep != "" {
			state += ", clock stepped " + n.ClockStep
		}
		if n.ClockStepError != "" {
			state += ", unreadable clock-step file (cluster start removes it)"
		}
		if len(n.SlowedTo) > 0 {
			var parts []string
			for _, r := range slices.Sorted(maps.Keys(n.SlowedTo)) {
				parts = append(parts, r+" +"+n.SlowedTo[r])
			}
			state += ", frames slowed to " + strings.Join(parts, ", ")
		}
		if n.SlowdownError != "" {
			state += ", unreadable slowdown file (cluster start removes it)"
		}
		if n.Exited != "" {
			state += ", exited: " + n.Exited
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\n", n.Name, n.ID, n.Roles, n.Addr, pid, state)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return servedOrExit()
}

// noClusterHere is err, readState's, unless dataDir holds no state while the configuration's
// addresses answer: then a cluster started from another data directory serves them, and the
// error names it.
// lockedState takes the data directory's lock and reads the cluster's state under it. A
// directory that holds no cluster is said so plainly (noClusterHere, with hint) before the lock
// is tried, which would only fail to open it.
func lockedState(cf *clusterFlags, dataDir string, hint func(dir string) string) (*clusterState, func(), error) {
	if _, err := readState(dataDir); err != nil {
		return nil, nil, noClusterHere(cf, dataDir, err, hint)
	}
	unlock, err := lockDataDir(dataDir)
	if err != nil {
		return nil, nil, err
	}
	st, err := readState(dataDir)
	if err != nil {
		unlock()
		return nil, nil, err
	}
	return st, unlock, nil
}

func noClusterHere(cf *clusterFlags, dataDir string, err error, hint func(dir string) string) error {
	if fileExists(filepath.Join(dataDir, stateFile)) {
		return err
	}
	cfg, lerr := cf.locate()
	if lerr != nil {
		return err
	}
	nodes := make([]nodeState, len(cfg.Nodes))
	for i, n := range cfg.Nodes {
		nodes[i] = nodeState{Name: n.Name, Addr: n.Addr}
	}
	if msg := servedElsewhere(dataDir, nodes, hint); msg != "" {
		return fmt.Errorf("no cluster was started in %s, but %s", dataDir, msg)
	}
	return err
}

// Exit statuses of cluster status besides 0 (every node running) and 1 (an error), so that a
// script can tell whether the cluster is up: status exited 0 with every node stopped.
const (
	statusSomeRunning = 2
	statusNoneRunning = 3
)

func statusExit(nodes []nodeStatus) error {
	running := 0
	for _, n := range nodes {
		if n.State == "running" {
			running++
		}
	}
	switch {
	case running == len(nodes):
		return nil
	case running > 0:
		return &exitError{code: statusSomeRunning}
	default:
		return &exitError{code: statusNoneRunning}
	}
}

func clusterStop(cmd *cobra.Command, cf *clusterFlags) error {
	dataDir, err := cf.stateDir()
	if err != nil {
		return err
	}
	hint := func(dir string) string { return "meridian cluster stop --data-dir " + dir + " stops them" }
	st, unlock, err := lockedState(cf, dataDir, hint)
	if err != nil {
		return err
	}
	defer unlock()
	out := cmd.OutOrStdout()
	var waiting []nodeState
	var problems []string // nodes this stop could not end, each with why
	for _, n := range st.Nodes {
		if alive(n.PID, n.Name, st.Config) {
			if err := syscall.Kill(n.PID, syscall.SIGTERM); err != nil {
				problems = append(problems, fmt.Sprintf("%s (pid %d) cannot be signalled: %v (run stop as the user who started it)", n.Name, n.PID, err))
				continue
			}
			waiting = append(waiting, n)
		}
	}
	deadline := time.Now().Add(stopGracePeriod)
	for _, n := range waiting {
		for alive(n.PID, n.Name, st.Config) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if alive(n.PID, n.Name, st.Config) {
			_ = syscall.Kill(n.PID, syscall.SIGKILL)
			// Gone before its address is probed below: its socket closes as it exits.
			for i := 0; i < 100 && alive(n.PID, n.Name, st.Config); i++ {
				time.Sleep(20 * time.Millisecond)
			}
			if alive(n.PID, n.Name, st.Config) {
				problems = append(problems, fmt.Sprintf("%s (pid %d) is still there after SIGKILL (stuck in the kernel?); stop tries it again", n.Name, n.PID))
				continue
			}
			fmt.Fprintf(out, "%-12s killed (did not stop within %v)\n", n.Name, stopGracePeriod)
			continue
		}
		fmt.Fprintf(out, "%-12s stopped\n", n.Name)
	}
	// A node that is still there keeps its pid, so that status shows it and the next stop
	// signals it again.
	var gone []nodeState
	changed := false
	for i, n := range st.Nodes {
		if alive(n.PID, n.Name, st.Config) {
			continue
		}
		changed = changed || n.PID != 0
		st.Nodes[i].PID = 0
		gone = append(gone, st.Nodes[i])
	}
	if changed {
		if err := writeState(dataDir, st); err != nil {
			return err
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("cluster %s in %s is not stopped: %s", st.Name, dataDir, strings.Join(problems, "; "))
	}
	// Stopped is said only of a cluster whose addresses no longer answer.
	if msg := servedElsewhere(dataDir, gone, hint); msg != "" {
		return fmt.Errorf("cluster %s in %s: its nodes are stopped, but %s", st.Name, dataDir, msg)
	}
	fmt.Fprintf(out, "cluster %s stopped; its data stays in %s\n", st.Name, dataDir)
	return nil
}

// holder is a process listening on a node's address that is not the node this data directory
// started. Status and stop went by the state's pids alone, so a cluster started from another
// data directory on the same addresses (--data-dir, or a shipped configuration given by path,
// whose data_dir lies beside its file, and by its built-in name) looked stopped, and stop said it
// had stopped it while its nodes still answered.
type holder struct {
	pid  int      // 0 when no process this command can see holds the address
	argv []string // its command line
}

// dataDir is the data directory a meridian server holder was started with, or "".
func (h holder) dataDir() string {
	if len(h.argv) < 2 || h.argv[1] != "server" {
		return ""
	}
	return argValue(h.argv[2:], "--data-dir")
}

// describe names the holder for a message about data directory dataDir.
func (h holder) describe(dataDir string) string {
	switch {
	case h.pid == 0:
		return "a process this command cannot see (another user's?)"
	case len(h.argv) >= 2 && h.argv[1] == "server":
		node := argValue(h.argv[2:], "--node")
		switch dir := h.dataDir(); {
		case dir == "":
			return fmt.Sprintf("node %s run by hand with meridian server --config %s (pid %d)", node, argValue(h.argv[2:], "--config"), h.pid)
		case filepath.Clean(dir) == filepath.Clean(dataDir):
			return fmt.Sprintf("node %s of this data directory, which its state does not name (pid %d)", node, h.pid)
		default:
			return fmt.Sprintf("node %s started from data directory %s (pid %d)", node, dir, h.pid)
		}
	case len(h.argv) > 0:
		return fmt.Sprintf("another process: %s (pid %d)", filepath.Base(h.argv[0]), h.pid)
	}
	return fmt.Sprintf("another process (pid %d)", h.pid)
}

// argValue is the value of flag name ("--node v" or "--node=v") in args, or "".
func argValue(args []string, name string) string {
	for i, a := range args {
		if a == name && i+1 < len(args) {
			return args[i+1]
		}
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v
		}
	}
	return ""
}

// holdersOf finds the process listening on each of addrs, by /proc: the listening sockets of
// /proc/net/tcp and tcp6 on the address's port (and its IP, or a wildcard), then the process
// whose file descriptors include the socket. An address it cannot tell of maps to holder{}.
func holdersOf(addrs []string) map[string]holder {
	out := map[string]holder{}
	byInode := map[string][]string{} // a listening socket's inode → the addresses it serves
	for _, file := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		data, err := os.ReadFile(file)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n") {
			// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode …
			f := strings.Fields(line)
			if len(f) < 10 || f[3] != "0A" { // 0A: TCP_LISTEN
				continue
			}
			ip, port, ok := procSocketAddr(f[1])
			if !ok {
				continue
			}
			for _, a := range addrs {
				want, err := net.ResolveTCPAddr("tcp", a)
				if err != nil || want.Port != port {
					continue
				}
				if want.IP == nil || want.IP.IsUnspecified() || ip.IsUnspecified() || ip.Equal(want.IP) {
					byInode[f[9]] = append(byInode[f[9]], a)
				}
			}
		}
	}
	for _, a := range addrs {
		out[a] = holder{}
	}
	if len(byInode) == 0 {
		return out
	}
	fds, _ := filepath.Glob("/proc/[0-9]*/fd/*")
	for _, fd := range fds {
		link, err := os.Readlink(fd)
		if err != nil {
			continue
		}
		inode, ok := strings.CutPrefix(link, "socket:[")
		if !ok {
			continue
		}
		served := byInode[strings.TrimSuffix(inode, "]")]
		if len(served) == 0 {
			continue
		}
		procDir := filepath.Dir(filepath.Dir(fd))
		var pid int
		if _, err := fmt.Sscan(filepath.Base(procDir), &pid); err != nil {
			continue
		}
		h := holder{pid: pid}
		if cmdline, err := os.ReadFile(filepath.Join(procDir, "cmdline")); err == nil {
			h.argv = strings.Split(strings.TrimSuffix(string(cmdline), "\x00"), "\x00")
		}
		for _, a := range served {
			out[a] = h
		}
	}
	return out
}

// procSocketAddr parses an address of /proc/net/tcp ("0100007F:1C85", each 32-bit word of the
// IP in the machine's byte order, which Linux's ports to little-endian machines print reversed).
func procSocketAddr(s string) (net.IP, int, bool) {
	hexIP, hexPort, ok := strings.Cut(s, ":")
	if !ok || (len(hexIP) != 8 && len(hexIP) != 32) {
		return nil, 0, false
	}
	var port int
	if _, err := fmt.Sscanf(hexPort, "%x", &port); err != nil {
		return nil, 0, false
	}
	ip := make(net.IP, len(hexIP)/2)
	for i := range ip {
		var b byte
		if _, err := fmt.Sscanf(hexIP[2*i:2*i+2], "%02x", &b); err != nil {
			return nil, 0, false
		}
		ip[i] = b
	}
	for w := 0; w < len(ip); w += 4 {
		slices.Reverse(ip[w : w+4])
	}
	return ip, port, true
}

// servedElsewhere says which of nodes, none running from dataDir, have addresses that answer all
// the same, and what serves them, with hint(dir) for the nodes of another data directory dir;
// "" when none does.
func servedElsewhere(dataDir string, nodes []nodeState, hint func(dir string) string) string {
	var answering []nodeState
	var addrs []string
	for _, n := range nodes {
		if accepting(n.Addr) {
			answering = append(answering, n)
			addrs = append(addrs, n.Addr)
		}
	}
	if len(answering) == 0 {
		return ""
	}
	holders := holdersOf(addrs)
	// Grouped by what serves them: as a rule, all of them by the nodes of one other data directory.
	type group struct {
		what, hint string
		names      []string
	}
	var groups []*group
	byWhat := map[string]*group{}
	for _, n := range answering {
		h := holders[n.Addr]
		what, hnt := h.describe(dataDir), ""
		key := what
		if dir := h.dataDir(); dir != "" && filepath.Clean(dir) != filepath.Clean(dataDir) {
			what, key, hnt = "the nodes started from data directory "+dir+", not from this one", "dir "+dir, hint(dir)
		}
		g := byWhat[key]
		if g == nil {
			g = &group{what: what, hint: hnt}
			byWhat[key] = g
			groups = append(groups, g)
		}
		g.names = append(g.names, n.Name)
	}
	var parts []string
	for _, g := range groups {
		subject := "the address of " + g.names[0] + " is"
		if len(g.names) > 1 {
			subject = "the addresses of " + strings.Join(g.names, ", ") + " are"
		}
		part := subject + " served by " + g.what
		if g.hint != "" {
			part += ": " + g.hint
		}
		parts = append(parts, part)
	}
	return strings.Join(parts, "; ")
}
