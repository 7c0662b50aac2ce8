package clock

import (
	"strings"
	"testing"
	"time"

	"github.com/meridiandb/meridian/internal/ts"
)

func mustBatcher(t *testing.T, cfg BatcherConfig) *Batcher {
	t.Helper()
	b, err := NewBatcher(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestBatcherConfigValidate(t *testing.T) {
	ok := K2BatcherConfig(1)
	tests := []struct {
		name string
		edit func(*BatcherConfig)
		want string // substring of the error; "" = valid
	}{
		{"paper defaults", func(*BatcherConfig) {}, ""},
		{"zero TTL", func(c *BatcherConfig) { c.TTL = 0 }, "TTL"},
		{"zero step", func(c *BatcherConfig) { c.Step = 0 }, "step"},
		{"step above TTL", func(c *BatcherConfig) { c.Step = c.TTL + 1 }, "step"},
		{"negative epsilon", func(c *BatcherConfig) { c.Epsilon = -1 }, "epsilon"},
		{"drift out of range", func(c *BatcherConfig) { c.MaxDrift = 2 }, "drift"},
		{"TTL eaten by drift", func(c *BatcherConfig) { c.TTL, c.Step, c.MaxDrift = 2, 1, 0.4 }, "too short"},
		{"unknown mutation", func(c *BatcherConfig) { c.Mutation = 99 }, "mutation"},
	}
	for _, tc := range tests {
		cfg := ok
		tc.edit(&cfg)
		_, err := NewBatcher(cfg)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: error %v, want one mentioning %q", tc.name, err, tc.want)
		}
	}
}

// TestBatcherPaperNumbers: the paper's TSCount and commit waits (notes/k2.md §2.4).
func TestBatcherPaperNumbers(t *testing.T) {
	b := mustBatcher(t, K2BatcherConfig(7))
	if b.count != 10_000 {
		t.Errorf("TSCount = %d, want 10000", b.count)
	}
	// 2 × (100 µs + 100 µs) × 1.0002 = 400.08 µs, plus 2 ns of rounding.
	if got, want := b.CommitWait(), 400*time.Microsecond+80*time.Nanosecond+2; got != want {
		t.Errorf("K2-TB CWT = %v, want %v", got, want)
	}
	// TTL × (1 − D) = 99.98 µs, minus 1 ns.
	if got, want := b.RequestTimeout(), 99*time.Microsecond+979*time.Nanosecond; got != want {
		t.Errorf("local TTL = %v, want %v", got, want)
	}
	cfg := K2BatcherConfig(7)
	cfg.Batching = false
	if got, want := mustBatcher(t, cfg).CommitWait(), 200*time.Microsecond+40*time.Nanosecond+2; got != want {
		t.Errorf("strawman CWT = %v, want %v", got, want)
	}
}

func TestBatcherLifecycle(t *testing.T) {
	cfg := K2BatcherConfig(3)
	cfg.TTL, cfg.Step, cfg.MaxDrift = 100, 10, 0 // 10 timestamps per batch, local TTL 99 ns
	b := mustBatcher(t, cfg)

	if _, _, ok := b.Take(0, 0); ok {
		t.Fatal("Take succeeded with no batch")
	}
	if b.NeedRequest(0, 0) {
		t.Fatal("NeedRequest with nobody waiting")
	}
	if !b.NeedRequest(0, 5) {
		t.Fatal("no request needed with five waiters and no batch")
	}
	req := b.StartRequest(1000)
	if b.NeedRequest(1001, 5) || b.InFlight(1001) != 1 {
		t.Fatal("a second request was wanted while one is in flight: batching must share it")
	}
	if !b.OnReply(1020, &TSBatchReply{ReqID: req.ReqID, Low: 5000, Up: 5200, OracleID: 9}) {
		t.Fatal("fresh reply refused")
	}
	if b.OnReply(1021, &TSBatchReply{ReqID: req.ReqID, Low: 5000, Up: 5200}) {
		t.Fatal("duplicate reply accepted")
	}
	var got []ts.Timestamp
	for {
		stamp, cwt, ok := b.Take(1020, 1030)
		if !ok {
			break
		}
		if cwt != b.CommitWait() {
			t.Fatalf("commit wait %v, want %v", cwt, b.CommitWait())
		}
		got = append(got, stamp)
	}
	if len(got) != 10 {
		t.Fatalf("took %d timestamps from a batch of 10", len(got))
	}
	for i, stamp := range got {
		// base = Up + TTL = 5300, step 10, Origin = coordinator id.
		if want := (ts.Timestamp{Wall: 5300 + 10*int64(i), Origin: 3}); stamp != want {
			t.Fatalf("timestamp %d = %v, want %v", i, stamp, want)
		}
	}

	// Exhausted: a new request is needed; its batch expires 99 ns (local) after it was sent.
	if !b.NeedRequest(1030, 1) {
		t.Fatal("exhausted batch but no request needed")
	}
	req = b.StartRequest(2000)
	b.OnReply(2050, &TSBatchReply{ReqID: req.ReqID, Up: 6000})
	if _, _, ok := b.Take(2098, 2098); !ok {
		t.Fatal("batch unusable 98 ns after its send")
	}
	if _, _, ok := b.Take(2099, 2099); ok {
		t.Fatal("batch usable 99 ns after its send: the TTL check must count from the send")
	}

	// A reply arriving after its TTL is refused and counted.
	req = b.StartRequest(3000)
	if b.OnReply(3099, &TSBatchReply{ReqID: req.ReqID, Up: 7000}) {
		t.Fatal("expired reply installed")
	}
	if s := b.Stats(); s.ExpiredOnArrival != 1 || s.Ignored != 1 || s.Requests != 3 || s.Taken != 11 {
		t.Fatalf("stats %+v", s)
	}
	if b.OnReply(0, nil) || b.OnReply(0, &TSBatchReply{ReqID: 424242}) {
		t.Fatal("nil or unknown reply accepted")
	}
}

// TestBatcherOlderReplyDoesNotReplaceNewer: replies can arrive out of order; the batch from the
// later request lives longer and must stay.
func TestBatcherOlderReplyDoesNotReplaceNewer(t *testing.T) {
	cfg := K2BatcherConfig(1)
	cfg.MaxDrift = 0
	b := mustBatcher(t, cfg)
	old := b.StartRequest(0)
	young := b.StartRequest(10_000)
	b.OnReply(20_000, &TSBatchReply{ReqID: young.ReqID, Up: 1_000_000})
	if b.OnReply(20_001, &TSBatchReply{ReqID: old.ReqID, Up: 900_000}) {
		t.Fatal("an older batch replaced a newer one")
	}
	if stamp, _, _ := b.Take(20_002, 20_002); stamp.Wall != 1_000_000+int64(cfg.TTL) {
		t.Fatalf("took %v from the wrong batch", stamp)
	}
}

// TestBatcherMonotonicGuard: a batch whose range lies below timestamps already handed out (an
// oracle further behind, or overlapping batches) never yields a repeat or a step backwards.
func TestBatcherMonotonicGuard(t *testing.T) {
	cfg := K2BatcherConfig(4)
	cfg.TTL, cfg.Step, cfg.MaxDrift = 100, 10, 0
	b := mustBatcher(t, cfg)
	var prev ts.Timestamp
	local := int64(0)
	for i, up := range []int64{5000, 4950, 4800, 5000, 5095} {
		req := b.StartRequest(local)
		b.OnReply(local, &TSBatchReply{ReqID: req.ReqID, Up: up})
		for range 10 {
			stamp, _, ok := b.Take(local, local)
			if !ok {
				t.Fatalf("batch %d exhausted early", i)
			}
			if !prev.Less(stamp) || stamp.Origin != 4 {
				t.Fatalf("batch %d: %v after %v", i, stamp, prev)
			}
			prev = stamp
		}
		local += 1000
	}
	if b.Stats().Bumped == 0 {
		t.Fatal("guard never bumped Logical although batches went backwards")
	}
}

// TestBatchersShareOracleUniquely: coordinators given identical oracle replies still hand out
// distinct timestamps, because Origin is the coordinator.
func TestBatchersShareOracleUniquely(t *testing.T) {
	seen := map[ts.Timestamp]uint32{}
	for coord := uint32(1); coord <= 5; coord++ {
		b := mustBatcher(t, K2BatcherConfig(coord))
		req := b.StartRequest(0)
		b.OnReply(10, &TSBatchReply{ReqID: req.ReqID, Up: 1_000_000, OracleID: 1})
		for range 100 {
			stamp, _, _ := b.Take(10, 10)
			if other, dup := seen[stamp]; dup {
				t.Fatalf("coordinators %d and %d both issued %v", other, coord, stamp)
			}
			seen[stamp] = coord
		}
	}
}

// TestStrawmanOneRequestPerTimestamp: without batching each waiter needs its own request, and a
// reply serves only transactions that began before its request was sent.
func TestStrawmanOneRequestPerTimestamp(t *testing.T) {
	cfg := K2BatcherConfig(2)
	cfg.Batching = false
	b := mustBatcher(t, cfg)
	n := 0
	for b.NeedRequest(100, 3) {
		b.StartRequest(100)
		n++
	}
	if n != 3 {
		t.Fatalf("strawman started %d requests for 3 waiters", n)
	}
	for id := uint64(1); id <= 3; id++ {
		b.OnReply(200, &TSBatchReply{ReqID: id, Up: 10_000 + int64(id)})
	}
	if _, _, ok := b.Take(150, 200); ok {
		t.Fatal("a transaction that began after the send took the reply")
	}
	// The late transaction's scan dropped every reply sent before it began.
	if _, _, ok := b.Take(50, 200); ok {
		t.Fatal("a dropped reply was handed out")
	}
	req := b.StartRequest(300)
	b.OnReply(400, &TSBatchReply{ReqID: req.ReqID, Up: 20_000})
	stamp, cwt, ok := b.Take(250, 400)
	if !ok || stamp != (ts.Timestamp{Wall: 20_000, Origin: 2}) || cwt != b.CommitWait() {
		t.Fatalf("Take = %v, %v, %v; want ts = T_up = 20000", stamp, cwt, ok)
	}
	if _, _, ok := b.Take(250, 400); ok {
		t.Fatal("one strawman reply served two transactions")
	}
}

func TestBatcherMutations(t *testing.T) {
	cfg := K2BatcherConfig(1)
	cfg.Mutation = MutationNoCommitWait
	if b := mustBatcher(t, cfg); b.CommitWait() != 0 {
		t.Errorf("no-commit-wait mutant waits %v", b.CommitWait())
	}
	cfg.Mutation = MutationTTLWrongDrift
	if b := mustBatcher(t, cfg); b.RequestTimeout() <= cfg.TTL {
		t.Errorf("ttl-wrong-drift mutant's local TTL %v is not longer than TTL", b.RequestTimeout())
	}
	for m, want := range map[BatcherMutation]string{MutationNone: "none", MutationNoCommitWait: "no-commit-wait", MutationTTLWrongDrift: "ttl-wrong-drift", 9: "mutation(9)"} {
		if m.String() != want {
			t.Errorf("%d.String() = %q, want %q", m, m.String(), want)
		}
	}
}

// TestBatcherIgnoresRepliesOfAnEarlierLife: a restarted requester numbers its requests from a
// new base, so the reply to a request its previous life sent (same low id) is not taken.
func TestBatcherIgnoresRepliesOfAnEarlierLife(t *testing.T) {
	cfg := K2BatcherConfig(1)
	before := mustBatcher(t, cfg).StartRequest(0) // the previous life's first request
	b := mustBatcher(t, cfg)
	b.NumberRequestsFrom(2 << 40)
	req := b.StartRequest(1_000)
	if req.ReqID == before.ReqID {
		t.Fatalf("this life's first request reuses id %d", req.ReqID)
	}
	if b.OnReply(2_000, &TSBatchReply{ReqID: before.ReqID, Up: 500}) {
		t.Fatal("a reply to the previous life's request was taken")
	}
	if !b.OnReply(2_000, &TSBatchReply{ReqID: req.ReqID, Up: 1_500}) {
		t.Fatal("the reply to this life's request was refused")
	}
}

// TestStrawmanSlowOracleNoRetryStorm: the strawman asks again for a timestamp whose reply has not
// come within its request timeout. With an oracle whose queue takes longer than that timeout,
// every waiter's request went again, the queue doubled, and no reply came in time any more (repro
// k2-fig16 --scale paper: no commit in 30 s at 6,400 clients per region). Once replies show the
// oracle answers in 40 ms, requests sent 60 ms ago are still in flight; one that stays unanswered
// for twice the latest round trip is asked for again.
func TestStrawmanSlowOracleNoRetryStorm(t *testing.T) {
	cfg := K2BatcherConfig(2)
	cfg.Batching = false
	b := mustBatcher(t, cfg)
	const ms = int64(time.Millisecond)
	for b.NeedRequest(0, 10) {
		b.StartRequest(0)
	}
	b.OnReply(40*ms, &TSBatchReply{ReqID: 1, Up: 40 * ms})
	if _, _, ok := b.Take(0, 40*ms); !ok {
		t.Fatal("the first reply served no waiter")
	}
	if b.NeedRequest(60*ms, 9) {
		t.Fatal("9 requests 60 ms old counted lost, although the oracle answers in 40 ms: a retry storm")
	}
	if !b.NeedRequest(81*ms, 9) {
		t.Fatal("9 requests unanswered for twice the oracle's round trip not asked for again")
	}
}

// TestStrawmanWindowCapped: the strawman's request window follows the oracle's latest round trip
// only up to strawmanMaxRequestTimeout. One reply that took 3 s stretched it to 6 s, so a
// request lost after it stalled its waiters that long.
func TestStrawmanWindowCapped(t *testing.T) {
	cfg := K2BatcherConfig(2)
	cfg.Batching = false
	b := mustBatcher(t, cfg)
	const ms = int64(time.Millisecond)
	b.StartRequest(0)
	b.OnReply(3000*ms, &TSBatchReply{ReqID: 1, Up: 3000 * ms})
	if _, _, ok := b.Take(0, 3000*ms); !ok {
		t.Fatal("the slow reply served no waiter")
	}
	if !b.NeedRequest(3000*ms, 1) {
		t.Fatal("a waiter with nothing in flight asked for no timestamp")
	}
	b.StartRequest(3000 * ms)
	if b.NeedRequest(3000*ms+int64(strawmanMaxRequestTimeout)-ms, 1) {
		t.Fatal("a request younger than the cap counted lost")
	}
	if !b.NeedRequest(3000*ms+int64(strawmanMaxRequestTimeout), 1) {
		t.Fatalf("a request unanswered for %v after a 3 s reply not asked for again: the window is not capped", strawmanMaxRequestTimeout)
	}
}
