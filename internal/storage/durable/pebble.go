package durable

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/meridiandb/meridian/internal/node"
)

// Pebble is the on-disk backend for real servers: a Pebble LSM with every batch committed with
// Sync, so Apply returning means the batch is in the fsynced write-ahead log. Pebble checksums
// its WAL records and sstable blocks; a torn WAL tail (a batch being written at a crash) is
// dropped whole at open, which is what makes a batch all-or-nothing across kill -9.
//
// Apply and Scan may be called from different goroutines (Pebble is safe for concurrent use);
// Close must be called once, after every other call has returned.
type Pebble struct {
	db     *pebble.DB
	dir    string
	closed atomic.Bool
	health backgroundHealth
}

// backgroundHealth follows Pebble's flushes, compactions and write stalls. Pebble retries a
// failed flush at once and without end: with the disk full, a node's memtables filled, every
// commit waited behind them, and the node spun its CPU answering nothing while it looked alive.
// A compaction may keep failing too (Pebble retries a failed L0 compaction at once) on a disk
// with room for flushes; such a store takes commits, and is healthy, until L0 grows to its
// limit and Pebble stops writes until a compaction succeeds, which then never happens.
type backgroundHealth struct {
	mu          sync.Mutex
	flushes     spell
	compactions spell
	// stalledSince is when the write stall under way began; zero: none.
	stalledSince time.Time
	// logged is when a background error was last logged.
	logged time.Time
}

// A spell is a run of failures of one kind of background work with no success between them
// and no quiet longer than spellGap, quiet being time with no attempt under way: one failure
// after an hour of quiet is not an hour of failing, nor is one among successes, but attempts
// that each take longer than spellGap to fail (a dying disk's I/O timeouts, a compaction that
// writes until the disk is full) are one spell.
type spell struct {
	since, failed time.Time // the spell's first and latest failures; since zero: none
	at            time.Time // the last time an attempt ended
	err           error
	underWay      int // attempts begun and not ended
}

const spellGap = 5 * time.Second

// begin notes an attempt beginning at now: after quiet longer than spellGap the spell under
// way, if any, is over.
func (s *spell) begin(now time.Time) {
	if s.underWay == 0 && !s.since.IsZero() && now.Sub(s.at) > spellGap {
		s.since, s.err = time.Time{}, nil
	}
	s.underWay++
}

// record notes the end, at now, of an attempt, failed (err) or not.
func (s *spell) record(err error, now time.Time) {
	if s.underWay == 0 { // an end whose beginning was not seen (Pebble pairs them): it began now
		s.begin(now)
	}
	s.underWay--
	s.at = now
	switch {
	case err == nil:
		s.since, s.err = time.Time{}, nil
	case s.since.IsZero():
		s.since, s.failed, s.err = now, now, err
	default:
		s.failed, s.err = now, err
	}
}

// abandon notes the end, at now, of an attempt given up on purpose: it neither fails nor
// succeeds.
func (s *spell) abandon(now time.Time) {
	if s.underWay == 0 { // as in record
		s.begin(now)
	}
	s.underWay--
	s.at = now
}

// lasted is how long the spell under way at now has gone on failing: from its first failure to
// its latest (0: none). An attempt still under way counts for nothing until it fails: after one
// transient failure, a slow attempt that then succeeds is no spell.
func (s *spell) lasted(now time.Time) time.Duration {
	if s.since.IsZero() || s.underWay == 0 && now.Sub(s.at) > spellGap {
		return 0
	}
	return s.failed.Sub(s.since)
}

// flushBegan, flushed, compactionBegan and compacted record the beginning and end of a flush
// or a compaction at now.
func (h *backgroundHealth) flushBegan(now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.flushes.begin(now)
}

func (h *backgroundHealth) flushed(err error, now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.flushes.record(err, now)
}

func (h *backgroundHealth) compactionBegan(now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.compactions.begin(now)
}

func (h *backgroundHealth) compacted(err error, now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if errors.Is(err, pebble.ErrCancelledCompaction) { // given up on purpose: neither way
		h.compactions.abandon(now)
		return
	}
	h.compactions.record(err, now)
}

// shouldLog reports whether to log a background error at now: one every ten seconds, as
// Pebble retries a failing flush or compaction many times a second.
func (h *backgroundHealth) shouldLog(now time.Time) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if now.Sub(h.logged) < 10*time.Second {
		return false
	}
	h.logged = now
	return true
}

// stall records the start (on) or end of a write stall at now.
func (h *backgroundHealth) stall(on bool, now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case !on:
		h.stalledSince = time.Time{}
	case h.stalledSince.IsZero():
		h.stalledSince = now
	}
}

// failing reports, at now, a spell of failed flushes that has lasted longer than after, or a
// write stall that has, through a spell of failed compactions as long (a stall that
// compactions are working off is load, not failure, whatever else fails meanwhile).
func (h *backgroundHealth) failing(after time.Duration, now time.Time) (string, time.Duration, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if d := h.flushes.lasted(now); d > 0 && d >= after {
		return "flushes failing", d, h.flushes.err
	}
	if !h.stalledSince.IsZero() && now.Sub(h.stalledSince) >= after {
		if d := h.compactions.lasted(now); d > 0 && d >= after {
			return "writes stalled, compactions failing,", now.Sub(h.stalledSince), h.compactions.err
		}
	}
	return "", 0, nil
}

// Failing reports an error when Pebble's flushes have been failing, in one spell of failures
// with no success, for longer than after, or its writes have been stalled that long through a
// spell of failed compactions: a store that cannot flush cannot take
// commits, and the runtime stops the node (fail-stop) rather than leave it hanging.
func (p *Pebble) Failing(after time.Duration) error {
	what, d, err := p.health.failing(after, time.Now())
	if err == nil {
		return nil
	}
	return fmt.Errorf("durable: %s: %s for %v: %w", p.dir, what, d.Round(time.Second), err)
}

// formatKey marks a directory as a Meridian store; its value names the layout version. The key
// starts with 0x00 so it sorts before, and never collides with, the engine's prefixes.
var (
	formatKey   = []byte("\x00meridian-format")
	formatValue = []byte("meridian-storage-v1")
)

// OpenPebble opens (creating if needed) the store in dir. It refuses a directory that holds
// something other than a Meridian store, and reports Pebble's corruption errors (bad manifest,
// bad WAL record in the middle of the log) instead of starting.
func OpenPebble(dir string) (*Pebble, error) { return openPebble(dir, nil) }

// openPebble is OpenPebble with options a test may change (a file system that fails).
func openPebble(dir string, tune func(*pebble.Options)) (*Pebble, error) {
	// A missing directory is left for Pebble to create: it fsyncs every parent it creates, so
	// the directory's own entry survives a power loss. Created here first, only its immediate
	// parent was synced (Pebble found it existing), and a new cluster directory above it could
	// vanish with every commit acknowledged since the first start.
	fresh, err := isEmptyDir(dir)
	if err != nil {
		return nil, fmt.Errorf("durable: open %s: %w", dir, err)
	}
	opts := &pebble.Options{ErrorIfNotExists: !fresh, Logger: quietLogger{}}
	p := &Pebble{dir: dir}
	opts.EventListener = &pebble.EventListener{
		// Pebble's default reaction to a bad block checksum is Logger.Fatalf (exit). The read
		// still returns an error, which Recover reports, so log and let the caller refuse to
		// start with a clear message.
		DataCorruption: func(info pebble.DataCorruptionInfo) {
			slog.Error("pebble: on-disk corruption", "path", info.Path, "err", info.Details)
		},
		BackgroundError: func(err error) {
			if p.health.shouldLog(time.Now()) {
				slog.Error("pebble: background error", "dir", dir, "err", err.Error())
			}
		},
		FlushEnd: func(info pebble.FlushInfo) {
			err := info.Err
			if err != nil && err.Error() == "pebble: empty table" { // a flush that had nothing to write
				err = nil
			}
			p.health.flushed(err, time.Now())
		},
		FlushBegin:      func(pebble.FlushInfo) { p.health.flushBegan(time.Now()) },
		CompactionBegin: func(pebble.CompactionInfo) { p.health.compactionBegan(time.Now()) },
		CompactionEnd: func(info pebble.CompactionInfo) {
			p.health.compacted(info.Err, time.Now())
		},
		WriteStallBegin: func(pebble.WriteStallBeginInfo) { p.health.stall(true, time.Now()) },
		WriteStallEnd:   func() { p.health.stall(false, time.Now()) },
	}
	if tune != nil {
		tune(opts)
	}
	db, err := pebble.Open(dir, opts)
	if err != nil {
		if lockHeld(err) {
			return nil, fmt.Errorf("durable: data directory %s is %w", dir, ErrInUse)
		}
		return nil, fmt.Errorf("durable: open %s: %w", dir, err)
	}
	p.db = db
	if fresh {
		if err := db.Set(formatKey, formatValue, pebble.Sync); err != nil {
			_ = db.Close()
			return nil, fmt.Errorf("durable: open %s: write format marker: %w", dir, err)
		}
		return p, nil
	}
	v, closer, err := db.Get(formatKey)
	if err != nil {
		_ = db.Close()
		if errors.Is(err, pebble.ErrNotFound) {
			return nil, fmt.Errorf("durable: open %s: not a Meridian store (no format marker)", dir)
		}
		return nil, fmt.Errorf("durable: open %s: read format marker: %w", dir, err)
	}
	ok := string(v) == string(formatValue)
	got := string(v)
	_ = closer.Close()
	if !ok {
		_ = db.Close()
		return nil, fmt.Errorf("durable: open %s: unsupported store format %q (want %q)", dir, got, formatValue)
	}
	return p, nil
}

// ErrInUse is why OpenPebble refuses a store that another process has open.
var ErrInUse = errors.New("in use by another process")

// lockHeld reports whether Pebble's Open failed because another process holds the store's LOCK
// file. Pebble takes it with fcntl(F_SETLK), which fails with EAGAIN (EWOULDBLOCK) and no more
// than that: reported as it came, the refusal read "resource temporarily unavailable".
func lockHeld(err error) bool {
	return errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EWOULDBLOCK)
}

func isEmptyDir(dir string) (bool, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	return len(ents) == 0, nil
}

// Dir returns the store's directory.
func (p *Pebble) Dir() string { return p.dir }

// Apply writes the batch atomically and syncs it.
func (p *Pebble) Apply(batch []node.Write) error {
	if err := ValidateBatch(batch); err != nil {
		return err
	}
	b := p.db.NewBatch()
	defer b.Close()
	for _, w := range batch {
		var err error
		if w.Delete {
			err = b.Delete(w.Key, nil)
		} else {
			err = b.Set(w.Key, w.Value, nil)
		}
		if err != nil {
			return fmt.Errorf("durable: build batch: %w", err)
		}
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("durable: commit batch of %d writes: %w", len(batch), err)
	}
	return nil
}

// Scan implements node.Durable. Errors from reading (including sstable checksum failures) are
// returned, never swallowed.
func (p *Pebble) Scan(start, end []byte, fn func(k, v []byte) bool) error {
	if len(start) == 0 {
		// Skip the format marker: it is not part of any node's state.
		start = []byte{0x01}
	}
	it, err := p.db.NewIter(&pebble.IterOptions{LowerBound: start, UpperBound: end})
	if err != nil {
		return fmt.Errorf("durable: scan: %w", err)
	}
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			_ = it.Close()
			return fmt.Errorf("durable: scan at %q: %w", it.Key(), err)
		}
		if !fn(it.Key(), v) {
			break
		}
	}
	if err := it.Error(); err != nil {
		_ = it.Close()
		return fmt.Errorf("durable: scan: %w", err)
	}
	if err := it.Close(); err != nil {
		return fmt.Errorf("durable: scan: %w", err)
	}
	return nil
}

// Flush forces the memtable into sstables (tests use it to exercise the sstable read path).
func (p *Pebble) Flush() error { return p.db.Flush() }

// Close closes the store. Closing twice is a no-op (Pebble itself panics on it).
func (p *Pebble) Close() error {
	if p.closed.Swap(true) {
		return nil
	}
	if err := p.db.Close(); err != nil {
		return fmt.Errorf("durable: close %s: %w", filepath.Base(p.dir), err)
	}
	return nil
}

// quietLogger keeps Pebble's informational chatter out of test and server output; errors go to
// slog, and fatal errors still stop the process, as Pebble requires.
type quietLogger struct{}

func (quietLogger) Infof(string, ...interface{}) {}
func (quietLogger) Errorf(format string, args ...interface{}) {
	slog.Error("pebble: " + fmt.Sprintf(format, args...))
}
func (quietLogger) Fatalf(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "pebble: fatal: "+format+"\n", args...)
	os.Exit(2)
}
