package spanner

import (
	"fmt"
	"testing"
	"time"

	"github.com/meridiandb/meridian/internal/bench"
	"github.com/meridiandb/meridian/internal/node"
	"github.com/meridiandb/meridian/internal/protocol/prototest"
	"github.com/meridiandb/meridian/internal/sim"
	"github.com/meridiandb/meridian/internal/storage"
	"github.com/meridiandb/meridian/internal/storage/locks"
	"github.com/meridiandb/meridian/internal/ts"
	"github.com/meridiandb/meridian/internal/wire"
)

// dropFirst loses the first message between nodes that match accepts, once.
func dropFirst(match func(d delivered) bool) func(d delivered) bool {
	done := false
	return func(d delivered) bool {
		if done || !match(d) {
			return false
		}
		done = true
		return true
	}
}

// awaitReply moves the cluster's clock on in 50 ms steps, firing timers, until client has more
// than n replies or limit has passed; it returns the new reply (nil if none) and the time taken.
func (c *testCluster) awaitReply(client node.ID, n int, limit time.Duration) (*wire.ClientReply, time.Duration) {
	const step = 50 * time.Millisecond
	var waited time.Duration
	for len(c.replies[client]) <= n && waited < limit {
		c.fireTimers(step)
		waited += step
	}
	if got := c.replies[client]; len(got) > n {
		return got[n], waited
	}
	return nil, waited
}

// checkSettled fails unless no transaction is left anywhere: no participant state or lock, no
// running transaction, no commit decision waiting for an acknowledgement.
func checkSettled(t *testing.T, c *testCluster) {
	t.Helper()
	for i, n := range c.nodes {
		if k, l := n.Part.Len(), n.Part.locks.Len(); k != 0 || l != 0 {
			t.Errorf("participant %d still tracks %d transactions and locks %d keys", i, k, l)
		}
		if a, u := n.Coord.Active(), len(n.Coord.unacked); a != 0 || u != 0 {
			t.Errorf("coordinator %d still runs %d transactions and waits for %d acknowledgements", i, a, u)
		}
	}
}

// TestLostMessageCostsAKeepAlive: one message of a read-write transaction is lost, and the
// transaction still commits within two keep-alive periods and a decision-timeout; nothing is
// left behind. Before, a lost later request, answer, prepare or vote left the client waiting
// for good (until its own timeout: the keep-alives kept the transaction, and its locks, alive
// at both ends), and a lost acknowledgement kept the commit record for good; then a lost
// request or prepare aborted the transaction (participant-lost-request), which under 10% loss
// aborted nearly every attempt of a transaction over five nodes. The keep-alive now has it sent
// again.
//
// The transaction reads a2, then b2 and writes b1 in one batch, then commits: participant 2
// serves both reads and votes read-only, participant 1 prepares the write.
func TestLostMessageCostsAKeepAlive(t *testing.T) {
	cfg := Config{Policy: locks.WoundWait, IdleTimeout: 5 * time.Second, DecisionTimeout: 500 * time.Millisecond}
	bound := 2*cfg.IdleTimeout/3 + cfg.DecisionTimeout
	to2 := func(d delivered) bool { return d.to == 2 }
	from2 := func(d delivered) bool { return d.from == 2 }
	for _, tc := range []struct {
		name string
		lose func(d delivered) bool
		// cause is the abort the client gets for the request that lost a message ("": none).
		cause string
		// failing is the request that is answered late: 1 the batch, 2 the commit, -1 none.
		failing int
	}{
		{"first request", func(d delivered) bool { m, ok := d.m.(*ReadReq); return ok && m.Seq == 0 }, "", 0},
		{"later request", func(d delivered) bool { m, ok := d.m.(*ReadReq); return ok && m.Seq == 1 }, "", 1},
		{"answer", func(d delivered) bool { m, ok := d.m.(*ReadResp); return ok && m.Seq == 1 }, "", 1},
		{"prepare", func(d delivered) bool { _, ok := d.m.(*PrepareReq); return ok && to2(d) }, "", 2},
		{"vote", func(d delivered) bool { _, ok := d.m.(*PrepareResp); return ok && from2(d) }, "", 2},
		{"decision", func(d delivered) bool { m, ok := d.m.(*DecideReq); return ok && m.Commit && to2(d) }, "", -1},
		{"acknowledgement", func(d delivered) bool { _, ok := d.m.(*DecideAck); return ok && from2(d) }, "", -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newTestClusterConfig(t, cfg)
			const client node.ID = 100
			a2, b2, b1 := c.key(2, 0, "a2"), c.key(2, 1, "b2"), c.key(1, 0, "b1")
			c.drop = dropFirst(tc.lose)
			reqs := []*wire.ClientRequest{
				{Txn: 1, Seq: 0, Op: wire.OpGet, Key: a2},
				{Txn: 1, Seq: 1, Op: wire.OpBatch, Batch: append(gets(b2), wire.BatchOp{Op: wire.OpPut, Key: b1, Value: []byte("v")})},
				{Txn: 1, Seq: 2, Op: wire.OpCommit},
			}
			for i, req := range reqs {
				r := c.request(client, req)
				if i == tc.failing {
					if r != nil {
						t.Fatalf("request %d answered at once (%+v): the message was not lost", i, r)
					}
					var waited time.Duration
					r, waited = c.awaitReply(client, i, 2*cfg.IdleTimeout)
					if r == nil || waited > bound {
						t.Fatalf("request %d after its message was lost: %+v after %v, want an answer within %v", i, r, waited, bound)
					}
				}
				if tc.cause != "" && i == tc.failing {
					if r.Code != wire.CodeAborted || r.Cause != tc.cause {
						t.Fatalf("request %d: %+v, want aborted (%s)", i, r, tc.cause)
					}
					break
				}
				if r == nil || r.Code != wire.CodeOK {
					t.Fatalf("request %d: %+v, want OK", i, r)
				}
			}
			// A lost decision or acknowledgement is repeated: the poll of the prepared
			// participant, the coordinator's resend.
			c.fireTimers(bound)
			checkSettled(t, c)
			if tc.cause == "" {
				r := c.request(client, &wire.ClientRequest{Txn: 2, Op: wire.OpGet, Key: b1})
				if r == nil || r.Code != wire.CodeOK || string(r.Value) != "v" {
					t.Fatalf("after the commit b1 = %+v, want v", r)
				}
			}
		})
	}
}

// TestLossSeenChasesLaterLosses: once a participant has asked for a request it never got, the
// coordinator takes messages for being lost and chases a transaction that waits longer than
// chaseAfter, rather than leave it to the next keep-alive. The first lost message costs a
// keep-alive period; a later one, here a lost answer, costs about two chase periods at most.
// Before, each cost up to a keep-alive period (a third of the idle timeout, ~1.7 s here), and
// under 15% loss a run's transactions fell so far behind that clients were still waiting when
// the drain ended.
func TestLossSeenChasesLaterLosses(t *testing.T) {
	cfg := Config{Policy: locks.WoundWait, IdleTimeout: 5 * time.Second, DecisionTimeout: 500 * time.Millisecond}
	c := newTestClusterConfig(t, cfg)
	const client node.ID = 100
	a2, b2 := c.key(2, 0, "a2"), c.key(2, 1, "b2")
	lostRequest := dropFirst(func(d delivered) bool { m, ok := d.m.(*ReadReq); return ok && m.Seq == 0 })
	lostAnswer := dropFirst(func(d delivered) bool { m, ok := d.m.(*ReadResp); return ok && m.Seq == 1 })
	c.drop = func(d delivered) bool { return lostRequest(d) || lostAnswer(d) }

	if r := c.request(client, &wire.ClientRequest{Txn: 1, Seq: 0, Op: wire.OpGet, Key: a2}); r != nil {
		t.Fatalf("first read answered at once (%+v): its request was not lost", r)
	}
	if r, waited := c.awaitReply(client, 0, 2*cfg.IdleTimeout); r == nil || r.Code != wire.CodeOK || waited > cfg.IdleTimeout/3+cfg.DecisionTimeout {
		t.Fatalf("first read after its request was lost: %+v after %v", r, waited)
	}
	if r := c.request(client, &wire.ClientRequest{Txn: 1, Seq: 1, Op: wire.OpGet, Key: b2}); r != nil {
		t.Fatalf("second read answered at once (%+v): its answer was not lost", r)
	}
	bound := 2*c.nodes[0].Coord.chaseAfter() + 50*time.Millisecond
	r, waited := c.awaitReply(client, 1, 2*cfg.IdleTimeout)
	if r == nil || r.Code != wire.CodeOK || waited > bound {
		t.Fatalf("second read after its answer was lost: %+v after %v, want OK within %v (a keep-alive period is %v)", r, waited, bound, cfg.IdleTimeout/3)
	}
	if r := c.request(client, &wire.ClientRequest{Txn: 1, Seq: 2, Op: wire.OpCommit}); r == nil || r.Code != wire.CodeOK {
		t.Fatalf("commit: %+v", r)
	}
	c.fireTimers(cfg.IdleTimeout)
	checkSettled(t, c)
	// With no loss since, the chase stops an idle-timeout after the last one.
	c.fireTimers(2 * c.nodes[0].Coord.chaseAfter())
	if c.nodes[0].Coord.chasing {
		t.Errorf("still chasing %v after the last loss; want the chase stopped after an idle-timeout (%v)", cfg.IdleTimeout+2*c.nodes[0].Coord.chaseAfter(), cfg.IdleTimeout)
	}
}

// TestLostAbortDecisionFreesLocks: a transaction's abort decision to a participant is lost, so
// the participant keeps its read lock with no coordinator driving it. A live coordinator keeps
// its transactions alive every keep-alive period, so the participant asks about one silent for
// longer than that and a decision-timeout, and learns it was aborted; a younger writer waiting
// for the lock commits then, not at the idle timeout.
func TestLostAbortDecisionFreesLocks(t *testing.T) {
	cfg := Config{Policy: locks.WoundWait, IdleTimeout: 5 * time.Second, DecisionTimeout: 500 * time.Millisecond}
	c := newTestClusterConfig(t, cfg)
	const reader, writer node.ID = 100, 101
	a2 := c.key(2, 0, "a2")
	if r := c.request(reader, &wire.ClientRequest{Txn: 1, Op: wire.OpGet, Key: a2}); r == nil || r.Code != wire.CodeOK {
		t.Fatalf("read: %+v", r)
	}
	c.drop = dropFirst(func(d delivered) bool { m, ok := d.m.(*DecideReq); return ok && !m.Commit })
	if r := c.request(reader, &wire.ClientRequest{Txn: 1, Seq: 1, Op: wire.OpAbort}); r == nil || r.Code != wire.CodeOK {
		t.Fatalf("abort: %+v", r)
	}
	c.now += int64(time.Millisecond) // the writer is younger: it waits for the reader's lock
	if r := c.request(writer, &wire.ClientRequest{Txn: 1, Op: wire.OpPut, Key: a2, Value: []byte("w")}); r == nil || r.Code != wire.CodeOK {
		t.Fatalf("write: %+v", r)
	}
	if r := c.request(writer, &wire.ClientRequest{Txn: 1, Seq: 1, Op: wire.OpCommit}); r != nil {
		t.Fatalf("commit answered %+v while the aborted reader still holds the lock: the decision was not lost", r)
	}
	bound := 2*cfg.IdleTimeout/3 + cfg.DecisionTimeout
	r, waited := c.awaitReply(writer, 1, cfg.IdleTimeout)
	if r == nil || r.Code != wire.CodeOK || waited > bound {
		t.Fatalf("writer's commit behind a lock whose abort decision was lost: %+v after %v, want OK within %v", r, waited, bound)
	}
	if n := c.nodes[2].metrics.Counters["silent-txns-asked"]; n != 1 {
		t.Errorf("silent-txns-asked = %d, want 1", n)
	}
	c.fireTimers(bound)
	checkSettled(t, c)
}

// TestLostWoundRepeatedByPoll: wound-wait's wound of a transaction prepared at a participant
// is lost. The older wounder waits there for the younger one's decision, and the younger one
// waits at another participant for the older one's lock: a deadlock that only the wound breaks.
// The prepared participant's poll repeats it, and the younger transaction aborts.
func TestLostWoundRepeatedByPoll(t *testing.T) {
	cfg := Config{Policy: locks.WoundWait, IdleTimeout: 5 * time.Second, DecisionTimeout: 500 * time.Millisecond}
	c := newTestClusterConfig(t, cfg)
	const older, younger node.ID = 100, 101
	a2, b1 := c.key(2, 0, "a2"), c.key(1, 0, "b1")
	if r := c.request(older, &wire.ClientRequest{Txn: 1, Op: wire.OpGet, Key: b1}); r == nil || r.Code != wire.CodeOK {
		t.Fatalf("older read: %+v", r)
	}
	c.now += int64(time.Millisecond)
	if r := c.request(younger, &wire.ClientRequest{Txn: 1, Op: wire.OpBatch, Batch: append(gets(a2),
		wire.BatchOp{Op: wire.OpPut, Key: b1, Value: []byte("y")})}); r == nil || r.Code != wire.CodeOK {
		t.Fatalf("younger batch: %+v", r)
	}
	// The younger one votes at participant 2 (read-only) and waits at 1 for the older one's lock.
	if r := c.request(younger, &wire.ClientRequest{Txn: 1, Seq: 1, Op: wire.OpCommit}); r != nil {
		t.Fatalf("younger commit answered %+v while its write waits", r)
	}
	if r := c.request(older, &wire.ClientRequest{Txn: 1, Seq: 1, Op: wire.OpPut, Key: a2, Value: []byte("o")}); r == nil || r.Code != wire.CodeOK {
		t.Fatalf("older write: %+v", r)
	}
	c.drop = dropFirst(func(d delivered) bool { _, ok := d.m.(*WoundReq); return ok })
	if r := c.request(older, &wire.ClientRequest{Txn: 1, Seq: 2, Op: wire.OpCommit}); r != nil {
		t.Fatalf("older commit answered %+v while the younger reader holds a2", r)
	}
	bound := 2 * cfg.DecisionTimeout
	r, waited := c.awaitReply(older, 2, 2*cfg.IdleTimeout)
	if r == nil || r.Code != wire.CodeOK || waited > bound {
		t.Fatalf("older commit after its wound was lost: %+v after %v, want OK within %v", r, waited, bound)
	}
	if got := c.replies[younger]; len(got) != 2 || got[1].Code != wire.CodeAborted || got[1].Cause != causeWoundWait {
		t.Fatalf("younger replies %+v, want its commit aborted (%s)", got, causeWoundWait)
	}
	c.fireTimers(bound)
	checkSettled(t, c)
}

// TestKeepAliveCrossingAnswerChangesNothing: a keep-alive sent while the answer it asks about
// is on its way (the two cross) finds the request answered, or the transaction aborted, only
// just now; it must not answer again or repeat the abort, or every run without faults would
// send more (and change its trace). Once the answer or abort is older than decision-timeout it
// was lost, and is repeated.
func TestKeepAliveCrossingAnswerChangesNothing(t *testing.T) {
	p, env := newScriptParticipant(t, locks.WoundWait)
	const coord, other node.ID = 4, 5
	id := storage.MakeTxnID(int32(coord), 1)
	p.onRead(coord, &ReadReq{Txn: id, Age: ts.Timestamp{Wall: 200}, Key: "a"})
	env.Take()
	keepAlive := &KeepAlive{Txn: id, Await: awaitAnswer, Seq: 0}
	p.onKeepAlive(coord, keepAlive)
	if sent := env.Take(); len(sent) != 0 {
		t.Fatalf("a keep-alive crossing the answer drew %+v, want nothing", sent)
	}
	env.Advance(p.cfg.DecisionTimeout)
	p.onKeepAlive(coord, keepAlive)
	if sent := env.Take(); len(sent) != 1 || sent[0].To != coord {
		t.Fatalf("a keep-alive for an answer sent decision-timeout ago drew %+v, want the answer again", sent)
	} else if r, ok := sent[0].M.(*ReadResp); !ok || !r.OK || r.Seq != 0 {
		t.Fatalf("answer sent again: %+v, want the read's answer", sent[0].M)
	}

	// An older transaction wounds it: the WoundReq goes now, and a keep-alive crossing it draws
	// nothing; one decision-timeout later the wound is repeated with its cause.
	p.onWrite(other, &WriteReq{Txn: storage.MakeTxnID(int32(other), 1), Age: ts.Timestamp{Wall: 100}, Key: "a", Value: []byte("o")})
	if sent := env.Take(); len(sent) != 2 {
		t.Fatalf("the wound sent %+v, want a WoundReq and the older write's answer", sent)
	}
	p.onKeepAlive(coord, keepAlive)
	if sent := env.Take(); len(sent) != 0 {
		t.Fatalf("a keep-alive crossing the wound drew %+v, want nothing", sent)
	}
	env.Advance(p.cfg.DecisionTimeout)
	p.onKeepAlive(coord, keepAlive)
	if sent := env.Take(); len(sent) != 1 {
		t.Fatalf("a keep-alive decision-timeout after the wound drew %+v, want the wound again", sent)
	} else if w, ok := sent[0].M.(*WoundReq); !ok || w.Txn != id || w.Cause != causeWoundWait {
		t.Fatalf("repeated: %+v, want a WoundReq (%s)", sent[0].M, causeWoundWait)
	}
}

// TestNetworkFaultsEndEveryTransaction: with 2% of the messages between nodes lost, 10%
// duplicated up to 100 ms late and two regions cut from each other for a second (the CLI's
// --loss 0.02 --duplicate 0.1 --partition 'SH|BJ@2s/1s'), every transaction ends before the
// run's drain does, and histories stay strictly serializable. Before, 14 to 50 of the 50
// clients were still waiting when the drain gave up, 30 s after the window; under
// lock-policy=detect a lost wound of a deadlock's victim left the deadlock for good.
func TestNetworkFaultsEndEveryTransaction(t *testing.T) {
	for _, opts := range []struct{ writeLocks, policy string }{{"buffered", "wound-wait"}, {"eager", "wound-wait"}, {"buffered", "detect"}} {
		for _, seed := range []uint64{1, 2} {
			t.Run(fmt.Sprintf("%s/%s/seed%d", opts.writeLocks, opts.policy, seed), func(t *testing.T) {
				res := prototest.Run(t, prototest.Case{Protocol: Name, Seed: seed,
					Options:  map[string]string{"write-locks": opts.writeLocks, "lock-policy": opts.policy},
					Workload: prototest.ListAppend(10, 0), Clients: 10, Duration: 3 * time.Second,
					Faults: func(s *sim.Sim, w bench.Window) {
						s.SetClientLinksReliable(true)
						s.SetLoss(0.02)
						s.SetDuplication(0.1)
						s.SetDuplicateDelay(100 * time.Millisecond)
						s.At(w.Start+int64(time.Second), func() { s.PartitionRegions(0, 1) })
						s.At(w.Start+int64(2*time.Second), func() { s.HealRegions(0, 1) })
					}})
				rep := prototest.MustCheck(t, res, "strict-serializable")
				c := res.ProtocolMetrics.Counters
				t.Logf("commits=%d unfinished=%d virtual %.1f s lost-requests=%d answers-resent=%d silent-txns-asked=%d",
					res.Committed, rep.Counts.Info, res.VirtualSeconds, c["lost-requests"], c["answers-resent"], c["silent-txns-asked"])
				if rep.Counts.Info != 0 {
					t.Errorf("%d transactions still running when the drain ended", rep.Counts.Info)
				}
				prototest.ExpectValid(t, rep, 5)
			})
		}
	}
}
