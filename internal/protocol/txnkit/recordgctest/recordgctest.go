// Package recordgctest holds the test scaffolding that the record-GC tests of the protocols
// keeping transaction records apart from their coordinators (k2's recorders, crdb's record
// holders) share: driving one node message by message over a nodetest.ScriptEnv until it is
// quiet, finding the question it sent, and restarting every data node of a simulation from its
// disk to count what it still holds.
package recordgctest

import (
	"testing"

	"github.com/meridiandb/meridian/internal/node"
	"github.com/meridiandb/meridian/internal/node/nodetest"
	"github.com/meridiandb/meridian/internal/sim"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/wire"
)

// Settle completes every persist and every timer due now, and what those start in turn, to a
// depth that covers a flush whose completion arms a timer whose work persists again.
func Settle(env *nodetest.ScriptEnv) {
	for range 3 {
		env.Flush()
		env.Advance(0)
	}
	env.Flush()
}

// Deliver hands h the message m from from and returns what h sent once settled.
func Deliver(env *nodetest.ScriptEnv, h node.Handler, from topo.NodeID, m wire.Msg) []nodetest.Sent {
	h.Handle(from, m)
	Settle(env)
	return env.Take()
}

// SentTo reports whether sent holds a message of type M to to that match accepts.
func SentTo[M wire.Msg](sent []nodetest.Sent, to topo.NodeID, match func(M) bool) bool {
	for _, s := range sent {
		if m, ok := s.M.(M); ok && s.To == to && match(m) {
			return true
		}
	}
	return false
}

// DataNodes lists every data node of a deployment, region by region.
func DataNodes(tp *topo.Topology) []topo.NodeID {
	var out []topo.NodeID
	for r := range tp.Regions {
		out = append(out, tp.DataNodes(topo.RegionID(r))...)
	}
	return out
}

// RestartAll crashes and restarts every data node of s from its disk, and returns, for each
// that holds any, what held counts on the restarted node: what a node's disk still holds that
// it should have let go.
func RestartAll(t testing.TB, s *sim.Sim, held func(node.Handler) int) map[topo.NodeID]int {
	t.Helper()
	left := map[topo.NodeID]int{}
	for _, id := range DataNodes(s.Topology()) {
		s.Crash(id)
		if err := s.Restart(id); err != nil {
			t.Fatal(err)
		}
		if n := held(s.Handler(id)); n > 0 {
			left[id] = n
		}
	}
	return left
}
