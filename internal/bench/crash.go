package bench

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/meridiandb/meridian/internal/protocol"
	"github.com/meridiandb/meridian/internal/sim"
	"github.com/meridiandb/meridian/internal/topo"
)

// Crash is one scripted outage of a data node in a simulated run: the node crashes At after the
// clients start (warm-up included, loading not) and restarts For later from what it had
// persisted, as a killed server process would be restarted.
type Crash struct {
	Node topo.NodeID
	At   time.Duration
	For  time.Duration
}

// CrashRecord is a Crash as a result file reports it: the node by id and by name, times as
// duration text (the form --crash takes them in).
type CrashRecord struct {
	Node int    `json:"node"`
	Name string `json:"name"`
	At   string `json:"at"`
	For  string `json:"for"`
}

// NodeName names a node as cluster configurations do: its region's name in lower case and its
// place among the region's data nodes counted from 1 (sh-1), or region-oracle for an oracle.
func NodeName(tp *topo.Topology, id topo.NodeID) string {
	n := tp.Nodes[id]
	region := strings.ToLower(tp.Regions[n.Region].Name)
	if n.Roles&topo.RoleData == 0 {
		return region + "-oracle"
	}
	return region + "-" + strconv.Itoa(slices.Index(tp.DataNodes(n.Region), id)+1)
}

// ResolveNode finds the data node that text names: a topology node id (0, 7) or a name as
// NodeName gives it (sh-1, region names in any case).
func ResolveNode(tp *topo.Topology, text string) (topo.NodeID, error) {
	if id, err := strconv.Atoi(text); err == nil {
		if id < 0 || id >= len(tp.Nodes) {
			return 0, fmt.Errorf("no node %d in topology %s: its servers are 0..%d (higher ids are clients)", id, tp.Name, len(tp.Nodes)-1)
		}
		if tp.Nodes[id].Roles&topo.RoleData == 0 {
			return 0, fmt.Errorf("node %d (%s) is a TrueTime oracle, not a data node", id, NodeName(tp, topo.NodeID(id)))
		}
		return topo.NodeID(id), nil
	}
	dash := strings.LastIndexByte(text, '-')
	r, known := tp.RegionByName(text[:max(dash, 0)])
	if dash <= 0 || !known {
		return 0, fmt.Errorf("no node %q in topology %s: give a node id or a name such as %s", text, tp.Name, NodeName(tp, tp.DataNodes(0)[0]))
	}
	place, data := text[dash+1:], tp.DataNodes(r)
	if strings.EqualFold(place, "oracle") && tp.Oracle(r) >= 0 {
		return 0, fmt.Errorf("node %d (%s) is a TrueTime oracle, not a data node", tp.Oracle(r), text)
	}
	n, err := strconv.Atoi(place)
	if err != nil || n < 1 || n > len(data) {
		return 0, fmt.Errorf("no node %q in topology %s: region %s's data nodes are %s to %s", text, tp.Name, tp.Regions[r].Name,
			NodeName(tp, data[0]), NodeName(tp, data[len(data)-1]))
	}
	return data[n-1], nil
}

// ParseCrash parses NODE@AT/FOR (0@1s/300ms, sh-1@2.5s/1s).
func ParseCrash(tp *topo.Topology, text string) (Crash, error) {
	id, at, down, err := parseNodeFault(tp, text, nodeFaultForm{example: "NODE@AT/FOR, e.g. 0@1s/300ms", sep: "/",
		at: "crash time", arg: "outage length", resolve: ResolveNode})
	return Crash{Node: id, At: at, For: down}, err
}

// nodeFaultForm describes a fault flag of the form NODE@AT<sep>ARG, both durations.
type nodeFaultForm struct {
	example string // the form and an example, for errors
	sep     string
	at, arg string // what AT and ARG are, for errors
	resolve func(*topo.Topology, string) (topo.NodeID, error)
}

// parseNodeFault parses text as f describes it.
func parseNodeFault(tp *topo.Topology, text string, f nodeFaultForm) (topo.NodeID, time.Duration, time.Duration, error) {
	form := "want " + f.example
	name, rest, ok := strings.Cut(text, "@")
	if !ok || name == "" {
		return 0, 0, 0, fmt.Errorf("%s", form)
	}
	atText, argText, ok := strings.Cut(rest, f.sep)
	if !ok {
		return 0, 0, 0, fmt.Errorf("no %s: %s", f.arg, form)
	}
	id, err := f.resolve(tp, name)
	if err != nil {
		return 0, 0, 0, err
	}
	at, err := time.ParseDuration(atText)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("%s %q is not a duration: %s", f.at, atText, form)
	}
	arg, err := time.ParseDuration(argText)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("%s %q is not a duration: %s", f.arg, argText, form)
	}
	return id, at, arg, nil
}

// CheckCrashes validates a crash schedule for a run of runLength (warm-up plus measured time).
// Every outage must end before the run does, so that the drain and the workload's own
// verification find every node up.
func CheckCrashes(tp *topo.Topology, crashes []Crash, runLength time.Duration) error {
	for _, c := range crashes {
		if int(c.Node) < 0 || int(c.Node) >= len(tp.Nodes) || tp.Nodes[c.Node].Roles&topo.RoleData == 0 {
			return fmt.Errorf("crash of node %d: not a data node of topology %s", c.Node, tp.Name)
		}
		switch {
		case c.At < 0:
			return fmt.Errorf("%s: the crash time must not be negative", c.describe(tp))
		case c.For <= 0:
			return fmt.Errorf("%s: the outage must last a positive time", c.describe(tp))
		case c.At >= runLength:
			return fmt.Errorf("%s: the run ends at %s (warm-up plus duration)", c.describe(tp), runLength)
		case c.For > runLength-c.At:
			return fmt.Errorf("%s: the node must be back by the end of the run at %s (warm-up plus duration)", c.describe(tp), runLength)
		}
	}
	latest := map[topo.NodeID]Crash{} // each node's latest outage so far
	for _, c := range sortedCrashes(crashes) {
		if prev, seen := latest[c.Node]; seen && c.At <= prev.At+prev.For {
			return fmt.Errorf("%s: the node is down until %s (%s); one node's outages must not overlap or touch", c.describe(tp), prev.At+prev.For, prev.describe(tp))
		}
		latest[c.Node] = c
	}
	return nil
}

// sortedCrashes orders a schedule by time and node, so that a run does not depend on the order
// crashes were given in: two crashes at one instant would otherwise run in either order.
func sortedCrashes(crashes []Crash) []Crash {
	return sortedFaults(crashes, func(c Crash) (time.Duration, topo.NodeID) { return c.At, c.Node })
}

// sortedFaults orders faults by the time and node when returns, stably, in a new slice.
func sortedFaults[F any](faults []F, when func(F) (time.Duration, topo.NodeID)) []F {
	out := slices.Clone(faults)
	slices.SortStableFunc(out, func(a, b F) int {
		at, an := when(a)
		bt, bn := when(b)
		return cmp.Or(cmp.Compare(at, bt), cmp.Compare(an, bn))
	})
	return out
}

func (c Crash) describe(tp *topo.Topology) string {
	return fmt.Sprintf("crash of %s at %s for %s", NodeName(tp, c.Node), c.At, c.For)
}

func (c Crash) record(tp *topo.Topology) CrashRecord {
	return CrashRecord{Node: int(c.Node), Name: NodeName(tp, c.Node), At: c.At.String(), For: c.For.String()}
}

// scheduleCrashes scripts each outage into s relative to the clients' start (w.Start). A
// restart that fails (the node's durable state could not be read back) is kept in *restartErr:
// it happens inside the simulation, where nothing can return an error, and fails the run after
// it.
//
// A restart replaces the node's handler, and with it the metrics its crashed life counted in
// the window, which the window's end reads only from the handlers then in place: so a crash
// inside the window moves them into lost first (and clears them, since a node still down at the
// window's end is read from its dead handler).
func scheduleCrashes(s *sim.Sim, tp *topo.Topology, crashes []Crash, w Window, lost *protocol.Metrics, restartErr *error) {
	for _, c := range sortedCrashes(crashes) {
		s.At(w.Start+int64(c.At), func() {
			if ms, ok := s.Handler(c.Node).(protocol.MetricsSource); ok && s.Now() >= w.MeasureFrom {
				lost.Merge(ms.Metrics())
				ms.Metrics().Reset()
			}
			s.Crash(c.Node)
		})
		s.At(w.Start+int64(c.At+c.For), func() {
			if err := s.Restart(c.Node); err != nil && *restartErr == nil {
				*restartErr = fmt.Errorf("%s: restart: %w", c.describe(tp), err)
			}
		})
	}
}
