package spanner

import (
	"fmt"
	"testing"
	"time"

	"github.com/meridiandb/meridian/internal/node"
	"github.com/meridiandb/meridian/internal/storage/locks"
	"github.com/meridiandb/meridian/internal/ts"
	"github.com/meridiandb/meridian/internal/wire"
)

// churn has client cl, through coordinator 0, commit a transaction on key and then abandon
// another (a write, then an abort it never retries): the abort leaves an age behind.
func (c *testCluster) churn(t *testing.T, cl node.ID, key string) {
	t.Helper()
	for _, m := range []*wire.ClientRequest{
		{Txn: 1, Op: wire.OpPut, Key: key, Value: []byte("committed")},
		{Txn: 1, Seq: 1, Op: wire.OpCommit},
		{Txn: 2, Op: wire.OpPut, Key: key, Value: []byte("abandoned")},
		{Txn: 2, Seq: 1, Op: wire.OpAbort},
	} {
		if r := c.request(cl, m); r == nil || r.Code != wire.CodeOK {
			t.Fatalf("client %d: %v of txn %d: %+v", cl, m.Op, m.Txn, r)
		}
	}
}

// TestClientAgesBounded: the coordinator keeps a client's age (priority) only for its retry.
// 100 distinct clients, one every 200 ms, each commit a transaction and then abandon one. A
// commit leaves no age; the coordinator holds at most the ages of the clients that aborted
// within the last idle timeout (plus one period of the keep-alive tick that expires them), and
// none once the last of them is that long gone. Keeping one age per client, as before, held
// one per client ever seen: 100.
func TestClientAgesBounded(t *testing.T) {
	const (
		clients  = 100
		interval = 200 * time.Millisecond
	)
	c := newTestCluster(t, locks.WoundWait, false)
	coord := c.nodes[0].Coord
	idle := c.cfg.IdleTimeout
	tick := idle / 3 // armKeepAlive's period
	most, commitsLeft := 0, 0
	for i := range clients {
		cl := node.ID(100 + i)
		key := c.key(i%3, i%2, fmt.Sprintf("age/%d", i))
		before := coord.ages.Len()
		if r := c.request(cl, &wire.ClientRequest{Txn: 1, Op: wire.OpPut, Key: key, Value: []byte("v")}); r == nil || r.Code != wire.CodeOK {
			t.Fatalf("client %d: put: %+v", cl, r)
		}
		if r := c.request(cl, &wire.ClientRequest{Txn: 1, Seq: 1, Op: wire.OpCommit}); r == nil || r.Code != wire.CodeOK {
			t.Fatalf("client %d: commit: %+v", cl, r)
		}
		if coord.ages.Len() != before {
			commitsLeft++
		}
		// It abandons its next transaction, an abort it never retries.
		if r := c.request(cl, &wire.ClientRequest{Txn: 2, Op: wire.OpPut, Key: key, Value: []byte("w")}); r == nil || r.Code != wire.CodeOK {
			t.Fatalf("client %d: second put: %+v", cl, r)
		}
		if r := c.request(cl, &wire.ClientRequest{Txn: 2, Seq: 1, Op: wire.OpAbort}); r == nil || r.Code != wire.CodeOK {
			t.Fatalf("client %d: abort: %+v", cl, r)
		}
		most = max(most, coord.ages.Len())
		c.fireTimers(interval)
	}
	// The tick fires up to one step late here (timers fire as the clock moves by interval), so
	// an age may stay idle + tick + interval after its abort; the aborts come interval apart.
	bound := int((idle+tick+interval)/interval) + 1
	if commitsLeft > 0 {
		t.Errorf("%d of %d commits left an age behind: a committed transaction is never retried", commitsLeft, clients)
	}
	t.Logf("the coordinator held at most %d ages while %d clients came and went (bound %d)", most, clients, bound)
	if most > bound {
		t.Errorf("the coordinator held %d client ages at once, want at most %d (the aborts of one idle timeout): it grows with the clients that finished", most, bound)
	}
	for range int((idle+tick+interval)/interval) + 1 {
		c.fireTimers(interval)
	}
	if n := coord.ages.Len(); n != 0 {
		t.Errorf("%d client ages kept an idle timeout after every client finished, want none", n)
	}
	checkQuiet(t, c)
}

// TestRetryKeepsAge: a transaction that aborts, retried (Attempt > 0) by its client after a
// backoff, begins with its first attempt's age, over several attempts and although ages are
// expired meanwhile (a backoff of a second spans keep-alive ticks) and other clients finish
// around it; so under wound-wait its last attempt wounds a younger rival that holds the lock it
// wants, where a fresh age would have waited for the rival. A retry that comes more than the
// idle timeout (and a tick) after the abort gets a fresh age, as after a coordinator restart,
// and so does the client's next transaction (Attempt 0).
func TestRetryKeepsAge(t *testing.T) {
	for _, tc := range []struct {
		name    string
		backoff time.Duration
		same    bool // every attempt has the first one's age
	}{{"retry-after-1s", time.Second, true}, {"retry-after-8s", 8 * time.Second, false}} {
		t.Run(tc.name, func(t *testing.T) {
			c := newTestCluster(t, locks.WoundWait, true)
			coord := c.nodes[0].Coord
			const retrier, rival node.ID = 100, 101
			key := c.key(1, 0, "retry")
			others := node.ID(200)
			// backoff lets the clock pass by d, other clients committing and abandoning
			// transactions on the same coordinator meanwhile.
			backoff := func(d time.Duration) {
				for step := 200 * time.Millisecond; d > 0; d -= step {
					c.churn(t, others, c.key(int(others)%3, 1, fmt.Sprintf("other/%d", others)))
					others++
					c.fireTimers(min(step, d))
				}
			}
			// put writes key eagerly (locking it) in the transaction and returns its reply.
			put := func(cl node.ID, txn uint64, attempt uint32) *wire.ClientReply {
				return c.request(cl, &wire.ClientRequest{Txn: txn, Attempt: attempt, Op: wire.OpPut, Key: key, Value: []byte("v")})
			}
			age := func(cl node.ID, txn uint64) ts.Timestamp {
				t.Helper()
				ct := coord.txns[txnKey(cl, txn)]
				if ct == nil {
					t.Fatalf("client %d's transaction %d is not running at the coordinator", cl, txn)
				}
				return ct.age
			}
			var ages []ts.Timestamp
			for attempt := range uint32(2) {
				txn := uint64(attempt) + 1
				if r := put(retrier, txn, attempt); r == nil || r.Code != wire.CodeOK {
					t.Fatalf("attempt %d's put: %+v", attempt+1, r)
				}
				ages = append(ages, age(retrier, txn))
				// The client gives this attempt up (a retryable error of its own).
				if r := c.request(retrier, &wire.ClientRequest{Txn: txn, Seq: 1, Op: wire.OpAbort}); r == nil || r.Code != wire.CodeOK {
					t.Fatalf("attempt %d's abort: %+v", attempt+1, r)
				}
				backoff(tc.backoff)
			}
			// A younger rival takes the lock the third attempt wants.
			if r := put(rival, 1, 0); r == nil || r.Code != wire.CodeOK {
				t.Fatalf("rival's put: %+v", r)
			}
			c.now += int64(time.Millisecond)
			r := put(retrier, 3, 2)
			ages = append(ages, age(retrier, 3))
			t.Logf("ages of the attempts %v, the rival's %v", ages, age(rival, 1))
			for i, a := range ages[1:] {
				if (a == ages[0]) != tc.same {
					t.Errorf("attempt %d began with age %v, the first with %v: want the same: %v", i+2, a, ages[0], tc.same)
				}
			}
			rivalCommit := c.request(rival, &wire.ClientRequest{Txn: 1, Seq: 1, Op: wire.OpCommit})
			if tc.same {
				// Older than the rival: it wounds the rival and takes the lock at once.
				if r == nil || r.Code != wire.CodeOK {
					t.Fatalf("the retry's put, older than the rival: %+v, want OK at once", r)
				}
				if rivalCommit == nil || rivalCommit.Code != wire.CodeAborted || rivalCommit.Cause != causeWoundWait {
					t.Fatalf("the rival's commit: %+v, want aborted by %s", rivalCommit, causeWoundWait)
				}
			} else {
				// Younger than the rival: it waits for the rival to commit.
				if r != nil {
					t.Fatalf("the retry's put, younger than the rival, answered %+v before the rival ended", r)
				}
				if rivalCommit == nil || rivalCommit.Code != wire.CodeOK {
					t.Fatalf("the rival's commit: %+v", rivalCommit)
				}
				if got := c.replies[retrier]; len(got) == 0 || got[len(got)-1].Code != wire.CodeOK || got[len(got)-1].Txn != 3 {
					t.Fatalf("the retry's put after the rival committed: %+v", got)
				}
			}
			if r := c.request(retrier, &wire.ClientRequest{Txn: 3, Seq: 1, Op: wire.OpCommit}); r == nil || r.Code != wire.CodeOK {
				t.Fatalf("the retry's commit: %+v", r)
			}
			c.now += int64(time.Millisecond)
			if r := put(retrier, 4, 0); r == nil || r.Code != wire.CodeOK {
				t.Fatalf("next transaction's put: %+v", r)
			}
			if next := age(retrier, 4); !ages[0].Less(next) || next == ages[2] {
				t.Errorf("the next transaction began with age %v, want a fresh one (first attempt %v, last %v)", next, ages[0], ages[2])
			}
			if r := c.request(retrier, &wire.ClientRequest{Txn: 4, Seq: 1, Op: wire.OpCommit}); r == nil || r.Code != wire.CodeOK {
				t.Fatalf("next transaction's commit: %+v", r)
			}
			checkQuiet(t, c)
		})
	}
}
