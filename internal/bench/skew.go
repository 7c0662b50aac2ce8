package bench

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/meridiandb/meridian/internal/sim"
	"github.com/meridiandb/meridian/internal/topo"
)

// ClockSkew moves one server's clocks (its TrueTime source and its local oscillator) By, At
// after the clients start (warm-up included, loading not), for the rest of the run: a clock
// fault beyond what the simulator's honest clocks do. A skew larger than the ε a protocol
// assumes breaks that protocol's premise; one within it must not break its guarantee. That is
// how a mutant that skips a commit wait is caught: honest clocks, whose errors stay well
// inside ε, never expose a missing wait on transactions longer than it.
type ClockSkew struct {
	Node topo.NodeID
	At   time.Duration
	By   time.Duration // positive: ahead of true time
}

// ClockSkewRecord is a ClockSkew as a result file reports it: the node by id and by name,
// times as duration text (the form --clock-skew takes them in).
type ClockSkewRecord struct {
	Node int    `json:"node"`
	Name string `json:"name"`
	At   string `json:"at"`
	By   string `json:"by"`
	// Unread says the protocol never read the node's clock after the skew (spanner's and
	// serial's oracles sit idle), so the skew cannot have changed anything.
	Unread bool `json:"unread,omitempty"`
}

// ResolveServer finds the server that text names: a topology node id or a name as NodeName
// gives it (sh-1, sh-oracle; region names in any case). Unlike ResolveNode it accepts oracles.
func ResolveServer(tp *topo.Topology, text string) (topo.NodeID, error) {
	if id, err := strconv.Atoi(text); err == nil {
		if id < 0 || id >= len(tp.Nodes) {
			return 0, fmt.Errorf("no node %d in topology %s: its servers are 0..%d (higher ids are clients)", id, tp.Name, len(tp.Nodes)-1)
		}
		return topo.NodeID(id), nil
	}
	// The last '-' separates the place: region names may hold one (us-east-oracle).
	if dash := strings.LastIndexByte(text, '-'); dash > 0 && strings.EqualFold(text[dash+1:], "oracle") {
		r, known := tp.RegionByName(text[:dash])
		if !known {
			return 0, fmt.Errorf("no node %q in topology %s: give a node id or a name such as %s or %s", text, tp.Name,
				NodeName(tp, tp.DataNodes(0)[0]), strings.ToLower(tp.Regions[0].Name)+"-oracle")
		}
		if o := tp.Oracle(r); o >= 0 {
			return o, nil
		}
		return 0, fmt.Errorf("region %s of topology %s has no TrueTime oracle", tp.Regions[r].Name, tp.Name)
	}
	return ResolveNode(tp, text)
}

// ParseClockSkew parses NODE@AT=BY (sh-oracle@0s=20ms, bj-1@1s=-5ms).
func ParseClockSkew(tp *topo.Topology, text string) (ClockSkew, error) {
	id, at, by, err := parseNodeFault(tp, text, nodeFaultForm{example: "NODE@AT=BY, e.g. sh-oracle@0s=20ms or 3@1s=-5ms", sep: "=",
		at: "skew time", arg: "skew", resolve: ResolveServer})
	return ClockSkew{Node: id, At: at, By: by}, err
}

// maxClockSkew bounds a skew: far beyond any ε or WAN delay already, and far from overflowing
// the simulator's nanosecond clocks.
const maxClockSkew = time.Hour

// CheckClockSkews validates skews for a run of runLength (warm-up plus measured time).
func CheckClockSkews(tp *topo.Topology, skews []ClockSkew, runLength time.Duration) error {
	for _, k := range skews {
		if int(k.Node) < 0 || int(k.Node) >= len(tp.Nodes) {
			return fmt.Errorf("clock skew of node %d: no such server in topology %s", k.Node, tp.Name)
		}
		switch {
		case k.At < 0:
			return fmt.Errorf("%s: the skew time must not be negative", k.describe(tp))
		case k.At >= runLength:
			return fmt.Errorf("%s: the run ends at %s (warm-up plus duration)", k.describe(tp), runLength)
		case k.By == 0:
			return fmt.Errorf("%s: a skew of zero changes nothing", k.describe(tp))
		case k.By > maxClockSkew || k.By < -maxClockSkew:
			return fmt.Errorf("%s: a skew must be within ±%s", k.describe(tp), maxClockSkew)
		}
	}
	return nil
}

// sortedClockSkews orders skews by time and node, so that a run does not depend on the order
// they were given in.
func sortedClockSkews(skews []ClockSkew) []ClockSkew {
	return sortedFaults(skews, func(k ClockSkew) (time.Duration, topo.NodeID) { return k.At, k.Node })
}

func (k ClockSkew) describe(tp *topo.Topology) string {
	return fmt.Sprintf("clock skew of %s at %s by %s", NodeName(tp, k.Node), k.At, k.By)
}

func (k ClockSkew) record(tp *topo.Topology) ClockSkewRecord {
	return ClockSkewRecord{Node: int(k.Node), Name: NodeName(tp, k.Node), At: k.At.String(), By: k.By.String()}
}

// scheduleClockSkews scripts each skew into s relative to the clients' start (w.Start). Skews
// of one node add up. Once the run is over, unread tells for each skew, in sortedClockSkews'
// order, whether its node's clock went unread from then on.
func scheduleClockSkews(s *sim.Sim, skews []ClockSkew, w Window) (unread func() []bool) {
	sorted := sortedClockSkews(skews)
	readsAt := make([]uint64, len(sorted))
	for i, k := range sorted {
		s.At(w.Start+int64(k.At), func() {
			s.SkewClock(k.Node, k.By)
			readsAt[i] = s.ClockReads(k.Node)
		})
	}
	return func() []bool {
		out := make([]bool, len(sorted))
		for i, k := range sorted {
			out[i] = s.ClockReads(k.Node) == readsAt[i]
		}
		return out
	}
}
