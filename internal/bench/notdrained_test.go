package bench_test

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/meridiandb/meridian/client"
	"github.com/meridiandb/meridian/internal/bench"
	"github.com/meridiandb/meridian/internal/protocol/prototest"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/workload"
)

// endless is a verified workload whose one transaction never ends: it reads a key again and
// again (under a gc-ttl long enough that it never grows too old), so its client is still
// running when the drain period ends.
type endless struct{ checked bool }

func (*endless) Name() string                                               { return "endless" }
func (*endless) Load(*client.DB) error                                      { return nil }
func (w *endless) Check(*client.DB) error                                   { w.checked = true; return nil }
func (w *endless) NewClient(int, topo.RegionID, *rand.Rand) workload.Client { return w }
func (*endless) Next() workload.Txn {
	return workload.Txn{Type: "endless", Run: func(tx *client.Txn) error {
		for {
			if _, err := tx.Get("k"); err != nil && !errors.Is(err, client.ErrNotFound) {
				return err
			}
		}
	}}
}

// A verified workload whose clients are still running when the drain ends is not checked, and
// says so: its check ran on a database they still wrote to, and could pass ("ok") on a state no
// finished run leaves (review).
func TestVerifierSkippedWhenNotDrained(t *testing.T) {
	cfg, err := prototest.SimConfig(prototest.Case{Protocol: "k2", Seed: 1, Options: map[string]string{"gc-ttl": "1h"}})
	if err != nil {
		t.Fatal(err)
	}
	w := &endless{}
	res, err := bench.SimRun(cfg, bench.Spec{Workload: w, ClientsPerRegion: 1, Duration: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if w.checked || !strings.HasPrefix(res.Consistency, "not checked: some clients were still running") {
		t.Errorf("checked %v, consistency %q: want not checked", w.checked, res.Consistency)
	}
}
