package spanner

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/meridiandb/meridian/internal/node"
	"github.com/meridiandb/meridian/internal/protocol/prototest"
	"github.com/meridiandb/meridian/internal/protocol/txnkit"
	"github.com/meridiandb/meridian/internal/storage"
	"github.com/meridiandb/meridian/internal/storage/durable"
	"github.com/meridiandb/meridian/internal/storage/locks"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/ts"
	"github.com/meridiandb/meridian/internal/wire"
)

// testCluster runs whole data nodes (coordinator and participant) under a test's control, like
// scriptEnv does for one participant: messages and persist completions are delivered one at a
// time in FIFO order when the test says so, timers fire only when the test calls fireTimers and
// the clock moves only when the test moves it. Endpoints outside the topology are clients; what
// is sent to them is collected. A node the test crashed loses what is delivered to it until it
// restarts.
type testCluster struct {
	tp      *topo.Topology
	cfg     Config
	nodes   []*Node
	now     int64
	queue   []func() // deliveries and persist completions, in order
	inbox   []delivered
	replies map[node.ID][]*wire.ClientReply
	timers  []testTimer // armed, in arming order
	nextTID node.TimerID
	down    map[node.ID]bool
	// drop, if set, loses the messages between nodes it returns true for.
	drop func(d delivered) bool
}

type testTimer struct {
	id   node.TimerID
	node node.ID
	at   int64
	fn   func()
}

// delivered is a message between nodes, recorded as it is delivered.
type delivered struct {
	from, to node.ID
	m        wire.Msg
}

type clusterEnv struct {
	c    *testCluster
	self node.ID
}

func (e clusterEnv) Self() node.ID            { return e.self }
func (e clusterEnv) Topology() *topo.Topology { return e.c.tp }
func (e clusterEnv) Now() int64               { return e.c.now }
func (e clusterEnv) Elapsed() int64           { return e.c.now }
func (e clusterEnv) TrueTime() ts.Interval {
	return ts.Interval{Earliest: e.c.now - int64(time.Millisecond), Latest: e.c.now + int64(time.Millisecond)}
}
func (e clusterEnv) Send(to node.ID, m wire.Msg) { e.c.send(e.self, to, m) }
func (e clusterEnv) After(d time.Duration, fn func()) node.TimerID {
	c := e.c
	c.nextTID++
	c.timers = append(c.timers, testTimer{id: c.nextTID, node: e.self, at: c.now + int64(d), fn: fn})
	return c.nextTID
}
func (e clusterEnv) Cancel(id node.TimerID) {
	e.c.timers = slices.DeleteFunc(e.c.timers, func(t testTimer) bool { return t.id == id })
}

// fireTimers moves the clock on by d and runs, in arming order, the timers of live nodes due by
// then (ones they arm meanwhile wait for the next call), then the cluster until quiet.
func (c *testCluster) fireTimers(d time.Duration) {
	c.now += int64(d)
	var due []testTimer
	c.timers = slices.DeleteFunc(c.timers, func(t testTimer) bool {
		if t.at <= c.now && !c.down[t.node] {
			due = append(due, t)
			return true
		}
		return false
	})
	for _, t := range due {
		t.fn()
	}
	c.run()
}

// crash stops node n: what is delivered to it is lost, its timers are dropped.
func (c *testCluster) crash(n node.ID) {
	c.down[n] = true
	c.timers = slices.DeleteFunc(c.timers, func(t testTimer) bool { return t.node == n })
}

// restart brings node n back with nothing it had (an empty durable store: it persisted
// nothing the test relies on).
func (c *testCluster) restart(t *testing.T, n node.ID) {
	t.Helper()
	nd, err := NewNode(clusterEnv{c: c, self: n}, durable.NewMem(), c.cfg)
	if err != nil {
		t.Fatal(err)
	}
	c.nodes[n] = nd
	delete(c.down, n)
	c.run()
}
func (e clusterEnv) Persist(_ []node.Write, done func()) {
	if done != nil {
		e.c.queue = append(e.c.queue, done)
	}
}
func (e clusterEnv) Rand() *rand.Rand     { return rand.New(rand.NewPCG(1, 2)) }
func (e clusterEnv) Charge(time.Duration) {}

// newTestCluster builds one region of three data nodes with two shards each (shard s's primary
// is node s mod 3) and no commit wait (its timers would never fire here).
func newTestCluster(t *testing.T, policy locks.Policy, eager bool) *testCluster {
	t.Helper()
	// locks.Wait stands for lock-policy=detect: conflicts wait and the detector breaks cycles.
	return newTestClusterConfig(t, Config{Policy: policy, DetectDeadlocks: policy == locks.Wait, EagerWrites: eager,
		IdleTimeout: 5 * time.Second, DecisionTimeout: 500 * time.Millisecond})
}

// newTestClusterConfig is newTestCluster with every node configured by cfg.
func newTestClusterConfig(t *testing.T, cfg Config) *testCluster {
	t.Helper()
	tp, err := topo.Build("batch-test", []string{"r"}, [][]time.Duration{{0}}, time.Millisecond,
		topo.Layout{NodesPerRegion: 3, ShardsPerNode: 2})
	if err != nil {
		t.Fatal(err)
	}
	c := &testCluster{tp: tp, now: int64(time.Second), replies: map[node.ID][]*wire.ClientReply{}, down: map[node.ID]bool{}, cfg: cfg}
	for i := range tp.Nodes {
		n, err := NewNode(clusterEnv{c: c, self: node.ID(i)}, durable.NewMem(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		c.nodes = append(c.nodes, n)
	}
	c.run() // the incarnations become durable: the coordinators start serving
	return c
}

// key returns a key whose primary is data node n (shard n or n+3, by slot).
func (c *testCluster) key(n, slot int, name string) string {
	return topo.PinnedKey(topo.ShardID(n+3*slot), name)
}

func (c *testCluster) send(from, to node.ID, m wire.Msg) {
	if int(to) >= len(c.nodes) {
		if r, ok := m.(*wire.ClientReply); ok {
			c.replies[to] = append(c.replies[to], r)
		}
		return
	}
	if c.drop != nil && c.drop(delivered{from, to, m}) {
		return
	}
	c.queue = append(c.queue, func() {
		if c.down[to] {
			return
		}
		c.inbox = append(c.inbox, delivered{from, to, m})
		c.nodes[to].Handle(from, m)
	})
}

// step performs the oldest pending delivery or persist completion; false if there is none.
func (c *testCluster) step() bool {
	if len(c.queue) == 0 {
		return false
	}
	f := c.queue[0]
	c.queue = c.queue[1:]
	f()
	return true
}

func (c *testCluster) run() {
	for c.step() {
	}
}

// request sends a client request to coordinator node 0 and runs the cluster until quiet; it
// returns the reply, or nil if the request is still unanswered.
func (c *testCluster) request(client node.ID, m *wire.ClientRequest) *wire.ClientReply {
	before := len(c.replies[client])
	c.send(client, 0, m)
	c.run()
	if got := c.replies[client]; len(got) > before {
		return got[len(got)-1]
	}
	return nil
}

func (c *testCluster) preload(rows ...wire.KV) error {
	for _, r := range rows {
		if err := c.nodes[c.tp.PrimaryOf(r.Key)].Preload([]wire.KV{r}); err != nil {
			return err
		}
	}
	return nil
}

// takeInbox returns and forgets the messages delivered since the last call.
func (c *testCluster) takeInbox() []delivered {
	d := c.inbox
	c.inbox = nil
	return d
}

func gets(keys ...string) []wire.BatchOp {
	ops := make([]wire.BatchOp, len(keys))
	for i, k := range keys {
		ops[i] = wire.BatchOp{Op: wire.OpGet, Key: k}
	}
	return ops
}

// checkResults compares a batch reply with the expected value of each operation ("" for not
// found or a write).
func checkResults(t *testing.T, what string, r *wire.ClientReply, want []string) {
	t.Helper()
	if r == nil || r.Code != wire.CodeOK {
		t.Fatalf("%s: reply %+v, want OK", what, r)
	}
	if len(r.Results) != len(want) {
		t.Fatalf("%s: %d results for %d operations", what, len(r.Results), len(want))
	}
	for i, w := range want {
		got := r.Results[i]
		if got.Found != (w != "") || string(got.Value) != w {
			t.Errorf("%s: result %d = %+v, want %q", what, i, got, w)
		}
	}
}

// opKeys returns the keys of a request from a coordinator to a participant (ReadReq, WriteReq,
// OpsReq), in the order sent, with its Seen; ok is false for other messages.
func opKeys(m wire.Msg) (keys []string, seen uint32, ok bool) {
	switch m := m.(type) {
	case *ReadReq:
		return []string{m.Key}, m.Seen, true
	case *WriteReq:
		return []string{m.Key}, m.Seen, true
	case *OpsReq:
		for _, op := range m.Ops {
			keys = append(keys, op.Key)
		}
		return keys, m.Seen, true
	}
	return nil, 0, false
}

// sentOps is what a request sent each participant: one entry per message.
type sentOps struct {
	keys []string
	seen uint32
}

// takeOps returns the operation requests delivered since the last takeInbox, by participant.
func (c *testCluster) takeOps() map[node.ID][]sentOps {
	out := map[node.ID][]sentOps{}
	for _, d := range c.takeInbox() {
		if keys, seen, ok := opKeys(d.m); ok {
			out[d.to] = append(out[d.to], sentOps{keys, seen})
		}
	}
	return out
}

// checkSent compares what a request sent each participant with one message per participant
// carrying want[n]'s keys (in that order) and seen[n].
func checkSent(t *testing.T, what string, got map[node.ID][]sentOps, want map[node.ID][]string, seen map[node.ID]uint32) {
	t.Helper()
	for n := node.ID(0); n < 3; n++ {
		if len(want[n]) == 0 {
			if len(got[n]) != 0 {
				t.Errorf("%s: participant %d got %v, want nothing", what, n, got[n])
			}
			continue
		}
		if len(got[n]) != 1 {
			t.Errorf("%s: participant %d got %d messages %v, want one with %v", what, n, len(got[n]), got[n], want[n])
			continue
		}
		if g := got[n][0]; !slices.Equal(g.keys, want[n]) || g.seen != seen[n] {
			t.Errorf("%s: participant %d got keys %v with Seen %d, want %v with Seen %d", what, n, g.keys, g.seen, want[n], seen[n])
		}
	}
}

// TestBatchAcrossParticipants: a batch sends each participant it touches one message with all
// its operations in request order, all at once (with Seen counting every lock the participant
// granted the transaction before); the reply carries each read's value in request order; later
// batches read the transaction's own writes (from the coordinator's buffer, or from the
// participant's pending eager writes); and the commit installs the batch's writes.
func TestBatchAcrossParticipants(t *testing.T) {
	for _, eager := range []bool{false, true} {
		t.Run(fmt.Sprintf("eager=%v", eager), func(t *testing.T) {
			c := newTestCluster(t, locks.WoundWait, eager)
			const client node.ID = 100
			a0, a1, b1, a2 := c.key(0, 0, "a0"), c.key(1, 0, "a1"), c.key(1, 1, "b1"), c.key(2, 0, "a2")
			w0, w2, b0 := c.key(0, 1, "w0"), c.key(2, 1, "w2"), c.key(0, 0, "b0")
			if err := c.preload(wire.KV{Key: a0, Value: []byte("v-a0")}, wire.KV{Key: a1, Value: []byte("v-a1")},
				wire.KV{Key: b1, Value: []byte("v-b1")}, wire.KV{Key: b0, Value: []byte("v-b0")}); err != nil {
				t.Fatal(err)
			}

			// The first request of the transaction is a batch: three reads on three
			// participants, a second read on participant 1, a missing key, two writes and a
			// delete.
			batch := append(gets(a0, b1, a1, a2),
				wire.BatchOp{Op: wire.OpPut, Key: w0, Value: []byte("new-w0")},
				wire.BatchOp{Op: wire.OpPut, Key: w2, Value: []byte("new-w2")},
				wire.BatchOp{Op: wire.OpDelete, Key: b0})
			c.send(client, 0, &wire.ClientRequest{Txn: 1, Seq: 0, Op: wire.OpBatch, Batch: batch})
			c.step() // the coordinator handles the request
			c.takeInbox()
			// Deliver exactly what the coordinator sent, before any participant answers.
			for range len(c.queue) {
				c.step()
			}
			want := map[node.ID][]string{0: {a0}, 1: {b1, a1}, 2: {a2}}
			if eager {
				want = map[node.ID][]string{0: {a0, w0, b0}, 1: {b1, a1}, 2: {a2, w2}}
			}
			checkSent(t, "first batch", c.takeOps(), want, map[node.ID]uint32{})
			c.run()
			checkSent(t, "after the answers", c.takeOps(), nil, nil)
			r := c.replies[client]
			if len(r) != 1 {
				t.Fatalf("%d replies to one batch", len(r))
			}
			checkResults(t, "first batch", r[0], []string{"v-a0", "v-b1", "v-a1", "", "", "", ""})

			// Read-your-writes within the transaction's next batch, mixed with a fresh read.
			// Seen now counts every lock the first batch took at each participant.
			r2 := c.request(client, &wire.ClientRequest{Txn: 1, Seq: 1, Op: wire.OpBatch, Batch: gets(w2, b0, w0, a2, a1)})
			checkResults(t, "own writes", r2, []string{"new-w2", "", "new-w0", "", "v-a1"})
			want, seen := map[node.ID][]string{1: {a1}, 2: {a2}}, map[node.ID]uint32{1: 2, 2: 1}
			if eager {
				want, seen = map[node.ID][]string{0: {b0, w0}, 1: {a1}, 2: {w2, a2}}, map[node.ID]uint32{0: 3, 1: 2, 2: 2}
			}
			checkSent(t, "second batch", c.takeOps(), want, seen)
			if r := c.request(client, &wire.ClientRequest{Txn: 1, Seq: 2, Op: wire.OpCommit}); r == nil || r.Code != wire.CodeOK {
				t.Fatalf("commit: %+v", r)
			}

			// A later transaction sees the committed writes.
			r3 := c.request(client, &wire.ClientRequest{Txn: 2, Seq: 0, Op: wire.OpBatch, Batch: gets(w0, b0, w2, a1)})
			checkResults(t, "after commit", r3, []string{"new-w0", "", "new-w2", "v-a1"})
			if r := c.request(client, &wire.ClientRequest{Txn: 2, Seq: 1, Op: wire.OpCommit}); r == nil || r.Code != wire.CodeOK {
				t.Fatalf("second commit: %+v", r)
			}
			if n := c.nodes[0].Coord.Active(); n != 0 {
				t.Errorf("coordinator still runs %d transactions", n)
			}
			for i, n := range c.nodes {
				if n.Part.Len() != 0 {
					t.Errorf("participant %d still tracks %d transactions", i, n.Part.Len())
				}
			}
		})
	}
}

// TestMultiKeyRequest: a participant takes a multi-key request's locks one after another. One
// that must wait parks the request, holding the locks before it, as an ordinary lock wait (the
// detector hears of it under detect) until it is granted; a wound while parked aborts the
// request; a refused lock aborts it and releases the locks its earlier keys took.
func TestMultiKeyRequest(t *testing.T) {
	cases := []struct {
		name   string
		policy locks.Policy
		// what the older transaction does once the younger's request is parked: commit
		// (the request is granted) or write a key the younger holds (a wound)
		then  string
		cause string // the younger's abort cause; "" if it commits
	}{
		{"wound-wait/granted", locks.WoundWait, "commit", ""},
		{"detect/granted", locks.Wait, "commit", ""},
		{"wound-wait/wounded", locks.WoundWait, "wound", causeWoundWait},
		{"no-wait/refused", locks.NoWait, "", locks.ReasonNoWait},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newTestCluster(t, tc.policy, true)
			const older, younger node.ID = 100, 101
			ka, kb, kc := c.key(1, 0, "a"), c.key(1, 0, "b"), c.key(1, 1, "c")
			if err := c.preload(wire.KV{Key: ka, Value: []byte("v-a")}, wire.KV{Key: kb, Value: []byte("v-b")}); err != nil {
				t.Fatal(err)
			}
			ok := func(what string, r *wire.ClientReply) {
				t.Helper()
				if r == nil || r.Code != wire.CodeOK {
					t.Fatalf("%s: %+v", what, r)
				}
			}
			// The older transaction holds kc exclusively (its eager write).
			ok("older writes kc", c.request(older, &wire.ClientRequest{Txn: 1, Op: wire.OpPut, Key: kc, Value: []byte("o")}))
			c.now += int64(time.Millisecond)
			c.takeInbox()
			// The younger reads ka, kb and kc at participant 1: ka and kb are granted, kc
			// conflicts.
			r := c.request(younger, &wire.ClientRequest{Txn: 1, Op: wire.OpBatch, Batch: gets(ka, kb, kc)})
			part := c.nodes[1].Part
			yid := c.nodes[0].Coord.txns[txnKey(younger, 1)]
			if tc.cause == locks.ReasonNoWait {
				if r == nil || r.Code != wire.CodeAborted || r.Cause != tc.cause {
					t.Fatalf("younger's request: %+v, want aborted by %s", r, tc.cause)
				}
				for _, k := range []string{ka, kb} {
					if holders, _ := part.locks.Holders(k); len(holders) != 0 {
						t.Errorf("%s still locked by %v after the abort", k, holders)
					}
				}
				ok("older commits", c.request(older, &wire.ClientRequest{Txn: 1, Seq: 1, Op: wire.OpCommit}))
				checkQuiet(t, c)
				return
			}
			if r != nil {
				t.Fatalf("younger's request answered %+v while it waits for kc", r)
			}
			if yid == nil {
				t.Fatal("the coordinator does not run the younger transaction")
			}
			for _, k := range []string{ka, kb} {
				if holders, _ := part.locks.Holders(k); !slices.Equal(holders, []storage.TxnID{yid.id}) {
					t.Errorf("%s held by %v while the request waits for kc, want the younger", k, holders)
				}
			}
			if w := part.locks.Waiters(kc); !slices.Equal(w, []storage.TxnID{yid.id}) {
				t.Errorf("kc's waiters %v, want the younger", w)
			}
			if tc.policy == locks.Wait {
				reported := false
				for _, d := range c.takeInbox() {
					if g, isGraph := d.m.(*WaitGraph); isGraph && d.from == 1 {
						reported = slices.ContainsFunc(g.Waits, func(w Wait) bool { return w.Waiter == yid.id })
					}
				}
				if !reported {
					t.Error("participant 1's last wait-for report does not show the parked request")
				}
			}
			switch tc.then {
			case "commit":
				ok("older commits", c.request(older, &wire.ClientRequest{Txn: 1, Seq: 1, Op: wire.OpCommit}))
				r = c.replies[younger][len(c.replies[younger])-1]
				checkResults(t, "younger's request", r, []string{"v-a", "v-b", "o"})
				// Seen counts all three locks: a further read there is admitted.
				c.takeInbox()
				ok("younger reads again", c.request(younger, &wire.ClientRequest{Txn: 1, Seq: 1, Op: wire.OpGet, Key: c.key(1, 1, "d")}))
				checkSent(t, "further read", c.takeOps(), map[node.ID][]string{1: {c.key(1, 1, "d")}}, map[node.ID]uint32{1: 3})
				ok("younger commits", c.request(younger, &wire.ClientRequest{Txn: 1, Seq: 2, Op: wire.OpCommit}))
			case "wound":
				// The older writes ka, which the younger holds: it wounds the younger.
				ok("older writes ka", c.request(older, &wire.ClientRequest{Txn: 1, Seq: 1, Op: wire.OpPut, Key: ka, Value: []byte("o")}))
				r = c.replies[younger][len(c.replies[younger])-1]
				if r.Code != wire.CodeAborted || r.Cause != tc.cause {
					t.Fatalf("younger's request: %+v, want aborted by %s", r, tc.cause)
				}
				if n := len(c.replies[younger]); n != 1 {
					t.Fatalf("younger got %d replies, want 1", n)
				}
				if holders, _ := part.locks.Holders(kb); len(holders) != 0 {
					t.Errorf("kb still locked by %v after the wound", holders)
				}
				ok("older commits", c.request(older, &wire.ClientRequest{Txn: 1, Seq: 2, Op: wire.OpCommit}))
			}
			checkQuiet(t, c)
		})
	}
}

// txnKey is how coordinator node 0 knows a client's transaction.
func txnKey(client node.ID, txn uint64) txnkit.ClientTxn {
	return txnkit.ClientTxn{Client: client, Txn: txn}
}

// checkQuiet checks that no transaction is left anywhere: coordinator 0 runs none, no
// participant tracks one or holds a lock.
func checkQuiet(t *testing.T, c *testCluster) {
	t.Helper()
	if n := c.nodes[0].Coord.Active(); n != 0 {
		t.Errorf("coordinator still runs %d transactions", n)
	}
	for i, n := range c.nodes {
		if n.Part.Len() != 0 {
			t.Errorf("participant %d still tracks %d transactions", i, n.Part.Len())
		}
		if n.Part.locks.Len() != 0 {
			t.Errorf("participant %d still has %d locked keys", i, n.Part.locks.Len())
		}
	}
}

// TestBatchAbort: an operation of a batch that its participant refuses (no-wait), or a wound
// that arrives while the batch waits for a lock (wound-wait), aborts the transaction: the client
// gets one Aborted reply with the cause, every participant drops the transaction, and the other
// operations' late answers change nothing.
func TestBatchAbort(t *testing.T) {
	cases := []struct {
		name   string
		policy locks.Policy
		cause  string
	}{
		{"no-wait", locks.NoWait, locks.ReasonNoWait},
		{"wound-wait", locks.WoundWait, causeWoundWait},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newTestCluster(t, tc.policy, true)
			const older, younger node.ID = 100, 101
			k0, k1, k2, k3, k4 := c.key(0, 0, "k0"), c.key(1, 0, "k1"), c.key(2, 0, "k2"), c.key(0, 1, "k3"), c.key(2, 1, "k4")
			ok := func(what string, r *wire.ClientReply) {
				t.Helper()
				if r == nil || r.Code != wire.CodeOK {
					t.Fatalf("%s: %+v", what, r)
				}
			}
			// The older transaction starts first and reads k1 (a shared lock at participant 1).
			ok("older reads k0", c.request(older, &wire.ClientRequest{Txn: 1, Op: wire.OpGet, Key: k0}))
			c.now += int64(time.Millisecond)
			ok("younger writes k2", c.request(younger, &wire.ClientRequest{Txn: 1, Op: wire.OpPut, Key: k2, Value: []byte("y")}))
			ok("older reads k1", c.request(older, &wire.ClientRequest{Txn: 1, Seq: 1, Op: wire.OpGet, Key: k1}))

			// The younger's batch wants k1 exclusively: no-wait refuses it at once; under
			// wound-wait the younger waits for the older.
			batch := []wire.BatchOp{{Op: wire.OpPut, Key: k1, Value: []byte("y")}, {Op: wire.OpGet, Key: k3}}
			r := c.request(younger, &wire.ClientRequest{Txn: 1, Seq: 1, Op: wire.OpBatch, Batch: batch})
			if tc.policy == locks.WoundWait {
				if r != nil {
					t.Fatalf("younger's batch answered %+v while it waits for the older's lock", r)
				}
				// The older now wants k2, which the younger holds: it wounds the younger,
				// whose batch is still in flight.
				ro := c.request(older, &wire.ClientRequest{Txn: 1, Seq: 2, Op: wire.OpBatch, Batch: gets(k2, k4)})
				checkResults(t, "older's batch", ro, []string{"", ""})
				r = c.replies[younger][len(c.replies[younger])-1]
			}
			if r == nil || r.Code != wire.CodeAborted || r.Cause != tc.cause || r.Seq != 1 {
				t.Fatalf("younger's batch: %+v, want aborted by %s", r, tc.cause)
			}
			if n := len(c.replies[younger]); n != 2 {
				t.Fatalf("younger got %d replies, want 2 (write, aborted batch)", n)
			}
			// The transaction is gone: a further request learns nothing new about it.
			if r := c.request(younger, &wire.ClientRequest{Txn: 1, Seq: 2, Op: wire.OpCommit}); r == nil || r.Code != wire.CodeAborted {
				t.Fatalf("commit after the abort: %+v", r)
			}
			ok("older commits", c.request(older, &wire.ClientRequest{Txn: 1, Seq: 3, Op: wire.OpCommit}))
			if n := c.nodes[0].Coord.Active(); n != 0 {
				t.Errorf("coordinator still runs %d transactions", n)
			}
			for i, n := range c.nodes {
				if holders, _ := n.Part.locks.Holders(k1); i == 1 && len(holders) != 0 {
					t.Errorf("k1 still locked by %v", holders)
				}
				if n.Part.Len() != 0 {
					t.Errorf("participant %d still tracks %d transactions", i, n.Part.Len())
				}
			}
		})
	}
}

// TestReadOnlyBatch: a read-only transaction may begin with a batch; its reads are snapshot
// reads at the transaction's snapshot timestamp, one message per participant with that
// participant's keys in request order, and a multi-key read that reaches a key behind a prepared intent
// below the snapshot parks there (after reading the keys before it) until the decision, while
// the other participants answer.
func TestReadOnlyBatch(t *testing.T) {
	c := newTestCluster(t, locks.WoundWait, false)
	const writer, reader node.ID = 100, 101
	a0, a1, b1, a2, gone := c.key(0, 0, "a0"), c.key(1, 0, "a1"), c.key(1, 1, "b1"), c.key(2, 0, "a2"), c.key(2, 1, "gone")
	pre := c.key(2, 0, "pre")
	if err := c.preload(wire.KV{Key: a0, Value: []byte("v-a0")}, wire.KV{Key: a1, Value: []byte("v-a1")},
		wire.KV{Key: b1, Value: []byte("v-b1")}, wire.KV{Key: a2, Value: []byte("old-a2")}, wire.KV{Key: pre, Value: []byte("v-pre")}); err != nil {
		t.Fatal(err)
	}
	// A writer prepares a2 at participant 2; hold its votes so it stays prepared.
	if r := c.request(writer, &wire.ClientRequest{Txn: 1, Op: wire.OpPut, Key: a2, Value: []byte("new-a2")}); r == nil || r.Code != wire.CodeOK {
		t.Fatalf("write: %+v", r)
	}
	c.send(writer, 0, &wire.ClientRequest{Txn: 1, Seq: 1, Op: wire.OpCommit})
	c.step() // the coordinator sends the prepare
	c.step() // participant 2 writes its intent; its vote waits for the persist
	var held []func()
	held, c.queue = c.queue, nil

	c.now += int64(10 * time.Millisecond)
	c.takeInbox()
	c.send(reader, 0, &wire.ClientRequest{Txn: 1, Op: wire.OpBatch, ReadOnly: true, Batch: gets(a1, a0, b1, gone, a2, pre)})
	c.run()
	sent := map[node.ID][][]string{}
	answered := map[node.ID]int{}
	for _, d := range c.takeInbox() {
		switch m := d.m.(type) {
		case *SnapReadReq:
			sent[d.to] = append(sent[d.to], m.keys())
		case *SnapReadResp:
			answered[d.from]++
		case *ReadReq, *OpsReq:
			t.Errorf("read-only transaction took a read lock: %+v", d.m)
		}
	}
	want := map[node.ID][][]string{0: {{a0}}, 1: {{a1, b1}}, 2: {{gone, a2, pre}}}
	for n := node.ID(0); n < 3; n++ {
		if len(sent[n]) != 1 || !slices.Equal(sent[n][0], want[n][0]) {
			t.Errorf("snapshot reads sent to participant %d: %v, want one message with %v", n, sent[n], want[n][0])
		}
	}
	if answered[0] != 1 || answered[1] != 1 || answered[2] != 0 {
		t.Fatalf("snapshot answers per participant %v, want 1, 1 and none (participant 2 waits at %q)", answered, a2)
	}
	if n := len(c.replies[reader]); n != 0 {
		t.Fatalf("read-only batch answered while a read waits behind a prepared intent: %+v", c.replies[reader])
	}

	// The writer commits after the reader's snapshot (its commit timestamp is above it).
	c.now += int64(10 * time.Millisecond)
	c.queue = held
	c.run()
	if r := c.replies[writer]; len(r) != 2 || r[1].Code != wire.CodeOK {
		t.Fatalf("writer's commit: %+v", r)
	}
	r := c.replies[reader]
	if len(r) != 1 {
		t.Fatalf("%d replies to the read-only batch", len(r))
	}
	// The writer committed above the reader's snapshot, so the snapshot sees the old value.
	checkResults(t, "read-only batch", r[0], []string{"v-a1", "v-a0", "v-b1", "", "old-a2", "v-pre"})
	if r := c.request(reader, &wire.ClientRequest{Txn: 1, Seq: 1, Op: wire.OpCommit}); r == nil || r.Code != wire.CodeOK || r.CommitTS.IsZero() {
		t.Fatalf("read-only commit: %+v", r)
	}
	if r := c.request(reader, &wire.ClientRequest{Txn: 2, Op: wire.OpBatch, ReadOnly: true,
		Batch: []wire.BatchOp{{Op: wire.OpGet, Key: a0}, {Op: wire.OpPut, Key: a1}}}); r == nil || r.Code != wire.CodeBadArgument {
		t.Fatalf("read-only batch with a write: %+v", r)
	}
}

// TestBatchesInSimulation runs GetMany and PutMany through the simulator (prototest.Batches):
// answers in order, read-your-writes across batches, and reads of different participants
// concurrent.
func TestBatchesInSimulation(t *testing.T) {
	for _, eager := range []string{"buffered", "eager"} {
		t.Run(eager, func(t *testing.T) {
			prototest.Batches(t, "spanner", map[string]string{"write-locks": eager}, true)
		})
	}
}

// TestDuplicateClientRequest: the network may deliver a client's request twice. The copy must
// get no answer of its own, whether it arrives while the request is being served (a batch's
// OpsReqs out, a commit's 2PC under way) or after it was answered: the client takes the first
// reply carrying the request's number, so a refusal of the copy would stand for the request —
// a committed transaction reported failed (G1a under sim.SetDuplication) — and re-running an
// old write could overwrite a newer one.
func TestDuplicateClientRequest(t *testing.T) {
	for _, eager := range []bool{false, true} {
		t.Run(fmt.Sprintf("eager=%v", eager), func(t *testing.T) {
			c := newTestCluster(t, locks.WoundWait, eager)
			const client node.ID = 100
			a0, a1, b1 := c.key(0, 0, "a0"), c.key(1, 0, "a1"), c.key(1, 1, "b1")
			if err := c.preload(wire.KV{Key: a0, Value: []byte("v-a0")}, wire.KV{Key: a1, Value: []byte("v-a1")}); err != nil {
				t.Fatal(err)
			}
			twice := func(m *wire.ClientRequest) []*wire.ClientReply {
				before := len(c.replies[client])
				c.send(client, 0, m)
				c.send(client, 0, m) // delivered right after the original, before any answer
				c.run()
				return c.replies[client][before:]
			}
			once := func(what string, got []*wire.ClientReply) *wire.ClientReply {
				t.Helper()
				if len(got) != 1 {
					t.Fatalf("%s sent twice: %d replies %+v, want one", what, len(got), got)
				}
				return got[0]
			}
			r := once("batch", twice(&wire.ClientRequest{Txn: 1, Seq: 0, Op: wire.OpBatch,
				Batch: append(gets(a0, a1), wire.BatchOp{Op: wire.OpPut, Key: b1, Value: []byte("first")})}))
			checkResults(t, "batch", r, []string{"v-a0", "v-a1", ""})
			// A second write of b1, then a late copy of the first batch: it must not run again.
			if r := c.request(client, &wire.ClientRequest{Txn: 1, Seq: 1, Op: wire.OpPut, Key: b1, Value: []byte("second")}); r == nil || r.Code != wire.CodeOK {
				t.Fatalf("put: %+v", r)
			}
			if got := c.replies[client]; len(got) != 2 {
				t.Fatalf("%d replies before the late copy, want 2", len(got))
			}
			c.send(client, 0, &wire.ClientRequest{Txn: 1, Seq: 0, Op: wire.OpBatch,
				Batch: append(gets(a0, a1), wire.BatchOp{Op: wire.OpPut, Key: b1, Value: []byte("first")})})
			c.run()
			if got := c.replies[client]; len(got) != 2 {
				t.Fatalf("a late copy of an answered request was answered: %+v", got[2:])
			}
			r = once("commit", twice(&wire.ClientRequest{Txn: 1, Seq: 2, Op: wire.OpCommit}))
			if r.Code != wire.CodeOK {
				t.Fatalf("commit: %+v", r)
			}
			r = c.request(client, &wire.ClientRequest{Txn: 2, Seq: 0, Op: wire.OpGet, Key: b1})
			if r == nil || r.Code != wire.CodeOK || string(r.Value) != "second" {
				t.Fatalf("after commit b1 = %+v, want %q", r, "second")
			}
		})
	}
}

// TestRestartedParticipantSettlesLostTxn: a participant that restarts loses the requests it was
// serving (or had not yet received). Its coordinator would wait for their answers for good, the
// client's request would hang and the coordinator's keep-alives would hold the transaction's
// locks at every other participant. The restarted participant answers the next keep-alive for
// a transaction it does not know: if the coordinator saw it grant locks, they are lost and the
// transaction aborts (participant-lost-locks); if not, the request or prepare is sent again
// and the transaction goes on. The coordinator keeps sending keep-alives while a vote is
// missing, so a PrepareReq lost in the crash is caught too.
func TestRestartedParticipantSettlesLostTxn(t *testing.T) {
	for _, lost := range []string{"batch", "prepare", "locks"} {
		t.Run(lost, func(t *testing.T) {
			c := newTestCluster(t, locks.WoundWait, false)
			const client node.ID = 100
			a1, b1, a2, b2 := c.key(1, 0, "a1"), c.key(1, 1, "b1"), c.key(2, 0, "a2"), c.key(2, 1, "b2")
			switch lost {
			case "batch":
				c.crash(2)
				if r := c.request(client, &wire.ClientRequest{Txn: 1, Op: wire.OpBatch, Batch: gets(a1, b1, a2, b2)}); r != nil {
					t.Fatalf("batch answered %+v with a participant down", r)
				}
			case "prepare":
				r := c.request(client, &wire.ClientRequest{Txn: 1, Op: wire.OpBatch, Batch: append(gets(a1, b1),
					wire.BatchOp{Op: wire.OpPut, Key: a2, Value: []byte("x")})})
				checkResults(t, "batch", r, []string{"", "", ""})
				c.crash(2)
				if r := c.request(client, &wire.ClientRequest{Txn: 1, Seq: 1, Op: wire.OpCommit}); r != nil {
					t.Fatalf("commit answered %+v with a participant down", r)
				}
			case "locks":
				r := c.request(client, &wire.ClientRequest{Txn: 1, Op: wire.OpBatch, Batch: gets(a1, b1, a2)})
				checkResults(t, "batch", r, []string{"", "", ""})
				c.crash(2)
			}
			if c.nodes[1].Part.Len() != 1 {
				t.Fatalf("participant 1 tracks %d transactions, want the one holding a1, b1", c.nodes[1].Part.Len())
			}
			c.restart(t, 2)
			before := len(c.replies[client])
			c.fireTimers(c.cfg.IdleTimeout / 3)
			got := c.replies[client][before:]
			if lost == "locks" {
				if len(got) != 0 {
					t.Fatalf("after the restart and a keep-alive: replies %+v, want none (no request out)", got)
				}
				// The client's commit learns the abort.
				got = []*wire.ClientReply{c.request(client, &wire.ClientRequest{Txn: 1, Seq: 1, Op: wire.OpCommit})}
				if r := got[0]; r == nil || r.Code != wire.CodeAborted || r.Cause != causeLostLocks {
					t.Fatalf("commit after participant 2 lost the transaction's lock on a2: %+v, want aborted (%s)", r, causeLostLocks)
				}
			} else {
				if len(got) != 1 || got[0].Code != wire.CodeOK {
					t.Fatalf("after the restart and a keep-alive: replies %+v, want the lost request sent again and answered OK", got)
				}
				if lost == "batch" {
					checkResults(t, "batch sent again", got[0], []string{"", "", "", ""})
					if r := c.request(client, &wire.ClientRequest{Txn: 1, Seq: 1, Op: wire.OpCommit}); r == nil || r.Code != wire.CodeOK {
						t.Fatalf("commit: %+v", r)
					}
				}
				if n := c.nodes[0].metrics.Counters["requests-resent"]; n != 1 {
					t.Errorf("requests-resent = %d, want 1", n)
				}
			}
			c.fireTimers(c.cfg.IdleTimeout / 3)
			if n := c.nodes[1].Part.Len(); n != 0 {
				t.Errorf("participant 1 still tracks %d transactions: its locks outlive the transaction", n)
			}
			if n := c.nodes[0].Coord.Active(); n != 0 {
				t.Errorf("coordinator still runs %d transactions", n)
			}
		})
	}
}

// TestClientAbortWhileRequestOut: a client that gives up on a request no participant will
// answer (here one is down and stays down) aborts the transaction; the coordinator must take
// the abort although the request is still out, and free the locks the other participants hold.
func TestClientAbortWhileRequestOut(t *testing.T) {
	c := newTestCluster(t, locks.WoundWait, false)
	const client node.ID = 100
	a1, b1, a2 := c.key(1, 0, "a1"), c.key(1, 1, "b1"), c.key(2, 0, "a2")
	c.crash(2)
	if r := c.request(client, &wire.ClientRequest{Txn: 1, Op: wire.OpBatch, Batch: gets(a1, b1, a2)}); r != nil {
		t.Fatalf("batch answered %+v with a participant down", r)
	}
	if c.nodes[1].Part.Len() != 1 {
		t.Fatalf("participant 1 tracks %d transactions, want the one holding a1, b1", c.nodes[1].Part.Len())
	}
	r := c.request(client, &wire.ClientRequest{Txn: 1, Seq: 1, Op: wire.OpAbort})
	if r == nil || r.Code != wire.CodeOK {
		t.Fatalf("abort while the batch is out: %+v, want OK", r)
	}
	if n := c.nodes[1].Part.Len(); n != 0 {
		t.Errorf("participant 1 still tracks %d transactions after the client's abort", n)
	}
	if n := c.nodes[0].Coord.Active(); n != 0 {
		t.Errorf("coordinator still runs %d transactions", n)
	}
}

// TestSnapshotReadLostInCrashIsSentAgain: a read-only transaction's snapshot read that a
// participant loses — parked behind a prepared intent when the participant crashes, or sent
// while it is down — leaves no state anywhere that a lock-holding transaction's keep-alive
// would find, and its coordinator, which did not fail, waited for the answer until the client
// gave up (a minute in the simulator: every spanner run with a crash drained for the full 30 s,
// with read-only clients of live coordinators still waiting). The coordinator's keep-alive for
// the unanswered read now reaches the restarted participant, which refuses it, and the
// coordinator sends the read again (it used to abort the transaction, which under heavy loss
// aborted most attempts). A read still parked at a live participant is left alone, and a
// keep-alive that crosses the read's answer changes nothing.
func TestSnapshotReadLostInCrashIsSentAgain(t *testing.T) {
	for _, lost := range []string{"parked", "sent-while-down"} {
		t.Run(lost, func(t *testing.T) {
			c := newTestCluster(t, locks.WoundWait, false)
			const writer, reader node.ID = 100, 101
			a2 := c.key(2, 0, "a2")
			if lost == "parked" {
				// A writer prepares a2 at participant 2; its vote is held, so it stays prepared.
				if r := c.request(writer, &wire.ClientRequest{Txn: 1, Op: wire.OpPut, Key: a2, Value: []byte("x")}); r == nil || r.Code != wire.CodeOK {
					t.Fatalf("write: %+v", r)
				}
				c.send(writer, 0, &wire.ClientRequest{Txn: 1, Seq: 1, Op: wire.OpCommit})
				c.step() // the coordinator sends the prepare
				c.step() // participant 2 writes its intent; its vote waits for the persist
				c.queue = nil
				c.now += int64(10 * time.Millisecond)
				if r := c.request(reader, &wire.ClientRequest{Txn: 1, Op: wire.OpGet, Key: a2, ReadOnly: true}); r != nil {
					t.Fatalf("snapshot read behind a prepared intent answered %+v", r)
				}
				// Parked at a live participant, the read gets keep-alives and stays.
				c.fireTimers(c.cfg.IdleTimeout / 3)
				if r := c.replies[reader]; len(r) != 0 {
					t.Fatalf("keep-alive for a read parked at a live participant: replies %+v, want none", r)
				}
				c.crash(2)
			} else {
				c.crash(2)
				if r := c.request(reader, &wire.ClientRequest{Txn: 1, Op: wire.OpGet, Key: a2, ReadOnly: true}); r != nil {
					t.Fatalf("snapshot read answered %+v with its participant down", r)
				}
			}
			c.restart(t, 2)
			c.fireTimers(c.cfg.IdleTimeout / 3)
			got := c.replies[reader]
			if len(got) != 1 || got[0].Code != wire.CodeOK {
				t.Fatalf("after the restart and a keep-alive: replies %+v, want the read sent again and answered OK", got)
			}
			resent := c.nodes[0].metrics.Counters["requests-resent"]
			if resent == 0 {
				t.Errorf("requests-resent = 0, want the lost read counted")
			}
			if r := c.request(reader, &wire.ClientRequest{Txn: 1, Seq: 1, Op: wire.OpCommit}); r == nil || r.Code != wire.CodeOK {
				t.Fatalf("read-only commit: %+v", r)
			}

			// The next read-only transaction; a keep-alive sent while the answer is on its way
			// finds the read gone at the participant, but its refusal arrives after the answer.
			c.send(reader, 0, &wire.ClientRequest{Txn: 2, Op: wire.OpGet, Key: a2, ReadOnly: true})
			c.step() // the coordinator sends the snapshot read
			c.step() // participant 2 answers
			c.takeInbox()
			c.fireTimers(c.cfg.IdleTimeout / 3)
			crossed := false
			for _, d := range c.takeInbox() {
				if m, ok := d.m.(*SnapReadResp); ok && m.Txn != 0 && m.Cause == causeLostRead {
					crossed = true
				}
			}
			if !crossed {
				t.Fatalf("no keep-alive crossed the retry's answer: the test does not exercise the race")
			}
			got = c.replies[reader][2:]
			if len(got) != 1 || got[0].Code != wire.CodeOK {
				t.Fatalf("read with a keep-alive crossing its answer: replies %+v, want one OK", got)
			}
			if r := c.request(reader, &wire.ClientRequest{Txn: 2, Seq: 1, Op: wire.OpCommit}); r == nil || r.Code != wire.CodeOK {
				t.Fatalf("read-only commit after the crossing keep-alive: %+v", r)
			}
			if n := c.nodes[0].metrics.Counters["requests-resent"]; n != resent {
				t.Errorf("requests-resent = %d after the crossing keep-alive, want still %d", n, resent)
			}
			for i, n := range c.nodes {
				if len(n.Part.snapParked) != 0 {
					t.Errorf("participant %d still counts %d parked snapshot reads", i, len(n.Part.snapParked))
				}
			}
		})
	}
}
