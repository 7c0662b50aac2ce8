package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meridiandb/meridian/client"
	"github.com/meridiandb/meridian/configs"
	mrt "github.com/meridiandb/meridian/internal/runtime"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/workload"
	"github.com/meridiandb/meridian/internal/workload/memdb"
	"github.com/meridiandb/meridian/internal/workload/tpcc"
)

// The data directories the README's cluster commands create in the source tree are ignored by
// git: the built-in configurations' where meridian runs (the repository's root), and a shipped
// file's given by path beside it in configs/. None was, and `git status` listed every store.
func TestClusterDataDirsIgnoredByGit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if exec.Command("git", "-C", root, "rev-parse", "--git-dir").Run() != nil {
		t.Skip("not in a git work tree")
	}
	for _, name := range configs.Names() {
		cfg, err := mrt.Load(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, dir := range []string{cfg.DataDir, filepath.Join("configs", cfg.DataDir)} {
			// --no-index: a store already added by mistake is still reported as ignored.
			path := filepath.Join(dir, "sh-1", "CURRENT")
			if err := exec.Command("git", "-C", root, "check-ignore", "-q", "--no-index", path).Run(); err != nil {
				t.Errorf("%s (data of %s): not ignored by git (%v)", path, name, err)
			}
		}
	}
	for _, kept := range []string{"configs/k2-3region.toml", "configs/configs.go"} {
		if exec.Command("git", "-C", root, "check-ignore", "-q", "--no-index", kept).Run() == nil {
			t.Errorf("%s is ignored by git", kept)
		}
	}
}

// runEnv is runFor with env added to the environment.
func runEnv(t *testing.T, env []string, args ...string) (string, string, int) {
	t.Helper()
	return runWith(t, 60*time.Second, "", env, args...)
}

// A configuration named by $MERIDIAN_CONFIG that does not load is said to come from there: the
// error named only a file ("open bogus: no such file or directory") that the command line did
// not mention.
func TestConfigFromEnvironmentNamedInErrors(t *testing.T) {
	dir := t.TempDir()
	broken := filepath.Join(dir, "broken.toml")
	writeFiles(t, dir, map[string]string{"broken.toml": "protocol = \"k2x\"\n"})
	for _, c := range []struct {
		env  string
		args []string
		want string
	}{
		{"bogus", []string{"kv", "get", "a"}, "$MERIDIAN_CONFIG=bogus: cluster config: open bogus: no such file or directory"},
		{"bogus", []string{"bench", "--duration", "1s"}, "$MERIDIAN_CONFIG=bogus: cluster config: open bogus"},
		{"bogus", []string{"cluster", "start"}, "$MERIDIAN_CONFIG=bogus: cluster config: open bogus"},
		{broken, []string{"cluster", "status"}, "$MERIDIAN_CONFIG=" + broken + ": " + broken + ":1: "},
		// Given on the command line, the file is the user's own words.
		{"k2-3region", []string{"kv", "get", "a", "--config", "bogus"}, "meridian: cluster config: open bogus"},
	} {
		_, errs, code := runEnv(t, []string{"MERIDIAN_CONFIG=" + c.env}, c.args...)
		if line := strings.TrimSpace(errs); code != 1 || strings.Contains(line, "\n") || !strings.Contains(line, c.want) {
			t.Errorf("MERIDIAN_CONFIG=%s meridian %s: exit %d, stderr %q, want one line mentioning %q", c.env, strings.Join(c.args, " "), code, errs, c.want)
		}
	}
}

// A second TPC-C bench on one cluster is refused, and the refusal says how to get the empty
// cluster it needs: it said only that one was needed.
func TestTPCCRefusalSaysHowToGetAnEmptyCluster(t *testing.T) {
	tp, err := topo.FromPreset("k2-3region", topo.DefaultLayout())
	if err != nil {
		t.Fatal(err)
	}
	cfg := tpcc.Small(1)
	cfg.Districts, cfg.CustomersPerDistrict, cfg.Items = 2, 30, 100
	w, err := tpcc.New(tp, cfg)
	if err != nil {
		t.Fatal(err)
	}
	db := client.Open(memdb.New().Transport())
	if err := w.Load(db); err != nil {
		t.Fatal(err)
	}
	terminal := w.NewClient(0, 0, rand.New(rand.NewPCG(1, 1)))
	for i := 0; i < 100; i++ { // as a bench run does: new orders beyond the loaded ones
		tx := terminal.Next()
		if err := client.RunTxn(db, client.TxnOptions{ReadOnly: tx.ReadOnly}, tx.Run); err != nil && !errors.Is(err, workload.ErrUserAbort) {
			t.Fatal(err)
		}
	}
	err = w.CheckFresh(db)
	if want := "TPC-C needs an empty cluster: stop it (meridian cluster stop) and start it with a new --data-dir, or delete its data directory before starting it again"; err == nil ||
		!strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
		t.Errorf("CheckFresh after a run: %v, want one line mentioning %q", err, want)
	}
}

// statusOfData runs cluster status on data, as a table and as JSON, and returns its exit status
// (the same for both, or the test fails) and each node's state.
func statusOfData(t *testing.T, data string) (int, map[string]string) {
	t.Helper()
	out, errs, code := runFor(t, 30*time.Second, "cluster", "status", "--data-dir", data)
	jsonOut, jsonErrs, jsonCode := runFor(t, 30*time.Second, "cluster", "status", "--json", "--data-dir", data)
	if code != jsonCode {
		t.Errorf("cluster status exits %d (stderr %q), with --json %d (stderr %q)", code, errs, jsonCode, jsonErrs)
	}
	var nodes []nodeStatus
	if err := json.Unmarshal([]byte(jsonOut), &nodes); err != nil {
		t.Fatalf("cluster status --json: %v\n%s", err, jsonOut)
	}
	states := map[string]string{}
	for _, n := range nodes {
		states[n.Name] = n.State
		if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(n.Name) + ` .* ` + n.State + `$`).MatchString(out) {
			t.Errorf("cluster status shows no line for %s %s:\n%s", n.Name, n.State, out)
		}
	}
	return code, states
}

// cluster status says by its exit status whether the cluster is up: it exited 0 with every node
// stopped, or one killed, and 1 only when no cluster had been started in the data directory.
func TestClusterStatusExitStatus(t *testing.T) {
	_, _, data := runningCluster(t)
	if code, states := statusOfData(t, data); code != 0 {
		t.Errorf("every node running: exit %d, want 0 (%v)", code, states)
	}
	st, err := readState(data)
	if err != nil {
		t.Fatal(err)
	}
	victim := st.Nodes[1]
	if err := syscall.Kill(victim.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for alive(victim.PID, victim.Name, st.Config) {
		time.Sleep(10 * time.Millisecond)
	}
	if code, states := statusOfData(t, data); code != statusSomeRunning || states[victim.Name] != "stopped" {
		t.Errorf("%s killed: exit %d, want %d (%v)", victim.Name, code, statusSomeRunning, states)
	}
	stopLeavesNoServer(t, data)
	if code, states := statusOfData(t, data); code != statusNoneRunning {
		t.Errorf("every node stopped: exit %d, want %d (%v)", code, statusNoneRunning, states)
	}
	if _, errs, code := runFor(t, 30*time.Second, "cluster", "status", "--data-dir", t.TempDir()); code != 1 || !strings.Contains(errs, "no cluster was started in") {
		t.Errorf("no cluster started in the data directory: exit %d, stderr %q, want 1", code, errs)
	}
}

// A cluster started from another data directory on the same addresses is named as such by
// status, stop and start. Status went by the state's pids alone: a cluster started with
// --data-dir (or from a shipped configuration given by path, whose data directory lies beside
// the file, and then by its built-in name) looked stopped from the default data directory, stop
// there said "cluster k2-3region stopped" while every node still answered, and start said only
// that the address was in use by another process.
func TestClusterStartedFromAnotherDataDir(t *testing.T) {
	dir := t.TempDir()
	config := freeClusterConfig(t, dir)
	here, there := filepath.Join(dir, "here"), filepath.Join(dir, "there")
	stopAtCleanup(t, here)
	stopAtCleanup(t, there)
	mustStartCluster(t, config, here) // a state with every node stopped, as a cluster stopped leaves
	stopLeavesNoServer(t, here)
	mustStartCluster(t, config, there)
	servers := len(serversOf(t, there))

	served := "are served by the nodes started from data directory " + there + ", not from this one: "
	oneLine := func(what, errs string, code int, want string) {
		t.Helper()
		if line := strings.TrimSpace(errs); code != 1 || strings.Contains(line, "\n") || !strings.Contains(line, want) {
			t.Errorf("%s: exit %d, stderr %q, want 1 and one line mentioning %q", what, code, errs, want)
		}
	}
	for _, args := range [][]string{{}, {"--json"}} {
		out, errs, code := runFor(t, 30*time.Second, append([]string{"cluster", "status", "--config", config, "--data-dir", here}, args...)...)
		oneLine(fmt.Sprint("status ", args), errs, code, "cluster k2-3region in "+here+": the addresses of sh-1, bj-1, sg-1, sh-oracle, bj-oracle, sg-oracle "+served+"give --data-dir "+there)
		if !strings.Contains(out, "stopped") {
			t.Errorf("status %v lists no node:\n%s", args, out)
		}
	}
	out, errs, code := runFor(t, 60*time.Second, "cluster", "stop", "--data-dir", here)
	oneLine("stop", errs, code, "its nodes are stopped, but the addresses of sh-1, bj-1, sg-1, sh-oracle, bj-oracle, sg-oracle "+served+
		"meridian cluster stop --data-dir "+there+" stops them")
	if strings.Contains(out, "cluster k2-3region stopped") || len(serversOf(t, there)) != servers {
		t.Errorf("stop of the other data directory said %q; %d of %d servers still run", out, len(serversOf(t, there)), servers)
	}
	_, errs, code = runFor(t, 60*time.Second, "cluster", "start", "--config", config, "--data-dir", here)
	oneLine("start", errs, code, "address 127.0.0.1:")
	oneLine("start", errs, code, "is already in use by node sh-1 started from data directory "+there+" (pid ")
	oneLine("start", errs, code, "): stop that cluster first (meridian cluster stop --data-dir "+there+"), or use it as it is with --data-dir "+there)
	// A data directory where no cluster was ever started.
	nowhere := filepath.Join(dir, "nowhere")
	_, errs, code = runFor(t, 30*time.Second, "cluster", "status", "--config", config, "--data-dir", nowhere)
	oneLine("status where no cluster was started", errs, code, "no cluster was started in "+nowhere+", but the addresses of sh-1, ")

	// Once the other is stopped, this one is simply stopped.
	stopLeavesNoServer(t, there)
	if code, states := statusOfData(t, here); code != statusNoneRunning {
		t.Errorf("status with the other data directory's cluster stopped: exit %d, want %d (%v)", code, statusNoneRunning, states)
	}
	stopLeavesNoServer(t, here)
}

// /proc/net/tcp prints each 32-bit word of an address in the machine's byte order.
func TestProcSocketAddr(t *testing.T) {
	for _, c := range []struct {
		in   string
		ip   string
		port int
	}{
		{"0100007F:1C85", "127.0.0.1", 7301},
		{"00000000:0050", "0.0.0.0", 80},
		{"00000000000000000000000001000000:1C85", "::1", 7301},
		{"0000000000000000FFFF00000100007F:1C85", "127.0.0.1", 7301}, // ::ffff:127.0.0.1
	} {
		ip, port, ok := procSocketAddr(c.in)
		if !ok || !ip.Equal(net.ParseIP(c.ip)) || port != c.port {
			t.Errorf("%s: %v %d %v, want %s %d", c.in, ip, port, ok, c.ip, c.port)
		}
	}
	for _, bad := range []string{"", "0100007F", "0100007F:zz", "01007F:1C85"} {
		if _, _, ok := procSocketAddr(bad); ok {
			t.Errorf("%q parsed", bad)
		}
	}
	// A listener of this process is found, and named as what it is.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	h := holdersOf([]string{l.Addr().String()})[l.Addr().String()]
	if want := fmt.Sprintf("another process: %s (pid %d)", filepath.Base(os.Args[0]), os.Getpid()); h.describe("/d") != want {
		t.Errorf("holder of %s: %q, want %q", l.Addr(), h.describe("/d"), want)
	}
}
