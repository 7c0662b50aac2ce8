package runtime

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// A node's links to whole regions can be slowed, as a congested or rerouted WAN link slows
// them, so that real processes can be reviewed under late messages as the simulator's
// --random-slowdowns reviews simulated ones: every frame the node sends to a node of a slowed
// region waits that much longer in its link's delay queue, and links stay FIFO (a frame sent
// after a slowdown ends still leaves behind those sent during it). A slowdown between two
// regions asks both sides to apply it; `meridian cluster chaos --slowdowns` does
// (cmd/meridian). Clients are never slowed: they talk to their own region's node.

// MaxSlowdown bounds a slowdown's extra delay, as bench.MaxSlowdown bounds the simulator's: a
// link slowed longer is cut in all but name.
const MaxSlowdown = 10 * time.Second

// SetSlowdown slows the node's frames to every node of each named region by its delay,
// replacing any earlier slowdown; none ends it. A name that is no region of the cluster, the
// node's own, or a delay not in (0, MaxSlowdown], is refused and changes nothing. Frames sent
// before a slowdown ends keep their delay, and those behind them wait for them.
func (s *Server) SetSlowdown(by map[string]time.Duration) error {
	extra := make([]time.Duration, len(s.cfg.Topology.Regions))
	for _, name := range slices.Sorted(maps.Keys(by)) {
		r, ok := s.cfg.Topology.RegionByName(name)
		switch {
		case !ok:
			return fmt.Errorf("node %s: no region %q to slow", s.me.Name, name)
		case r == s.me.Region:
			return fmt.Errorf("node %s: cannot slow its own region %s", s.me.Name, name)
		case by[name] <= 0 || by[name] > MaxSlowdown:
			return fmt.Errorf("node %s: a slowdown of %s to region %s: want one in (0, %s]", s.me.Name, by[name], name, MaxSlowdown)
		}
		extra[r] = by[name]
	}
	if len(by) == 0 {
		if s.slow.Swap(nil) != nil {
			s.log.Warn("slowdown ended: frames to every region at their usual delay")
		}
		return nil
	}
	if old := s.slow.Swap(&extra); old != nil && slices.Equal(*old, extra) {
		return nil // unchanged: a node is told to reread its files for a cut or a step too
	}
	var what []string
	for _, name := range slices.Sorted(maps.Keys(by)) {
		what = append(what, name+"+"+by[name].String())
	}
	s.log.Warn("frames to regions slowed (SetSlowdown)", "regions", strings.Join(what, ","))
	return nil
}

// slowTo is the extra delay of frames to peer, a node, under the node's slowdown.
func (s *Server) slowTo(peer int) time.Duration {
	extra := s.slow.Load()
	if extra == nil {
		return 0
	}
	return (*extra)[s.cfg.Nodes[peer].Region]
}
