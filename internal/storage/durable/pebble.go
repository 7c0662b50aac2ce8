package durable

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/meridiandb/meridian/internal/node"
)

// Pebble is the on-disk backend for real servers: a Pebble LSM with every batch committed with
// Sync, so Apply returning means the batch is in the fsynced write-ahead log. Pebble checksums
// its WAL records and sstable blocks; a torn WAL tail (a batch being written at a crash) is
// dropped whole at open, which is what makes a batch all-or-nothing across kill -9.
//
// Apply and Scan may be called from different goroutines (Pebble is safe for concurrent use);
// Close must be called once, after every other call has returned.
//
// The store watches its disk (slowdisk.go): operations slower than PebbleOptions.SlowDisk are
// logged and counted, and one under way for MaxSyncDuration stalls the store, which then fails
// every write.
type Pebble struct {
	db     *pebble.DB
	dir    string
	closed atomic.Bool
	health backgroundHealth
	disk   *diskHealth
	// fsCloser stops the disk-health checks' monitoring.
	fsCloser io.Closer
	// commits are the commits Apply has under way: one that waits on a stalled disk outlives
	// the Apply that gave up on it.
	commits sync.WaitGroup
	// released is closed once Close has released the store (after a stall: once the stalled
	// operation and the commits behind it have ended, if ever).
	released chan struct{}
}

// PebbleOptions tune a Pebble store; the zero value is OpenPebble's.
type PebbleOptions struct {
	// MaxSyncDuration is how long a disk operation of the store (a write, a sync, a file
	// created, renamed or removed) may stay under way before the store takes its disk for
	// stalled and fails every write from then on, with ErrDiskStalled. Pebble checks every
	// two seconds, so a stall is found up to that much later. 0: DefaultMaxSyncDuration.
	MaxSyncDuration time.Duration
	// SlowDisk is how long an operation may take before it is logged (once per episode of
	// slowness) and counted (SlowDiskEpisodes). 0: 5s, or MaxSyncDuration if that is less.
	SlowDisk time.Duration
	// Logger receives the slow-disk and stall lines; nil: slog.Default().
	Logger *slog.Logger
	// FS is the file system the store is on; nil: the operating system's.
	FS vfs.FS
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
//
// A store whose disk has stalled reports that, whatever after is.
func (p *Pebble) Failing(after time.Duration) error {
	if err := p.disk.stalledErr(); err != nil {
		return err
	}
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
func OpenPebble(dir string) (*Pebble, error) { return OpenPebbleWith(dir, PebbleOptions{}) }

// OpenPebbleWith is OpenPebble with options.
func OpenPebbleWith(dir string, o PebbleOptions) (*Pebble, error) { return openStore(dir, o, nil) }

// openPebble is OpenPebble with options a test may change (a file system that fails).
func openPebble(dir string, tune func(*pebble.Options)) (*Pebble, error) {
	return openStore(dir, PebbleOptions{}, tune)
}

func openStore(dir string, o PebbleOptions, tune func(*pebble.Options)) (*Pebble, error) {
	// A missing directory is left for Pebble to create: it fsyncs every parent it creates, so
	// the directory's own entry survives a power loss. Created here first, only its immediate
	// parent was synced (Pebble found it existing), and a new cluster directory above it could
	// vanish with every commit acknowledged since the first start.
	fresh, err := isFresh(dir)
	if err != nil {
		return nil, fmt.Errorf("durable: open %s: %w", dir, err)
	}
	maxSync, slow, log := o.MaxSyncDuration, o.SlowDisk, o.Logger
	if maxSync <= 0 {
		maxSync = DefaultMaxSyncDuration
	}
	if slow <= 0 {
		slow = min(defaultSlowDisk, maxSync)
	}
	if log == nil {
		log = slog.Default()
	}
	opts := &pebble.Options{ErrorIfNotExists: !fresh, Logger: quietLogger{}, FS: o.FS}
	p := &Pebble{dir: dir, disk: newDiskHealth(dir, maxSync, log), released: make(chan struct{})}
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
		DiskSlow:        func(info pebble.DiskSlowInfo) { p.disk.report(info, time.Now()) },
	}
	if tune != nil {
		tune(opts)
	}
	// Pebble's disk-health checks time every write, sync and file operation on opts.FS and
	// report the slow ones to the listener, as Options.WithFSDefaults wires them.
	if opts.FS == nil {
		opts.FS = vfs.Default
	}
	listener := opts.EventListener
	opts.FS, p.fsCloser = vfs.WithDiskHealthChecks(opts.FS, slow, nil, func(info vfs.DiskSlowInfo) {
		if listener != nil && listener.DiskSlow != nil {
			listener.DiskSlow(info)
		}
	})
	db, err := pebble.Open(dir, opts)
	if err != nil {
		_ = p.fsCloser.Close()
		if lockHeld(err) {
			return nil, fmt.Errorf("durable: data directory %s is %w", dir, ErrInUse)
		}
		return nil, fmt.Errorf("durable: open %s: %w", dir, err)
	}
	p.db = db
	fail := func(format string, args ...any) (*Pebble, error) {
		_ = db.Close()
		_ = p.fsCloser.Close()
		return nil, fmt.Errorf("durable: open %s: "+format, append([]any{dir}, args...)...)
	}
	if !fresh {
		v, closer, err := db.Get(formatKey)
		switch {
		case errors.Is(err, pebble.ErrNotFound):
			// A store with nothing in it is one whose first start ended (a crash) between
			// Pebble's creating it and the marker's write: there is nothing to lose in taking
			// it. One with keys and no marker is not ours.
			if empty, err := isEmptyStore(db); err != nil {
				return fail("read store: %w", err)
			} else if !empty {
				return fail("not a Meridian store (no format marker)")
			}
		case err != nil:
			return fail("read format marker: %w", err)
		default:
			ok := string(v) == string(formatValue)
			got := string(v)
			_ = closer.Close()
			if !ok {
				return fail("unsupported store format %q (want %q)", got, formatValue)
			}
			return p, nil
		}
	}
	if err := db.Set(formatKey, formatValue, pebble.Sync); err != nil {
		return fail("write format marker: %w", err)
	}
	return p, nil
}

// isEmptyStore reports whether db holds no key at all.
func isEmptyStore(db *pebble.DB) (bool, error) {
	it, err := db.NewIter(nil)
	if err != nil {
		return false, err
	}
	found := it.First()
	if err := it.Close(); err != nil {
		return false, err
	}
	return !found, nil
}

// ErrInUse is why OpenPebble refuses a store that another process has open.
var ErrInUse = errors.New("in use by another process")

// lockHeld reports whether Pebble's Open failed because another process holds the store's LOCK
// file. Pebble takes it with fcntl(F_SETLK), which fails with EAGAIN (EWOULDBLOCK) and no more
// than that: reported as it came, the refusal read "resource temporarily unavailable".
func lockHeld(err error) bool {
	return errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EWOULDBLOCK)
}

// isFresh reports whether dir holds no store yet, for Pebble to create one in: it is missing
// or empty, or it holds only what Pebble writes while creating a store before the marker that
// makes its manifest current (the lock file and the manifest itself), which is what a first
// start killed meanwhile leaves. Taken for a store that does not exist (ErrorIfNotExists),
// such a directory refused every later start; Pebble creates the store again over it.
func isFresh(dir string) (bool, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	for _, e := range ents {
		if name := e.Name(); name != "LOCK" && !strings.HasPrefix(name, "MANIFEST-") {
			return false, nil
		}
	}
	return true, nil
}

// Dir returns the store's directory.
func (p *Pebble) Dir() string { return p.dir }

// Apply writes the batch atomically and syncs it.
func (p *Pebble) Apply(batch []node.Write) error {
	if err := ValidateBatch(batch); err != nil {
		return err
	}
	if err := p.disk.stalledErr(); err != nil {
		return err
	}
	b := p.db.NewBatch()
	for _, w := range batch {
		var err error
		if w.Delete {
			err = b.Delete(w.Key, nil)
		} else {
			err = b.Set(w.Key, w.Value, nil)
		}
		if err != nil {
			_ = b.Close()
			return fmt.Errorf("durable: build batch: %w", err)
		}
	}
	// The commit runs on a goroutine of its own so that Apply can give up on it once the disk
	// has stalled: with a sync that never returns, the commit waits for ever, and so did the
	// node's every acknowledgement. A commit given up on may still become durable if the disk
	// comes back; it was never acknowledged.
	done := make(chan error, 1)
	p.commits.Add(1)
	go func() {
		defer p.commits.Done()
		err := b.Commit(pebble.Sync)
		_ = b.Close()
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("durable: commit batch of %d writes: %w", len(batch), err)
		}
		return nil
	case <-p.disk.stalled:
		return p.disk.stalledErr()
	}
}

// SlowDiskEpisodes counts the episodes of slow disk operations the store has logged.
func (p *Pebble) SlowDiskEpisodes() uint64 { return p.disk.slowEpisodes() }

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

// Close closes the store. Closing twice is a no-op (Pebble itself panics on it). A store
// whose disk has stalled is left as a crash leaves it, and Close returns at once with the
// stall: closing waits on the stalled operation. It is released in the background should the
// disk come back.
func (p *Pebble) Close() error {
	if p.closed.Swap(true) {
		return nil
	}
	release := func() error {
		defer close(p.released)
		p.commits.Wait()
		err := p.db.Close()
		_ = p.fsCloser.Close()
		return err
	}
	if err := p.disk.stalledErr(); err != nil {
		go func() { _ = release() }()
		return fmt.Errorf("durable: close %s: left open: %w", filepath.Base(p.dir), err)
	}
	if err := release(); err != nil {
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
