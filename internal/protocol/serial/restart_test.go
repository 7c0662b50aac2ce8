package serial

import (
	"fmt"
	"testing"
	"time"

	"github.com/meridiandb/meridian/internal/bench"
	"github.com/meridiandb/meridian/internal/node"
	"github.com/meridiandb/meridian/internal/node/nodetest"
	"github.com/meridiandb/meridian/internal/protocol/prototest"
	"github.com/meridiandb/meridian/internal/protocol/txnkit"
	"github.com/meridiandb/meridian/internal/storage/durable"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/wire"
)

// TestLateForwardCopiesAfterRestart: a client attached to another data node reaches the serial
// node through Forward messages, which the network may deliver twice and late, to the serial
// node's next life; its coordinator forwards unanswered ones again too. That life remembers no
// ended transaction (txnkit.EndedTxns is in memory) and the client, on a node that did not
// restart, keeps its endpoint: late copies of a committed transaction's put and commit began it
// again and committed it a second time, over a later committed write (before: k = "client").
// Requests forwarded under an earlier life are now refused, and begin nothing; the client's
// next transaction, forwarded under the new life, runs as ever.
func TestLateForwardCopiesAfterRestart(t *testing.T) {
	s := newScript(t)
	coord := s.tp.DataNodes(1)[0] // the client's own data node, which forwards
	put := &wire.ClientRequest{Txn: 1, Seq: 0, Op: wire.OpPut, Key: "k", Value: []byte("client")}
	commit := &wire.ClientRequest{Txn: 1, Seq: 1, Op: wire.OpCommit}
	s.one("the client's put", s.fwd(coord, put, false), 1, 0, wire.CodeOK, "")
	s.one("the client's commit", s.fwd(coord, commit, false), 1, 1, wire.CodeOK, "")
	s.one("bob's put", s.send(s.bob, &wire.ClientRequest{Txn: 1, Op: wire.OpPut, Key: "k", Value: []byte("bob")}), 1, 0, wire.CodeOK, "")
	s.one("bob's commit", s.send(s.bob, &wire.ClientRequest{Txn: 1, Seq: 1, Op: wire.OpCommit}), 1, 1, wire.CodeOK, "")

	s.life() // the serial node crashes and restarts; the client's node does not
	if s.n.life != 2 {
		t.Fatalf("the restarted node is in life %d, want 2", s.n.life)
	}
	s.one("the put's late copy", s.fwdUnder(1, coord, put, false), 1, 0, wire.CodeAborted, txnkit.CauseUnknownTxn)
	if s.n.holder != nil || len(s.n.txns) != 0 {
		t.Errorf("the put's copy began a transaction (%d held)", len(s.n.txns))
	}
	s.fwdUnder(1, coord, commit, false)
	s.fwdUnder(1, coord, put, true) // forwarded again: the answer was lost
	if v, _ := s.n.Value("k"); string(v) != "bob" {
		t.Errorf("k = %q after late copies of the client's committed transaction reached the next life, want bob's later write", v)
	}
	if s.n.holder != nil || len(s.n.txns) != 0 {
		t.Errorf("the copies left %d transactions held", len(s.n.txns))
	}

	s.one("the client's next put", s.fwd(coord, &wire.ClientRequest{Txn: 2, Op: wire.OpPut, Key: "k", Value: []byte("next")}, false), 2, 0, wire.CodeOK, "")
	s.one("the client's next commit", s.fwd(coord, &wire.ClientRequest{Txn: 2, Seq: 1, Op: wire.OpCommit}, false), 2, 1, wire.CodeOK, "")
	if v, _ := s.n.Value("k"); string(v) != "next" {
		t.Errorf("k = %q, want the client's next write", v)
	}
}

// TestLifeDurableBeforeUse: a life handles nothing until its number is durable. One that
// crashed before leaves the number to the next life, and a request it had taken under that
// number would be taken from a copy again by the next one: its reads answered twice, from two
// states, and its commit applied without what the first one read.
func TestLifeDurableBeforeUse(t *testing.T) {
	s := newScript(t)
	coord := s.tp.DataNodes(1)[0]
	put := &wire.ClientRequest{Txn: 1, Op: wire.OpPut, Key: "k", Value: []byte("v")}
	s.one("the put", s.fwd(coord, put, false), 1, 0, wire.CodeOK, "")

	s.life()
	s.env.Take()
	h, err := proto{}.NewNode(node.Config{Env: s.env, Durable: s.disk}) // the third life, not durable yet
	if err != nil {
		t.Fatal(err)
	}
	s.n = h.(*Node)
	s.n.Handle(coord, &Forward{Client: s.client, Req: wire.ClientRequest{Txn: 2, Op: wire.OpGet, Key: "k"}, Life: 2})
	s.n.Handle(s.bob, &wire.ClientRequest{Txn: 1, Op: wire.OpGet, Key: "k"})
	if sent := s.env.Take(); len(sent) != 0 {
		t.Fatalf("before its number was durable the node sent %+v", sent)
	}
	s.env.Flush()
	var lifeNotices, answers int
	for _, m := range s.env.Take() {
		switch m := m.M.(type) {
		case *Life:
			if m.N == 3 {
				lifeNotices++
			}
		case *Answer:
			answers++
		case *wire.ClientReply:
			answers++
		}
	}
	peers := 0
	for _, nd := range s.tp.Nodes {
		if nd.Roles&topo.RoleData != 0 && nd.ID != s.env.ID {
			peers++
		}
	}
	if lifeNotices != peers || answers != 2 {
		t.Errorf("once durable: %d notices of life 3 and %d answers, want %d and 2", lifeNotices, answers, peers)
	}
}

// TestCoordinatorStampsSerialLife: a coordinator forwards each request under the serial node's
// latest life it heard of (1 until then), and every copy under the same. When it hears of a
// later life (the serial node's announcement, or any answer), the requests it still awaits
// from an earlier one are forwarded again at once, for the refusal that life owes them, instead
// of at their resend timer: one that waited for the lock was forwarded only every idle-timeout.
func TestCoordinatorStampsSerialLife(t *testing.T) {
	s := newScript(t)
	c := newCoordScript(t, s.tp, nil)
	c.n.Handle(s.client, &wire.ClientRequest{Txn: 1, Op: wire.OpPut, Key: "k", Value: []byte("v")})
	c.n.Handle(c.server, &Queued{Client: s.client, Txn: 1, Life: 1})
	if fs := c.forwards(); len(fs) != 1 || fs[0].Life != 1 {
		t.Fatalf("forwarded %+v, want one under life 1", fs)
	}
	c.n.Handle(c.server, &Life{N: 2})
	fs := c.forwards()
	if len(fs) != 1 || !fs[0].Resent || fs[0].Life != 1 || fs[0].Req.Txn != 1 {
		t.Fatalf("on news of life 2 forwarded %+v, want the put again under life 1", fs)
	}

	// The serial node's second life refuses it, and begins nothing.
	s.life()
	s.n.Handle(c.env.ID, fs[0])
	s.env.Flush()
	var refusal *Answer
	for _, m := range s.env.Take() {
		if a, ok := m.M.(*Answer); ok {
			refusal = a
		}
	}
	if refusal == nil || refusal.Reply.Code != wire.CodeAborted || refusal.Reply.Cause != txnkit.CauseUnknownTxn || refusal.Life != 2 {
		t.Fatalf("the second life answered %+v, want an unknown-transaction refusal from life 2", refusal)
	}
	c.n.Handle(c.server, refusal)
	if sent := c.env.Take(); len(sent) != 1 || sent[0].To != s.client {
		t.Fatalf("the coordinator sent %+v, want the refusal to the client", sent)
	}
	c.n.Handle(s.client, &wire.ClientRequest{Txn: 2, Op: wire.OpPut, Key: "k", Value: []byte("v")})
	if fs := c.forwards(); len(fs) != 1 || fs[0].Life != 2 {
		t.Errorf("the next transaction forwarded %+v, want it under life 2", fs)
	}

	// A coordinator that missed the announcement learns the life from an answer.
	c2 := newCoordScript(t, s.tp, nil)
	c2.n.Handle(s.client, &wire.ClientRequest{Txn: 1, Op: wire.OpGet, Key: "k"})
	c2.n.Handle(s.client, &wire.ClientRequest{Txn: 2, Op: wire.OpGet, Key: "k"}) // another client's, say
	c2.forwards()
	c2.n.Handle(c2.server, &Answer{Client: s.client, Reply: wire.ClientReply{Txn: 1, Code: wire.CodeAborted, Cause: txnkit.CauseUnknownTxn}, Life: 2})
	if fs := c2.forwards(); len(fs) != 1 || fs[0].Req.Txn != 2 || fs[0].Life != 1 || !fs[0].Resent {
		t.Errorf("after an answer from life 2 forwarded %+v, want txn 2's get again under life 1", fs)
	}
}

// TestCommitCopyAfterRestartUnknown: the serial node makes a commit durable, its answer is
// lost, and the node restarts; the network's copy of the commit (not forwarded again) reaches
// the next life before the coordinator's own copy. That life cannot tell whether the earlier
// one committed the transaction, and answers unknown (before: aborted, unknown-transaction,
// which the coordinator handed the client, awaiting that very answer: a committed transaction
// reported aborted). A commit forwarded again is answered alike; a commit or abort that is the
// transaction's first request did nothing, and is answered OK.
func TestCommitCopyAfterRestartUnknown(t *testing.T) {
	s := newScript(t)
	coord := s.tp.DataNodes(1)[0]
	s.one("the put", s.fwd(coord, &wire.ClientRequest{Txn: 1, Op: wire.OpPut, Key: "k", Value: []byte("v")}, false), 1, 0, wire.CodeOK, "")
	commit := &wire.ClientRequest{Txn: 1, Seq: 1, Op: wire.OpCommit}
	s.fwd(coord, commit, false) // durable; the answer is lost

	s.life()
	s.one("the commit's network copy", s.fwdUnder(1, coord, commit, false), 1, 1, wire.CodeUnknown, "")
	s.one("the commit forwarded again", s.fwdUnder(1, coord, commit, true), 1, 1, wire.CodeUnknown, "")
	if v, _ := s.n.Value("k"); string(v) != "v" {
		t.Errorf("k = %q, want v", v)
	}
	for _, op := range []wire.Op{wire.OpCommit, wire.OpAbort} {
		s.one("a first "+op.String(), s.fwdUnder(1, coord, &wire.ClientRequest{Txn: 2, Op: op}, false), 2, 0, wire.CodeOK, "")
	}
	s.one("an abort", s.fwdUnder(1, coord, &wire.ClientRequest{Txn: 3, Seq: 2, Op: wire.OpAbort}, false), 3, 2, wire.CodeAborted, txnkit.CauseUnknownTxn)
}

// TestCoordinatorRestartEndsItsTransactions: a coordinator that crashes takes its clients'
// connections with it, but the serial node kept their transactions: the lock holder's until
// its idle timeout, and each waiting one, when its turn came, until its own (a 300 ms crash
// of one coordinator left 49 transactions of other clients without an outcome after the
// drain's 30 s). The restarted coordinator now announces its life, and the serial node ends at
// once what its earlier life forwarded, held or waiting, answering no one; a late copy from
// that life begins nothing. A forward from the new life that overtakes a lost announcement
// does the same.
func TestCoordinatorRestartEndsItsTransactions(t *testing.T) {
	for _, notice := range []string{"announcement", "forward from the new life"} {
		t.Run(notice, func(t *testing.T) {
			s := newScript(t)
			coord := s.tp.DataNodes(1)[0]
			other := s.client + 10 // another client of the same coordinator
			put := func(txn uint64, v string) wire.ClientRequest {
				return wire.ClientRequest{Txn: txn, Op: wire.OpPut, Key: "k", Value: []byte(v)}
			}
			s.one("the client's put", s.fwd(coord, &wire.ClientRequest{Txn: 1, Op: wire.OpPut, Key: "k", Value: []byte("client")}, false), 1, 0, wire.CodeOK, "")
			s.n.Handle(coord, &Forward{Client: other, Req: put(1, "other"), Life: 1, HostLife: 1})
			s.n.Handle(s.bob, &wire.ClientRequest{Txn: 1, Op: wire.OpGet, Key: "k"})
			if sent := s.env.Take(); len(sent) != 0 {
				t.Fatalf("answered %+v while the client's transaction held the lock", sent)
			}

			// The coordinator crashes and comes back, in its second life.
			switch notice {
			case "announcement":
				s.n.Handle(coord, &Life{N: 2})
			default:
				s.n.Handle(coord, &Forward{Client: s.client + 20, Req: wire.ClientRequest{Txn: 1, Op: wire.OpGet, Key: "k"}, Life: 1, HostLife: 2})
			}
			var bob []*wire.ClientReply
			for _, m := range s.env.Take() {
				switch r := m.M.(type) {
				case *wire.ClientReply:
					if m.To == s.bob {
						bob = append(bob, r)
					}
				case *Answer:
					if r.Client != s.client+20 {
						t.Errorf("answered %+v for a client of the coordinator's dead life", r)
					}
				}
			}
			if len(bob) != 1 || bob[0].Code != wire.CodeOK || bob[0].Found {
				t.Fatalf("bob's get got %+v, want k not found at once", bob)
			}
			if s.n.holder == nil || s.n.holder.key.client != s.bob || len(s.n.waiting) > 1 {
				t.Errorf("after the restart notice the lock is held by %+v, %d waiting; want bob holding it", s.n.holder, len(s.n.waiting))
			}
			s.one("bob's commit", s.send(s.bob, &wire.ClientRequest{Txn: 1, Seq: 1, Op: wire.OpCommit}), 1, 1, wire.CodeOK, "")

			// A late copy of the dead life's put begins nothing, and answers no one.
			s.n.Handle(coord, &Forward{Client: other, Req: put(1, "other"), Life: 1, HostLife: 1})
			s.n.Handle(coord, &Forward{Client: s.client, Req: wire.ClientRequest{Txn: 1, Seq: 1, Op: wire.OpCommit}, Life: 1, HostLife: 1})
			s.env.Flush()
			if s.n.holder != nil && s.n.holder.hostLife < 2 {
				t.Errorf("a late copy from the coordinator's dead life began %+v", s.n.holder.key)
			}
			for _, m := range s.env.Take() {
				if a, ok := m.M.(*Answer); ok && a.Client != s.client+20 {
					t.Errorf("answered %+v for a client of the coordinator's dead life", a)
				}
			}
			if _, ok := s.n.Value("k"); ok {
				t.Errorf("k committed by a transaction of the coordinator's dead life")
			}
		})
	}
}

// TestRestartedCoordinatorAnnouncesItself: a coordinator in its second life tells the serial
// node once its number is durable, before it forwards anything, and forwards under its life.
func TestRestartedCoordinatorAnnouncesItself(t *testing.T) {
	s := newScript(t)
	env := &nodetest.ScriptEnv{ID: s.tp.DataNodes(1)[0], Topo: s.tp, Clock: int64(time.Second)}
	disk := durable.NewMem()
	for life := uint64(1); life <= 2; life++ {
		env.Take()
		env.Disk = disk
		h, err := proto{}.NewNode(node.Config{Env: env, Durable: disk})
		if err != nil {
			t.Fatal(err)
		}
		h.Handle(s.client, &wire.ClientRequest{Txn: 1, Op: wire.OpGet, Key: "k"})
		if sent := env.Take(); len(sent) != 0 {
			t.Fatalf("life %d sent %+v before its number was durable", life, sent)
		}
		env.Flush()
		sent := env.Take()
		var got []string
		for _, m := range sent {
			switch m := m.M.(type) {
			case *Life:
				got = append(got, fmt.Sprintf("life %d", m.N))
			case *Forward:
				got = append(got, fmt.Sprintf("forward host life %d", m.HostLife))
			}
		}
		want := fmt.Sprintf("[forward host life %d]", life)
		if life > 1 {
			want = fmt.Sprintf("[life %d forward host life %d]", life, life)
		}
		if fmt.Sprint(got) != want {
			t.Errorf("life %d sent %v, want %s", life, got, want)
		}
	}
}

// TestCrashesCostNoStall runs what `meridian sim --protocol serial --workload list-append`
// runs (10 clients per region, 1 s warm-up, 5 s) with a coordinator crashed for 300 ms, and
// with the serial node crashed before it under duplication. Every transaction must get an
// outcome, but for those of the crashed nodes' own clients (unavailable while their node was
// down, or unknown when the crash took a commit's answer), and the run must end well within
// the drain's 30 s (before, with bj-1 crashed at 2 s: 49 transactions of other clients
// without an outcome, each waiting behind a dead client's transaction holding the lock for
// the idle timeout, and 36 virtual s).
func TestCrashesCostNoStall(t *testing.T) {
	for _, tc := range []struct {
		name      string
		crashes   func(tp *topo.Topology) []bench.Crash
		duplicate float64
	}{
		{"coordinator", func(tp *topo.Topology) []bench.Crash {
			return []bench.Crash{{Node: tp.DataNodes(1)[0], At: 2 * time.Second, For: 300 * time.Millisecond}}
		}, 0},
		{"serial+coordinator+duplicate", func(tp *topo.Topology) []bench.Crash {
			return []bench.Crash{{Node: tp.DataNodes(0)[0], At: time.Second, For: 300 * time.Millisecond},
				{Node: tp.DataNodes(1)[0], At: 2 * time.Second, For: 300 * time.Millisecond}}
		}, 0.1},
	} {
		for seed := uint64(1); seed <= 3; seed++ {
			t.Run(fmt.Sprintf("%s/seed=%d", tc.name, seed), func(t *testing.T) {
				res, rep := simListAppend(t, seed, func(tp *topo.Topology, spec *bench.Spec) {
					spec.Crashes, spec.Network = tc.crashes(tp), bench.NetFaults{Duplicate: tc.duplicate}
				})
				t.Logf("%d committed, %d without an outcome (%d unavailable, %d unknown), %.1f virtual s",
					res.Committed, rep.Counts.Info, res.Unavailable, res.Unknown, res.VirtualSeconds)
				if stuck := int64(rep.Counts.Info) - res.Unavailable - res.Unknown; stuck > 0 {
					t.Errorf("%d transactions got no outcome", stuck)
				}
				if res.VirtualSeconds > 20 {
					t.Errorf("the run took %.1f virtual s: some client waited behind a dead client's transaction", res.VirtualSeconds)
				}
				prototest.ExpectValid(t, rep, 30)
			})
		}
	}
}
