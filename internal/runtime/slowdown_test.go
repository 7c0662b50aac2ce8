package runtime

import (
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/meridiandb/meridian/internal/runtime/frame"
)

// A slowdown delays a node's frames to the slowed region by its extra delay, and only those; it
// ends when set to none. Bad slowdowns are refused and change nothing.
func TestSlowdownDelaysFramesToItsRegion(t *testing.T) {
	cfg := testConfig(t, nil)
	s := &Server{cfg: cfg, id: 0, me: cfg.Nodes[0], log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	other := cfg.Topology.Regions[cfg.Nodes[1].Region].Name
	own := cfg.Topology.Regions[cfg.Nodes[0].Region].Name
	for _, bad := range []map[string]time.Duration{{"nowhere": time.Second}, {own: time.Second}, {other: 0}, {other: MaxSlowdown + 1}} {
		if err := s.SetSlowdown(bad); err == nil || strings.Contains(err.Error(), "\n") {
			t.Errorf("SetSlowdown(%v): %v, want a one-line refusal", bad, err)
		}
	}
	if got := s.slowTo(1); got != 0 {
		t.Fatalf("refused slowdowns slowed frames to node 1 by %v", got)
	}
	if err := s.SetSlowdown(map[string]time.Duration{other: 300 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	for _, n := range cfg.Nodes[1:] {
		want := time.Duration(0)
		if n.Region == cfg.Nodes[1].Region {
			want = 300 * time.Millisecond
		}
		if got := s.slowTo(int(n.ID)); got != want {
			t.Errorf("frames to %s slowed by %v, want %v", n.Name, got, want)
		}
	}
	l := &link{s: s, peer: 1, delay: 10 * time.Millisecond, q: make(chan outFrame, 2)}
	before := time.Now()
	l.enqueue(1, []byte("x"))
	if f := <-l.q; f.due.Sub(before) < 310*time.Millisecond || f.due.Sub(before) > time.Second {
		t.Errorf("a frame to the slowed region is due %v after it was sent, want 310ms (10ms + 300ms)", f.due.Sub(before))
	}
	// A client's link is never slowed: its endpoint id is no node's.
	cl := &link{s: s, peer: frame.ClientID(0, 7), client: true, q: make(chan outFrame, 1)}
	cl.enqueue(cl.peer, []byte("x"))
	if f := <-cl.q; !f.due.IsZero() {
		t.Errorf("a frame to a client is due %v after it was sent; clients are never slowed", time.Until(f.due))
	}
	if err := s.SetSlowdown(nil); err != nil || s.slowTo(1) != 0 {
		t.Errorf("ending the slowdown: %v, frames to node 1 still slowed by %v", err, s.slowTo(1))
	}
}
