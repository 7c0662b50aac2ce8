package main

import (
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// stderr is the process's standard error for its log and its last error line. A node's standard
// error is often its log file in its data directory (cluster start puts it there); on a hung
// disk a write to it never returns, and a node that has stopped serving would then never exit,
// holding its data directory's lock and leaving a supervisor nothing to restart.
var stderr io.Writer = newGiveUpWriter(os.Stderr, 2*time.Second)

// giveUpWriter writes to w but gives up on a write that has not returned within wait: it
// reports the bytes written, and drops later writes until the stuck one returns. Lines may be
// lost that way, never the process.
type giveUpWriter struct {
	w    io.Writer
	wait time.Duration
	mu   sync.Mutex // one write at a time, in order
	// hung is the done channel of the write that has been under way for longer than wait, nil
	// when none is. Only that write's goroutine (or its Write) clears it: a goroutine of an
	// earlier write that finished in time, descheduled between its close and its clear, must not
	// clear a later write's hang and let a second write run beside the stuck one.
	hung atomic.Pointer[chan struct{}]
}

func newGiveUpWriter(w io.Writer, wait time.Duration) *giveUpWriter {
	return &giveUpWriter{w: w, wait: wait}
}

func (g *giveUpWriter) Write(p []byte) (int, error) {
	if g.hung.Load() != nil {
		return len(p), nil
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.hung.Load() != nil {
		return len(p), nil
	}
	// The write may outlive this call, and callers reuse their buffers (slog does).
	line := append([]byte(nil), p...)
	done := make(chan struct{})
	go func() {
		_, _ = g.w.Write(line)
		close(done)
		g.hung.CompareAndSwap(&done, nil)
	}()
	select {
	case <-done:
	case <-time.After(g.wait):
		g.hung.Store(&done)
		select {
		case <-done: // it returned just now, maybe before hung was set
			g.hung.CompareAndSwap(&done, nil)
		default:
		}
	}
	return len(p), nil
}
