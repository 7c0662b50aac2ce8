package durable

import (
	"errors"
	"fmt"
	"strings"
	"sync"
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
	stop := keepWriting(p, 0)
	if err := waitFailing(t, p, 100*time.Millisecond, 30*time.Second); !strings.Contains(err.Error(), "flushes failing") ||
		!strings.Contains(err.Error(), "no space left on device") {
		t.Errorf("failing store: %v, want it to say its flushes fail for the disk's error", err)
	}
	// Space again: the flushes succeed, the stalled writer goes on, and the store is healthy.
	full.Store(false)
	stop()
	deadline := time.Now().Add(30 * time.Second)
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

// A spell of failed flushes is continuous: failures with long quiet between them, or one after
// a long idle, never make a store failing, while failures every few seconds for longer than
// the limit do, until a flush succeeds.
func TestBackgroundHealthSpells(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	disk := errors.New("no space left on device")
	failingAt := func(h *backgroundHealth, d time.Duration) bool {
		_, _, err := h.failing(10*time.Second, at(d))
		return err != nil
	}

	var idle backgroundHealth
	idle.flushed(disk, at(0))
	idle.flushed(disk, at(time.Hour))
	if failingAt(&idle, time.Hour) {
		t.Error("an error after an hour of quiet made the store failing")
	}

	var sparse backgroundHealth
	for d := time.Duration(0); d <= 5*time.Minute; d += 30 * time.Second {
		sparse.flushed(disk, at(d))
		if failingAt(&sparse, d) {
			t.Fatalf("errors 30 s apart made the store failing at %v", d)
		}
	}

	var full backgroundHealth
	for d := time.Duration(0); d <= 12*time.Second; d += time.Second {
		full.flushed(disk, at(d))
	}
	if !failingAt(&full, 12*time.Second) {
		t.Error("errors every second for 12 s did not make the store failing")
	}
	if failingAt(&full, 30*time.Second) {
		t.Error("still failing after 18 s without an error")
	}
	full.flushed(disk, at(31*time.Second))
	full.flushed(nil, at(31*time.Second))
	if failingAt(&full, 31*time.Second) {
		t.Error("failing after a success")
	}

	// Attempts that each take 6 s to fail, one after another, are one spell: the time between
	// failures is spent failing, not quiet (review: a dying disk's I/O timeouts, or a
	// compaction writing until the disk is full, restarted the spell at every failure).
	var slow backgroundHealth
	for d := time.Duration(0); d < 18*time.Second; d += 6 * time.Second {
		slow.flushBegan(at(d))
		slow.flushed(disk, at(d+6*time.Second))
		if got, want := failingAt(&slow, d+6*time.Second), d >= 12*time.Second; got != want {
			t.Fatalf("flushes failing 6 s each, at %v: failing %v, want %v", d+6*time.Second, got, want)
		}
	}
	// After one transient failure, a slow attempt that then succeeds is no spell, however long
	// it is under way.
	var transient backgroundHealth
	transient.flushed(disk, at(0))
	transient.flushBegan(at(0))
	if failingAt(&transient, time.Minute) {
		t.Error("one failure and a slow attempt under way made the store failing")
	}

	// Writes stalled while compactions keep failing: no flush runs, and the stall is the sign.
	var stalled backgroundHealth
	stalled.stall(true, at(0))
	for d := time.Duration(0); d <= 12*time.Second; d += time.Second {
		stalled.compacted(disk, at(d))
	}
	if !failingAt(&stalled, 12*time.Second) {
		t.Error("writes stalled for 12 s with compactions failing, and not failing")
	}
	stalled.stall(false, at(12*time.Second))
	if failingAt(&stalled, 12*time.Second) {
		t.Error("failing after the stall ended")
	}
	// A long stall that compactions are working off is load, even with a failure among them
	// (review: one transient error during a stall under load stopped the node).
	var busy backgroundHealth
	busy.stall(true, at(0))
	for d := time.Duration(0); d <= 12*time.Second; d += time.Second {
		err := error(nil)
		if d == 9*time.Second {
			err = disk
		}
		busy.compacted(err, at(d))
	}
	if failingAt(&busy, 12*time.Second) {
		t.Error("a stall with one failed compaction among succeeding ones made the store failing")
	}

	// A cancelled compaction neither fails nor succeeds: it ends no spell, and after quiet it
	// revives none.
	cancelled := fmt.Errorf("job 7: %w", pebble.ErrCancelledCompaction)
	var mixed backgroundHealth
	mixed.stall(true, at(0))
	for d := time.Duration(0); d <= 12*time.Second; d += time.Second {
		mixed.compactionBegan(at(d))
		if d == 6*time.Second {
			mixed.compacted(cancelled, at(d))
		} else {
			mixed.compacted(disk, at(d))
		}
	}
	if !failingAt(&mixed, 12*time.Second) {
		t.Error("a cancelled compaction among failing ones ended the spell")
	}
	var revived backgroundHealth
	revived.stall(true, at(0))
	revived.compacted(disk, at(0))
	revived.compacted(cancelled, at(time.Minute))
	revived.compacted(disk, at(time.Minute+time.Second))
	if failingAt(&revived, time.Minute+time.Second) {
		t.Error("a cancelled compaction after a minute of quiet revived the spell before it")
	}
}

// A store whose compactions keep failing while its flushes succeed (a nearly full disk with
// room for a flush but not for a compaction's output) still takes commits, and is not failing:
// Pebble retries a failed L0 compaction at once, and counting every background error stopped
// such a node after 10 s with all its commits succeeding (review).
func TestPebbleCompactionFailuresAloneAreNotFailing(t *testing.T) {
	var flushing, compactionsFail atomic.Bool
	noRoomToCompact := errorfs.InjectorFunc(func(op errorfs.Op) error {
		if compactionsFail.Load() && !flushing.Load() && strings.HasSuffix(op.Path, ".sst") && op.Kind == errorfs.OpCreate {
			return syscall.ENOSPC
		}
		return nil
	})
	var p *Pebble
	p, err := openPebble(t.TempDir(), func(o *pebble.Options) {
		o.FS = errorfs.Wrap(vfs.Default, noRoomToCompact)
		o.MemTableSize = 256 << 10
		o.L0CompactionThreshold = 2
		flushBegin := o.EventListener.FlushBegin
		o.EventListener.FlushBegin = func(info pebble.FlushInfo) { flushing.Store(true); flushBegin(info) }
		flushEnd := o.EventListener.FlushEnd
		o.EventListener.FlushEnd = func(info pebble.FlushInfo) { flushing.Store(false); flushEnd(info) }
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	compactionsFail.Store(true)
	val := make([]byte, 4<<10)
	for i := range 2000 { // about 8 MiB: many flushes, and L0 past its compaction threshold
		if err := p.Apply([]node.Write{{Key: []byte(fmt.Sprintf("k%08d", i%300)), Value: val}}); err != nil {
			t.Fatalf("commit %d: %v", i, err)
		}
	}
	if err := p.Failing(0); err != nil {
		t.Errorf("flushes succeed and only compactions fail, yet: %v", err)
	}
}

// A store whose compactions all fail while its flushes succeed stalls once L0 reaches its
// limit: Pebble then holds every write until a compaction succeeds, no flush runs, and only the
// stall, with the errors still coming, tells that the store is failing (review: watching
// flushes alone left such a node hung and healthy by its own account).
func TestPebbleStalledByFailingCompactionsIsFailing(t *testing.T) {
	var compacting sync.Map // paths of tables compactions are writing
	var fail atomic.Bool
	injector := errorfs.InjectorFunc(func(op errorfs.Op) error {
		if _, ok := compacting.Load(op.Path); ok && fail.Load() && (op.Kind == errorfs.OpFileWrite || op.Kind == errorfs.OpFileSync) {
			return syscall.ENOSPC
		}
		return nil
	})
	p, err := openPebble(t.TempDir(), func(o *pebble.Options) {
		o.FS = errorfs.Wrap(vfs.Default, injector)
		o.MemTableSize = 256 << 10
		o.EventListener.TableCreated = func(info pebble.TableCreateInfo) {
			if info.Reason == "compacting" {
				compacting.Store(info.Path, true)
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	fail.Store(true)
	stop := keepWriting(p, 300) // overlapping keys: each flush adds an L0 sublevel
	if err := waitFailing(t, p, 500*time.Millisecond, 60*time.Second); !strings.Contains(err.Error(), "writes stalled") {
		t.Errorf("failing store: %v, want it to say its writes are stalled", err)
	}
	// Room again: compactions succeed, the stall ends, the writer goes on.
	fail.Store(false)
	stop()
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
}

// keepWriting applies 4 KiB writes to p, to keys cycling through distinct (0: never repeating),
// until the returned stop is called; stop waits for the writer, which a stalled store holds
// until it can write again.
func keepWriting(p *Pebble, distinct int) (stop func()) {
	var stopping atomic.Bool
	done := make(chan struct{})
	go func() {
		defer close(done)
		val := make([]byte, 4<<10)
		for i := 0; !stopping.Load(); i++ {
			k := i
			if distinct > 0 {
				k = i % distinct
			}
			if p.Apply([]node.Write{{Key: []byte(fmt.Sprintf("k%08d", k)), Value: val}}) != nil {
				return
			}
		}
	}()
	return func() { stopping.Store(true); <-done }
}

// waitFailing waits up to within for p to report itself failing for after, and returns what
// it reported.
func waitFailing(t *testing.T, p *Pebble, after, within time.Duration) error {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		if err := p.Failing(after); err != nil {
			return err
		}
		if time.Now().After(deadline) {
			t.Fatalf("the store not reported failing within %v", within)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
