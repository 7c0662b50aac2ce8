package main

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/meridiandb/meridian/internal/topo"
)

// runFor is run bounded by timeout: a command that should have refused its input but serves
// instead is killed (exit -1) rather than left to hang the test.
func runFor(t *testing.T, timeout time.Duration, args ...string) (string, string, int) {
	t.Helper()
	return runWith(t, timeout, "", nil, args...)
}

// runForInput is runFor with input on the command's standard input.
func runForInput(t *testing.T, timeout time.Duration, input string, args ...string) (string, string, int) {
	t.Helper()
	return runWith(t, timeout, input, nil, args...)
}

// runWith runs the binary with input on its standard input and env added to its environment.
func runWith(t *testing.T, timeout time.Duration, input string, env []string, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Stdin = strings.NewReader(input)
	cmd.Env = append(os.Environ(), env...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return out.String(), errb.String(), ee.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return out.String(), errb.String(), 0
}

// listing names every file under dir with its size, to tell whether a refused command touched it.
func listing(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		b.WriteString(rel)
		if !info.IsDir() {
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			b.WriteString("=" + string(data))
		}
		b.WriteByte('\n')
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// wantRefused checks that a command failed with one line naming want and left dir as it was.
func wantRefused(t *testing.T, dir, before, want string, out, errs string, code int) {
	t.Helper()
	line := strings.TrimSpace(errs)
	if code <= 0 || strings.Contains(line, "\n") || !strings.Contains(line, want) {
		t.Errorf("exit %d, stderr:\n%s\nwant one error line mentioning %q (stdout: %q)", code, errs, want, out)
	}
	if after := listing(t, dir); after != before {
		t.Errorf("the refused command changed %s:\nbefore:\n%s\nafter:\n%s", dir, before, after)
	}
}

func TestClaimNodeDir(t *testing.T) {
	here := "region SH (#0), data node 1 of 1 there; of 6 shards, replica 1 of shard 0, 1 of shard 3"
	me := nodeIdentity{Cluster: "c", Node: "sh-1", Protocol: "k2", Placement: here, Shards: []topo.ShardID{0, 3}, ShardCount: 6}
	root := t.TempDir()
	dir := func(name string, files map[string]string) string {
		d := filepath.Join(root, name)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		writeFiles(t, d, files)
		return d
	}
	own := `{"cluster":"c","node":"sh-1","protocol":"k2","placement":"` + here + `"}`
	// Identities written before placements were recorded take the one they are started with.
	unplaced := `{"cluster":"c","node":"sh-1","protocol":"k2"}`
	for _, c := range []struct {
		dir      string
		wantMark bool
		wantErr  string
	}{
		{filepath.Join(root, "missing"), true, ""},
		{dir("empty", nil), true, ""},
		{dir("own", map[string]string{identityFile: own, "CURRENT": "x"}), false, ""},
		{dir("unplaced", map[string]string{identityFile: unplaced, "CURRENT": "x"}), true, ""},
		{dir("legacy", map[string]string{"MANIFEST-000001": "x", "000002.log": ""}), true, ""},
		// A first start killed just after Pebble created its lock file: the store is created
		// again over it (durable.TestOpenPebbleAfterAFirstStartKilled).
		{dir("first-start-killed", map[string]string{"LOCK": ""}), true, ""},
		{dir("moved", map[string]string{identityFile: `{"cluster":"c","node":"sh-1","protocol":"k2","placement":"region BJ (#1), data node 1 of 1 there; of 6 shards, replica 1 of shard 0, 1 of shard 3"}`}), false,
			"was written as region BJ (#1), data node 1 of 1 there; of 6 shards, replica 1 of shard 0, 1 of shard 3, but this configuration places the node as " + here},
		// Identities that recorded only the shard set are held to it.
		{dir("shards-same", map[string]string{identityFile: `{"cluster":"c","node":"sh-1","protocol":"k2","shards":[0,3],"shard_count":6}`, "CURRENT": "x"}), true, ""},
		{dir("shards-moved", map[string]string{identityFile: `{"cluster":"c","node":"sh-1","protocol":"k2","shards":[1,4],"shard_count":6}`}), false,
			"holds shards [1 4] of 6, but this configuration places the node as " + here},
		{dir("was-oracle", map[string]string{identityFile: `{"cluster":"c","node":"sh-1","protocol":"k2","placement":"` + noKeys + `"}`}), false,
			"was written as " + noKeys},
		{dir("resharded", map[string]string{identityFile: `{"cluster":"c","node":"sh-1","protocol":"k2","placement":"region SH (#0), data node 1 of 1 there; of 12 shards, replica 1 of shard 0, 1 of shard 3"}`}), false,
			"of 12 shards"},
		{dir("other-node", map[string]string{identityFile: `{"cluster":"c","node":"bj-1","protocol":"k2"}`}), false,
			`holds node bj-1 of cluster "c" (protocol k2), not node sh-1 of cluster "c" (protocol k2)`},
		{dir("other-cluster", map[string]string{identityFile: `{"cluster":"d","node":"sh-1","protocol":"k2"}`}), false, `of cluster "d"`},
		{dir("other-protocol", map[string]string{identityFile: `{"cluster":"c","node":"sh-1","protocol":"crdb"}`}), false, "(protocol crdb)"},
		{dir("torn", map[string]string{identityFile: ""}), false, "has a MERIDIAN-NODE that names no node"},
		{dir("junk", map[string]string{"notes.txt": "mine"}), false, "holds files that are not a Meridian store (notes.txt)"},
	} {
		mark, err := claimNodeDir(c.dir, me)
		switch {
		case c.wantErr == "" && err != nil:
			t.Errorf("%s: %v", filepath.Base(c.dir), err)
		case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)):
			t.Errorf("%s: error %v, want one mentioning %q", filepath.Base(c.dir), err, c.wantErr)
		case c.wantErr == "" && mark != c.wantMark:
			t.Errorf("%s: mark %v, want %v", filepath.Base(c.dir), mark, c.wantMark)
		}
	}
}

// A server writes its identity into the store it creates, and a node of another cluster given
// that directory refuses it without touching it.
func TestServerRefusesAnotherClustersData(t *testing.T) {
	dir := t.TempDir()
	config := freeClusterConfig(t, dir)
	data := filepath.Join(dir, "data")
	srv, logs, exited := startStoredNode(t, config, data)
	ident := filepath.Join(data, "sh-1", identityFile)
	_ = srv.Process.Signal(syscall.SIGTERM)
	if err := <-exited; err != nil {
		t.Fatalf("server: %v\n%s", err, logs.String())
	}
	if got, _ := os.ReadFile(ident); !strings.Contains(string(got), `"cluster":"k2-3region","node":"sh-1","protocol":"k2"`) {
		t.Fatalf("%s: %s", ident, got)
	}

	text, err := os.ReadFile(config)
	if err != nil {
		t.Fatal(err)
	}
	other := filepath.Join(dir, "other.toml")
	writeFiles(t, dir, map[string]string{"other.toml": strings.Replace(string(text), `name = "k2-3region"`, `name = "other"`, 1)})
	before := listing(t, data)
	out, errs, code := runFor(t, 20*time.Second, "server", "--config", other, "--node", "sh-1", "--data-dir", data)
	wantRefused(t, data, before, `holds node sh-1 of cluster "k2-3region" (protocol k2), not node sh-1 of cluster "other"`, out, errs, code)
	// cluster start asks every node's directory before it writes anything of its own.
	out, errs, code = runFor(t, 20*time.Second, "cluster", "start", "--config", other, "--data-dir", data)
	if code == 0 {
		_, _, _ = runFor(t, 30*time.Second, "cluster", "stop", "--config", other, "--data-dir", data)
	}
	wantRefused(t, data, before, `not node sh-1 of cluster "other"`, out, errs, code)
}

// cluster start must not replace files in its data directory that are not a cluster's.
func TestClusterStartLeavesForeignFilesAlone(t *testing.T) {
	dir := t.TempDir()
	config := freeClusterConfig(t, dir)
	for _, c := range []struct {
		files map[string]string
		want  string
	}{
		{map[string]string{stateFile: "my notes"}, "cluster.json: invalid character 'm' looking for beginning of value: not a cluster's state, so left alone"},
		{map[string]string{stateFile: `{"nodes":[]}`}, "cluster.json names no cluster, so it is left alone"},
		{map[string]string{configCopy: "# my own file\n"}, "cluster.toml exists and is not this cluster's configuration; starting would overwrite it"},
		{map[string]string{"sh-1/notes.txt": "mine"}, "holds files that are not a Meridian store (notes.txt)"},
	} {
		data, err := os.MkdirTemp(dir, "data")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(data, "sh-1"), 0o755); err != nil {
			t.Fatal(err)
		}
		writeFiles(t, data, c.files)
		before := listing(t, data)
		out, errs, code := runFor(t, 30*time.Second, "cluster", "start", "--config", config, "--data-dir", data)
		if code == 0 {
			_, _, _ = runFor(t, 30*time.Second, "cluster", "stop", "--config", config, "--data-dir", data)
		}
		wantRefused(t, data, before, c.want, out, errs, code)
	}
}

// cluster status and stop judge a pid by its whole command line: a state file's pid may since
// belong to another program, which stop must not signal.
func TestAliveOnlyForTheNodesServer(t *testing.T) {
	const cfg = "/d/cluster.toml"
	for _, c := range []struct {
		argv []string
		want bool
	}{
		{[]string{"/bin/meridian", "server", "--config", cfg, "--node", "sh-1", "--data-dir", "/d"}, true},
		{[]string{"/bin/meridian", "server", "--config", cfg, "--node", "bj-1", "--data-dir", "/d"}, false},
		{[]string{"/bin/meridian", "server", "--config", "/e/cluster.toml", "--node", "sh-1"}, false},
		{[]string{"/usr/bin/redis-server", "*:6379"}, false},
		{[]string{"sh", "-c", "sleep 30; :", "server", "--node", "sh-1"}, false},
		{[]string{"/bin/meridian"}, false},
	} {
		if got := isServerOf(c.argv, "sh-1", cfg); got != c.want {
			t.Errorf("%q: %v, want %v", c.argv, got, c.want)
		}
	}
	// A live process with "server" in its command line is not a node's server.
	p := exec.Command("sh", "-c", "sleep 30; :", "server")
	p.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // so that its sleep is killed with it
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = syscall.Kill(-p.Process.Pid, syscall.SIGKILL); _ = p.Wait() }()
	if alive(p.Process.Pid, "sh-1", cfg) {
		t.Errorf("pid %d (sh -c … server) taken for node sh-1's server", p.Process.Pid)
	}
}

// holdFirstNodeAddr listens, until the test ends, on the address of config's first node (sh-1:
// the first addr = "…" in the default configuration), and returns it.
func holdFirstNodeAddr(t *testing.T, config string) string {
	t.Helper()
	text, err := os.ReadFile(config)
	if err != nil {
		t.Fatal(err)
	}
	_, rest, _ := strings.Cut(string(text), `addr = "`)
	addr, _, _ := strings.Cut(rest, `"`)
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return addr
}

// A node whose address is taken is refused before its store is opened: the store was created
// first, left behind, and the error did not say the node might be running already.
func TestServerAddressTakenLeavesNoStore(t *testing.T) {
	dir := t.TempDir()
	config := freeClusterConfig(t, dir)
	holdFirstNodeAddr(t, config)
	data := filepath.Join(dir, "data")
	_, errs, code := runFor(t, 20*time.Second, "server", "--config", config, "--node", "sh-1", "--data-dir", data)
	line := strings.TrimSpace(errs)
	if code <= 0 || strings.Contains(line, "\n") || !strings.Contains(line, "address already in use (is node sh-1 already running?") {
		t.Errorf("exit %d, stderr:\n%s", code, errs)
	}
	if _, err := os.Stat(data); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a node that could not listen created %s (stat: %v)", data, err)
	}
}

// A node whose data directory another process has open (the node already running under a
// configuration that moved its addresses) is refused on one line that says so and gives the
// hint a taken address gets: it was the store lock's errno, "durable: open …/sh-1: resource
// temporarily unavailable".
func TestServerDataDirInUse(t *testing.T) {
	dir := t.TempDir()
	config := freeClusterConfig(t, dir)
	data := filepath.Join(dir, "data")
	first, _, exited := startStoredNode(t, config, data)
	t.Cleanup(func() { _ = first.Process.Signal(syscall.SIGTERM); <-exited })
	// The same cluster on other ports (chosen while the first server holds its own).
	moved := freeClusterConfig(t, t.TempDir())
	_, errs, code := runFor(t, 20*time.Second, "server", "--config", moved, "--node", "sh-1", "--data-dir", data)
	line := strings.TrimSpace(errs)
	want := "node sh-1: durable: data directory " + filepath.Join(data, "sh-1") +
		" is in use by another process (is node sh-1 already running? meridian cluster status)"
	if code <= 0 || strings.Contains(line, "\n") || !strings.Contains(line, want) {
		t.Errorf("exit %d, stderr:\n%s\nwant one line with: %s", code, errs, want)
	}
}

// A node that fails to start is reported on one line, with its own reason.
func TestClusterStartReportsANodeThatExits(t *testing.T) {
	dir := t.TempDir()
	config := freeClusterConfig(t, dir)
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(filepath.Join(data, "sh-1"), 0o755); err != nil {
		t.Fatal(err)
	}
	// Looks like a store to the server's own check; the store itself refuses it.
	writeFiles(t, filepath.Join(data, "sh-1"), map[string]string{"CURRENT": "garbage\n"})
	out, errs, code := runFor(t, 60*time.Second, "cluster", "start", "--config", config, "--data-dir", data)
	t.Cleanup(func() { _, _, _ = runFor(t, 60*time.Second, "cluster", "stop", "--config", config, "--data-dir", data) })
	line := strings.TrimSpace(errs)
	if code <= 0 || strings.Contains(line, "\n") || !strings.Contains(line, "node sh-1 exited while starting: node sh-1: durable: open") ||
		!strings.Contains(line, "(log: "+filepath.Join(data, "sh-1.log")+")") {
		log, _ := os.ReadFile(filepath.Join(data, "sh-1.log"))
		t.Errorf("exit %d, stderr:\n%s\nstdout:\n%s\nsh-1's log:\n%s", code, errs, out, log)
	}
}

// The address check binds without listening: a port that listened, even for an instant, took
// connections, and cluster start reported a node that was failing as started.
func TestAddressCheckAcceptsNoConnection(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	fd, err := bindOnly(addr)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Fatalf("%s accepted a connection while only being checked", addr)
	}
	// Taken is taken: a listener refuses the check.
	l, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if fd, err := bindOnly(l.Addr().String()); !errors.Is(err, syscall.EADDRINUSE) {
		if err == nil {
			syscall.Close(fd)
		}
		t.Fatalf("bindOnly of a listening address: %v, want address already in use", err)
	}
}

// A node started before a later one fails to start is recorded, so that status shows it and
// stop stops it: it ran on unrecorded, and its port kept the next start from starting it.
func TestClusterStartRecordsTheNodesItStarted(t *testing.T) {
	dir := t.TempDir()
	config := freeClusterConfig(t, dir)
	data := filepath.Join(dir, "data")
	// bj-1, the second node, cannot open its log.
	if err := os.MkdirAll(filepath.Join(data, "bj-1.log"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _, _ = runFor(t, 60*time.Second, "cluster", "stop", "--config", config, "--data-dir", data)
		killServersOf(t, data)
	})
	_, errs, code := runFor(t, 60*time.Second, "cluster", "start", "--config", config, "--data-dir", data)
	line := strings.TrimSpace(errs)
	if want := "node bj-1: open " + filepath.Join(data, "bj-1.log") + ": is a directory; started before it and running: sh-1 (pid "; code <= 0 || strings.Contains(line, "\n") || !strings.Contains(line, want) {
		t.Errorf("exit %d, stderr %q, want one line mentioning %q", code, errs, want)
	}
	out, errs, code := runFor(t, 30*time.Second, "cluster", "status", "--config", config, "--data-dir", data)
	if code != statusSomeRunning && code != statusNoneRunning || !regexp.MustCompile(`(?m)^sh-1 .* (starting|running)$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^bj-1 .* stopped$`).MatchString(out) {
		t.Errorf("status: exit %d, %s\n%s", code, errs, out)
	}
	out, errs, code = runFor(t, 60*time.Second, "cluster", "stop", "--config", config, "--data-dir", data)
	if code != 0 || !strings.Contains(out, "sh-1         stopped") {
		t.Errorf("stop: exit %d, %s\n%s", code, errs, out)
	}
	if left := serversOf(t, data); len(left) > 0 {
		t.Errorf("servers still running after cluster stop: pids %v", left)
	}
}

// serversOf lists the pids of the servers running on data: found by their command lines, as
// a server this test's command failed to record is in no state file.
func serversOf(t *testing.T, data string) []int {
	t.Helper()
	procs, err := filepath.Glob("/proc/[0-9]*/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, p := range procs {
		argv, err := os.ReadFile(p)
		if err != nil || !bytes.Contains(argv, []byte("\x00server\x00")) || !bytes.Contains(argv, []byte("\x00"+data+"\x00")) {
			continue
		}
		stat, err := os.ReadFile(filepath.Join(filepath.Dir(p), "stat"))
		if err != nil || bytes.Contains(stat, []byte(") Z ")) { // gone, or a zombie
			continue
		}
		if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(p))); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// killServersOf kills what serversOf finds, each by its pid.
func killServersOf(t *testing.T, data string) {
	for _, pid := range serversOf(t, data) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// Two nodes whose addresses differ as text but are one socket are refused before any node
// starts: the second node exited at once, and cluster start, finding its port answered by the
// first, reported it started and the cluster running.
func TestClusterStartRefusesNodesSharingASocket(t *testing.T) {
	dir := t.TempDir()
	config := freeClusterConfig(t, dir)
	text, err := os.ReadFile(config)
	if err != nil {
		t.Fatal(err)
	}
	// The first two addr = "127.0.0.1:P" lines are sh-1's and bj-1's.
	_, rest, _ := strings.Cut(string(text), `addr = "127.0.0.1:`)
	shPort, _, _ := strings.Cut(rest, `"`)
	_, rest, _ = strings.Cut(rest, "[[node]]")
	_, rest, _ = strings.Cut(rest, `addr = "`)
	bjAddr, _, _ := strings.Cut(rest, `"`)
	for _, host := range []string{"localhost", "0.0.0.0"} {
		shared := host + ":" + shPort
		edited := strings.Replace(string(text), `addr = "`+bjAddr+`"`, `addr = "`+shared+`"`, 1)
		writeFiles(t, dir, map[string]string{"shared.toml": edited})
		sharedConfig := filepath.Join(dir, "shared.toml")
		data := filepath.Join(dir, "data-"+host)
		_, errs, code := runFor(t, 60*time.Second, "cluster", "start", "--config", sharedConfig, "--data-dir", data)
		if code == 0 {
			_, _, _ = runFor(t, 60*time.Second, "cluster", "stop", "--config", sharedConfig, "--data-dir", data)
		}
		line := strings.TrimSpace(errs)
		if want := "node sh-1's 127.0.0.1:" + shPort + " and node bj-1's " + shared + " are one socket on this machine"; code <= 0 ||
			strings.Contains(line, "\n") || !strings.Contains(line, want) {
			t.Errorf("bj-1 at %s: exit %d, stderr %q, want one line mentioning %q", shared, code, errs, want)
		}
		if left := serversOf(t, data); len(left) > 0 {
			killServersOf(t, data)
			t.Errorf("bj-1 at %s: servers started: pids %v", shared, left)
		}
	}
}

// startStoredNode starts node sh-1 of config on data and returns once its store is open (its
// identity file, written then, exists), with its log and a channel that gets its exit.
func startStoredNode(t *testing.T, config, data string) (*exec.Cmd, *bytes.Buffer, <-chan error) {
	t.Helper()
	srv := exec.Command(binary, "server", "--config", config, "--node", "sh-1", "--data-dir", data)
	logs := &bytes.Buffer{}
	srv.Stderr = logs
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- srv.Wait() }()
	ident := filepath.Join(data, "sh-1", identityFile)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(ident); err == nil {
			return srv, logs, exited
		}
		select {
		case err := <-exited:
			t.Fatalf("server exited (%v) before writing %s; its log:\n%s", err, ident, logs.String())
		default:
		}
		if time.Now().After(deadline) {
			_ = srv.Process.Kill()
			<-exited
			t.Fatalf("no %s after 20 s; server log:\n%s", ident, logs.String())
		}
	}
}
