package crdb

import (
	"errors"
	"testing"
	"time"

	"github.com/meridiandb/meridian/client"
	"github.com/meridiandb/meridian/internal/protocol/prototest"
	"github.com/meridiandb/meridian/internal/sim"
	"github.com/meridiandb/meridian/internal/wire"
)

// TestClientAbortWhileRequestOut: a client's put of k, whose leaseholder X is cut off from the
// gateway C after the write arrived (its intent laid, its answer and every retransmission lost),
// times out at the client, which aborts. The gateway dropped every request while one was being
// served, the abort included: the client waited a second full timeout for nothing, and the
// transaction, its record heartbeated by C, kept its intents on k and on a (written before) until
// C's idle timeout, 5 s, holding up every writer of those keys. C now takes the abort at once
// (as spanner's coordinator does): it rolls the transaction back and answers OK, and another
// client, through another gateway, writes both keys without waiting for the idle timeout.
func TestClientAbortWhileRequestOut(t *testing.T) {
	b := newBatchSim(t, nil)
	s, tp := b.s, b.tp
	c, x := b.coord, tp.DataNodes(1)[0]
	a := prototest.KeysOn(t, tp, tp.DataNodes(2)[0], "abort-a", 1)[0] // the record's home
	k := prototest.KeysOn(t, tp, x, "abort-k", 1)[0]
	oneWay := tp.OneWay(tp.RegionOf(c), tp.RegionOf(x))
	const timeout = time.Second
	var abortTook, writerTook time.Duration
	var abortErr, writerErr error
	aborted, written := false, false
	// The writer, through X, starts once the first client's abort has returned.
	s.AddClient(1, x, int64(100*time.Millisecond), func(db *client.DB) {
		for !aborted {
			db.Transport().Sleep(10 * time.Millisecond)
		}
		start := s.Now()
		writerErr = client.RunTxnWith(db, client.TxnOptions{}, client.RetryPolicy{MaxAttempts: 1000}, func(tx *client.Txn) error {
			return tx.PutMany([]wire.KV{{Key: a, Value: []byte("2")}, {Key: k, Value: []byte("2")}})
		})
		writerTook, written = time.Duration(s.Now()-start), true
	})
	b.runClient(t, func(cl *sim.Client, db *client.DB, fail func(string, ...any)) {
		cl.SetTimeout(timeout)
		tx := db.Begin(client.TxnOptions{})
		if err := tx.Put(a, []byte("1")); err != nil {
			fail("put a: %v", err)
			return
		}
		s.At(s.Now()+int64(oneWay)/2, func() { s.PartitionNodes(c, x) }) // after the write left
		if err := tx.Put(k, []byte("1")); !errors.Is(err, client.ErrUnavailable) {
			fail("put k across the cut: %v, want it timed out (unavailable)", err)
			return
		}
		start := s.Now()
		abortErr = tx.Abort()
		abortTook, aborted = time.Duration(s.Now()-start), true
	})
	if t.Failed() {
		return
	}
	t.Logf("the abort took %v (client timeout %v): %v", abortTook, timeout, abortErr)
	if abortErr != nil || abortTook >= timeout {
		t.Errorf("the abort while the put was out: %v after %v, want OK at once", abortErr, abortTook)
	}
	t.Logf("the gateway sent %d requests again while the cut lasted", s.Handler(c).(*Node).m.Counters["rpc/retransmitted"])
	idle := s.Handler(c).(*Node).set.idle
	t.Logf("the writer of a and k took %v (idle timeout %v): %v", writerTook, idle, writerErr)
	if !written || writerErr != nil || writerTook >= idle/5 {
		t.Errorf("the writer of a and k: done=%v after %v, %v; want it through well within the idle timeout (%v)", written, writerTook, writerErr, idle)
	}
	gw := s.Handler(c).(*Node)
	if n := len(gw.txns); n != 0 {
		t.Errorf("the gateway still holds %d transactions after the abort", n)
	}
}
