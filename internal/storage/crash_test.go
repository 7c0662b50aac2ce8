package storage_test

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/meridiandb/meridian/internal/storage"
	"github.com/meridiandb/meridian/internal/storage/durable"
	"github.com/meridiandb/meridian/internal/storage/mvcc"
	"github.com/meridiandb/meridian/internal/storage/txnrec"
	"github.com/meridiandb/meridian/internal/ts"
)

const (
	crashDirEnv   = "MERIDIAN_CRASH_CHILD_DIR"
	crashStartEnv = "MERIDIAN_CRASH_CHILD_START"
	keysPerBatch  = 4
	maxInflight   = 32 // batches submitted but not acknowledged, so group commit has work to merge
)

func batchKey(n, i int) string { return fmt.Sprintf("b%07d/%d", n, i) }

// TestCrashChild is the child process of TestCrashKill9: it writes numbered batches (each: four
// committed versions and a transaction record) through the group committer and prints "ack N"
// once batch N is durable, until it is killed.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashDirEnv)
	if dir == "" {
		t.Skip("child process of TestCrashKill9")
	}
	start, err := strconv.Atoi(os.Getenv(crashStartEnv))
	if err != nil {
		t.Fatal(err)
	}
	p, err := durable.OpenPebble(dir)
	if err != nil {
		fmt.Printf("error %v\n", err)
		os.Exit(3)
	}
	c := durable.NewCommitter(p, 0)
	out := bufio.NewWriter(os.Stdout)
	var mu sync.Mutex
	slots := make(chan struct{}, maxInflight)
	store := mvcc.New(mvcc.Options{})
	recs := txnrec.New()
	fmt.Println("ready")
	for n := start; ; n++ {
		id := storage.MakeTxnID(1, uint64(n))
		for i := 0; i < keysPerBatch; i++ {
			if err := store.PutIntent(batchKey(n, i), mvcc.Version{TS: ts.New(int64(n)), Txn: id, Value: []byte(fmt.Sprintf("value-%d-%d", n, i))}); err != nil {
				panic(err)
			}
		}
		if _, err := store.CommitTxn(id, ts.New(int64(n))); err != nil {
			panic(err)
		}
		if err := recs.Decide(id, txnrec.Committed, ts.New(int64(n)), 0); err != nil {
			panic(err)
		}
		batch := append(store.TakeWrites(), recs.TakeWrites()...)
		slots <- struct{}{}
		c.Submit(batch, func(err error) {
			if err != nil {
				fmt.Printf("error %v\n", err)
				os.Exit(3)
			}
			mu.Lock()
			fmt.Fprintf(out, "ack %d\n", n)
			out.Flush()
			mu.Unlock()
			<-slots
		})
	}
}

// TestCrashKill9 kills a writing child process with SIGKILL at random points, many times, and
// checks after each restart that every acknowledged batch is present and that every batch is
// either entirely present or entirely absent.
func TestCrashKill9(t *testing.T) {
	if os.Getenv(crashDirEnv) != "" {
		t.Skip("in child")
	}
	iterations := 8
	if os.Getenv("MERIDIAN_LONG") == "1" {
		iterations = 100
	}
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(7, 7))
	acked := map[int]bool{}
	next := 0
	for it := 0; it < iterations; it++ {
		got := runAndKill(t, dir, next, time.Duration(5+rng.IntN(120))*time.Millisecond)
		for _, n := range got {
			acked[n] = true
		}
		present := verifyCrashState(t, dir, acked)
		t.Logf("iteration %d: %d acknowledged in this run, %d batches on disk", it, len(got), len(present))
		for n := range present {
			next = max(next, n+1)
		}
	}
	if len(acked) == 0 {
		t.Fatal("the child never acknowledged a batch: the test proved nothing")
	}
}

func runAndKill(t *testing.T, dir string, start int, after time.Duration) []int {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashDirEnv+"="+dir, crashStartEnv+"="+strconv.Itoa(start))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 1024)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var acks []int
	killed := false
	var timer <-chan time.Time
	deadline := time.After(30 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				if err := cmd.Wait(); !killed {
					t.Fatalf("child exited on its own: %v", err)
				}
				return acks
			}
			switch {
			case l == "ready":
				timer = time.After(after)
			case strings.HasPrefix(l, "ack "):
				n, err := strconv.Atoi(l[4:])
				if err != nil {
					t.Fatalf("bad child line %q", l)
				}
				acks = append(acks, n)
			case strings.HasPrefix(l, "error "):
				t.Fatalf("child: %s", l)
			}
		case <-timer:
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			killed, timer = true, nil
		case <-deadline:
			_ = cmd.Process.Kill()
			t.Fatal("child did not become ready")
		}
	}
}

// verifyCrashState recovers the store the killed child left and checks it against the acks.
func verifyCrashState(t *testing.T, dir string, acked map[int]bool) map[int]bool {
	t.Helper()
	p, err := durable.OpenPebble(dir)
	if err != nil {
		t.Fatalf("reopen after kill: %v", err)
	}
	defer p.Close()
	s, err := mvcc.Recover(p, mvcc.Options{})
	if err != nil {
		t.Fatalf("recover after kill: %v", err)
	}
	recs, err := txnrec.Recover(p)
	if err != nil {
		t.Fatalf("recover records after kill: %v", err)
	}
	present := map[int]int{}
	s.Ascend("", "", func(key string, vs []mvcc.Version) bool {
		var n, i int
		if _, err := fmt.Sscanf(key, "b%07d/%d", &n, &i); err != nil {
			t.Fatalf("unexpected key %q", key)
		}
		if len(vs) != 1 || vs[0].State != mvcc.Committed || string(vs[0].Value) != fmt.Sprintf("value-%d-%d", n, i) {
			t.Fatalf("key %q: versions %+v", key, vs)
		}
		present[n]++
		return true
	})
	out := map[int]bool{}
	for n, c := range present {
		r, ok := recs.Get(storage.MakeTxnID(1, uint64(n)))
		if c != keysPerBatch || !ok || r.Status != txnrec.Committed {
			t.Fatalf("batch %d half-written: %d of %d keys, record present=%v", n, c, keysPerBatch, ok)
		}
		out[n] = true
	}
	if recs.Len() != len(out) {
		t.Fatalf("%d records but %d complete batches", recs.Len(), len(out))
	}
	for n := range acked {
		if !out[n] {
			t.Fatalf("acknowledged batch %d lost", n)
		}
	}
	return out
}
