package bench

import (
	"errors"
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meridiandb/meridian/client"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/workload"
	"github.com/meridiandb/meridian/internal/workload/memdb"
)

// flakyTransport fails every request from its failAt-th on, as a connection to a node that was
// killed mid-load does.
type flakyTransport struct {
	client.Transport
	sent, failAt int
}

func (f *flakyTransport) RoundTrip(req *client.Request) (*client.Reply, error) {
	if f.sent++; f.failAt > 0 && f.sent >= f.failAt {
		return nil, errors.New("connection lost")
	}
	return f.Transport.RoundTrip(req)
}

// A loader whose node goes away mid-load (its connection fails, then dials are refused for a
// while) goes on from the last batch that committed once the node is back, and loads every row:
// a bench beside a crash review failed its load at the first crash.
func TestLoadThroughSurvivesACrash(t *testing.T) {
	store := memdb.New()
	var rows []row
	for i := range 1000 {
		rows = append(rows, row{k: "k" + strconv.Itoa(i), v: []byte{byte(i)}})
	}
	var opens atomic.Int32
	open := func(topo.NodeID) (*client.DB, func(), error) {
		switch n := opens.Add(1); {
		case n == 1: // the first connection dies after a few batches
			return client.Open(&flakyTransport{Transport: store.Transport(), failAt: 7}), func() {}, nil
		case n <= 4: // the node is down: dials are refused
			return nil, nil, errors.New("connection refused")
		default:
			return client.Open(store.Transport()), func() {}, nil
		}
	}
	db, closeFn, _ := open(0)
	if err := loadThrough(0, rows, db, closeFn, open); err != nil {
		t.Fatal(err)
	}
	if store.Len() != len(rows) || opens.Load() != 5 {
		t.Errorf("%d of %d rows loaded after %d connections; want all after 5", store.Len(), len(rows), opens.Load())
	}
	// Every batch once, but none again: the first connection's failing batch never reached the
	// store, and no batch that committed was loaded again.
	if commits, _ := store.Stats(); commits != (len(rows)+loadBatchRows-1)/loadBatchRows {
		t.Errorf("%d commits for %d rows in batches of %d: batches loaded twice", commits, len(rows), loadBatchRows)
	}
}

// rowsOnly is a workload that only lists rows: what realLoad needs of one.
type rowsOnly struct{ n int }

func (rowsOnly) Name() string                                             { return "rows-only" }
func (rowsOnly) Load(*client.DB) error                                    { return errors.New("rows-only loads through Rows") }
func (rowsOnly) NewClient(int, topo.RegionID, *rand.Rand) workload.Client { return nil }
func (w rowsOnly) Rows(emit func(string, []byte) error) error {
	for i := range w.n {
		if err := emit("k"+strconv.Itoa(i), []byte{byte(i)}); err != nil {
			return err
		}
	}
	return nil
}

// A node that is down at the moment the loaders first connect (a chaos crash that began just
// before) and back soon after does not fail the load: the load failed at once, after the other
// regions' loaders had loaded everything, though the node was back within seconds.
func TestRealLoadNodeDownAtFirstDial(t *testing.T) {
	tp, err := topo.FromPreset("k2-3region", topo.DefaultLayout())
	if err != nil {
		t.Fatal(err)
	}
	store := memdb.New()
	down := tp.DataNodes(2)[0]
	var refused atomic.Int32
	open := func(coord topo.NodeID) (*client.DB, func(), error) {
		if coord == down && refused.Add(1) <= 3 {
			return nil, nil, errors.New("connection refused")
		}
		return client.Open(store.Transport()), func() {}, nil
	}
	w := rowsOnly{n: 3000}
	if err := realLoad(tp, Spec{Workload: w}, open); err != nil {
		t.Fatal(err)
	}
	if store.Len() != w.n {
		t.Errorf("%d of %d rows loaded", store.Len(), w.n)
	}
}

// A cluster none of whose nodes answers still fails the load at the first dials.
func TestRealLoadNoNodeFailsAtOnce(t *testing.T) {
	tp, err := topo.FromPreset("k2-3region", topo.DefaultLayout())
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = realLoad(tp, Spec{Workload: rowsOnly{n: 3000}}, func(topo.NodeID) (*client.DB, func(), error) {
		return nil, nil, errors.New("connection refused")
	})
	if err == nil || time.Since(start) > loadStall/2 {
		t.Fatalf("load against no cluster: %v after %v; want a refusal at once", err, time.Since(start))
	}
}
