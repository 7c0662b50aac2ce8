package crdb

import (
	"fmt"
	"testing"
	"time"

	"github.com/meridiandb/meridian/client"
	"github.com/meridiandb/meridian/internal/protocol/prototest"
)

// TestRequestsResentAfterRestart: a transaction of a live coordinator C sends a request to a
// leaseholder (and record holder) X that crashes, before it arrives (the write) or with it in
// flight (the commit's staging and proof). X restarts 300 ms later. The transaction must go on
// once X is back, as CockroachDB's DistSender retries on the broken connection. Before, nothing
// told C: the request was awaited until the idle timeout (5 s), the put then aborted
// (coordinator-timeout) and the commit answered "unknown", while the transaction's intents
// and live record blocked every other transaction on its keys; under three 300 ms crashes in a
// 20-key list-append run that stalled the whole cluster for four seconds.
func TestRequestsResentAfterRestart(t *testing.T) {
	const down = 300 * time.Millisecond
	for _, tc := range []struct {
		name string
		// beforePut: X crashes before the put; otherwise just after the client asks to commit
		// (the staging and the proof are then on their way to X, a WAN away).
		beforePut bool
	}{{"write-while-down", true}, {"commit-in-flight", false}} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBatchSim(t, nil)
			s, tp := b.s, b.tp
			defer s.Stop()
			x, c := tp.DataNodes(0)[0], tp.DataNodes(1)[0]
			k := prototest.KeysOn(t, tp, x, "restart", 1)[0]
			var failures []string
			fail := func(format string, args ...any) { failures = append(failures, fmt.Sprintf(format, args...)) }
			var restartAt, doneAt int64
			crash := func(at int64) {
				restartAt = at + int64(down)
				s.At(at, func() { s.Crash(x) })
				s.At(restartAt, func() {
					if err := s.Restart(x); err != nil {
						fail("restart: %v", err)
					}
				})
			}
			var got string
			s.AddClient(1, c, 100*ms, func(db *client.DB) {
				if tc.beforePut {
					crash(s.Now())
				}
				tx := db.Begin(client.TxnOptions{})
				if err := tx.Put(k, []byte("v")); err != nil {
					fail("put: %v", err)
					return
				}
				if !tc.beforePut {
					crash(s.Now() + ms)
				}
				if err := tx.Commit(); err != nil {
					fail("commit: %v", err)
					return
				}
				doneAt = s.Now()
				if err := client.RunTxn(db, client.TxnOptions{ReadOnly: true}, func(tx *client.Txn) error {
					v, err := tx.Get(k)
					got = string(v)
					return err
				}); err != nil {
					fail("read back: %v", err)
				}
			})
			s.RunUntil(int64(10 * time.Second))
			for _, f := range failures {
				t.Error(f)
			}
			if t.Failed() {
				return
			}
			resent := s.Handler(c).(*Node).m.Counters["rpc/resent"]
			t.Logf("X back at %v, committed %v later; C resent %d requests", time.Duration(restartAt),
				time.Duration(doneAt-restartAt), resent)
			// A few WAN round trips after X is back, not the idle timeout.
			if doneAt-restartAt > int64(time.Second) {
				t.Errorf("committed %v after X restarted", time.Duration(doneAt-restartAt))
			}
			if got != "v" {
				t.Errorf("read back %q, want v", got)
			}
		})
	}
}
