package crdb

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/meridiandb/meridian/internal/node/nodetest"
	"github.com/meridiandb/meridian/internal/protocol"
	"github.com/meridiandb/meridian/internal/protocol/prototest"
	"github.com/meridiandb/meridian/internal/storage/durable"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/wire"
)

// TestSilentClientTxnNotBegunAgain: the gateway aborts a transaction whose client is silent
// past the idle timeout and rolls its intent back; the client's next request must be refused,
// not begin the transaction afresh (prototest has the scenario). Under the serializable model
// the checker sees the lost write after a put of k2 (the reader follows the transaction on k2
// and precedes it on k1), not after a get, as the reader may be ordered first. A commit was
// refused before too, with cause coordinator-timeout, now the same cause as the others.
func TestSilentClientTxnNotBegunAgain(t *testing.T) {
	prototest.SilentClientTxnNotBegunAgain(t, prototest.SilentClient{Case: prototest.Case{Protocol: name},
		Idle: 5 * time.Second, Model: model, RefusalCounter: "abort/" + causeUnknownTxn})
}

// TestRestartedCoordinatorRefusesEarlierTxn: the put after the gateway's crash is queued until
// the new life's incarnation is durable, then served (prototest has the scenario).
func TestRestartedCoordinatorRefusesEarlierTxn(t *testing.T) {
	self, cl, tp := scriptedGateway(t)
	g := &restartingGateway{t: t, self: self, cl: cl, tp: tp, disk: durable.NewMem()}
	g.Restart()
	g.env.Flush()
	prototest.RestartedCoordinatorRefusesEarlierTxn(t, g, prototest.KeysOn(t, tp, self, "restart", 2), "abort/"+causeUnknownTxn)
}

// scriptedGateway returns region 0's first data node, a client attached to it and the
// topology, for tests that drive the node by hand.
func scriptedGateway(t *testing.T) (self, cl topo.NodeID, tp *topo.Topology) {
	t.Helper()
	cfg, err := prototest.SimConfig(prototest.Case{Protocol: name, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	tp = cfg.Topology
	return tp.DataNodes(0)[0], topo.NodeID(len(tp.Nodes) + 1), tp
}

// restartingGateway is a gateway's lives on one disk, for
// prototest.RestartedCoordinatorRefusesEarlierTxn.
type restartingGateway struct {
	t        *testing.T
	self, cl topo.NodeID
	tp       *topo.Topology
	disk     *durable.Mem
	n        *Node
	env      *nodetest.ScriptEnv
}

func (g *restartingGateway) Restart() {
	g.n, g.env = scriptedLife(g.t, g.self, g.tp, g.disk, int64(time.Second))
}

func (g *restartingGateway) Send(req *wire.ClientRequest) (replies []*wire.ClientReply, wrote bool) {
	g.n.Handle(g.cl, req)
	g.env.Flush()
	for _, s := range g.env.Take() {
		switch m := s.M.(type) {
		case *wire.ClientReply:
			if s.To == g.cl {
				replies = append(replies, m)
			}
		case *WriteReq:
			wrote = true
		}
	}
	return replies, wrote
}

func (g *restartingGateway) Metrics() *protocol.Metrics { return g.n.m }

// TestLateFirstRequestCopyRefused: the network may deliver a request twice, and a copy of a
// transaction's first request that arrives after the transaction ended (committed, or aborted
// by its client) found nothing under its name and began the transaction again: one no client
// drives, its write laying an intent that blocked the key until the idle timeout. The copy is
// now refused (a retryable abort the client, no longer waiting for it, drops) and sends
// nothing; the client's next transaction, numbered above, begins as ever.
func TestLateFirstRequestCopyRefused(t *testing.T) {
	self, cl, tp := scriptedGateway(t)
	key := prototest.KeysOn(t, tp, self, "late", 1)[0]
	for _, end := range []wire.Op{wire.OpCommit, wire.OpAbort} {
		t.Run(end.String(), func(t *testing.T) {
			n, env := scriptedLife(t, self, tp, durable.NewMem(), int64(time.Second))
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
