package bench

import (
	"testing"

	"github.com/meridiandb/meridian/internal/topo"
)

// A server is named as NodeName names it, also where region names hold a '-': an oracle's own
// name was refused as "a TrueTime oracle, not a data node" in a region us-east (review).
func TestResolveServerByName(t *testing.T) {
	tp, err := topo.Parse("hyphens", `
name = "hyphens"
[[region]]
name = "us-east"
rtt_ms = { eu-west = 80 }
[[region]]
name = "eu-west"
`, topo.DefaultLayout())
	if err != nil {
		t.Fatal(err)
	}
	for id := range tp.Nodes {
		name := NodeName(tp, topo.NodeID(id))
		got, err := ResolveServer(tp, name)
		if err != nil || got != topo.NodeID(id) {
			t.Errorf("ResolveServer(%q) = %d, %v; want node %d", name, got, err, id)
		}
		if k, err := ParseClockSkew(tp, name+"@1s=5ms"); err != nil || k != (ClockSkew{Node: topo.NodeID(id), At: 1e9, By: 5e6}) {
			t.Errorf("ParseClockSkew(%s@1s=5ms) = %+v, %v", name, k, err)
		}
	}
	if _, err := ResolveServer(tp, "ap-south-oracle"); err == nil {
		t.Error("an oracle of a region the topology lacks was resolved")
	}
}
