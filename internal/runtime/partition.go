package runtime

import (
	"fmt"
	"strings"

	"github.com/meridiandb/meridian/internal/topo"
)

// A node can be cut off from whole regions, as a network partition between regions would cut
// it, so that real processes can be reviewed under partitions as the simulator's --partition
// and --random-partitions review simulated ones. While a region is cut, the node neither dials
// nor writes to its nodes (their links drop what is sent to them and what they still hold,
// "partitioned", and close their connections), and closes any connection from one of them at
// its hello or next frame, so both ends see the connection die and dial again once the cut
// heals, through the same reconnection path a crash or a real outage takes. Clients are never
// cut: a partition between regions leaves a client's link to its own region's node alone. A
// cut asks both sides to apply it; `meridian cluster chaos --partitions` does (cmd/meridian).
// As in the simulator, a frame sent while its regions are cut is lost; unlike it, so is one
// still on its way (in a link's emulated delay, or unread by the receiver) when the cut begins:
// loss, never reorder.

// cutSet is a node's cut regions, indexed by region id; nil or all false for none.
type cutSet []bool

// SetCut cuts the node off from every node of the named regions, replacing any earlier cut;
// none heals it. A name that is no region of the cluster, or the node's own, is refused and
// changes nothing.
func (s *Server) SetCut(regions []string) error {
	set, err := s.cfg.cutSet(s.me, regions)
	if err != nil {
		return err
	}
	if len(regions) == 0 {
		if s.cut.Swap(nil) != nil {
			s.log.Warn("partition healed: every region reachable again")
		}
		return nil
	}
	s.cut.Store(&set)
	s.log.Warn("cut off from regions by a partition (SetCut)", "regions", strings.Join(regions, ","))
	return nil
}

// cutSet resolves region names into the set a node me may be cut off from.
func (c *Config) cutSet(me NodeConfig, regions []string) (cutSet, error) {
	set := make(cutSet, len(c.Topology.Regions))
	for _, name := range regions {
		r, ok := c.Topology.RegionByName(name)
		if !ok {
			return nil, fmt.Errorf("node %s: no region %q to cut off", me.Name, name)
		}
		if r == me.Region {
			return nil, fmt.Errorf("node %s: cannot be cut off from its own region %s", me.Name, name)
		}
		set[r] = true
	}
	return set, nil
}

// cutFrom reports whether peer, a node, is in a region this node is cut off from.
func (s *Server) cutFrom(peer topo.NodeID) bool {
	set := s.cut.Load()
	return set != nil && (*set)[s.cfg.Nodes[peer].Region]
}
