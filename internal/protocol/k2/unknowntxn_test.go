package k2

import (
	"errors"
	"testing"
	"time"

	"github.com/meridiandb/meridian/client"
	"github.com/meridiandb/meridian/internal/check"
	"github.com/meridiandb/meridian/internal/history"
	"github.com/meridiandb/meridian/internal/node/nodetest"
	"github.com/meridiandb/meridian/internal/protocol/prototest"
	"github.com/meridiandb/meridian/internal/protocol/txnkit"
	"github.com/meridiandb/meridian/internal/wire"
)

// TestSilentClientTxnNotBegunAgain: a client puts k1, stays silent past the idle timeout (the
// coordinator's tick aborts the transaction, telling no one, and k1's intent is rolled back),
// then goes on: a put of k2, a get of k2, or the commit. The coordinator must refuse with a
// retryable abort (unknown-transaction), never begin a fresh transaction under the old one's
// name: that one committed k2 (or nothing) and the client, told its commit succeeded, had lost
// its put of k1 (before: k1 not found, k2 = 2). The client's view is checked as a list-append
// history (k1 and k2 as lists, a later transaction reading both): after a put of k2 the checker
// sees the lost write as a cycle (G-single). A commit was refused before too, with the same
// cause, but not counted.
func TestSilentClientTxnNotBegunAgain(t *testing.T) {
	const idle = 5 * time.Second // idle-timeout's default
	for _, second := range []string{"put", "get", "commit"} {
		t.Run(second, func(t *testing.T) {
			s := newScript(t, nil, nil)
			tp := s.Topology()
			coord := tp.DataNodes(0)[0]
			keys := prototest.KeysOn(t, tp, coord, "silent", 2)
			rec := history.NewRecorder()
			list := func(found bool, v int64) history.Value {
				if found {
					return history.ListValue([]int64{v})
				}
				return history.ListValue([]int64{})
			}
			var fail failures
			done := false
			s.AddClient(0, coord, 100*ms, func(db *client.DB) {
				defer func() { done = true }()
				now := db.Transport().Now
				ops := []history.MicroOp{{F: history.FAppend, Key: 1, Value: history.IntValue(1)}}
				switch second {
				case "put":
					ops = append(ops, history.MicroOp{F: history.FAppend, Key: 2, Value: history.IntValue(2)})
				case "get":
					ops = append(ops, history.MicroOp{F: history.FRead, Key: 2})
				}
				rec.Invoke(0, 0, now(), ops)
				tx := db.Begin(client.TxnOptions{})
				if err := tx.Put(keys[0], []byte("1")); err != nil {
					fail.add("put k1: %v", err)
					return
				}
				db.Transport().Sleep(idle + time.Second)
				var err error
				switch second {
				case "put":
					err = tx.Put(keys[1], []byte("2"))
				case "get":
					_, err = tx.Get(keys[1])
					if found := err == nil; found || errors.Is(err, client.ErrNotFound) {
						ops[1].Value, err = list(found, 2), nil
					}
				}
				if err == nil {
					err = tx.Commit()
				}
				if err == nil {
					rec.Complete(history.OK, 0, 0, now(), ops, "")
					fail.add("the transaction committed after the coordinator had dropped it at its idle timeout")
				} else {
					rec.Complete(history.Fail, 0, 0, now(), ops, err.Error())
					if !client.IsRetryable(err) || client.AbortCause(err) != txnkit.CauseUnknownTxn {
						fail.add("the %s after the idle timeout failed with %v, want a retryable abort, cause %s", second, err, txnkit.CauseUnknownTxn)
					}
				}

				reads := []history.MicroOp{{F: history.FRead, Key: 1}, {F: history.FRead, Key: 2}}
				rec.Invoke(0, 0, now(), reads)
				if err := client.RunTxn(db, client.TxnOptions{ReadOnly: true}, func(tx *client.Txn) error {
					for i, k := range keys {
						_, err := tx.Get(k)
						if err != nil && !errors.Is(err, client.ErrNotFound) {
							return err
						}
						reads[i].Value = list(err == nil, int64(i+1))
					}
					return nil
				}); err != nil {
					fail.add("read back: %v", err)
					return
				}
				rec.Complete(history.OK, 0, 0, now(), reads, "")
				t.Logf("%s after %v of silence: %v; then read k1 %v, k2 %v", second, idle+time.Second, err, reads[0].Value.List, reads[1].Value.List)
			})
			s.RunUntil(20 * int64(time.Second))
			fail.report(t)
			if !done {
				t.Fatal("the client did not finish in 20 virtual seconds")
			}
			var refused int64
			for _, id := range tp.DataNodes(0) {
				refused += s.Handler(id).(*Node).Metrics().Counters["abort."+txnkit.CauseUnknownTxn]
			}
			if refused != 1 {
				t.Errorf("abort.%s = %d, want 1", txnkit.CauseUnknownTxn, refused)
			}
			rep, err := check.Check(rec.Ops(), model)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Verdict != check.Valid {
				t.Errorf("the client's history is %s:\n%v", rep.Verdict, rep)
			}
		})
	}
}

// TestRestartedCoordinatorRefusesEarlierTxn: a coordinator crashes after a client's first put
// (its transaction was only in memory) and comes back; the client's next requests of that
// transaction, one arriving before the new life's incarnation is durable and one after, are
// refused (retryable, unknown-transaction) and send nothing: begun afresh, the transaction would
// take a timestamp and commit without the put the earlier life took. The client's next
// transaction begins.
func TestRestartedCoordinatorRefusesEarlierTxn(t *testing.T) {
	s := newReqIDScript(t)
	keys := prototest.KeysOn(t, s.tp, s.remote, "restart", 2)
	// take returns the replies to the client and whether a write went out, since the last take.
	take := func() ([]*wire.ClientReply, bool) {
		var replies []*wire.ClientReply
		wrote := false
		for _, m := range s.sent {
			switch r := m.M.(type) {
			case *wire.ClientReply:
				if m.To == s.client {
					replies = append(replies, r)
				}
			case *OpsReq:
				wrote = wrote || len(r.Writes) > 0
			case *WriteReq:
				wrote = true
			}
		}
		s.sent = nil
		return replies, wrote
	}
	put := func(txn uint64, seq uint32, key string) {
		s.n.Handle(s.client, &wire.ClientRequest{Txn: txn, Seq: seq, Op: wire.OpPut, Key: key, Value: []byte("v")})
	}
	refused := func(what string, seq uint32) {
		t.Helper()
		s.settle()
		replies, wrote := take()
		if wrote {
			t.Errorf("%s sent a write", what)
		}
		if len(replies) != 1 {
			t.Fatalf("%s: %d replies, want 1", what, len(replies))
		}
		if r := replies[0]; r.Code != wire.CodeAborted || r.Cause != txnkit.CauseUnknownTxn || r.Txn != 1 || r.Seq != seq {
			t.Errorf("%s answered %+v, want txn 1 seq %d aborted, cause %s", what, r, seq, txnkit.CauseUnknownTxn)
		}
	}

	put(1, 0, keys[0])
	s.settle()
	if _, wrote := take(); !wrote {
		t.Fatal("the first put sent no write")
	}

	// The crash: the transaction was only in memory. The new life is handed the put before its
	// incarnation is durable.
	s.env = &nodetest.ScriptEnv{ID: s.self, Topo: s.tp, Clock: s.env.Clock, Epsilon: 100 * time.Microsecond, Disk: s.disk}
	n, err := newNode(s.env, s.disk, s.c)
	if err != nil {
		t.Fatal(err)
	}
	s.n = n
	if s.n.ready {
		t.Fatal("the new life is ready before its incarnation's flush: the scenario tests nothing")
	}
	put(1, 1, keys[1])
	refused("the put arriving while the new life started", 1)
	s.n.Handle(s.client, &wire.ClientRequest{Txn: 1, Seq: 2, Op: wire.OpCommit})
	refused("the commit", 2)

	put(2, 0, keys[1])
	s.settle()
	if _, wrote := take(); !wrote {
		t.Error("the client's next transaction sent no write")
	}
	if got := s.n.m.Counters["abort."+txnkit.CauseUnknownTxn]; got != 2 {
		t.Errorf("abort.%s = %d, want 2", txnkit.CauseUnknownTxn, got)
	}
}

// TestLateFirstRequestCopyRefused: the network may deliver a request twice, and a copy of a
// transaction's first request that arrives after the transaction ended (its client aborted it,
// or the tick dropped it at its idle timeout) found nothing under its name and began the
// transaction again: one no client drives, its reads and writes at the data nodes, and, after
// an idle drop, the client's next request of the old transaction, which must be refused
// (unknown-transaction), ran in it instead. The copy is now refused (a retryable abort the
// client, no longer waiting for it, drops) and sends nothing; the client's next transaction,
// numbered above, begins as ever.
func TestLateFirstRequestCopyRefused(t *testing.T) {
	for _, end := range []string{"abort", "idle"} {
		t.Run(end, func(t *testing.T) {
			s := newReqIDScript(t)
			keys := prototest.KeysOn(t, s.tp, s.remote, "late", 1)
			ids := s.request(1, 0, keys...)
			if len(ids) != 1 {
				t.Fatalf("the first read sent %d reads, want 1", len(ids))
			}
			s.n.Handle(s.remote, &ReadResp{ReqID: ids[0], Found: true, Value: []byte("v")})
			if r := s.reply(); r == nil || r.Code != wire.CodeOK {
				t.Fatalf("the first read answered %+v", r)
			}
			if end == "abort" {
				s.n.Handle(s.client, &wire.ClientRequest{Txn: 1, Seq: 1, Op: wire.OpAbort})
				if r := s.reply(); r == nil || r.Code != wire.CodeOK {
					t.Fatalf("the abort answered %+v", r)
				}
			} else {
				s.env.Advance(s.c.idleTimeout + s.c.lease)
				s.settle()
				s.sent = nil
			}
			if n := len(s.n.txns); n != 0 {
				t.Fatalf("the coordinator holds %d transactions after the %s, want none", n, end)
			}
			refused := func(what string, seq uint32, ids []uint64) {
				t.Helper()
				if len(ids) != 0 {
					t.Errorf("%s sent %d reads", what, len(ids))
				}
				if r := s.reply(); r == nil || r.Code != wire.CodeAborted || r.Cause != txnkit.CauseUnknownTxn || r.Txn != 1 || r.Seq != seq {
					t.Errorf("%s answered %+v, want txn 1 seq %d aborted, cause %s", what, r, seq, txnkit.CauseUnknownTxn)
				}
				if n := len(s.n.txns); n != 0 {
					t.Errorf("after %s the coordinator holds %d transactions, want none", what, n)
				}
			}
			refused("the late copy of the first read", 0, s.request(1, 0, keys...))
			if end == "idle" {
				refused("the client's next request after its idle timeout", 1, s.request(1, 1, keys...))
			}
			if got := s.n.m.Counters["late-first-request"]; got != 1 {
				t.Errorf("late-first-request = %d, want 1", got)
			}
			if ids := s.request(2, 0, keys...); len(ids) != 1 {
				t.Errorf("the client's next transaction sent %d reads, want 1", len(ids))
			}
		})
	}
}
