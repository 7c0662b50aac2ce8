package crdb

import (
	"fmt"
	"testing"
	"time"

	"github.com/meridiandb/meridian/client"
	"github.com/meridiandb/meridian/internal/protocol/txnkit"
	"github.com/meridiandb/meridian/internal/sim"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/ts"
)

// TestClientAgesBounded: the gateway keeps a client's age (priority) only for its retry. 100
// distinct clients, one every 200 ms, each commit a transaction and then abandon one (a put,
// then an abort it never retries), the abort that leaves an age behind. The gateway holds at
// most the ages of the clients that aborted within the last idle timeout (plus a tick of the
// expiry), and none once the last of them is that long gone; keeping every client's age, as
// before, left one per client ever seen: 100.
func TestClientAgesBounded(t *testing.T) {
	const (
		clients  = 100
		interval = 200 * time.Millisecond
		idle     = 5 * time.Second // idle-timeout's default
		tick     = 200 * time.Millisecond
	)
	b := newBatchSim(t, nil)
	gw := b.s.Handler(b.coord).(*Node)
	finished, most := 0, 0
	var failures []string
	for i := range clients {
		key := b.keyOn(t, b.coord, fmt.Sprintf("age/%d", i))
		b.s.AddClient(0, b.coord, int64(100*time.Millisecond+time.Duration(i)*interval), func(db *client.DB) {
			defer func() { finished++ }()
			if err := client.RunTxn(db, client.TxnOptions{}, func(tx *client.Txn) error {
				return tx.Put(key, []byte("committed"))
			}); err != nil {
				failures = append(failures, fmt.Sprintf("client %d: commit: %v", i, err))
				return
			}
			tx := db.Begin(client.TxnOptions{})
			if err := tx.Put(key, []byte("abandoned")); err != nil {
				failures = append(failures, fmt.Sprintf("client %d: put: %v", i, err))
			}
			if err := tx.Abort(); err != nil {
				failures = append(failures, fmt.Sprintf("client %d: abort: %v", i, err))
			}
		})
	}
	end := int64(time.Duration(clients)*interval + time.Second)
	for at := int64(0); at < end; at += int64(10 * time.Millisecond) {
		b.s.At(at, func() { most = max(most, len(gw.clientAge)) })
	}
	b.s.RunUntil(end)
	if finished != clients {
		t.Fatalf("%d of %d clients finished", finished, clients)
	}
	for _, f := range failures {
		t.Error(f)
	}
	// Clients abort one interval apart: a window of idle + tick holds this many aborts.
	bound := int((idle+tick)/interval) + 1
	t.Logf("the gateway held at most %d ages while %d clients came and went (bound %d)", most, clients, bound)
	if most > bound {
		t.Errorf("the gateway held %d client ages at once, want at most %d (the aborts of one idle timeout): it grows with the clients that finished", most, bound)
	}
	b.s.RunUntil(b.s.Now() + int64(idle+2*tick))
	b.s.Stop()
	if n := len(gw.clientAge); n != 0 {
		t.Errorf("%d client ages kept an idle timeout after every client finished, want none", n)
	}
}

// TestRetryKeepsAge: a transaction that aborts, retried (Attempt > 0) by its client after a
// backoff, begins with its first attempt's age, over several attempts and although ages are
// expired meanwhile (a backoff of a second spans five expiry ticks) and other clients finish
// around it; so an old transaction wins eventually. A retry that comes more than the idle
// timeout after the abort gets a fresh age, as after a coordinator restart, and so does a
// client's next transaction (Attempt 0).
func TestRetryKeepsAge(t *testing.T) {
	for _, tc := range []struct {
		name    string
		backoff time.Duration
		same    bool // every attempt has the first one's age
	}{{"retry-after-1s", time.Second, true}, {"retry-after-6s", 6 * time.Second, false}} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBatchSim(t, nil)
			gw := b.s.Handler(b.coord).(*Node)
			key := b.keyOn(t, b.coord, "retry")
			// Other clients commit and abandon transactions on the same gateway meanwhile.
			for i := range 20 {
				other := b.keyOn(t, b.coord, fmt.Sprintf("other/%d", i))
				b.s.AddClient(0, b.coord, int64(50*time.Millisecond+time.Duration(i)*100*time.Millisecond), func(db *client.DB) {
					_ = client.RunTxn(db, client.TxnOptions{}, func(tx *client.Txn) error { return tx.Put(other, []byte("x")) })
					tx := db.Begin(client.TxnOptions{})
					_ = tx.Put(other, []byte("y"))
					_ = tx.Abort()
				})
			}
			var cl *sim.Client
			// age returns the age the gateway gave tx, which must be running there.
			age := func(tx *client.Txn) ts.Timestamp {
				ct := gw.txns[txnkit.ClientTxn{Client: topo.NodeID(cl.ID()), Txn: tx.ID()}]
				if ct == nil {
					t.Errorf("transaction %d is not running at the gateway", tx.ID())
					return ts.Zero
				}
				return ct.meta.Age
			}
			var ages []ts.Timestamp
			var next ts.Timestamp
			b.runClient(t, func(c *sim.Client, db *client.DB, fail func(string, ...any)) {
				cl = c
				err := client.RunTxnWith(db, client.TxnOptions{}, client.RetryPolicy{BaseBackoff: tc.backoff, MaxBackoff: tc.backoff},
					func(tx *client.Txn) error {
						if err := tx.Put(key, []byte("v")); err != nil {
							return err
						}
						ages = append(ages, age(tx))
						if len(ages) < 3 {
							return &client.AbortError{Cause: "test"} // the client gives up this attempt
						}
						return nil
					})
				if err != nil {
					fail("transaction: %v", err)
				}
				tx := db.Begin(client.TxnOptions{})
				if err := tx.Put(key, []byte("w")); err != nil {
					fail("next transaction: %v", err)
				}
				next = age(tx)
				if err := tx.Commit(); err != nil {
					fail("next transaction's commit: %v", err)
				}
			})
			if len(ages) != 3 {
				t.Fatalf("%d attempts ran, want 3", len(ages))
			}
			t.Logf("ages of the attempts %v, of the next transaction %v", ages, next)
			for i, a := range ages[1:] {
				if (a == ages[0]) != tc.same {
					t.Errorf("attempt %d began with age %v, the first with %v: want the same: %v", i+2, a, ages[0], tc.same)
				}
			}
			if !ages[0].Less(next) {
				t.Errorf("the next transaction began with age %v, want a fresh one above %v", next, ages[0])
			}
		})
	}
}
