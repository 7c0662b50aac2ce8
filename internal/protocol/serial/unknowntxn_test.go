package serial

import (
	"testing"
	"time"

	"github.com/meridiandb/meridian/internal/node"
	"github.com/meridiandb/meridian/internal/node/nodetest"
	"github.com/meridiandb/meridian/internal/protocol/prototest"
	"github.com/meridiandb/meridian/internal/protocol/txnkit"
	"github.com/meridiandb/meridian/internal/storage/durable"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/wire"
)

// TestSilentClientTxnNotBegunAgain: the serial node ends a transaction whose client is silent
// past the idle timeout, telling no one, and discards its buffered put; the client's next
// request must be refused, not begin the transaction afresh (prototest has the scenario). The
// client is attached to another node, which forwards its requests. A commit was refused before
// too, with the same cause.
func TestSilentClientTxnNotBegunAgain(t *testing.T) {
	prototest.SilentClientTxnNotBegunAgain(t, prototest.SilentClient{Case: prototest.Case{Protocol: "serial"},
		Region: 1, Idle: 5 * time.Second, Model: "strict-serializable"})
}

// script drives the serial node's lives on one disk by hand.
type script struct {
	t           *testing.T
	tp          *topo.Topology
	disk        *durable.Mem
	n           *Node
	env         *nodetest.ScriptEnv
	client, bob topo.NodeID
}

func newScript(t *testing.T) *script {
	t.Helper()
	cfg, err := prototest.SimConfig(prototest.Case{Protocol: "serial", Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	tp := cfg.Topology
	s := &script{t: t, tp: tp, disk: durable.NewMem(), client: topo.NodeID(len(tp.Nodes) + 1), bob: topo.NodeID(len(tp.Nodes) + 2)}
	s.life()
	return s
}

// life starts the serial node's next life (the previous one, if any, crashed).
func (s *script) life() {
	s.t.Helper()
	s.env = &nodetest.ScriptEnv{ID: s.tp.DataNodes(0)[0], Topo: s.tp, Clock: int64(time.Second), Disk: s.disk}
	h, err := proto{}.NewNode(node.Config{Env: s.env, Durable: s.disk})
	if err != nil {
		s.t.Fatal(err)
	}
	s.n = h.(*Node)
	s.env.Flush() // the life's number: the node handles nothing before it is durable
	s.env.Take()  // the restart's announcement, if any
}

// send hands the node a request of from, completes every persist, and returns the replies.
func (s *script) send(from topo.NodeID, req *wire.ClientRequest) []*wire.ClientReply {
	s.t.Helper()
	s.n.Handle(from, req)
	s.env.Flush()
	return s.replies(from)
}

// replies returns the replies sent to to since the last call (and forgets everything sent).
func (s *script) replies(to topo.NodeID) []*wire.ClientReply {
	var out []*wire.ClientReply
	for _, m := range s.env.Take() {
		if r, ok := m.M.(*wire.ClientReply); ok && m.To == to {
			out = append(out, r)
		}
	}
	return out
}

// one checks that rs is a single reply to txn's request seq with code and cause.
func (s *script) one(what string, rs []*wire.ClientReply, txn uint64, seq uint32, code wire.Code, cause string) {
	s.t.Helper()
	if len(rs) != 1 {
		s.t.Fatalf("%s: %d replies, want 1", what, len(rs))
	}
	if r := rs[0]; r.Txn != txn || r.Seq != seq || r.Code != code || r.Cause != cause {
		s.t.Errorf("%s answered %+v, want txn %d seq %d code %v cause %q", what, r, txn, seq, code, cause)
	}
}

// TestRestartedNodeRefusesEarlierTxn: the serial node crashes after a client's first put (its
// transaction, and the put, were only in memory) and comes back. The client's next requests of
// that transaction, one arriving while another client's transaction holds the lock and then
// the commit, are refused at once (retryable, unknown-transaction): before, the put waited for
// the lock and then began a fresh transaction under the old one's name, which would commit
// without the first put. Nothing of the transaction is persisted, and the client's next
// transaction begins.
func TestRestartedNodeRefusesEarlierTxn(t *testing.T) {
	s := newScript(t)
	put := func(txn uint64, seq uint32, key, v string) *wire.ClientRequest {
		return &wire.ClientRequest{Txn: txn, Seq: seq, Op: wire.OpPut, Key: key, Value: []byte(v)}
	}
	s.one("the first put", s.send(s.client, put(1, 0, "k1", "1")), 1, 0, wire.CodeOK, "")

	s.life() // the crash
	s.one("bob's put", s.send(s.bob, put(1, 0, "held", "bob")), 1, 0, wire.CodeOK, "")
	s.one("the put while bob holds the lock", s.send(s.client, put(1, 1, "k2", "2")), 1, 1, wire.CodeAborted, txnkit.CauseUnknownTxn)
	s.one("bob's commit", s.send(s.bob, &wire.ClientRequest{Txn: 1, Seq: 1, Op: wire.OpCommit}), 1, 1, wire.CodeOK, "")
	s.one("the commit", s.send(s.client, &wire.ClientRequest{Txn: 1, Seq: 2, Op: wire.OpCommit}), 1, 2, wire.CodeAborted, txnkit.CauseUnknownTxn)
	for _, k := range []string{"k1", "k2"} {
		if v, ok := s.n.Value(k); ok {
			t.Errorf("%s = %q committed: the restart lost the transaction's first put", k, v)
		}
	}
	if v, _ := s.n.Value("held"); string(v) != "bob" {
		t.Errorf("bob's put committed %q, want bob", v)
	}
	s.one("the next transaction's put", s.send(s.client, put(2, 0, "k2", "2")), 2, 0, wire.CodeOK, "")
	// A first request that commits or aborts did nothing, and is answered OK.
	s.one("a first commit", s.send(s.client, &wire.ClientRequest{Txn: 3, Seq: 0, Op: wire.OpCommit}), 3, 0, wire.CodeOK, "")
}

// TestDuplicateRequestsDropped: the network may deliver a request twice. A late copy of a
// transaction's first put, arriving after a second put of the same key, used to be applied
// again and put the first value back, which the commit then made durable; a copy of the commit
// arriving while its writes were being persisted was answered "unknown-transaction", and that
// answer reached the client before the commit's own: a committed transaction reported aborted.
// Both copies are now dropped unanswered.
func TestDuplicateRequestsDropped(t *testing.T) {
	s := newScript(t)
	first := &wire.ClientRequest{Txn: 1, Seq: 0, Op: wire.OpPut, Key: "k", Value: []byte("first")}
	s.one("the first put", s.send(s.client, first), 1, 0, wire.CodeOK, "")
	s.one("the second put", s.send(s.client, &wire.ClientRequest{Txn: 1, Seq: 1, Op: wire.OpPut, Key: "k", Value: []byte("second")}), 1, 1, wire.CodeOK, "")
	if rs := s.send(s.client, first); len(rs) != 0 {
		t.Errorf("the first put's copy was answered %+v, want no answer", rs[0])
	}
	commit := &wire.ClientRequest{Txn: 1, Seq: 2, Op: wire.OpCommit}
	s.n.Handle(s.client, commit)
	s.n.Handle(s.client, commit) // the copy, while the commit's writes are being persisted
	if rs := s.replies(s.client); len(rs) != 0 {
		t.Errorf("answered %+v before the commit was durable", rs[0])
	}
	s.env.Flush()
	s.one("the commit", s.replies(s.client), 1, 2, wire.CodeOK, "")
	if v, _ := s.n.Value("k"); string(v) != "second" {
		t.Errorf("k = %q committed, want second", v)
	}
}

// TestBadRequestsRefused: a request no client library sends (an empty key, an unknown
// operation, a write in a read-only transaction, a key that is not UTF-8) is answered with a
// one-line bad-argument error by the node the client is attached to, and begins nothing: the
// serial node's lock stays free for the next transaction. Before, the serial node began a
// transaction for it and held the lock until the idle timeout, and a coordinator forwarded a
// key that is not UTF-8, which the real runtime cannot encode, so the client heard nothing.
func TestBadRequestsRefused(t *testing.T) {
	s := newScript(t)
	coord := &nodetest.ScriptEnv{ID: s.tp.DataNodes(1)[0], Topo: s.tp, Clock: int64(time.Second)}
	h, err := proto{}.NewNode(node.Config{Env: coord, Durable: durable.NewMem()})
	if err != nil {
		t.Fatal(err)
	}
	coord.Flush()
	for i, req := range []*wire.ClientRequest{
		{Op: wire.OpPut, Value: []byte("v")},
		{Op: wire.Op(99), Key: "k"},
		{Op: wire.OpPut, Key: "k", Value: []byte("v"), ReadOnly: true},
		{Op: wire.OpGet, Key: "\xff"},
	} {
		req.Txn = uint64(i + 1)
		for _, at := range []struct {
			name string
			n    node.Handler
			env  *nodetest.ScriptEnv
		}{{"serial node", s.n, s.env}, {"coordinator", h, coord}} {
			at.n.Handle(s.client, req)
			sent := at.env.Take()
			if len(sent) != 1 || sent[0].To != s.client {
				t.Fatalf("%s, request %+v: sent %+v, want one answer to the client", at.name, req, sent)
			}
			r, ok := sent[0].M.(*wire.ClientReply)
			if !ok || r.Code != wire.CodeBadArgument || r.Error == "" || r.Txn != req.Txn {
				t.Errorf("%s, request %+v: answered %+v, want a bad-argument error", at.name, req, sent[0].M)
			}
		}
	}
	s.one("bob's put", s.send(s.bob, &wire.ClientRequest{Txn: 1, Op: wire.OpPut, Key: "k", Value: []byte("bob")}), 1, 0, wire.CodeOK, "")
}

// TestLateFirstRequestCopyRefused: the network may deliver a request twice, and a copy of a
// transaction's first request that arrives after the transaction ended (committed, or aborted
// by its client) found nothing under its name and began the transaction again: one no client
// drives, holding the global lock until the idle timeout, every other client's transaction
// queued behind it. The copy is now refused (a retryable abort the client, no longer waiting
// for it, drops) and takes no lock; the client's next transaction, numbered above, begins as
// ever.
func TestLateFirstRequestCopyRefused(t *testing.T) {
	for _, end := range []wire.Op{wire.OpCommit, wire.OpAbort} {
		t.Run(end.String(), func(t *testing.T) {
			s := newScript(t)
			first := &wire.ClientRequest{Txn: 1, Seq: 0, Op: wire.OpPut, Key: "k", Value: []byte("first")}
			s.one("the first put", s.send(s.client, first), 1, 0, wire.CodeOK, "")
			s.one("the "+end.String(), s.send(s.client, &wire.ClientRequest{Txn: 1, Seq: 1, Op: end}), 1, 1, wire.CodeOK, "")
			s.one("the late copy of the first put", s.send(s.client, first), 1, 0, wire.CodeAborted, txnkit.CauseUnknownTxn)
			if s.n.holder != nil || len(s.n.txns) != 0 {
				t.Errorf("after the late copy the node holds %d transactions (the lock held: %v), want none", len(s.n.txns), s.n.holder != nil)
			}
			s.one("bob's put", s.send(s.bob, &wire.ClientRequest{Txn: 1, Seq: 0, Op: wire.OpPut, Key: "b", Value: []byte("bob")}), 1, 0, wire.CodeOK, "")
			s.one("bob's commit", s.send(s.bob, &wire.ClientRequest{Txn: 1, Seq: 1, Op: wire.OpCommit}), 1, 1, wire.CodeOK, "")
			s.one("the client's next put", s.send(s.client, &wire.ClientRequest{Txn: 2, Seq: 0, Op: wire.OpPut, Key: "k", Value: []byte("next")}), 2, 0, wire.CodeOK, "")
			s.one("the client's next commit", s.send(s.client, &wire.ClientRequest{Txn: 2, Seq: 1, Op: wire.OpCommit}), 2, 1, wire.CodeOK, "")
			want := "next"
			if v, _ := s.n.Value("k"); string(v) != want {
				t.Errorf("k = %q committed, want %q", v, want)
			}
		})
	}
}

// TestEndedTxnsBounded: the serial node has no periodic tick, so what it remembers of ended
// transactions is bounded as it goes: of 1000 clients, one every 100 ms, each ending one
// transaction, it holds about those of the last idle timeout (51), at most twice that.
func TestEndedTxnsBounded(t *testing.T) {
	s := newScript(t)
	most := 0
	for i := range 1000 {
		cl := topo.NodeID(1000 + i)
		s.one("put", s.send(cl, &wire.ClientRequest{Txn: 1, Op: wire.OpPut, Key: "k", Value: []byte("v")}), 1, 0, wire.CodeOK, "")
		s.one("commit", s.send(cl, &wire.ClientRequest{Txn: 1, Seq: 1, Op: wire.OpCommit}), 1, 1, wire.CodeOK, "")
		most = max(most, s.n.ended.Len())
		s.env.Clock += int64(100 * time.Millisecond)
	}
	t.Logf("at most %d clients remembered", most)
	if live := int(5*time.Second/(100*time.Millisecond)) + 1; most > 2*live {
		t.Errorf("the node remembered the ended transactions of %d clients at once, want at most %d (twice the %d of one idle timeout)", most, 2*live, live)
	}
}
