package sim

import (
	"fmt"
	"testing"
	"time"

	"github.com/meridiandb/meridian/internal/node"
	"github.com/meridiandb/meridian/internal/protocol"
	"github.com/meridiandb/meridian/internal/topo"
)

// A flush's completions may persist again, more than once. The first of those starts the next
// flush and the rest queue behind it; none may be dropped. The completions run at once when a
// core is free, so the flush that just ended must not start another over the one they began
// (it did: the second batch replaced the first in flight, which then never reached the disk and
// whose callback never ran).
func TestPersistFromFlushCompletion(t *testing.T) {
	for _, serviceTime := range []time.Duration{0, 5 * time.Microsecond} {
		t.Run(fmt.Sprint("service-time=", serviceTime), func(t *testing.T) {
			tp, _ := topo.FromPreset("k2-5region", topo.DefaultLayout())
			p, _ := protocol.Lookup("serial")
			cfg := DefaultConfig()
			cfg.Topology, cfg.Protocol, cfg.Seed, cfg.ServiceTime = tp, p, 1, serviceTime
			s, err := New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Stop()
			n := s.nodes[tp.DataNodes(0)[0]]
			write := func(k string) []node.Write { return []node.Write{{Key: []byte(k), Value: []byte("v")}} }
			var done []string
			n.Persist(write("x/a"), func() {
				done = append(done, "a")
				n.Persist(write("x/b"), func() { done = append(done, "b") })
				n.Persist(write("x/c"), func() { done = append(done, "c") })
			})
			s.RunFor(100 * time.Millisecond)
			if fmt.Sprint(done) != "[a b c]" {
				t.Errorf("completions ran: %v, want [a b c]", done)
			}
			onDisk := map[string]bool{}
			n.disk.Scan([]byte("x/"), []byte("x0"), func(k, _ []byte) bool { onDisk[string(k)] = true; return true })
			for _, k := range []string{"x/a", "x/b", "x/c"} {
				if !onDisk[k] {
					t.Errorf("%s persisted with a completion but not on the disk", k)
				}
			}
		})
	}
}
