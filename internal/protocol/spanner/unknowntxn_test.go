package spanner

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/meridiandb/meridian/internal/node"
	"github.com/meridiandb/meridian/internal/protocol/prototest"
	"github.com/meridiandb/meridian/internal/storage/locks"
	"github.com/meridiandb/meridian/internal/wire"
)

// TestUnheldTxnAnswers: a request of a transaction the coordinator does not hold is answered
// by txnkit.AnswerUnheld, as in k2 and crdb: a later one (Seq > 0) aborts, retryably, cause
// unknown-transaction, counted under aborts/unknown-transaction and beginning nothing; a
// first commit or abort (nothing was done) is answered OK and counted nowhere.
func TestUnheldTxnAnswers(t *testing.T) {
	c := newTestCluster(t, locks.WoundWait, false)
	const client node.ID = 100
	k := c.key(1, 0, "k")
	for _, m := range []*wire.ClientRequest{
		{Txn: 1, Seq: 1, Op: wire.OpPut, Key: k, Value: []byte("v")},
		{Txn: 2, Seq: 3, Op: wire.OpCommit},
	} {
		r := c.request(client, m)
		if r == nil || r.Code != wire.CodeAborted || r.Cause != causeUnknownTxn || r.Txn != m.Txn || r.Seq != m.Seq {
			t.Errorf("%v of unheld txn %d seq %d: %+v, want aborted, cause %s", m.Op, m.Txn, m.Seq, r, causeUnknownTxn)
		}
	}
	for _, m := range []*wire.ClientRequest{{Txn: 3, Op: wire.OpCommit}, {Txn: 4, Op: wire.OpAbort}} {
		if r := c.request(client, m); r == nil || r.Code != wire.CodeOK {
			t.Errorf("first-request %v: %+v, want OK", m.Op, r)
		}
	}
	if n := c.nodes[0].metrics.Counters["aborts/"+causeUnknownTxn]; n != 2 {
		t.Errorf("aborts/%s = %d, want 2", causeUnknownTxn, n)
	}
	if n := len(c.nodes[0].Coord.txns); n != 0 {
		t.Errorf("the coordinator holds %d transactions, want none", n)
	}
	checkQuiet(t, c)
}

// TestAbortedIdleTxnDropped: a transaction aborted while its client has no request in flight
// (wounded while the client thinks) is kept so that the client's next request learns the
// cause; one whose client never sends another was kept for good, an entry per such client in
// the coordinator's table (the idle timer only ended transactions still running). The client's
// next request within the idle timeout still gets the abort and its cause; after it the entry
// is gone and the request is refused as of an unknown transaction.
func TestAbortedIdleTxnDropped(t *testing.T) {
	for _, tc := range []struct {
		name  string
		after time.Duration // client silence after its put, before its next request
		cause string
	}{{"next-request-within-idle", time.Second, causeWoundWait}, {"next-request-after-idle", 5 * time.Second, causeUnknownTxn}} {
		t.Run(tc.name, func(t *testing.T) {
			c := newTestCluster(t, locks.WoundWait, true)
			coord := c.nodes[0].Coord
			const older, younger node.ID = 100, 101
			k0, k2 := c.key(0, 0, "k0"), c.key(2, 0, "k2")
			ok := func(what string, r *wire.ClientReply) {
				t.Helper()
				if r == nil || r.Code != wire.CodeOK {
					t.Fatalf("%s: %+v", what, r)
				}
			}
			ok("older reads k0", c.request(older, &wire.ClientRequest{Txn: 1, Op: wire.OpGet, Key: k0}))
			c.now += int64(time.Millisecond)
			ok("younger writes k2", c.request(younger, &wire.ClientRequest{Txn: 1, Op: wire.OpPut, Key: k2, Value: []byte("y")}))
			// The older wants k2: it wounds the younger, whose client has nothing in flight.
			ok("older reads k2", c.request(older, &wire.ClientRequest{Txn: 1, Seq: 1, Op: wire.OpGet, Key: k2}))
			ok("older commits", c.request(older, &wire.ClientRequest{Txn: 1, Seq: 2, Op: wire.OpCommit}))
			if n := len(coord.txns); n != 1 {
				t.Fatalf("the coordinator holds %d transactions after the wound, want the younger's", n)
			}
			c.fireTimers(tc.after)
			if tc.after >= c.cfg.IdleTimeout {
				if n := len(coord.txns); n != 0 {
					t.Errorf("the coordinator holds %d transactions an idle timeout after the wounded one's last request, want none", n)
				}
			}
			r := c.request(younger, &wire.ClientRequest{Txn: 1, Seq: 1, Op: wire.OpPut, Key: k0, Value: []byte("y")})
			if r == nil || r.Code != wire.CodeAborted || r.Cause != tc.cause {
				t.Errorf("younger's next request %v later: %+v, want aborted, cause %s", tc.after, r, tc.cause)
			}
			if n := len(coord.txns); n != 0 {
				t.Errorf("the coordinator holds %d transactions after the younger's next request, want none", n)
			}
			checkQuiet(t, c)
		})
	}
}

// TestIdleTimeoutAfterLongWait: a request that waits for a lock longer than the idle timeout
// (its client is not silent: it waits for the answer) outlives the idle timer armed when it
// came, which found it in flight and did nothing. Nothing armed the timer again, so if the
// client then fell silent for good (a client process that died) the coordinator ran the
// transaction forever and its keep-alives held its locks at the participants. The client must
// have the idle timeout from the answer to send its next request, and no more.
func TestIdleTimeoutAfterLongWait(t *testing.T) {
	c := newTestCluster(t, locks.WoundWait, true)
	coord := c.nodes[0].Coord
	idle := c.cfg.IdleTimeout
	const older, younger node.ID = 100, 101
	k := c.key(1, 0, "k")
	ok := func(what string, r *wire.ClientReply) {
		t.Helper()
		if r == nil || r.Code != wire.CodeOK {
			t.Fatalf("%s: %+v", what, r)
		}
	}
	ok("older writes k", c.request(older, &wire.ClientRequest{Txn: 1, Op: wire.OpPut, Key: k, Value: []byte("o")}))
	c.now += int64(time.Millisecond)
	// The younger waits for the older's lock (wound-wait: a younger requester waits).
	if r := c.request(younger, &wire.ClientRequest{Txn: 1, Op: wire.OpGet, Key: k}); r != nil {
		t.Fatalf("younger's read answered %+v while the older holds k", r)
	}
	// The older's client keeps it alive past the younger's idle timeout, then commits.
	step := idle / 4
	for i := range 5 {
		c.fireTimers(step)
		ok("older reads", c.request(older, &wire.ClientRequest{Txn: 1, Seq: uint32(1 + i), Op: wire.OpGet, Key: c.key(2, 0, "other")}))
	}
	ok("older commits", c.request(older, &wire.ClientRequest{Txn: 1, Seq: 6, Op: wire.OpCommit}))
	if r := c.replies[younger]; len(r) != 1 || r[0].Code != wire.CodeOK {
		t.Fatalf("younger's read after the older's commit: %+v, want OK", r)
	}
	// The younger's client thinks for almost an idle timeout: its transaction stays. (The
	// clock moves in steps, each a keep-alive's chance to reach the participants.)
	for range 3 {
		c.fireTimers(step)
	}
	if n := coord.Active(); n != 1 {
		t.Fatalf("the coordinator runs %d transactions %v after the younger's answer, want the younger's", n, 3*step)
	}
	// Then it is silent for good: an idle timeout after the answer, the transaction ends.
	for range 2 {
		c.fireTimers(step)
	}
	if n := coord.Active(); n != 0 {
		t.Errorf("the coordinator still runs %d transactions %v after the answer to a client silent since", n, 5*step)
	}
	if n := len(coord.txns); n != 0 {
		t.Errorf("the coordinator still holds %d transactions", n)
	}
	checkQuiet(t, c)
}

// TestLateFirstRequestCopyRefused: the network may deliver a request twice, and a copy of a
// transaction's first request that arrives after the transaction ended found nothing under its
// name and began the transaction again: one no client drives, its write holding the key's lock
// until the idle timeout. It is now refused (a retryable abort the client, no longer waiting
// for it, drops) and begins nothing, while the client's next transaction, numbered above,
// begins as ever. A transaction its client aborted stays known until the idle timer (abort
// keeps it for the client's next request), and a copy arriving meanwhile is dropped as one of
// a request already taken; after that it is refused too.
func TestLateFirstRequestCopyRefused(t *testing.T) {
	for _, end := range []wire.Op{wire.OpCommit, wire.OpAbort} {
		t.Run(end.String(), func(t *testing.T) {
			c := newTestCluster(t, locks.WoundWait, true)
			coord := c.nodes[0].Coord
			const client node.ID = 100
			k := c.key(1, 0, "k")
			first := &wire.ClientRequest{Txn: 1, Op: wire.OpPut, Key: k, Value: []byte("v")}
			if r := c.request(client, first); r == nil || r.Code != wire.CodeOK {
				t.Fatalf("put: %+v", r)
			}
			if r := c.request(client, &wire.ClientRequest{Txn: 1, Seq: 1, Op: end}); r == nil || r.Code != wire.CodeOK {
				t.Fatalf("%v: %+v", end, r)
			}
			refused := 0
			copyOf := func(when string, wantAnswer bool) {
				t.Helper()
				before := len(c.replies[client])
				c.send(client, 0, first)
				c.run()
				got := c.replies[client][before:]
				switch {
				case wantAnswer && (len(got) != 1 || got[0].Code != wire.CodeAborted || got[0].Cause != causeUnknownTxn || got[0].Txn != 1 || got[0].Seq != 0):
					t.Errorf("the copy of the first put %s answered %s, want one abort, cause %s", when, describe(got), causeUnknownTxn)
				case !wantAnswer && len(got) != 0:
					t.Errorf("the copy of the first put %s answered %s, want nothing", when, describe(got))
				}
				if wantAnswer {
					refused++
				}
				if n := coord.Active(); n != 0 {
					t.Errorf("the copy of the first put %s began a transaction: the coordinator runs %d", when, n)
				}
				if n := len(coord.txns); n > 1 || n == 1 && coord.txns[txnKey(client, 1)].abortedBy == "" {
					t.Errorf("the copy of the first put %s: the coordinator holds %d transactions, want none but the aborted one", when, n)
				}
				checkQuiet(t, c)
				if n := c.nodes[0].metrics.Counters["late-first-request"]; n != int64(refused) {
					t.Errorf("late-first-request = %d, want %d", n, refused)
				}
			}
			copyOf("after the "+end.String(), end == wire.OpCommit)
			c.fireTimers(c.cfg.IdleTimeout)
			copyOf("an idle timeout after the "+end.String(), true)
			if r := c.request(client, &wire.ClientRequest{Txn: 2, Op: wire.OpPut, Key: k, Value: []byte("w")}); r == nil || r.Code != wire.CodeOK {
				t.Fatalf("the client's next transaction: %+v", r)
			}
			if r := c.request(client, &wire.ClientRequest{Txn: 2, Seq: 1, Op: wire.OpCommit}); r == nil || r.Code != wire.CodeOK {
				t.Fatalf("the next transaction's commit: %+v", r)
			}
			// An idle timeout after the client's last end, its record goes.
			for range 4 {
				c.fireTimers(c.cfg.IdleTimeout / 3)
			}
			if n := coord.ended.Len(); n != 0 {
				t.Errorf("%d clients' ended transactions remembered an idle timeout after the last, want none", n)
			}
		})
	}
}

// describe prints client replies for a test's message.
func describe(rs []*wire.ClientReply) string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = fmt.Sprintf("%+v", *r)
	}
	return "[" + strings.Join(out, ", ") + "]"
}

// TestSilentClientTxnNotBegunAgain: a transaction whose client is silent past the idle timeout
// is aborted, and the client's next request must be refused, not begin it afresh (prototest has
// the scenario; spanner always refused it, this keeps it so).
func TestSilentClientTxnNotBegunAgain(t *testing.T) {
	prototest.SilentClientTxnNotBegunAgain(t, prototest.SilentClient{Case: prototest.Case{Protocol: Name},
		Idle: 5 * time.Second, Model: "strict-serializable", RefusalCounter: "aborts/" + causeUnknownTxn})
}
