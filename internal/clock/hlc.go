package clock

import (
	"math"

	"github.com/meridiandb/meridian/internal/ts"
)

// HLC is a hybrid logical clock (Kulkarni et al., 2014), as CockroachDB and Wren use it
// (notes/wren.md §2.6): Wall follows the largest physical reading or remote timestamp seen, and
// Logical counts events within one Wall value. Every timestamp it returns is strictly greater
// than every timestamp it returned or received before, so it respects causality, and its Wall
// never runs ahead of the largest physical time seen in the system.
//
// Origin is stamped on every timestamp so timestamps of different nodes never tie; ordering
// decisions (the max rules below) compare (Wall, Logical) only, as the algorithm prescribes.
type HLC struct {
	origin uint32
	last   ts.Timestamp
}

// NewHLC returns a clock for node origin. It takes every remote timestamp it is given, however
// far ahead: a pushed write timestamp may be ahead of every physical clock, and CockroachDB too
// accepts such "synthetic" timestamps. The max-offset bound is the protocol's to apply.
func NewHLC(origin uint32) *HLC {
	return &HLC{origin: origin}
}

// Last returns the most recent timestamp issued or merged (Zero before any).
func (h *HLC) Last() ts.Timestamp { return h.last }

// Now returns a timestamp for a local or send event when the physical clock reads physical.
func (h *HLC) Now(physical int64) ts.Timestamp {
	if physical > h.last.Wall {
		h.last = ts.Timestamp{Wall: physical, Origin: h.origin}
	} else {
		h.last = h.tick(h.last.Wall, h.last.Logical)
	}
	return h.last
}

// Update merges a timestamp received from another node (a receive event) and returns the new
// reading, which is greater than both remote and every earlier reading.
func (h *HLC) Update(physical int64, remote ts.Timestamp) ts.Timestamp {
	wall := max(h.last.Wall, remote.Wall, physical)
	switch {
	case wall == h.last.Wall && wall == remote.Wall:
		h.last = h.tick(wall, max(h.last.Logical, remote.Logical))
	case wall == h.last.Wall:
		h.last = h.tick(wall, h.last.Logical)
	case wall == remote.Wall:
		h.last = h.tick(wall, remote.Logical)
	default:
		h.last = ts.Timestamp{Wall: wall, Origin: h.origin}
	}
	return h.last
}

// tick returns (wall, logical+1), carrying into Wall if Logical would overflow: a carry moves
// Wall 1 ns ahead of physical time, which is harmless and only happens after 2^32 events in 1 ns.
func (h *HLC) tick(wall int64, logical uint32) ts.Timestamp {
	if logical == math.MaxUint32 {
		return ts.Timestamp{Wall: wall + 1, Origin: h.origin}
	}
	return ts.Timestamp{Wall: wall, Logical: logical + 1, Origin: h.origin}
}
