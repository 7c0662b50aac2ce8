package durable

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	_ "unsafe" // go:linkname

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/meridiandb/meridian/internal/node"
)

// TestApplyDelay: each Apply waits the delay before the batch reaches the backend, and then
// lands whole; no delay leaves the backend as it is.
func TestApplyDelay(t *testing.T) {
	m := NewMem()
	if b := WithApplyDelay(m, 0); b != Backend(m) {
		t.Fatal("a zero delay wrapped the backend")
	}
	b := WithApplyDelay(m, 10*time.Millisecond).(*slowDisk)
	var waits []time.Duration
	b.sleep = func(d time.Duration) {
		waits = append(waits, d)
		if m.Len() != 0 {
			t.Error("the batch reached the backend before the delay ended")
		}
	}
	if err := b.Apply([]node.Write{{Key: []byte("k"), Value: []byte("v")}}); err != nil {
		t.Fatal(err)
	}
	if len(waits) != 1 || waits[0] != 10*time.Millisecond {
		t.Fatalf("waits %v, want one of 10ms", waits)
	}
	var got string
	if err := m.Scan(nil, nil, func(k, v []byte) bool { got = string(k) + "=" + string(v); return true }); err != nil || got != "k=v" {
		t.Fatalf("after Apply the backend holds %q (%v), want k=v", got, err)
	}
}

// diskHealthTick is how often Pebble's disk-health checks look for slow operations (2 s):
// tests that make a disk operation hang shorten it, with short thresholds, so that a stall is
// found within milliseconds. Reached by its symbol: Pebble exports no way to set it.
//
//go:linkname diskHealthTick github.com/cockroachdb/pebble/v2/vfs.defaultTickInterval
var diskHealthTick time.Duration

// shortDiskHealthTick sets Pebble's disk-health tick to d for the rest of the test. It must
// be called before the store is opened (each file reads the tick when it is created).
func shortDiskHealthTick(t *testing.T, d time.Duration) {
	old := diskHealthTick
	diskHealthTick = d
	t.Cleanup(func() { diskHealthTick = old })
}

// hangingSyncs is a file system whose syncs of the write-ahead log, once hang is set, do not
// return until release is closed: a disk whose fsync hangs without an error.
type hangingSyncs struct {
	hang    atomic.Bool
	entered chan struct{} // closed when the first sync hangs
	once    sync.Once
	release chan struct{}
}

func newHangingSyncs() *hangingSyncs {
	return &hangingSyncs{entered: make(chan struct{}), release: make(chan struct{})}
}

func (h *hangingSyncs) fs() vfs.FS {
	return errorfs.Wrap(vfs.Default, errorfs.InjectorFunc(func(op errorfs.Op) error {
		switch op.Kind {
		case errorfs.OpFileSync, errorfs.OpFileSyncData, errorfs.OpFileSyncTo:
			if h.hang.Load() && strings.HasSuffix(op.Path, ".log") {
				h.once.Do(func() { close(h.entered) })
				<-h.release
			}
		}
		return nil
	}))
}

// logLines is a slog handler that keeps the lines logged, for tests to read.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) Enabled(context.Context, slog.Level) bool { return true }
func (l *logLines) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logLines) WithGroup(string) slog.Handler            { return l }
func (l *logLines) Handle(_ context.Context, r slog.Record) error {
	line := r.Level.String() + " " + r.Message
	r.Attrs(func(a slog.Attr) bool { line += " " + a.String(); return true })
	l.mu.Lock()
	l.lines = append(l.lines, line)
	l.mu.Unlock()
	return nil
}

// count counts the lines that contain s.
func (l *logLines) count(s string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, line := range l.lines {
		if strings.Contains(line, s) {
			n++
		}
	}
	return n
}

// A sync of the write-ahead log that hangs (no error: it never returns) made the commit
// waiting on it, and every acknowledgement after it, wait for ever, with nothing logged or
// counted. Now the slow sync is logged once and counted, and once it has been under way for
// the max sync duration the commit fails with ErrDiskStalled, as does every later one, so the
// node stops (fail-stop). What was acknowledged before is still there after a restart.
func TestPebbleFailsCommitsOnAHungSync(t *testing.T) {
	shortDiskHealthTick(t, 5*time.Millisecond)
	dir := t.TempDir()
	disk := newHangingSyncs()
	released := false
	release := func() {
		if !released {
			released = true
			close(disk.release)
		}
	}
	defer release()
	var log logLines
	p, err := OpenPebbleWith(dir, PebbleOptions{FS: disk.fs(), SlowDisk: 20 * time.Millisecond,
		MaxSyncDuration: 200 * time.Millisecond, Logger: slog.New(&log)})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Apply([]node.Write{{Key: []byte("acked"), Value: []byte("1")}}); err != nil {
		t.Fatal(err)
	}

	disk.hang.Store(true)
	c := NewCommitter(p, 0)
	errs := make(chan error, 2)
	c.Submit([]node.Write{{Key: []byte("waiting"), Value: []byte("2")}}, func(err error) { errs <- err })
	select {
	case <-disk.entered:
	case <-time.After(5 * time.Second):
		t.Fatal("the commit never synced the log")
	}
	var err1 error
	select {
	case err1 = <-errs:
	case <-time.After(5 * time.Second):
		t.Fatal("a commit waiting on a hung sync was still waiting after 5 s: the hung disk goes unnoticed")
	}
	if !errors.Is(err1, ErrDiskStalled) || !strings.Contains(err1.Error(), ".log under way for") {
		t.Fatalf("the commit on a hung sync failed with %v, want the stall of the log's sync", err1)
	}
	t.Logf("commit failed: %v", err1)
	c.Submit([]node.Write{{Key: []byte("later"), Value: []byte("3")}}, func(err error) { errs <- err })
	if err := <-errs; !errors.Is(err, ErrDiskStalled) {
		t.Errorf("a commit after the stall: %v, want ErrDiskStalled", err)
	}
	c.Close()
	if err := p.Failing(time.Hour); !errors.Is(err, ErrDiskStalled) {
		t.Errorf("Failing: %v, want the stall", err)
	}
	if err := p.Apply([]node.Write{{Key: []byte("direct"), Value: []byte("4")}}); !errors.Is(err, ErrDiskStalled) {
		t.Errorf("Apply after the stall: %v, want ErrDiskStalled", err)
	}

	// One episode, logged once however many times Pebble reported the hung sync (every 5 ms
	// here), and counted.
	deadline := time.Now().Add(5 * time.Second)
	for log.count("disk stalled") == 0 || log.count("disk slow") == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the slow sync and the stall were not logged: %q", log.lines)
		}
		time.Sleep(time.Millisecond)
	}
	if n := log.count("disk slow"); n != 1 || log.count("op=sync") == 0 {
		t.Errorf("%d lines of a slow disk, want one naming the sync: %q", n, log.lines)
	}
	if n := log.count("disk stalled"); n != 1 {
		t.Errorf("%d lines of the stall, want one: %q", n, log.lines)
	}
	if n := p.SlowDiskEpisodes(); n != 1 {
		t.Errorf("SlowDiskEpisodes %d, want 1", n)
	}

	// Close does not wait on the hung sync: the store is left as a crash leaves it.
	closed := make(chan error, 1)
	go func() { closed <- p.Close() }()
	select {
	case err := <-closed:
		if !errors.Is(err, ErrDiskStalled) {
			t.Errorf("Close of a stalled store: %v, want it to say it was left open for the stall", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close waited on the hung sync")
	}
	// The disk comes back: the store is released, and what was acknowledged is there.
	release()
	select {
	case <-p.released:
	case <-time.After(5 * time.Second):
		t.Fatal("the store was not released once the sync returned")
	}
	q, err := OpenPebble(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	got := map[string]string{}
	if err := q.Scan(nil, nil, func(k, v []byte) bool { got[string(k)] = string(v); return true }); err != nil {
		t.Fatal(err)
	}
	if got["acked"] != "1" || got["later"] != "" || got["direct"] != "" {
		t.Errorf("after the restart the store holds %v, want acked=1 and nothing written after the stall", got)
	}
}

// Pebble reports an operation every tick while it is slow: reports no further apart than the
// episode gap are one episode, logged once and counted once; one under way for the max sync
// duration stalls the store, once.
func TestDiskHealthEpisodes(t *testing.T) {
	var lines []string
	h := newDiskHealth("/data/sh-1", 20*time.Second, nil)
	h.log = func(level slog.Level, msg string, args ...any) {
		lines = append(lines, fmt.Sprint(append([]any{level.String(), msg}, args...)...))
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	sync := func(at, d time.Duration) {
		h.report(vfs.DiskSlowInfo{Path: "/data/sh-1/000004.log", OpType: vfs.OpTypeSyncData, Duration: d}, t0.Add(at))
	}
	for at := time.Duration(0); at <= 10*time.Second; at += 2 * time.Second {
		sync(at, 5*time.Second+at)
	}
	if h.slowEpisodes() != 1 || len(lines) != 1 || !strings.Contains(lines[0], "syncdata") || !strings.Contains(lines[0], "000004.log") {
		t.Fatalf("a sync slow for 10 s: %d episodes, lines %q; want one, naming the op and the file", h.slowEpisodes(), lines)
	}
	if h.stalledErr() != nil {
		t.Fatal("stalled before the max sync duration")
	}
	sync(60*time.Second, 5*time.Second) // after a minute without reports: a new episode
	if h.slowEpisodes() != 2 || len(lines) != 2 {
		t.Fatalf("a second slow sync a minute later: %d episodes, %d lines; want 2", h.slowEpisodes(), len(lines))
	}
	sync(62*time.Second, 19999*time.Millisecond)
	select {
	case <-h.stalled:
		t.Fatal("stalled before the max sync duration")
	default:
	}
	sync(64*time.Second, 20*time.Second)
	sync(66*time.Second, 22*time.Second)
	<-h.stalled
	err := h.stalledErr()
	want := "durable: /data/sh-1: disk stalled: syncdata of /data/sh-1/000004.log under way for 20s (max sync duration 20s)"
	if !errors.Is(err, ErrDiskStalled) || err.Error() != want {
		t.Errorf("stall: %v\nwant: %s", err, want)
	}
	if len(lines) != 3 || !strings.HasPrefix(lines[2], "ERROR") {
		t.Errorf("lines %q, want the stall logged once", lines)
	}

	never := newDiskHealth("/d", 0, nil)
	never.log = func(slog.Level, string, ...any) {}
	never.report(vfs.DiskSlowInfo{OpType: vfs.OpTypeSync, Duration: time.Hour}, t0)
	if never.stalledErr() != nil {
		t.Error("a store without a max sync duration stalled")
	}
}
