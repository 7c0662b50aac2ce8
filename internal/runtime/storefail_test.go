package runtime

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meridiandb/meridian/internal/node"
	"github.com/meridiandb/meridian/internal/storage/durable"
)

// fullDisk is a store whose writes, once the disk is full, wait for ever, as Pebble's commits
// do behind memtables it cannot flush, and which then reports itself failing.
type fullDisk struct {
	*durable.Mem
	full    atomic.Bool
	stalled chan struct{}
}

func (d *fullDisk) Apply(batch []node.Write) error {
	if d.full.Load() {
		<-d.stalled
		return errors.New("stalled write released")
	}
	return d.Mem.Apply(batch)
}

func (d *fullDisk) Failing(time.Duration) error {
	if d.full.Load() {
		return errors.New("background writes failing: no space left on device")
	}
	return nil
}

// startAndFillDisk starts a node on a fullDisk logging to log (nil: the default), fills the
// disk and makes a persist that stalls in it, as a commit's did; the store then reports itself
// failing at the watcher's first look (storeFailAfter 0 for the test).
func startAndFillDisk(t *testing.T, log *slog.Logger) *Server {
	t.Helper()
	old := storeFailAfter
	storeFailAfter = 0
	t.Cleanup(func() { storeFailAfter = old })
	cfg := testConfig(t, nil)
	disk := &fullDisk{Mem: durable.NewMem(), stalled: make(chan struct{})}
	t.Cleanup(func() { close(disk.stalled) })
	s, err := Start(cfg, cfg.Topology.DataNodes(0)[0], Options{store: disk, NoGRPC: true, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	disk.full.Store(true)
	s.committer.Submit([]node.Write{{Key: []byte("k"), Value: []byte("v")}}, func(error) {})
	return s
}

// A node whose store keeps failing stops (fail-stop), and Close does not wait on the writes
// stalled in it: with the disk full, a node answered nothing while it looked alive, Pebble
// retrying its flushes without end.
func TestNodeStopsWhenItsStoreFails(t *testing.T) {
	s := startAndFillDisk(t, nil)
	select {
	case <-s.Done():
	case <-time.After(30 * time.Second):
		s.Close()
		t.Fatal("the store failing for 30 s did not stop the node")
	}
	if err := s.Err(); err == nil || !strings.Contains(err.Error(), "store: background writes failing") {
		t.Errorf("the node stopped with %v, want the store's failure", err)
	}
	closed := make(chan struct{})
	go func() { s.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(30 * time.Second):
		t.Fatal("Close waited on the failed store")
	}
}

// blockingHandler is a log handler whose writes of errors never return, as a log file on a
// hung disk (the node's other lines are let through: a hang is tested where it stops a node).
type blockingHandler struct{ slog.Handler }

func (h blockingHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= slog.LevelError {
		select {}
	}
	return h.Handler.Handle(ctx, r)
}
func (h blockingHandler) WithAttrs(a []slog.Attr) slog.Handler {
	return blockingHandler{h.Handler.WithAttrs(a)}
}
func (h blockingHandler) WithGroup(name string) slog.Handler {
	return blockingHandler{h.Handler.WithGroup(name)}
}

// A node whose store fails stops even when its log cannot be written: the log may be a file on
// the disk that failed, and the line saying why the node stops would otherwise keep it running.
func TestNodeStopsWhenItsLogHangs(t *testing.T) {
	defer func(d time.Duration) { failLogWait = d }(failLogWait)
	failLogWait = 50 * time.Millisecond
	s := startAndFillDisk(t, slog.New(blockingHandler{slog.NewTextHandler(io.Discard, nil)}))
	select {
	case <-s.Done():
		s.Close()
	case <-time.After(10 * time.Second):
		// Not closed: Close would wait on the goroutine stuck writing the log.
		t.Fatal("a node whose log hangs did not stop when its store failed")
	}
}
