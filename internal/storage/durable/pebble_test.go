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
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

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

// A first start killed while it creates the store (between Pebble's first file and the format
// marker's sync) left a directory that every later start refused: "pebble: database does not
// exist" (a lock file and a manifest with no marker naming it) or "not a Meridian store (no
// format marker)" (a store created but the marker not yet written), until someone deleted it
// by hand. The test kills the first open at each of its writes in turn (every write from the
// chosen one on waits, and the directory is copied as it then is) and starts again on the
// copy, which must open, take a write and keep it.
func TestOpenPebbleAfterAFirstStartKilled(t *testing.T) {
	for n := int64(0); ; n++ {
		base := t.TempDir()
		dir := filepath.Join(base, "sh-1")
		var ops atomic.Int64
		killed, release := make(chan string, 1), make(chan struct{})
		freeze := errorfs.InjectorFunc(func(op errorfs.Op) error {
			if op.Kind.ReadOrWrite() == errorfs.OpIsWrite && ops.Add(1) > n {
				select {
				case killed <- "to " + filepath.Base(op.Path):
				default:
				}
				<-release
			}
			return nil
		})
		opened := make(chan *Pebble, 1)
		go func() {
			p, err := openPebble(dir, func(o *pebble.Options) { o.FS = errorfs.Wrap(vfs.Default, freeze) })
			if err != nil {
				t.Errorf("first open: %v", err)
			}
			opened <- p
		}()
		var at string
		select {
		case at = <-killed:
		case p := <-opened:
			close(release)
			if p != nil {
				_ = p.Close()
			}
			if n < 10 {
				t.Fatalf("the first open made only %d writes", n)
			}
			t.Logf("killed the first open at each of its %d writes", n)
			return
		case <-time.After(10 * time.Second):
			t.Fatalf("the first open neither wrote nor returned")
		}
		restart := filepath.Join(base, "restart")
		left := copyFiles(t, dir, restart)
		close(release)
		if p := <-opened; p != nil {
			_ = p.Close()
		}

		p, err := OpenPebble(restart)
		if err != nil {
			t.Fatalf("killed before write %d (%s), leaving %v: the restart: %v", n, at, left, err)
		}
		if err := p.Apply([]node.Write{{Key: []byte("k"), Value: []byte("v")}}); err != nil {
			t.Fatal(err)
		}
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
		q, err := OpenPebble(restart)
		if err != nil {
			t.Fatalf("killed before write %d (%s), leaving %v: the second restart: %v", n, at, left, err)
		}
		var got string
		err = q.Scan(nil, nil, func(k, v []byte) bool { got += string(k) + "=" + string(v); return true })
		_ = q.Close()
		if err != nil || got != "k=v" {
			t.Fatalf("killed before write %d (%s): the store holds %q (%v), want k=v", n, at, got, err)
		}
	}
}

// copyFiles copies the files of from (if it exists) into a new directory to, and names them.
func copyFiles(t *testing.T, from, to string) []string {
	t.Helper()
	ents, err := os.ReadDir(from)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(to, 0o755); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
		names = append(names, e.Name())
	}
	return names
}

// A directory with keys in it and no format marker is still not taken for a Meridian store,
// nor is one that holds other files besides a lock and a manifest.
func TestOpenPebbleRefusesForeignStores(t *testing.T) {
	dir := t.TempDir()
	db, err := pebble.Open(dir, &pebble.Options{Logger: quietLogger{}})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Set([]byte("theirs"), []byte("x"), pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if p, err := OpenPebble(dir); err == nil || !strings.Contains(err.Error(), "not a Meridian store (no format marker)") {
		if p != nil {
			_ = p.Close()
		}
		t.Errorf("a Pebble store with keys and no format marker: %v, want refused", err)
	}

	junk := t.TempDir()
	for _, name := range []string{"LOCK", "MANIFEST-000001", "notes.txt"} {
		if err := os.WriteFile(filepath.Join(junk, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if p, err := OpenPebble(junk); err == nil {
		_ = p.Close()
		t.Error("a directory with a lock, a manifest and a file of someone else's was taken for a store")
	}
	if _, err := os.Stat(filepath.Join(junk, "OPTIONS-000003")); err == nil {
		t.Error("Pebble created a store among someone else's files")
	}
}
