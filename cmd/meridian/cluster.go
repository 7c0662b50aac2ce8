package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
)

// clusterState is what `cluster start` leaves in the data directory for status and stop.
type clusterState struct {
	Name   string      `json:"name"`
	Config string      `json:"config"` // the copy of the configuration the servers run with
	Nodes  []nodeState `json:"nodes"`
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
		Short: "Start, inspect and stop a local cluster (one process per node, loopback ports)",
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
		Short: "Report each node: running, starting or stopped",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return clusterStatus(cmd, &cf, asJSON) },
	}
	status.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.AddCommand(status)
	cmd.AddCommand(&cobra.Command{
		Use:   "stop",
		Short: "Stop every node (SIGTERM, then SIGKILL after a grace period)",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return clusterStop(cmd, &cf) },
	})
	return cmd
}

func init() { rootCmd.AddCommand(newClusterCmd()) }

func readState(dataDir string) (*clusterState, error) {
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

func writeState(dataDir string, st *clusterState) error {
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(dataDir, stateFile+".tmp")
	if err := os.WriteFile(tmp, append(data, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dataDir, stateFile))
}

// alive reports whether pid is a running meridian server (not a zombie, not a reused pid).
func alive(pid int) bool {
	if pid <= 0 {
		return false
	}
	if err := syscall.Kill(pid, 0); err != nil {
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
	return strings.Contains(string(cmdline), "server")
}

func accepting(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
	if err != nil {
		return false
	}
	_ = c.Close()
	return true
}

func clusterStart(cmd *cobra.Command, cf *clusterFlags) error {
	cfg, err := cf.load()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(cfg.DataDir, 0o755); err != nil {
		return fmt.Errorf("data directory: %w", err)
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	st, err := readState(cfg.DataDir)
	if err != nil {
		st = &clusterState{}
	}
	if st.Name != "" && st.Name != cfg.Name {
		return fmt.Errorf("%s holds cluster %q, not %q: choose another --data-dir", cfg.DataDir, st.Name, cfg.Name)
	}
	cfgPath := filepath.Join(cfg.DataDir, configCopy)
	if err := os.WriteFile(cfgPath, []byte(cfg.Text), 0o644); err != nil {
		return err
	}
	st.Name, st.Config = cfg.Name, cfgPath
	prev := map[string]nodeState{}
	for _, n := range st.Nodes {
		prev[n.Name] = n
	}
	st.Nodes = nil
	out := cmd.OutOrStdout()
	var started []nodeState
	for _, n := range cfg.Nodes {
		ns := nodeState{Name: n.Name, ID: int(n.ID), Roles: n.Roles.String(), Addr: n.Addr,
			Log: filepath.Join(cfg.DataDir, n.Name+".log")}
		if p, ok := prev[n.Name]; ok && alive(p.PID) {
			ns.PID = p.PID
			st.Nodes = append(st.Nodes, ns)
			fmt.Fprintf(out, "%-12s already running (pid %d)\n", n.Name, p.PID)
			continue
		}
		if accepting(n.Addr) {
			return fmt.Errorf("node %s: address %s is already in use by another process", n.Name, n.Addr)
		}
		logf, err := os.OpenFile(ns.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return err
		}
		c := exec.Command(self, "server", "--config", cfgPath, "--node", n.Name, "--data-dir", cfg.DataDir)
		c.Stdout, c.Stderr = logf, logf
		// Its own process group: the node outlives this command and ignores its terminal's ^C.
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		err = c.Start()
		logf.Close()
		if err != nil {
			return fmt.Errorf("node %s: %w", n.Name, err)
		}
		ns.PID = c.Process.Pid
		_ = c.Process.Release()
		st.Nodes = append(st.Nodes, ns)
		started = append(started, ns)
	}
	if err := writeState(cfg.DataDir, st); err != nil {
		return err
	}
	deadline := time.Now().Add(readyTimeout)
	for _, ns := range started {
		for !accepting(ns.Addr) {
			if !alive(ns.PID) {
				return fmt.Errorf("node %s exited while starting; see %s:\n%s", ns.Name, ns.Log, tail(ns.Log, 10))
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("node %s did not accept connections on %s within %v; see %s", ns.Name, ns.Addr, readyTimeout, ns.Log)
			}
			time.Sleep(20 * time.Millisecond)
		}
		fmt.Fprintf(out, "%-12s started (pid %d) on %s\n", ns.Name, ns.PID, ns.Addr)
	}
	fmt.Fprintf(out, "cluster %s (protocol %s) is running; data and logs in %s\n", cfg.Name, cfg.Protocol.Name(), cfg.DataDir)
	return nil
}

func tail(path string, lines int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	ls := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(ls) > lines {
		ls = ls[len(ls)-lines:]
	}
	return strings.Join(ls, "\n")
}

func statusOf(st *clusterState) []nodeStatus {
	out := make([]nodeStatus, len(st.Nodes))
	for i, n := range st.Nodes {
		s := nodeStatus{nodeState: n, State: "stopped"}
		if alive(n.PID) {
			s.State = "starting"
			if accepting(n.Addr) {
				s.State = "running"
			}
		}
		out[i] = s
	}
	return out
}

func clusterStatus(cmd *cobra.Command, cf *clusterFlags, asJSON bool) error {
	cfg, err := cf.locate()
	if err != nil {
		return err
	}
	st, err := readState(cfg.DataDir)
	if err != nil {
		return err
	}
	nodes := statusOf(st)
	if asJSON {
		return writeJSON(cmd.OutOrStdout(), nodes)
	}
	tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tID\tROLES\tADDRESS\tPID\tSTATE")
	for _, n := range nodes {
		pid := "-"
		if n.State != "stopped" {
			pid = fmt.Sprint(n.PID)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\n", n.Name, n.ID, n.Roles, n.Addr, pid, n.State)
	}
	return tw.Flush()
}

func clusterStop(cmd *cobra.Command, cf *clusterFlags) error {
	cfg, err := cf.locate()
	if err != nil {
		return err
	}
	st, err := readState(cfg.DataDir)
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	var waiting []nodeState
	for _, n := range st.Nodes {
		if alive(n.PID) {
			_ = syscall.Kill(n.PID, syscall.SIGTERM)
			waiting = append(waiting, n)
		}
	}
	deadline := time.Now().Add(stopGracePeriod)
	for _, n := range waiting {
		for alive(n.PID) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if alive(n.PID) {
			_ = syscall.Kill(n.PID, syscall.SIGKILL)
			fmt.Fprintf(out, "%-12s killed (did not stop within %v)\n", n.Name, stopGracePeriod)
			continue
		}
		fmt.Fprintf(out, "%-12s stopped\n", n.Name)
	}
	for i := range st.Nodes {
		st.Nodes[i].PID = 0
	}
	if err := writeState(cfg.DataDir, st); err != nil {
		return err
	}
	fmt.Fprintf(out, "cluster %s stopped; its data stays in %s\n", st.Name, cfg.DataDir)
	return nil
}
