package durable

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/meridiandb/meridian/internal/node"
)

// A store whose flushes keep failing (the disk is full for every new table) reports itself
// failing, so that the runtime can stop the node: Pebble retries the flush without end, the
// memtables fill, commits wait behind them, and the node hung while looking alive.
func TestPebbleReportsFailingFlushes(t *testing.T) {
	var full atomic.Bool
	noSpace := errorfs.InjectorFunc(func(op errorfs.Op) error {
		if full.Load() && strings.HasSuffix(op.Path, ".sst") && (op.Kind == errorfs.OpCreate || op.Kind == errorfs.OpFileWrite) {
			return syscall.ENOSPC
		}
		return nil
	})
	p, err := openPebble(t.TempDir(), func(o *pebble.Options) {
		o.FS = errorfs.Wrap(vfs.Default, noSpace)
		o.MemTableSize = 256 << 10
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Failing(0); err != nil {
		t.Fatalf("a healthy store: %v", err)
	}
	full.Store(true)
	// Enough writes to need flushes; they stall once the memtables are full.
	var stop atomic.Bool
	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		val := make([]byte, 4<<10)
		for i := 0; !stop.Load(); i++ {
			if p.Apply([]node.Write{{Key: []byte(fmt.Sprintf("k%08d", i)), Value: val}}) != nil {
				return
			}
		}
	}()
	deadline := time.Now().Add(30 * time.Second)
	for p.Failing(100*time.Millisecond) == nil {
		if time.Now().After(deadline) {
			t.Fatal("flushes failing for 30 s, and the store not reported failing")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := p.Failing(100 * time.Millisecond); !strings.Contains(err.Error(), "no space left on device") {
		t.Errorf("failing store: %v, want the disk's error", err)
	}
	// Space again: the flushes succeed, the stalled writer goes on, and the store is healthy.
	full.Store(false)
	stop.Store(true)
	<-wrote
	for p.Failing(0) != nil {
		if time.Now().After(deadline) {
			t.Fatal("flushes succeed again, and the store still reported failing")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
}

// A spell of background errors is continuous: errors with long quiet between them (a failed
// compaction is retried after 30 s), or one after a long idle, never make a store failing,
// while errors every few seconds for longer than the limit do, until a success.
func TestBackgroundHealthSpells(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	disk := errors.New("no space left on device")
	failingAt := func(h *backgroundHealth, d time.Duration) bool {
		_, err := h.failing(10*time.Second, at(d))
		return err != nil
	}

	var idle backgroundHealth
	idle.failed(disk, at(0))
	idle.failed(disk, at(time.Hour))
	if failingAt(&idle, time.Hour) {
		t.Error("an error after an hour of quiet made the store failing")
	}

	var sparse backgroundHealth
	for d := time.Duration(0); d <= 5*time.Minute; d += 30 * time.Second {
		sparse.failed(disk, at(d))
		if failingAt(&sparse, d) {
			t.Fatalf("errors 30 s apart made the store failing at %v", d)
		}
	}

	var full backgroundHealth
	for d := time.Duration(0); d <= 12*time.Second; d += time.Second {
		full.failed(disk, at(d))
	}
	if !failingAt(&full, 12*time.Second) {
		t.Error("errors every second for 12 s did not make the store failing")
	}
	if failingAt(&full, 30*time.Second) {
		t.Error("still failing after 18 s without an error")
	}
	full.failed(disk, at(31*time.Second))
	full.succeeded()
	if failingAt(&full, 31*time.Second) {
		t.Error("failing after a success")
	}
}
