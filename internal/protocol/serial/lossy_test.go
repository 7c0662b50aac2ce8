package serial

import (
	"fmt"
	"testing"
	"time"

	"github.com/meridiandb/meridian/internal/bench"
	"github.com/meridiandb/meridian/internal/check"
	"github.com/meridiandb/meridian/internal/node"
	"github.com/meridiandb/meridian/internal/node/nodetest"
	"github.com/meridiandb/meridian/internal/protocol/prototest"
	"github.com/meridiandb/meridian/internal/storage/durable"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/wire"
)

// TestLostMessagesCostBoundedDelay runs what `meridian sim --protocol serial --workload
// list-append` runs (10 clients per region, 1 s warm-up, 5 s), with 2% of the messages between
// nodes lost, and with a partition between the serial node's region and another on top of loss
// and duplication. Every transaction must get its outcome, and the run must end well within the
// drain's 30 s: a forward or an answer lost between a coordinator and the serial node was
// never sent again, and its client waited out its 60 s timeout while the serial node held the
// global lock until its idle timeout (before: 3 or 4 transactions without an outcome, 36
// virtual seconds, for each seed, and 35, 5 and 12 commits under loss against 59, 56 and 59
// without).
func TestLostMessagesCostBoundedDelay(t *testing.T) {
	cfg, err := prototest.SimConfig(prototest.Case{Protocol: "serial", Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	tp := cfg.Topology
	home := tp.RegionOf(tp.DataNodes(0)[0])
	other := topo.RegionID(1)
	if other == home {
		other = 0
	}
	for _, tc := range []struct {
		name   string
		faults bench.NetFaults
	}{
		{"loss", bench.NetFaults{Loss: 0.02}},
		{"loss+duplicate+partition", bench.NetFaults{Loss: 0.02, Duplicate: 0.1,
			Partitions: []bench.Partition{{A: home, B: other, At: 2 * time.Second, For: time.Second}}}},
	} {
		for seed := uint64(1); seed <= 3; seed++ {
			t.Run(fmt.Sprintf("%s/seed=%d", tc.name, seed), func(t *testing.T) {
				res, rep := simListAppend(t, seed, func(_ *topo.Topology, spec *bench.Spec) { spec.Network = tc.faults })
				t.Logf("%d committed, %d without an outcome, %.1f virtual s", res.Committed, rep.Counts.Info, res.VirtualSeconds)
				if rep.Counts.Info > 0 {
					t.Errorf("%d transactions got no outcome", rep.Counts.Info)
				}
				// The drain takes about 5 s with no fault at all (the transactions queued for
				// the lock at the window's end); a client left waiting for an answer holds it
				// until the 30 s limit.
				if res.VirtualSeconds > 20 {
					t.Errorf("the run took %.1f virtual s: some client waited far longer than a lost message should cost", res.VirtualSeconds)
				}
				prototest.ExpectValid(t, rep, 30)
			})
		}
	}
}

// simListAppend runs serial on list-append with the CLI's defaults (10 clients per region, 1 s
// warm-up, 5 s) and the faults that faults adds to the spec, and checks the history strict
// serializable.
func simListAppend(t *testing.T, seed uint64, faults func(*topo.Topology, *bench.Spec)) (*bench.Result, *check.Report) {
	t.Helper()
	cfg, err := prototest.SimConfig(prototest.Case{Protocol: "serial", Seed: seed})
	if err != nil {
		t.Fatal(err)
	}
	wl, err := bench.BuildWorkload(cfg.Topology, bench.DefaultWorkloadParams("list-append"))
	if err != nil {
		t.Fatal(err)
	}
	spec := bench.Spec{Workload: wl, ClientsPerRegion: 10, Warmup: time.Second, Duration: 5 * time.Second, Record: true}
	faults(cfg.Topology, &spec)
	res, err := bench.SimRun(cfg, spec)
	if err != nil {
		t.Fatal(err)
	}
	return res, prototest.MustCheck(t, res, "strict-serializable")
}

// coordScript drives one coordinator (a node other than the serial node) by hand.
type coordScript struct {
	t      *testing.T
	env    *nodetest.ScriptEnv
	n      *Node
	server topo.NodeID
}

func newCoordScript(t *testing.T, tp *topo.Topology, opts map[string]string) *coordScript {
	t.Helper()
	env := &nodetest.ScriptEnv{ID: tp.DataNodes(1)[0], Topo: tp, Clock: int64(time.Second)}
	h, err := proto{}.NewNode(node.Config{Env: env, Durable: durable.NewMem(), Options: opts})
	if err != nil {
		t.Fatal(err)
	}
	env.Flush() // the life's number
	return &coordScript{t: t, env: env, n: h.(*Node), server: tp.DataNodes(0)[0]}
}

// forwards returns the Forwards sent since the last call (and forgets everything sent).
func (c *coordScript) forwards() []*Forward {
	var out []*Forward
	for _, m := range c.env.Take() {
		if f, ok := m.M.(*Forward); ok && m.To == c.server {
			out = append(out, f)
		}
	}
	return out
}

// TestCoordinatorForwardsUntilAnswered: a coordinator whose forward, or the answer to it, is
// lost forwards the request again (marked Resent) after resend-after, then at doubling
// intervals up to idle-timeout, until the serial node answers; it hands the client the first
// answer only. A Queued notice (the request waits for the lock) spaces the copies out to
// idle-timeout. Before, a request was forwarded once, and a lost one left its client waiting
// for its own timeout.
func TestCoordinatorForwardsUntilAnswered(t *testing.T) {
	s := newScript(t)
	c := newCoordScript(t, s.tp, map[string]string{"resend-after": "100ms"})
	put := &wire.ClientRequest{Txn: 1, Op: wire.OpPut, Key: "k", Value: []byte("v")}
	c.n.Handle(s.client, put)
	if fs := c.forwards(); len(fs) != 1 || fs[0].Resent {
		t.Fatalf("forwarded %+v, want one first forwarding", fs)
	}
	// The forward is lost: copies follow after 100, 200, 400 ms, ... up to the idle timeout.
	var at []time.Duration
	start := c.env.Clock
	for range 8 {
		c.env.Advance(50 * time.Millisecond)
		for c.env.Clock-start < int64(30*time.Second) && len(c.env.Take()) == 0 {
			c.env.Advance(50 * time.Millisecond)
		}
		at = append(at, time.Duration(c.env.Clock-start))
	}
	want := []time.Duration{100, 300, 700, 1500, 3100, 6300, 11300, 16300}
	for i := range want {
		want[i] *= time.Millisecond
	}
	if fmt.Sprint(at) != fmt.Sprint(want) {
		t.Errorf("copies forwarded at %v, want %v", at, want)
	}

	// The serial node gets a copy: its answer reaches the client, once.
	c.env.Advance(10 * time.Second)
	var copy *Forward
	if fs := c.forwards(); len(fs) > 0 {
		copy = fs[0]
	}
	if copy == nil || !copy.Resent || copy.Req.Seq != 0 || copy.Client != s.client {
		t.Fatalf("copy %+v, want the put marked Resent", copy)
	}
	s.n.Handle(c.env.ID, copy)
	answers := s.env.Take()
	if len(answers) != 1 {
		t.Fatalf("the serial node sent %+v, want one answer", answers)
	}
	a, ok := answers[0].M.(*Answer)
	if !ok || answers[0].To != c.env.ID || a.Client != s.client || a.Reply.Code != wire.CodeOK {
		t.Fatalf("the serial node sent %+v to %d, want an OK Answer to the coordinator", answers[0].M, answers[0].To)
	}
	for i := range 2 { // the answer, then a copy of it
		c.n.Handle(s.tp.DataNodes(0)[0], a)
		sent := c.env.Take()
		if i == 1 {
			if len(sent) != 0 {
				t.Errorf("the answer's copy reached the client too: %+v", sent)
			}
			continue
		}
		if len(sent) != 1 || sent[0].To != s.client {
			t.Fatalf("the coordinator sent %+v, want the answer to the client", sent)
		}
		if r := sent[0].M.(*wire.ClientReply); r.Txn != 1 || r.Seq != 0 || r.Code != wire.CodeOK {
			t.Errorf("the client got %+v", r)
		}
	}
	c.env.Advance(time.Minute)
	if fs := c.forwards(); len(fs) != 0 {
		t.Errorf("forwarded %d more copies after the answer", len(fs))
	}

	// A request waiting for the lock: after a Queued notice, a copy every idle timeout only.
	get := &wire.ClientRequest{Txn: 2, Op: wire.OpGet, Key: "k"}
	c.n.Handle(s.client, get)
	c.forwards()
	c.env.Advance(100 * time.Millisecond)
	if fs := c.forwards(); len(fs) != 1 {
		t.Fatalf("%d copies 100ms after the forwarding, want 1", len(fs))
	}
	c.n.Handle(c.server, &Queued{Client: s.client, Txn: 2, Seq: 0})
	c.env.Advance(5*time.Second - time.Millisecond)
	if fs := c.forwards(); len(fs) != 0 {
		t.Errorf("%d copies within the idle timeout after Queued, want none", len(fs))
	}
	c.env.Advance(time.Millisecond)
	if fs := c.forwards(); len(fs) != 1 {
		t.Errorf("%d copies an idle timeout after Queued, want 1", len(fs))
	}
}

// fwd hands the serial node a request forwarded by coordinator coord under its current life,
// completes every persist, and returns the client replies it sent back through coord.
func (s *script) fwd(coord topo.NodeID, req *wire.ClientRequest, resent bool) []*wire.ClientReply {
	s.t.Helper()
	return s.fwdUnder(s.n.life, coord, req, resent)
}

// fwdUnder is fwd for a request forwarded under the serial node's life-th life.
func (s *script) fwdUnder(life uint64, coord topo.NodeID, req *wire.ClientRequest, resent bool) []*wire.ClientReply {
	s.t.Helper()
	s.n.Handle(coord, &Forward{Client: s.client, Req: *req, Resent: resent, Life: life, HostLife: 1})
	s.env.Flush()
	return s.answers(coord)
}

// answers returns the replies to s.client sent through coord since the last call.
func (s *script) answers(coord topo.NodeID) []*wire.ClientReply {
	var out []*wire.ClientReply
	for _, m := range s.env.Take() {
		if a, ok := m.M.(*Answer); ok && m.To == coord && a.Client == s.client {
			r := a.Reply
			out = append(out, &r)
		}
	}
	return out
}

// TestCopiesAnsweredAsTheFirst: every request of a transaction may reach the serial node more
// than once (the coordinator forwards it again when it or its answer may have been lost), and
// each copy gets the answer the first one got, applying nothing again. A copy of the last
// request was dropped before, so a client whose answer was lost waited for its timeout; and a
// commit's copy after the commit got "unknown-transaction", a committed transaction reported
// aborted. After a restart, the node cannot tell whether an earlier life committed a
// transaction it does not know: a commit forwarded again is answered unknown.
func TestCopiesAnsweredAsTheFirst(t *testing.T) {
	s := newScript(t)
	coord := s.tp.DataNodes(1)[0]
	put := func(txn uint64, seq uint32, v string) *wire.ClientRequest {
		return &wire.ClientRequest{Txn: txn, Seq: seq, Op: wire.OpPut, Key: "k", Value: []byte(v)}
	}
	s.one("the put", s.fwd(coord, put(1, 0, "first"), false), 1, 0, wire.CodeOK, "")
	get := &wire.ClientRequest{Txn: 1, Seq: 1, Op: wire.OpGet, Key: "k"}
	rs := s.fwd(coord, get, false)
	s.one("the get", rs, 1, 1, wire.CodeOK, "")
	s.one("the get's copy", s.fwd(coord, get, true), 1, 1, wire.CodeOK, "")
	if rs := s.fwd(coord, put(1, 0, "first"), true); len(rs) != 0 {
		t.Errorf("a stale copy of the put was answered %+v", rs[0])
	}
	s.one("the second put", s.fwd(coord, put(1, 2, "second"), false), 1, 2, wire.CodeOK, "")
	if rs := s.fwd(coord, get, true); len(rs) != 0 {
		t.Errorf("a stale copy of the get was answered %+v", rs[0])
	}
	commit := &wire.ClientRequest{Txn: 1, Seq: 3, Op: wire.OpCommit}
	s.one("the commit", s.fwd(coord, commit, false), 1, 3, wire.CodeOK, "")

	// Bob overwrites k; then the commit's copy comes.
	s.one("bob's put", s.send(s.bob, &wire.ClientRequest{Txn: 1, Op: wire.OpPut, Key: "k", Value: []byte("bob")}), 1, 0, wire.CodeOK, "")
	s.one("bob's commit", s.send(s.bob, &wire.ClientRequest{Txn: 1, Seq: 1, Op: wire.OpCommit}), 1, 1, wire.CodeOK, "")
	s.one("the commit's copy", s.fwd(coord, commit, true), 1, 3, wire.CodeOK, "")
	if v, _ := s.n.Value("k"); string(v) != "bob" {
		t.Errorf("k = %q after the commit's copy, want bob's write kept", v)
	}

	// An aborted transaction's abort, again.
	s.one("txn 2's put", s.fwd(coord, put(2, 0, "two"), false), 2, 0, wire.CodeOK, "")
	abort := &wire.ClientRequest{Txn: 2, Seq: 1, Op: wire.OpAbort}
	s.one("the abort", s.fwd(coord, abort, false), 2, 1, wire.CodeOK, "")
	s.one("the abort's copy", s.fwd(coord, abort, true), 2, 1, wire.CodeOK, "")

	// A transaction the idle timeout ended: its commit, forwarded again, aborts.
	s.one("txn 3's put", s.fwd(coord, put(3, 0, "three"), false), 3, 0, wire.CodeOK, "")
	s.env.Advance(6 * time.Second)
	s.answers(coord) // the put's answer, sent again while the client was silent
	s.one("txn 3's commit after the idle timeout", s.fwd(coord, &wire.ClientRequest{Txn: 3, Seq: 1, Op: wire.OpCommit}, true),
		3, 1, wire.CodeAborted, "unknown-transaction")

	// Txn 4 commits; its answer is lost and the node restarts.
	s.one("txn 4's put", s.fwd(coord, put(4, 0, "four"), false), 4, 0, wire.CodeOK, "")
	commit4 := &wire.ClientRequest{Txn: 4, Seq: 1, Op: wire.OpCommit}
	s.one("txn 4's commit", s.fwd(coord, commit4, false), 4, 1, wire.CodeOK, "")
	s.life()
	s.one("txn 4's commit forwarded again after the restart", s.fwdUnder(1, coord, commit4, true), 4, 1, wire.CodeUnknown, "")
	if v, _ := s.n.Value("k"); string(v) != "four" {
		t.Errorf("k = %q after the restart, want four", v)
	}
}

// TestHolderAnswerSentAgain: the answer to the lock holder's request may be lost after the
// request waited long for the lock, when its coordinator forwards copies only every few
// seconds. Every other transaction waits meanwhile, so the serial node sends the answer again
// after resend-after, at doubling intervals, while the client's next request does not come,
// until the idle timeout ends the transaction. A client attached to the serial node itself
// needs no copy.
func TestHolderAnswerSentAgain(t *testing.T) {
	s := newScript(t)
	h, err := proto{}.NewNode(node.Config{Env: s.env, Durable: s.disk, Options: map[string]string{"resend-after": "100ms"}})
	if err != nil {
		t.Fatal(err)
	}
	s.n = h.(*Node)
	s.env.Flush()
	s.env.Take()
	coord := s.tp.DataNodes(1)[0]
	start := s.env.Clock
	s.one("the put", s.fwd(coord, &wire.ClientRequest{Txn: 1, Op: wire.OpPut, Key: "k", Value: []byte("v")}, false), 1, 0, wire.CodeOK, "")
	var at []time.Duration
	for s.n.holder != nil && s.env.Clock-start < int64(time.Minute) {
		s.env.Advance(50 * time.Millisecond)
		if rs := s.answers(coord); len(rs) > 0 {
			s.one("the put's answer again", rs, 1, 0, wire.CodeOK, "")
			at = append(at, time.Duration(s.env.Clock-start))
		}
	}
	// Then the idle timeout, 5 s after the put, ends the transaction.
	if want := "[100ms 300ms 700ms 1.5s 3.1s]"; fmt.Sprint(at) != want {
		t.Errorf("answer sent again at %v, want %s", at, want)
	}
	if s.n.holder != nil {
		t.Error("the idle timeout did not end the silent transaction")
	}

	s.one("bob's put", s.send(s.bob, &wire.ClientRequest{Txn: 1, Op: wire.OpPut, Key: "b", Value: []byte("b")}), 1, 0, wire.CodeOK, "")
	s.env.Advance(time.Second)
	if rs := s.replies(s.bob); len(rs) != 0 {
		t.Errorf("a client attached to the serial node got %d copies of an answer", len(rs))
	}
}

// TestWaitingRequestCopyNotQueuedTwice: a copy of a request that waits for the lock gets a
// Queued notice (to its coordinator, when forwarded again) and takes no second place in the
// queue: the request is answered once when the lock comes free.
func TestWaitingRequestCopyNotQueuedTwice(t *testing.T) {
	s := newScript(t)
	coord := s.tp.DataNodes(1)[0]
	s.one("bob's put", s.send(s.bob, &wire.ClientRequest{Txn: 1, Op: wire.OpPut, Key: "b", Value: []byte("b")}), 1, 0, wire.CodeOK, "")
	get := &wire.ClientRequest{Txn: 1, Op: wire.OpGet, Key: "k"}
	for _, resent := range []bool{false, true, true} {
		s.n.Handle(coord, &Forward{Client: s.client, Req: *get, Resent: resent, Life: s.n.life})
	}
	sent := s.env.Take()
	if len(sent) != 2 {
		t.Fatalf("sent %+v for a waiting request and 2 copies, want 2 Queued notices", sent)
	}
	for _, m := range sent {
		if q, ok := m.M.(*Queued); !ok || m.To != coord || *q != (Queued{Client: s.client, Txn: 1, Life: 1}) {
			t.Errorf("sent %+v to %d, want Queued to the coordinator", m.M, m.To)
		}
	}
	if len(s.n.waiting) != 1 {
		t.Errorf("%d requests waiting, want 1", len(s.n.waiting))
	}
	s.n.Handle(s.bob, &wire.ClientRequest{Txn: 1, Seq: 1, Op: wire.OpCommit})
	s.env.Flush()
	var got []string
	for _, m := range s.env.Take() {
		switch m := m.M.(type) {
		case *wire.ClientReply:
			got = append(got, fmt.Sprintf("bob %v", m.Code))
		case *Answer:
			got = append(got, fmt.Sprintf("client seq %d %v", m.Reply.Seq, m.Reply.Code))
		}
	}
	if want := "[bob ok client seq 0 ok]"; fmt.Sprint(got) != want {
		t.Errorf("after bob's commit the node answered %v, want %s", got, want)
	}
	if s.n.holder == nil || s.n.holder.key != (txnKey{s.client, 1}) || len(s.n.waiting) != 0 {
		t.Error("the get's transaction does not hold the lock alone")
	}
}
