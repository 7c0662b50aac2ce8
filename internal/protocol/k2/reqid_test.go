package k2

import (
	"fmt"
	"testing"
	"time"

	"github.com/meridiandb/meridian/internal/clock"
	"github.com/meridiandb/meridian/internal/node/nodetest"
	"github.com/meridiandb/meridian/internal/protocol/prototest"
	"github.com/meridiandb/meridian/internal/storage/durable"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/wire"
)

// reqIDScript drives one coordinator's lives on one disk, with its reads going to another data
// node that the test answers by hand.
type reqIDScript struct {
	t            *testing.T
	tp           *topo.Topology
	c            config
	self, remote topo.NodeID
	client       topo.NodeID
	disk         *durable.Mem
	n            *Node
	env          *nodetest.ScriptEnv
	txn          uint64
	oracleAsked  []uint64 // ids of the oracle requests, all lives
	sent         []nodetest.Sent
}

func newReqIDScript(t *testing.T) *reqIDScript {
	t.Helper()
	cfg, err := prototest.SimConfig(prototest.Case{Protocol: "k2", Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	c, err := parseConfig(100*time.Microsecond, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	tp := cfg.Topology
	s := &reqIDScript{t: t, tp: tp, c: c, self: tp.DataNodes(0)[0], remote: tp.DataNodes(1)[0],
		client: topo.NodeID(len(tp.Nodes) + 1), disk: durable.NewMem()}
	s.life()
	return s
}

// life starts the coordinator's next life (the previous one, if any, crashed) and lets it
// settle.
func (s *reqIDScript) life() {
	s.t.Helper()
	s.env = &nodetest.ScriptEnv{ID: s.self, Topo: s.tp, Clock: int64(time.Second), Epsilon: 100 * time.Microsecond, Disk: s.disk}
	n, err := newNode(s.env, s.disk, s.c)
	if err != nil {
		s.t.Fatal(err)
	}
	s.n = n
	s.settle()
}

// settle completes every persist and answers every oracle request, until the node asks for
// nothing more; what else it sent is in s.sent.
func (s *reqIDScript) settle() {
	s.t.Helper()
	for range 10 {
		s.env.Flush()
		asked := false
		for _, m := range s.env.Take() {
			if r, ok := m.M.(*clock.TSBatchRequest); ok {
				asked = true
				s.oracleAsked = append(s.oracleAsked, r.ReqID)
				s.n.Handle(m.To, &clock.TSBatchReply{ReqID: r.ReqID, Low: s.env.Clock, Up: s.env.Clock})
				continue
			}
			s.sent = append(s.sent, m)
		}
		if !asked {
			return
		}
	}
	s.t.Fatal("the node kept asking its oracle")
}

// request sends the client's request seq of transaction txn, reading keys, and returns the
// request id of each read sent for it, in key order.
func (s *reqIDScript) request(txn uint64, seq uint32, keys ...string) []uint64 {
	s.t.Helper()
	req := &wire.ClientRequest{Txn: txn, Seq: seq, Op: wire.OpBatch}
	for _, k := range keys {
		req.Batch = append(req.Batch, wire.BatchOp{Op: wire.OpGet, Key: k})
	}
	s.n.Handle(s.client, req)
	s.settle()
	var ids []uint64
	for _, m := range s.sent {
		switch r := m.M.(type) {
		case *ReadReq:
			ids = append(ids, r.ReqID)
		case *OpsReq:
			for _, rr := range r.Reads {
				ids = append(ids, rr.ReqID)
			}
		}
	}
	return ids
}

// reply returns (and forgets) the client's last answer, nil if none.
func (s *reqIDScript) reply() *wire.ClientReply {
	s.t.Helper()
	s.settle()
	var last *wire.ClientReply
	for _, m := range s.sent {
		if r, ok := m.M.(*wire.ClientReply); ok && m.To == s.client {
			last = r
		}
	}
	s.sent = nil
	return last
}

// TestRequestIDsNeverRepeatAcrossLives: a coordinator matches answers to its requests by request
// id alone, and a data node may answer a request of the coordinator's previous life after the
// restart (a read parked on PUSHWS across the crash). Ids carry a number above every earlier
// life's, in their high bits, with 2^40 counted under it. A life that counted on past that
// (2^40 requests, skipped here) would mint the next life's first ids, and that life would take
// a stale answer of its predecessor for its own read: a wrong value. The coordinator takes a
// new number, durable, once half its counter is spent, and a transaction that needs an id
// when none is left and the new number is not durable yet aborts (request-ids-spent) rather
// than count on.
func TestRequestIDsNeverRepeatAcrossLives(t *testing.T) {
	s := newReqIDScript(t)
	keys := prototest.KeysOn(t, s.tp, s.remote, "reqid", 3)

	// Life 1 has two ids left under its number.
	s.n.reqSeq = (s.n.reqSeq>>reqSeqBits+1)<<reqSeqBits - 2
	s.txn++
	old := s.request(s.txn, 0, keys...)
	if len(old) != len(keys) {
		t.Fatalf("life 1 sent %d reads, want %d", len(old), len(keys))
	}
	s.sent = nil

	// Life 2 reads the same keys; life 1's answers arrive late, then life 2's own.
	s.life()
	s.txn++
	ids := s.request(s.txn, 0, keys...)
	if len(ids) != len(keys) {
		t.Fatalf("life 2 sent %d reads, want %d", len(ids), len(keys))
	}
	for i, id := range old {
		s.n.Handle(s.remote, &ReadResp{ReqID: id, Found: true, Value: []byte(fmt.Sprintf("life 1's %s", keys[i]))})
	}
	for i, id := range ids {
		s.n.Handle(s.remote, &ReadResp{ReqID: id, Found: true, Value: []byte(keys[i])})
	}
	r := s.reply()
	if r == nil || r.Code != wire.CodeOK || len(r.Results) != len(keys) {
		t.Fatalf("life 2's read answered %+v (request ids %#x; life 1 sent %#x)", r, ids, old)
	}
	for i, res := range r.Results {
		if string(res.Value) != keys[i] {
			t.Fatalf("life 2 read %q for %s: an answer to life 1's request taken for its own (request ids %#x; life 1 sent %#x)", res.Value, keys[i], ids, old)
		}
	}

	// A running transaction that needs an id when none is left, with the next number not
	// durable yet, aborts and sends nothing.
	s.txn++
	if ids := s.request(s.txn, 0, keys[0]); len(ids) != 1 {
		t.Fatalf("sent %d reads, want 1", len(ids))
	} else {
		s.n.Handle(s.remote, &ReadResp{ReqID: ids[0], Found: true, Value: []byte("v")})
	}
	s.sent = nil
	s.n.reqSeq |= 1<<reqSeqBits - 1
	last := s.n.reqSeq
	s.n.Handle(s.client, &wire.ClientRequest{Txn: s.txn, Seq: 1, Op: wire.OpGet, Key: keys[1]})
	if s.n.reqSeq != last {
		t.Fatalf("minted request id %#x after the number's last, %#x", s.n.reqSeq, last)
	}
	if r := s.reply(); r == nil || r.Code != wire.CodeAborted || r.Cause != "request-ids-spent" {
		t.Fatalf("a request with no id left got %+v, want aborted (request-ids-spent)", r)
	}
	// The next transaction waits for the next number to be durable, and its requests carry it.
	s.txn++
	if ids := s.request(s.txn, 0, keys[1]); len(ids) != 1 || ids[0]>>reqSeqBits <= last>>reqSeqBits {
		t.Fatalf("after the ids ran out the next read went as %#x, want one under a number above %d", ids, last>>reqSeqBits)
	}
}

// TestOracleRequestIDsRenewed: an oracle's answer to a timestamp request of an earlier life must
// not match a request of this one (its reading would predate the transactions it stamps), so
// oracle requests are numbered as the coordinator's requests are, and their counter renews the
// number too.
func TestOracleRequestIDsRenewed(t *testing.T) {
	s := newReqIDScript(t)
	key := prototest.KeysOn(t, s.tp, s.remote, "oracle", 1)[0]
	s.n.oracleSeq = (s.n.oracleSeq>>reqSeqBits+1)<<reqSeqBits - 2
	s.n.batcher.NumberRequestsFrom(s.n.oracleSeq)
	for i := range 3 {
		s.txn++
		if ids := s.request(s.txn, 0, key); len(ids) != 1 {
			t.Fatalf("transaction %d of life 1 sent %d reads, want 1 (oracle requests %#x)", i, len(ids), s.oracleAsked)
		}
		s.sent = nil
		s.env.Advance(time.Millisecond) // the batch expires: the next transaction asks again
	}
	first := len(s.oracleAsked)
	s.life()
	s.txn++
	if ids := s.request(s.txn, 0, key); len(ids) != 1 {
		t.Fatalf("life 2 sent %d reads, want 1", len(ids))
	}
	seen := map[uint64]bool{}
	for _, id := range s.oracleAsked {
		if seen[id] {
			t.Fatalf("oracle request id %#x sent again (ids %#x, life 2 from the %dth)", id, s.oracleAsked, first)
		}
		seen[id] = true
	}
	if first == len(s.oracleAsked) {
		t.Fatal("life 2 asked its oracle nothing")
	}
}

// TestRecoverFloorOnlyFromThisLife: a restarted data node serves nothing until an oracle reading
// taken after its restart bounds every timestamp a reader of its earlier lives could have
// used, and raises its read floor above that. An answer to the recovery request of an earlier
// life, held up on the way (a slow link, resent requests) and arriving after a later crash, was
// read before that life served its readers: taken for this life's, it would set the floor
// below their timestamps, and a write below a read they made would be accepted.
func TestRecoverFloorOnlyFromThisLife(t *testing.T) {
	s := newReqIDScript(t)
	// restart starts the next life and returns its recovery request's id, unanswered.
	restart := func() uint64 {
		t.Helper()
		s.env = &nodetest.ScriptEnv{ID: s.self, Topo: s.tp, Clock: s.env.Clock, Epsilon: 100 * time.Microsecond, Disk: s.disk}
		n, err := newNode(s.env, s.disk, s.c)
		if err != nil {
			t.Fatal(err)
		}
		s.n = n
		s.env.Flush()
		var id uint64
		for _, m := range s.env.Take() {
			if r, ok := m.M.(*clock.TSBatchRequest); ok && r.ReqID&recoverReqID != 0 {
				id = r.ReqID
			}
		}
		if !n.recovering || id == 0 {
			t.Fatalf("a restarted node is recovering %v, asked its oracle %#x", n.recovering, id)
		}
		return id
	}
	lost := restart() // life 2's answer is held up; it recovers from a resent request's
	readAt := s.env.Clock
	s.n.Handle(s.tp.Oracle(0), &clock.TSBatchReply{ReqID: lost, Low: readAt, Up: readAt})
	if s.n.recovering {
		t.Fatal("life 2 did not recover from its oracle's answer")
	}
	s.env.Advance(time.Second) // life 2 serves readers meanwhile, then crashes
	own := restart()
	s.n.Handle(s.tp.Oracle(0), &clock.TSBatchReply{ReqID: lost, Low: readAt, Up: readAt})
	if !s.n.recovering {
		t.Fatalf("life 3 took life 2's recovery answer (read at %d, a second before its restart) for its own: read floor %v", readAt, s.n.store.ReadFloor())
	}
	now := s.env.Clock
	s.n.Handle(s.tp.Oracle(0), &clock.TSBatchReply{ReqID: own, Low: now, Up: now})
	if s.n.recovering || s.n.store.ReadFloor().Wall <= now {
		t.Fatalf("life 3 recovering %v with read floor %v after its own answer, read at %d", s.n.recovering, s.n.store.ReadFloor(), now)
	}
}
