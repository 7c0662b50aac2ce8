package crdb

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/meridiandb/meridian/client"
	"github.com/meridiandb/meridian/internal/check"
	"github.com/meridiandb/meridian/internal/history"
	"github.com/meridiandb/meridian/internal/node"
	"github.com/meridiandb/meridian/internal/node/nodetest"
	"github.com/meridiandb/meridian/internal/protocol/prototest"
	"github.com/meridiandb/meridian/internal/sim"
	"github.com/meridiandb/meridian/internal/storage/durable"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/wire"
)

// TestSilentClientTxnNotBegunAgain: a client puts k1, stays silent past the idle timeout (the
// gateway aborts the transaction and rolls k1 back), then goes on: a put of k2, a get of k2, or
// the commit. The gateway must refuse with a retryable abort (unknown-transaction), never
// begin a fresh transaction under the old one's name: that one committed k2 (or nothing) and
// the client, told its commit succeeded, had lost its put of k1 (before: k1 not found, k2 =
// 2). The client's view is also checked as a list-append history (k1 and k2 as lists, a later
// transaction reading both): after a put of k2 the serializable checker sees the lost write as
// a cycle (G-single), the reader following the transaction on k2 and preceding it on k1; after
// a get it cannot, as the reader may be ordered first. A commit was refused before too, with
// cause coordinator-timeout, now the same cause as the others.
func TestSilentClientTxnNotBegunAgain(t *testing.T) {
	const idle = 5 * time.Second // idle-timeout's default
	for _, second := range []string{"put", "get", "commit"} {
		t.Run(second, func(t *testing.T) {
			b := newBatchSim(t, nil)
			k1, k2 := b.keyOn(t, b.coord, "silent/1"), b.keyOn(t, b.coord, "silent/2")
			rec := history.NewRecorder()
			list := func(found bool, v int64) history.Value {
				if found {
					return history.ListValue([]int64{v})
				}
				return history.ListValue([]int64{})
			}
			b.runClient(t, func(c *sim.Client, db *client.DB, fail func(string, ...any)) {
				ops := []history.MicroOp{{F: history.FAppend, Key: 1, Value: history.IntValue(1)}}
				switch second {
				case "put":
					ops = append(ops, history.MicroOp{F: history.FAppend, Key: 2, Value: history.IntValue(2)})
				case "get":
					ops = append(ops, history.MicroOp{F: history.FRead, Key: 2})
				}
				rec.Invoke(0, 0, b.s.Now(), ops)
				tx := db.Begin(client.TxnOptions{})
				if err := tx.Put(k1, []byte("1")); err != nil {
					fail("put k1: %v", err)
					return
				}
				c.Sleep(idle + time.Second)
				var err error
				switch second {
				case "put":
					err = tx.Put(k2, []byte("2"))
				case "get":
					_, err = tx.Get(k2)
					if found := err == nil; found || errors.Is(err, client.ErrNotFound) {
						ops[1].Value, err = list(found, 2), nil
					}
				}
				if err == nil {
					err = tx.Commit()
				}
				if err == nil {
					rec.Complete(history.OK, 0, 0, b.s.Now(), ops, "")
					fail("the transaction committed after the gateway had dropped it at its idle timeout")
				} else {
					rec.Complete(history.Fail, 0, 0, b.s.Now(), ops, err.Error())
					if !client.IsRetryable(err) || client.AbortCause(err) != causeUnknownTxn {
						fail("the %s after the idle timeout failed with %v, want a retryable abort, cause %s", second, err, causeUnknownTxn)
					}
				}

				reads := []history.MicroOp{{F: history.FRead, Key: 1}, {F: history.FRead, Key: 2}}
				rec.Invoke(0, 0, b.s.Now(), reads)
				if err := client.RunTxn(db, client.TxnOptions{ReadOnly: true}, func(tx *client.Txn) error {
					for i, k := range []string{k1, k2} {
						_, err := tx.Get(k)
						if err != nil && !errors.Is(err, client.ErrNotFound) {
							return err
						}
						reads[i].Value = list(err == nil, int64(i+1))
					}
					return nil
				}); err != nil {
					fail("read back: %v", err)
					return
				}
				rec.Complete(history.OK, 0, 0, b.s.Now(), reads, "")
				t.Logf("%s after %v of silence: %v; then read k1 %v, k2 %v", second, idle+time.Second, err, reads[0].Value.List, reads[1].Value.List)
			})
			if got := b.counter("abort/" + causeUnknownTxn); got != 1 {
				t.Errorf("abort/%s = %d, want 1", causeUnknownTxn, got)
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

// TestRestartedCoordinatorRefusesEarlierTxn: a gateway crashes after a client's first put
// (its transaction was only in memory) and comes back; the client's next requests of that
// transaction, one queued before the new life's incarnation is durable and one after, are
// refused (retryable, unknown-transaction) and send nothing: begun afresh, the transaction
// would commit without the put the earlier life took. The client's next transaction begins.
func TestRestartedCoordinatorRefusesEarlierTxn(t *testing.T) {
	cfg, err := prototest.SimConfig(prototest.Case{Protocol: name, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	tp := cfg.Topology
	self, cl := tp.DataNodes(0)[0], topo.NodeID(len(tp.Nodes)+1)
	keys := prototest.KeysOn(t, tp, self, "restart", 2)
	disk := durable.NewMem()
	life := func() (*Node, *nodetest.ScriptEnv) {
		t.Helper()
		env := &nodetest.ScriptEnv{ID: self, Topo: tp, Clock: int64(time.Second), Disk: disk}
		h, err := proto{}.NewNode(node.Config{Env: env, Durable: disk})
		if err != nil {
			t.Fatal(err)
		}
		return h.(*Node), env
	}
	// take returns the replies to the client and whether a write went out, since the last take.
	take := func(env *nodetest.ScriptEnv) ([]*wire.ClientReply, bool) {
		var replies []*wire.ClientReply
		wrote := false
		for _, s := range env.Take() {
			switch m := s.M.(type) {
			case *wire.ClientReply:
				if s.To == cl {
					replies = append(replies, m)
				}
			case *WriteReq:
				wrote = true
			}
		}
		return replies, wrote
	}
	refused := func(what string, seq uint32, env *nodetest.ScriptEnv) {
		t.Helper()
		replies, wrote := take(env)
		if wrote {
			t.Errorf("%s sent a write", what)
		}
		if len(replies) != 1 {
			t.Fatalf("%s: %d replies, want 1", what, len(replies))
		}
		if r := replies[0]; r.Code != wire.CodeAborted || r.Cause != causeUnknownTxn || r.Txn != 1 || r.Seq != seq {
			t.Errorf("%s answered %+v, want txn 1 seq %d aborted, cause %s", what, r, seq, causeUnknownTxn)
		}
	}

	n, env := life()
	env.Flush()
	n.Handle(cl, &wire.ClientRequest{Txn: 1, Seq: 0, Op: wire.OpPut, Key: keys[0], Value: []byte("a")})
	if _, wrote := take(env); !wrote {
		t.Fatal("the first put sent no write")
	}

	n, env = life() // the crash: the transaction was only in memory
	n.Handle(cl, &wire.ClientRequest{Txn: 1, Seq: 1, Op: wire.OpPut, Key: keys[1], Value: []byte("b")})
	env.Flush() // the incarnation is durable: the queued put is served
	refused("the put queued while the new life started", 1, env)
	n.Handle(cl, &wire.ClientRequest{Txn: 1, Seq: 2, Op: wire.OpCommit})
	env.Flush()
	refused("the commit", 2, env)

	n.Handle(cl, &wire.ClientRequest{Txn: 2, Seq: 0, Op: wire.OpPut, Key: keys[1], Value: []byte("b")})
	if _, wrote := take(env); !wrote {
		t.Error("the client's next transaction sent no write")
	}
	if got := n.m.Counters["abort/"+causeUnknownTxn]; got != 2 {
		t.Errorf("abort/%s = %d, want 2", causeUnknownTxn, got)
	}
}

// TestLateFirstRequestCopyRefused: the network may deliver a request twice, and a copy of a
// transaction's first request that arrives after the transaction ended (committed, or aborted
// by its client) found nothing under its name and began the transaction again: one no client
// drives, its write laying an intent that blocked the key until the idle timeout. The copy is
// now refused (a retryable abort the client, no longer waiting for it, drops) and sends
// nothing; the client's next transaction, numbered above, begins as ever.
func TestLateFirstRequestCopyRefused(t *testing.T) {
	cfg, err := prototest.SimConfig(prototest.Case{Protocol: name, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	tp := cfg.Topology
	self, cl := tp.DataNodes(0)[0], topo.NodeID(len(tp.Nodes)+1)
	key := prototest.KeysOn(t, tp, self, "late", 1)[0]
	for _, end := range []wire.Op{wire.OpCommit, wire.OpAbort} {
		t.Run(end.String(), func(t *testing.T) {
			env := &nodetest.ScriptEnv{ID: self, Topo: tp, Clock: int64(time.Second), Disk: durable.NewMem()}
			h, err := proto{}.NewNode(node.Config{Env: env, Durable: env.Disk})
			if err != nil {
				t.Fatal(err)
			}
			n := h.(*Node)
			// settle runs the node to quiet (it is the key's leaseholder and the transaction
			// record's node: what it sends itself is delivered); it returns the client's replies
			// and whether a write went out.
			settle := func() (replies []*wire.ClientReply, wrote bool) {
				t.Helper()
				for range 100 {
					env.Flush()
					sent := env.Take()
					if len(sent) == 0 {
						return replies, wrote
					}
					for _, s := range sent {
						switch m := s.M.(type) {
						case *wire.ClientReply:
							if s.To == cl {
								replies = append(replies, m)
							}
							continue
						case *WriteReq:
							wrote = true
						}
						if s.To == self {
							n.Handle(self, s.M)
						}
					}
				}
				t.Fatal("the node did not settle")
				return nil, false
			}
			send := func(req *wire.ClientRequest) ([]*wire.ClientReply, bool) {
				t.Helper()
				n.Handle(cl, req)
				return settle()
			}
			settle() // the incarnation becomes durable
			first := &wire.ClientRequest{Txn: 1, Op: wire.OpPut, Key: key, Value: []byte("v")}
			if rs, wrote := send(first); len(rs) != 1 || rs[0].Code != wire.CodeOK || !wrote {
				t.Fatalf("the put answered %s (a write sent: %v)", replyList(rs), wrote)
			}
			if rs, _ := send(&wire.ClientRequest{Txn: 1, Seq: 1, Op: end}); len(rs) != 1 || rs[0].Code != wire.CodeOK {
				t.Fatalf("the %v answered %s", end, replyList(rs))
			}
			rs, wrote := send(first) // the copy
			if wrote {
				t.Error("the late copy of the first put sent a write")
			}
			if len(rs) != 1 || rs[0].Code != wire.CodeAborted || rs[0].Cause != causeUnknownTxn || rs[0].Txn != 1 || rs[0].Seq != 0 {
				t.Errorf("the late copy of the first put answered %s, want one abort, cause %s", replyList(rs), causeUnknownTxn)
			}
			if k := len(n.txns); k != 0 {
				t.Errorf("the gateway holds %d transactions after the late copy, want none", k)
			}
			if got := n.m.Counters["late-first-request"]; got != 1 {
				t.Errorf("late-first-request = %d, want 1", got)
			}
			if rs, wrote := send(&wire.ClientRequest{Txn: 2, Op: wire.OpPut, Key: key, Value: []byte("w")}); len(rs) != 1 || rs[0].Code != wire.CodeOK || !wrote {
				t.Errorf("the client's next transaction's put answered %s (a write sent: %v)", replyList(rs), wrote)
			}
		})
	}
}

// replyList prints client replies for a test's message.
func replyList(rs []*wire.ClientReply) string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = fmt.Sprintf("%+v", *r)
	}
	return "[" + strings.Join(out, ", ") + "]"
}
