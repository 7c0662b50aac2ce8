package prototest

import (
	"errors"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/meridiandb/meridian/client"
	"github.com/meridiandb/meridian/internal/check"
	"github.com/meridiandb/meridian/internal/history"
	"github.com/meridiandb/meridian/internal/protocol"
	"github.com/meridiandb/meridian/internal/protocol/txnkit"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/wire"
)

// SilentClient is what SilentClientTxnNotBegunAgain needs to know of a protocol.
type SilentClient struct {
	Case Case // the deployment; the seed is 1 unless set
	// Region is the client's; its first data node is the client's coordinator, which holds
	// the two keys written.
	Region topo.RegionID
	// Idle is the idle timeout the protocol is run with (its "idle-timeout" option): the
	// client stays silent a second longer.
	Idle  time.Duration
	Model string // the consistency model the client's history is checked under
	// RefusalCounter, if set, is the protocol counter of unknown-transaction refusals, summed
	// over every node: it must count the one refusal.
	RefusalCounter string
}

// SilentClientTxnNotBegunAgain: a client puts k1, stays silent past the idle timeout (the
// coordinator ends the transaction, telling no one, and k1's put is undone), then goes on, in
// one subtest each: a put of k2, a get of k2, or the commit. The coordinator must refuse with a
// retryable abort (unknown-transaction), never begin a fresh transaction under the old one's
// name: that one committed k2 (or nothing) and the client, told its commit succeeded, had lost
// its put of k1 (k1 not found, k2 = 2). The client's view is checked as a list-append history
// (k1 and k2 as lists, a later transaction reading both): after a put of k2 the checker sees
// the lost write as a cycle (G-single).
func SilentClientTxnNotBegunAgain(t *testing.T, p SilentClient) {
	t.Helper()
	for _, second := range []string{"put", "get", "commit"} {
		t.Run(second, func(t *testing.T) {
			c := p.Case
			c.Options = maps.Clone(c.Options)
			if c.Options == nil {
				c.Options = map[string]string{}
			}
			c.Options["idle-timeout"] = p.Idle.String()
			if c.Seed == 0 {
				c.Seed = 1
			}
			s := NewSim(t, c)
			t.Cleanup(s.Stop)
			tp := s.Topology()
			coord := tp.DataNodes(p.Region)[0]
			keys := KeysOn(t, tp, coord, "silent", 2)
			rec := history.NewRecorder()
			list := func(found bool, v int64) history.Value {
				if found {
					return history.ListValue([]int64{v})
				}
				return history.ListValue([]int64{})
			}
			var failures []string
			fail := func(format string, args ...any) { failures = append(failures, fmt.Sprintf(format, args...)) }
			done := false
			s.AddClient(p.Region, coord, int64(100*time.Millisecond), func(db *client.DB) {
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
					fail("put k1: %v", err)
					return
				}
				db.Transport().Sleep(p.Idle + time.Second)
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
					fail("the transaction committed after its idle timeout had ended it")
				} else {
					rec.Complete(history.Fail, 0, 0, now(), ops, err.Error())
					if !client.IsRetryable(err) || client.AbortCause(err) != txnkit.CauseUnknownTxn {
						fail("the %s after the idle timeout failed with %v, want a retryable abort, cause %s", second, err, txnkit.CauseUnknownTxn)
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
					fail("read back: %v", err)
					return
				}
				rec.Complete(history.OK, 0, 0, now(), reads, "")
				t.Logf("%s after %v of silence: %v; then read k1 %v, k2 %v", second, p.Idle+time.Second, err, reads[0].Value.List, reads[1].Value.List)
			})
			s.RunUntil(int64(20 * time.Second))
			for _, f := range failures {
				t.Error(f)
			}
			if !done {
				t.Fatal("the client did not finish in 20 virtual seconds")
			}
			if p.RefusalCounter != "" {
				var refused int64
				for i := range tp.Nodes {
					if m, ok := s.Handler(topo.NodeID(i)).(protocol.MetricsSource); ok {
						refused += m.Metrics().Counters[p.RefusalCounter]
					}
				}
				if refused != 1 {
					t.Errorf("%s = %d, want 1", p.RefusalCounter, refused)
				}
			}
			rep, err := check.Check(rec.Ops(), p.Model)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Verdict != check.Valid {
				t.Errorf("the client's history is %s:\n%v", rep.Verdict, rep)
			}
		})
	}
}

// RestartingCoordinator is a protocol's coordinator node driven by hand on one disk, across
// crashes, for RestartedCoordinatorRefusesEarlierTxn.
type RestartingCoordinator interface {
	// Send hands the current life a request of the client, runs it to quiet (persists
	// completed), and returns the life's replies to the client and whether it sent a write.
	Send(req *wire.ClientRequest) (replies []*wire.ClientReply, wrote bool)
	// Restart crashes the node and starts its next life, whose number is not yet durable: the
	// next Send arrives while the life starts.
	Restart()
	// Metrics are the current life's.
	Metrics() *protocol.Metrics
}

// RestartedCoordinatorRefusesEarlierTxn: a coordinator crashes after a client's first put of
// keys[0] (its transaction was only in memory) and comes back; the client's next requests of
// that transaction, a put of keys[1] arriving while the new life starts and then the commit,
// are refused (retryable, unknown-transaction) and send nothing: begun afresh, the transaction
// would commit without the put the earlier life took. The client's next transaction begins.
// refusalCounter is the protocol counter of unknown-transaction refusals, which must count
// both.
func RestartedCoordinatorRefusesEarlierTxn(t *testing.T, n RestartingCoordinator, keys []string, refusalCounter string) {
	t.Helper()
	put := func(txn uint64, seq uint32, key string) *wire.ClientRequest {
		return &wire.ClientRequest{Txn: txn, Seq: seq, Op: wire.OpPut, Key: key, Value: []byte("v")}
	}
	refused := func(what string, seq uint32, replies []*wire.ClientReply, wrote bool) {
		t.Helper()
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

	if _, wrote := n.Send(put(1, 0, keys[0])); !wrote {
		t.Fatal("the first put sent no write")
	}
	n.Restart() // the transaction was only in memory
	replies, wrote := n.Send(put(1, 1, keys[1]))
	refused("the put arriving while the new life started", 1, replies, wrote)
	replies, wrote = n.Send(&wire.ClientRequest{Txn: 1, Seq: 2, Op: wire.OpCommit})
	refused("the commit", 2, replies, wrote)

	if _, wrote := n.Send(put(2, 0, keys[1])); !wrote {
		t.Error("the client's next transaction sent no write")
	}
	if got := n.Metrics().Counters[refusalCounter]; got != 2 {
		t.Errorf("%s = %d, want 2", refusalCounter, got)
	}
}
