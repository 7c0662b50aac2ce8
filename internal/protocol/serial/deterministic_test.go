package serial

import (
	"testing"
	"time"

	"github.com/meridiandb/meridian/internal/protocol/prototest"
)

// The same seed gives the same trace, as for every other protocol (a determinism audit found
// serial the only one without this test).
func TestDeterministic(t *testing.T) {
	prototest.Deterministic(t, prototest.Case{Protocol: "serial", Seed: 7, Workload: prototest.ListAppend(10, 0.5), Duration: time.Second}, 8)
}
