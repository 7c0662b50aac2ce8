package serial

import (
	"testing"
	"time"

	"github.com/meridiandb/meridian/internal/bench"
	"github.com/meridiandb/meridian/internal/node"
	"github.com/meridiandb/meridian/internal/protocol/prototest"
	"github.com/meridiandb/meridian/internal/sim"
	"github.com/meridiandb/meridian/internal/storage/durable"
)

// snapshot copies a store's contents.
func snapshot(m *durable.Mem) map[string][]byte {
	out := map[string][]byte{}
	_ = m.Scan(nil, nil, func(k, v []byte) bool { out[string(k)] = append([]byte(nil), v...); return true })
	return out
}

// rollBack makes m hold exactly snap again, as a disk that acknowledged flushes it never made
// would after a power loss.
func rollBack(t *testing.T, m *durable.Mem, snap map[string][]byte) {
	var batch []node.Write
	for k := range snapshot(m) {
		if _, ok := snap[k]; !ok {
			batch = append(batch, node.Write{Key: []byte(k), Delete: true})
		}
	}
	for k, v := range snap {
		batch = append(batch, node.Write{Key: []byte(k), Value: v})
	}
	if err := m.Apply(batch); err != nil {
		t.Error(err)
	}
}

// The final read of a run's keys finds the commits a crash lost: the serial node's store is
// rolled back 300 ms as it crashes near the window's end, so the commits it acknowledged in
// those 300 ms are gone. Whether a read during the run came after the loss is chance; the final
// read comes after it always. The same crash without the rollback loses nothing.
func TestFinalReadFindsRolledBackCommits(t *testing.T) {
	for _, rolledBack := range []bool{false, true} {
		cfg, err := prototest.SimConfig(prototest.Case{Protocol: "serial", Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		wl, err := bench.BuildWorkload(cfg.Topology, bench.DefaultWorkloadParams("list-append"))
		if err != nil {
			t.Fatal(err)
		}
		server := cfg.Topology.DataNodes(0)[0]
		var snap map[string][]byte
		res, err := bench.SimRun(cfg, bench.Spec{Workload: wl, ClientsPerRegion: 4, Warmup: 200 * time.Millisecond,
			Duration: 2 * time.Second, Record: true, Faults: func(s *sim.Sim, w bench.Window) {
				at := w.End - int64(500*time.Millisecond)
				s.At(at, func() { snap = snapshot(s.Durable(server)) })
				s.At(at+int64(300*time.Millisecond), func() {
					s.Crash(server)
					if rolledBack {
						rollBack(t, s.Durable(server), snap)
					}
				})
				s.At(at+int64(400*time.Millisecond), func() {
					if err := s.Restart(server); err != nil {
						t.Error(err)
					}
				})
			}})
		if err != nil {
			t.Fatal(err)
		}
		d := res.Durability
		if d == nil || d.NotRun != "" {
			t.Fatalf("rolled back %v: no final read judged: %v", rolledBack, d)
		}
		t.Logf("rolled back %v: %v", rolledBack, d)
		switch {
		case rolledBack && len(d.Lost) == 0:
			t.Errorf("the store lost 300 ms of commits, and the final read found all %d acknowledged writes", d.Acknowledged)
		case !rolledBack && d.Err() != nil:
			t.Errorf("an honest crash: %v", d)
		case d.Acknowledged < 20:
			t.Errorf("only %d acknowledged writes: the run judges too little", d.Acknowledged)
		}
	}
}
