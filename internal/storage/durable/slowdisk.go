package durable

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/meridiandb/meridian/internal/node"
)

// WithApplyDelay returns b with every Apply held back d before it reaches b: a slower disk, for
// crash reviews of real clusters ([disk] flush_delay). A local fsync takes a fraction of a
// millisecond, so a kill -9 almost never falls between a write acknowledged before it was
// durable and its flush; with the delay, a node killed meanwhile loses the batch, as a crash
// before the write reached the disk would. Reads are not delayed.
func WithApplyDelay(b Backend, d time.Duration) Backend {
	if d <= 0 {
		return b
	}
	return &slowDisk{Backend: b, delay: d, sleep: time.Sleep}
}

type slowDisk struct {
	Backend
	delay time.Duration
	sleep func(time.Duration) // time.Sleep; tests record the waits instead
}

func (s *slowDisk) Apply(batch []node.Write) error {
	s.sleep(s.delay)
	return s.Backend.Apply(batch)
}

// A disk whose syncs hang (no error, a sync that never returns, or returns minutes later) left
// a node's commits waiting for ever: its acknowledgements stopped, nothing was logged or
// counted, and it held its locks and leases while its peers and clients took it for alive. The
// Pebble store therefore runs on Pebble's disk-health-checking file system
// (vfs.WithDiskHealthChecks), which times every write, sync and file operation the store makes
// and, every two seconds, reports each one under way for longer than a threshold
// (EventListener.DiskSlow) while it lasts. As CockroachDB does with storage.max_sync_duration:
//   - an operation slower than the slow threshold is logged, once per episode, and counted;
//   - an operation still under way after MaxSyncDuration means the disk has stalled: the store
//     fails the commit waiting on it and every later one (Apply, Failing), so the node stops
//     (fail-stop) as when its store refuses a write, and other nodes and clients see it down
//     rather than hung. What it had acknowledged is in the synced log; what waited on the
//     stalled operation was never acknowledged.

// DefaultMaxSyncDuration is how long a disk operation may stay under way before the store
// takes its disk for stalled, as CockroachDB's storage.max_sync_duration.
const DefaultMaxSyncDuration = 20 * time.Second

const (
	// defaultSlowDisk is how long an operation may take before it is slow (Pebble's own
	// default for its disk-health checks).
	defaultSlowDisk = 5 * time.Second
	// slowEpisodeGap ends an episode of slow operations: Pebble reports an operation that
	// is slow every two seconds while it lasts, so reports further apart than this are
	// separate episodes.
	slowEpisodeGap = 10 * time.Second
)

// ErrDiskStalled is what a store whose disk has stalled fails its writes with.
var ErrDiskStalled = errors.New("disk stalled")

// diskHealth receives Pebble's reports of slow disk operations for one store. Its methods
// may be called from Pebble's monitoring goroutines, which must never block: report does no
// I/O itself and logs from a goroutine of its own (the node's log may be on the disk that
// stalled).
type diskHealth struct {
	dir     string
	maxSync time.Duration // 0: never stalled
	gap     time.Duration // slowEpisodeGap; tests shorten it
	log     func(level slog.Level, msg string, args ...any)

	mu       sync.Mutex
	last     time.Time // the latest report; zero: none yet
	episodes uint64
	err      error         // why the disk is taken for stalled; nil: it is not
	stalled  chan struct{} // closed once err is set
}

func newDiskHealth(dir string, maxSync time.Duration, log *slog.Logger) *diskHealth {
	return &diskHealth{dir: dir, maxSync: maxSync, gap: slowEpisodeGap, stalled: make(chan struct{}),
		log: func(level slog.Level, msg string, args ...any) {
			go log.Log(context.Background(), level, msg, args...)
		}}
}

// report notes, at now, Pebble's report that an operation has been under way for
// info.Duration: a new episode of slowness is logged and counted, and an operation under way
// for MaxSyncDuration or longer stalls the store.
func (h *diskHealth) report(info vfs.DiskSlowInfo, now time.Time) {
	h.mu.Lock()
	episode := h.last.IsZero() || now.Sub(h.last) > h.gap
	h.last = now
	if episode {
		h.episodes++
	}
	stall := h.err == nil && h.maxSync > 0 && info.Duration >= h.maxSync
	if stall {
		h.err = fmt.Errorf("durable: %s: %w: %s of %s under way for %v (max sync duration %v)",
			h.dir, ErrDiskStalled, info.OpType, info.Path, info.Duration.Round(time.Millisecond), h.maxSync)
		close(h.stalled)
	}
	err := h.err
	h.mu.Unlock()
	if episode {
		h.log(slog.LevelWarn, "disk slow", "op", info.OpType.String(), "path", info.Path,
			"for", info.Duration.Round(time.Millisecond))
	}
	if stall {
		h.log(slog.LevelError, "disk stalled; the store fails every write from now on", "err", err.Error())
	}
}

// stalledErr is why the disk is taken for stalled, or nil.
func (h *diskHealth) stalledErr() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.err
}

// slowEpisodes counts the episodes of slow operations so far.
func (h *diskHealth) slowEpisodes() uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.episodes
}
