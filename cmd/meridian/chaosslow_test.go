package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Chaos slows the links between pairs of regions and ends each slowdown: both sides of a pair
// log it, the schedule is the seed's, no slowdown file outlives the run, and the cluster still
// serves every write after it. A slowdown a killed chaos left shows in status, and cluster start
// ends it.
func TestClusterChaosSlowdowns(t *testing.T) {
	_, config, data := runningCluster(t)
	chaos := []string{"cluster", "chaos", "--data-dir", data, "--slowdowns", "100ms-300ms/300ms", "--slow-by", "50ms", "--for", "1500ms", "--seed", "3"}
	out, errs, code := runFor(t, 60*time.Second, chaos...)
	schedule := func(text string) (slows, ends []string) {
		for _, l := range strings.Split(text, "\n") {
			if _, what, ok := strings.Cut(l, "s  slowed "); ok {
				slows = append(slows, what)
			} else if _, what, ok := strings.Cut(l, "s  ended the slowdown of "); ok {
				ends = append(ends, what)
			}
		}
		return slows, ends
	}
	slows, ends := schedule(out)
	// A slowdown the run's end cuts short is ended on exit, named in one line.
	if code != 0 || len(slows) < 3 || len(ends) < len(slows)-1 || len(ends) < len(slows) && !strings.Contains(out, "s  undid the slowdowns ") {
		t.Fatalf("cluster chaos --slowdowns: exit %d, stderr %q; want three or more slowdowns, each ended\n%s", code, errs, out)
	}
	again, _, _ := runFor(t, 60*time.Second, chaos...)
	if a, _ := schedule(again); !slices.Equal(a, slows) {
		t.Errorf("one seed, two schedules of slowdowns:\n%v\n%v", slows, a)
	}
	if files, _ := filepath.Glob(filepath.Join(data, "*", slowdownFile)); len(files) > 0 {
		t.Errorf("slowdown files outlive chaos: %v", files)
	}
	if told := nodesLogging(t, data, "frames to regions slowed", "slowdown ended"); told < 2 {
		t.Errorf("%d nodes logged a slowdown and its end; want two at least", told)
	}
	benchFindsEveryWrite(t, config)
	// Left behind as a killed chaos leaves it: the file written, the node told.
	if err := writeSlowdown(filepath.Join(data, "sh-1"), map[string]time.Duration{"BJ": 30 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	if err := tellPID("sh-1", pidOf(t, data, "sh-1")); err != nil {
		t.Fatal(err)
	}
	if out, _, _ := runFor(t, 60*time.Second, "cluster", "status", "--data-dir", data); !strings.Contains(out, "running, frames slowed to BJ +30ms") {
		t.Errorf("status does not show the slowdown chaos left:\n%s", out)
	}
	out, errs, code = runFor(t, 60*time.Second, "cluster", "start", "--config", config, "--data-dir", data)
	if code != 0 || !strings.Contains(out, "sh-1         healed of the slowdown to BJ +30ms a cluster chaos left") || fileExists(filepath.Join(data, "sh-1", slowdownFile)) {
		t.Errorf("start with a slowdown left on a running node: exit %d, stderr %q\n%s", code, errs, out)
	}
	waitForLog(t, filepath.Join(data, "sh-1.log"), "slowdown ended")
}

// A slowdown file a node cannot read is reported, and flags that make no slowdowns are refused.
func TestSlowdownFileAndFlags(t *testing.T) {
	dir := t.TempDir()
	for _, text := range []string{"BJ\n", "BJ soon\n", "BJ 1s extra\n", "BJ -1s\n", "BJ 0s\n"} {
		writeFiles(t, dir, map[string]string{slowdownFile: text})
		if _, err := readSlowdown(dir); err == nil || !strings.Contains(err.Error(), "slowdown file") {
			t.Errorf("slowdown file %q: %v, want it refused", text, err)
		}
	}
	if err := writeSlowdown(dir, map[string]time.Duration{"SG": time.Second, "BJ": 5 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	if got, err := readSlowdown(dir); err != nil || len(got) != 2 || got["SG"] != time.Second || got["BJ"] != 5*time.Millisecond {
		t.Errorf("read back %v, %v", got, err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--slowdowns", "1s/1s", "--for", "3s"}, "--slowdowns 1s/1s needs --slow-by"},
		{[]string{"--crashes", "1s/1s", "--slow-by", "5ms", "--for", "3s"}, "--slow-by 5ms without --slowdowns"},
		{[]string{"--slowdowns", "1s/1s", "--slow-by", "11s", "--for", "30s"}, "--slow-by 11s: want an extra delay from 1µs to 10s"},
		{[]string{"--slowdowns", "1s/1s", "--slow-by", "3s", "--for", "3s"}, "--slow-by 3s with --for 3s: frames slowed near the end would arrive after it"},
	} {
		out, errs, code := runFor(t, 30*time.Second, append([]string{"cluster", "chaos", "--data-dir", dir}, c.args...)...)
		if code != 1 || out != "" || !strings.Contains(errs, c.want) || strings.Count(strings.TrimSpace(errs), "\n") > 0 {
			t.Errorf("chaos %v: exit %d, stdout %q, stderr %q; want one line with %q", c.args, code, out, errs, c.want)
		}
	}
}

// A node started while its slowdown file names a slowdown (chaos restarted it mid-slowdown)
// starts slowed: otherwise the pair would be slowed one way only.
func TestServerStartsWithItsSlowdown(t *testing.T) {
	dir, config, data := runningCluster(t)
	if out, errs, code := runFor(t, 60*time.Second, "cluster", "stop", "--data-dir", data); code != 0 {
		t.Fatalf("cluster stop: exit %d\n%s%s", code, out, errs)
	}
	nodeDir := filepath.Join(data, "sh-1")
	if err := writeSlowdown(nodeDir, map[string]time.Duration{"BJ": 40 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "sh-1.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	cmd := exec.Command(binary, "server", "--config", config, "--node", "sh-1", "--data-dir", data)
	cmd.Stderr = logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}()
	waitForLog(t, logPath, "node started")
	text, _ := os.ReadFile(logPath)
	if !strings.Contains(string(text), "frames to regions slowed (SetSlowdown)") || !strings.Contains(string(text), "regions=BJ+40ms") {
		t.Errorf("sh-1 started with a slowdown file for BJ and did not say it is slowed:\n%s", text)
	}
}
