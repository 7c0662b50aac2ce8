package k2

import (
	"testing"
	"time"

	"github.com/meridiandb/meridian/internal/protocol/prototest"
)

// TestRecoveringRecorderKeepsLiveLeases: a recorder that restarts and then waits for its oracle
// longer than a lease (here partitioned from it for two) holds its live transactions'
// heartbeats meanwhile, unread. It must not lease-abort them for a silence it did not hear:
// the transaction whose record it holds commits once the oracle answers.
func TestRecoveringRecorderKeepsLiveLeases(t *testing.T) {
	s := newScript(t, nil, nil)
	tp := s.Topology()
	coord, d := tp.DataNodes(0)[0], tp.DataNodes(1)[0]
	k := prototest.KeysOn(t, tp, d, "leased", 1)
	var fail failures
	holdIntents(s, 0, coord, 100*ms, 3*time.Second, k, &fail) // d holds its record from the write
	s.At(300*ms, func() { s.Crash(d) })
	s.At(350*ms, func() {
		s.PartitionNodes(d, tp.Oracle(1))
		if err := s.Restart(d); err != nil {
			fail.add("restart: %v", err)
		}
	})
	s.At(2000*ms, func() {
		n := s.Handler(d).(*Node)
		if !n.recovering || len(n.held) == 0 {
			fail.add("node %d recovering %v, holding %d messages: the scenario tests nothing", d, n.recovering, len(n.held))
		}
	})
	s.At(2500*ms, s.Heal)
	s.RunUntil(6 * int64(time.Second))
	fail.report(t)
	if n := s.Handler(d).(*Node).m.Snapshot().Counters["recorder.lease-abort"]; n != 0 {
		t.Errorf("the recovering recorder lease-aborted %d transactions whose heartbeats it held", n)
	}
}
