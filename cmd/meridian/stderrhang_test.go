package main

import (
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"syscall"
	"testing"
	"time"
)

// fullPipe returns the write end of a pipe whose buffer is already full and whose read end is
// never read: a write to it blocks, as a write to a log file on a hung disk does.
func fullPipe(t *testing.T) *os.File {
	t.Helper()
	var fds [2]int
	if err := syscall.Pipe(fds[:]); err != nil {
		t.Fatal(err)
	}
	r, w := os.NewFile(uintptr(fds[0]), "pipe-r"), fds[1]
	t.Cleanup(func() { r.Close() })
	if err := syscall.SetNonblock(w, true); err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 4096)
	for {
		if _, err := syscall.Write(w, chunk); errors.Is(err, syscall.EAGAIN) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
	}
	if err := syscall.SetNonblock(w, false); err != nil {
		t.Fatal(err)
	}
	f := os.NewFile(uintptr(w), "pipe-w")
	t.Cleanup(func() { f.Close() })
	return f
}

// A process whose standard error hangs still exits with its error's status: a stopped node
// whose log is on a hung disk must not linger holding its data directory.
func TestExitsWhenItsErrorCannotBePrinted(t *testing.T) {
	cmd := exec.Command(binary, "server", "--config", "/nonexistent/meridian.toml")
	cmd.Stderr = fullPipe(t)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Fatalf("exit: %v, want status 1", err)
		}
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatal("still running 30 s after failing: blocked printing its error")
	}
}

// blockingWriter's writes wait until release is closed.
type blockingWriter struct {
	release chan struct{}
	got     chan string
}

func (b *blockingWriter) Write(p []byte) (int, error) {
	<-b.release
	b.got <- string(p)
	return len(p), nil
}

func TestGiveUpWriter(t *testing.T) {
	b := &blockingWriter{release: make(chan struct{}), got: make(chan string, 4)}
	g := newGiveUpWriter(b, 50*time.Millisecond)
	buf := []byte("first\n")
	if n, err := g.Write(buf); n != len(buf) || err != nil {
		t.Fatalf("Write = %d, %v", n, err)
	}
	copy(buf, "XXXXX") // the caller reuses its buffer; the stuck write must not see it
	if g.hung.Load() == nil {
		t.Fatal("a write past its wait did not mark the writer hung")
	}
	if n, err := g.Write([]byte("dropped\n")); n != 8 || err != nil {
		t.Fatalf("Write while hung = %d, %v", n, err)
	}
	close(b.release)
	if got := <-b.got; got != "first\n" {
		t.Fatalf("the stuck write wrote %q, want its own copy %q", got, "first\n")
	}
	for deadline := time.Now().Add(10 * time.Second); g.hung.Load() != nil; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the writer still hung 10 s after its stuck write returned")
		}
	}
	if _, err := g.Write([]byte("third\n")); err != nil {
		t.Fatal(err)
	}
	if got := <-b.got; got != "third\n" {
		t.Fatalf("after the disk came back the writer wrote %q, want %q", got, "third\n")
	}
	select {
	case got := <-b.got:
		t.Fatalf("a write made while hung got out: %q", got)
	default:
	}
}

// A node whose log hangs still serves, and still stops on SIGTERM: its "node started" line,
// written while it starts, once kept it from ever reading its signals.
func TestNodeStopsWithItsLogHung(t *testing.T) {
	dir := t.TempDir()
	config := freeClusterConfig(t, dir)
	raw, err := os.ReadFile(config)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`name = "sh-1"\n(?:.*\n)*?addr = "([^"]+)"`).FindSubmatch(raw)
	if m == nil {
		t.Fatal("no addr for sh-1 in the configuration")
	}
	cmd := exec.Command(binary, "server", "--config", config, "--node", "sh-1", "--data-dir", filepath.Join(dir, "data"))
	cmd.Stderr = fullPipe(t)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})
	for deadline := time.Now().Add(30 * time.Second); ; {
		c, err := net.DialTimeout("tcp", string(m[1]), time.Second)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("node never listened on %s: %v", m[1], err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		done <- err // for the cleanup
		if err != nil {
			t.Fatalf("node stopped with %v, want exit 0", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("node still running 30 s after SIGTERM: blocked on its log")
	}
}
