package durable

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meridiandb/meridian/internal/node"
)

// TestOpenPebbleCreatesMissingDirs: a store under directories that do not exist yet is created
// whole (by Pebble, which syncs each directory it creates, so the store's entry survives a power
// loss) and opens again with what was written.
func TestOpenPebbleCreatesMissingDirs(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cluster", "node-1", "data")
	p, err := OpenPebble(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Apply([]node.Write{{Key: []byte("k"), Value: []byte("v")}}); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	q, err := OpenPebble(dir)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer q.Close()
	var got string
	if err := q.Scan([]byte("k"), []byte("l"), func(k, v []byte) bool { got = string(v); return true }); err != nil {
		t.Fatal(err)
	}
	if got != "v" {
		t.Fatalf("after reopening, k = %q, want v", got)
	}
}

// holdStoreEnv names the store TestHoldStore, run as a process of its own, keeps open.
const holdStoreEnv = "MERIDIAN_TEST_HOLD_STORE"

// TestHoldStore is not a test: TestOpenPebbleInUse runs it as a second process, which holds
// the store open until its standard input closes. Pebble's lock is a per-process fcntl lock,
// so only another process meets it as a node's second server would.
func TestHoldStore(t *testing.T) {
	dir := os.Getenv(holdStoreEnv)
	if dir == "" {
		return
	}
	p, err := OpenPebble(dir)
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	fmt.Println("held")
	_, _ = io.Copy(io.Discard, os.Stdin)
	_ = p.Close()
}

// TestOpenPebbleInUse: a store another process has open is refused with a line that says so
// (ErrInUse), not with the lock's errno ("durable: open …: resource temporarily unavailable").
func TestOpenPebbleInUse(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "sh-1")
	p, err := OpenPebble(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	holder := exec.Command(os.Args[0], "-test.run=^TestHoldStore$")
	holder.Env = append(os.Environ(), holdStoreEnv+"="+dir)
	holder.Stderr = os.Stderr
	stdin, err := holder.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := holder.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := holder.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = stdin.Close(); _ = holder.Wait() }()
	var said []string
	for sc := bufio.NewScanner(stdout); ; {
		if !sc.Scan() {
			t.Fatalf("the holding process ended without opening %s: %q", dir, said)
		}
		if said = append(said, sc.Text()); sc.Text() == "held" {
			break
		}
	}

	q, err := OpenPebble(dir)
	if err == nil {
		q.Close()
		t.Fatalf("opened %s while another process holds it", dir)
	}
	want := "durable: data directory " + dir + " is in use by another process"
	if !errors.Is(err, ErrInUse) || err.Error() != want {
		t.Errorf("second open: %v\nwant: %s", err, want)
	}
	if strings.Contains(err.Error(), "temporarily unavailable") {
		t.Errorf("second open reports the lock's errno: %v", err)
	}
}
