package k2

import (
	"testing"
	"time"

	"github.com/meridiandb/meridian/internal/node/nodetest"
	"github.com/meridiandb/meridian/internal/protocol"
	"github.com/meridiandb/meridian/internal/protocol/prototest"
	"github.com/meridiandb/meridian/internal/protocol/txnkit"
	"github.com/meridiandb/meridian/internal/wire"
)

// TestSilentClientTxnNotBegunAgain: the coordinator's tick aborts a transaction whose client
// is silent past the idle timeout, telling no one, and rolls its intent back; the client's next
// request must be refused, not begin the transaction afresh (prototest has the scenario). A
// commit was refused before too, with the same cause, but not counted.
func TestSilentClientTxnNotBegunAgain(t *testing.T) {
	prototest.SilentClientTxnNotBegunAgain(t, prototest.SilentClient{Case: prototest.Case{Protocol: "k2"},
		Idle: 5 * time.Second, Model: model, RefusalCounter: "abort." + txnkit.CauseUnknownTxn})
}

// TestRestartedCoordinatorRefusesEarlierTxn: the put after the crash arrives before the new
// life's incarnation is durable, the commit after (prototest has the scenario).
func TestRestartedCoordinatorRefusesEarlierTxn(t *testing.T) {
	s := newReqIDScript(t)
	keys := prototest.KeysOn(t, s.tp, s.remote, "restart", 2)
	prototest.RestartedCoordinatorRefusesEarlierTxn(t, restartScript{s}, keys, "abort."+txnkit.CauseUnknownTxn)
}

// restartScript drives reqIDScript's coordinator for prototest.RestartedCoordinatorRefusesEarlierTxn.
type restartScript struct{ *reqIDScript }

func (s restartScript) Send(req *wire.ClientRequest) (replies []*wire.ClientReply, wrote bool) {
	s.t.Helper()
	s.n.Handle(s.client, req)
	s.settle()
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

func (s restartScript) Restart() {
	s.t.Helper()
	s.env = &nodetest.ScriptEnv{ID: s.self, Topo: s.tp, Clock: s.env.Clock, Epsilon: 100 * time.Microsecond, Disk: s.disk}
	n, err := newNode(s.env, s.disk, s.c)
	if err != nil {
		s.t.Fatal(err)
	}
	s.n = n
	if s.n.ready {
		s.t.Fatal("the new life is ready before its incarnation's flush: the scenario tests nothing")
	}
}

func (s restartScript) Metrics() *protocol.Metrics { return s.n.m }

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
