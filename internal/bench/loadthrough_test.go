package bench

import (
	"errors"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/meridiandb/meridian/client"
	"github.com/meridiandb/meridian/internal/topo"
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
