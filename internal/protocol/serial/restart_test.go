package serial

import (
	"testing"

	"github.com/meridiandb/meridian/internal/node"
	"github.com/meridiandb/meridian/internal/protocol/txnkit"
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
