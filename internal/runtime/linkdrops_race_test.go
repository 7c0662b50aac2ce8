package runtime

import (
	"io"
	"log/slog"
	"testing"
)

// A link's drop counter is touched by its writer goroutine (dial failures, an unreachable
// peer) and by every goroutine that enqueues to it (the event loop, and connection readers
// relaying replies) when its queue is full. Run with -race.
func TestLinkDropsFromSeveralGoroutines(t *testing.T) {
	s := &Server{log: slog.New(slog.NewTextHandler(io.Discard, nil)), stop: make(chan struct{})}
	defer close(s.stop)
	l := s.newLink(1, "127.0.0.1:1", 0, nil) // nothing listens: every frame is dropped
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 2 * linkQueueLen {
			l.enqueue(1, []byte{0})
		}
	}()
	for range 2 * linkQueueLen {
		l.enqueue(1, []byte{0})
	}
	<-done
	if s.dropped.Load() == 0 {
		t.Fatal("nothing was dropped")
	}
}
