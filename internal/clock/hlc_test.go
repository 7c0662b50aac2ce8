package clock

import (
	"testing"
	"time"

	"github.com/meridiandb/meridian/internal/ts"
)

// TestHLCCausality simulates nodes with skewed, drifting clocks exchanging messages in random
// order, and checks the HLC guarantees: every reading on a node is above the previous one, a
// receive is above the matching send (so happened-before implies timestamp order), and Wall never
// exceeds the largest physical reading anywhere so far.
func TestHLCCausality(t *testing.T) {
	type msg struct {
		stamp   ts.Timestamp
		to      int
		deliver int64 // true time
	}
	for _, seed := range testSeeds(32) {
		r := newRand(seed)
		const nodes = 5
		clocks := make([]Physical, nodes)
		hlcs := make([]*HLC, nodes)
		last := make([]ts.Timestamp, nodes)
		for i := range clocks {
			var err error
			if clocks[i], err = RandomPhysical(r, 5*time.Millisecond, 1e-3); err != nil {
				t.Fatal(err)
			}
			hlcs[i] = NewHLC(uint32(i + 1))
		}
		var inflight []msg
		maxPhysical := int64(-1 << 62)
		now := int64(10 * time.Millisecond)
		for step := 0; step < 5000; step++ {
			now += r.Int64N(3000)
			i := r.IntN(nodes)
			phys := clocks[i].Read(now)
			maxPhysical = max(maxPhysical, phys)
			var got ts.Timestamp
			if k := r.IntN(len(inflight) + 1); k < len(inflight) && inflight[k].deliver <= now {
				m := inflight[k]
				inflight = append(inflight[:k], inflight[k+1:]...)
				i = m.to
				phys = clocks[i].Read(now)
				maxPhysical = max(maxPhysical, phys)
				got = hlcs[i].Update(phys, m.stamp)
				if !m.stamp.Less(got) {
					t.Fatalf("seed %#x: receive %v not after send %v", seed, got, m.stamp)
				}
			} else {
				got = hlcs[i].Now(phys)
				inflight = append(inflight, msg{stamp: got, to: r.IntN(nodes), deliver: now + r.Int64N(50_000)})
			}
			if !last[i].Less(got) {
				t.Fatalf("seed %#x: node %d went from %v to %v", seed, i, last[i], got)
			}
			if got.Wall > maxPhysical {
				t.Fatalf("seed %#x: HLC wall %d ahead of every physical clock (max %d)", seed, got.Wall, maxPhysical)
			}
			if got.Origin != uint32(i+1) {
				t.Fatalf("seed %#x: node %d stamped origin %d", seed, i, got.Origin)
			}
			last[i] = got
		}
	}
}

func TestHLCRules(t *testing.T) {
	h := NewHLC(1)
	steps := []struct {
		name     string
		physical int64
		remote   *ts.Timestamp
		want     ts.Timestamp
	}{
		{"physical leads", 100, nil, ts.Timestamp{Wall: 100, Origin: 1}},
		{"physical stalls", 100, nil, ts.Timestamp{Wall: 100, Logical: 1, Origin: 1}},
		{"physical goes back", 90, nil, ts.Timestamp{Wall: 100, Logical: 2, Origin: 1}},
		{"remote ahead", 100, &ts.Timestamp{Wall: 200, Logical: 5, Origin: 2}, ts.Timestamp{Wall: 200, Logical: 6, Origin: 1}},
		{"remote same wall, lower logical", 150, &ts.Timestamp{Wall: 200, Logical: 3, Origin: 2}, ts.Timestamp{Wall: 200, Logical: 7, Origin: 1}},
		{"remote same wall, higher logical", 150, &ts.Timestamp{Wall: 200, Logical: 9, Origin: 2}, ts.Timestamp{Wall: 200, Logical: 10, Origin: 1}},
		{"remote behind", 150, &ts.Timestamp{Wall: 10, Logical: 99, Origin: 2}, ts.Timestamp{Wall: 200, Logical: 11, Origin: 1}},
		{"physical overtakes", 300, &ts.Timestamp{Wall: 250, Origin: 2}, ts.Timestamp{Wall: 300, Origin: 1}},
	}
	for _, s := range steps {
		var got ts.Timestamp
		if s.remote == nil {
			got = h.Now(s.physical)
		} else {
			got = h.Update(s.physical, *s.remote)
		}
		if got != s.want {
			t.Fatalf("%s: got %v, want %v", s.name, got, s.want)
		}
	}
	if h.Last() != steps[len(steps)-1].want {
		t.Fatalf("Last = %v", h.Last())
	}
}
