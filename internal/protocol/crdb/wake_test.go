package crdb

import (
	"testing"
	"time"

	"github.com/meridiandb/meridian/internal/protocol/prototest"
	"github.com/meridiandb/meridian/internal/storage"
	"github.com/meridiandb/meridian/internal/storage/mvcc"
	"github.com/meridiandb/meridian/internal/ts"
	"github.com/meridiandb/meridian/internal/wire"
	"github.com/meridiandb/meridian/internal/workload/ycsbt"
)

// TestWakeOldestFirst: a key's intent holder H commits while two younger writers wait on it,
// the younger one Y having arrived first, then O, older than Y. When H's intent is resolved the
// key must go to O: had Y got it, O, queued behind Y's new intent, would push-abort Y at once
// (it is older), throwing away Y's work for nothing. Waking in arrival order did exactly that.
func TestWakeOldestFirst(t *testing.T) {
	g := newGCScript(t, false)
	base := g.env.Clock
	meta := func(seq uint64, ageMs int64) TxnMeta {
		return TxnMeta{ID: storage.MakeTxnID(int32(g.c), seq), Age: ts.Timestamp{Wall: base + ageMs*int64(time.Millisecond)},
			RecordNode: g.l, Coord: g.c}
	}
	h, o, y := meta(1, 0), meta(2, 2), meta(3, 3)
	at := ts.Timestamp{Wall: base + int64(5*time.Millisecond)}
	write := func(req uint64, m TxnMeta) []wire.Msg {
		var out []wire.Msg
		for _, s := range g.deliver(g.c, &WriteReq{Req: req, Txn: m, Key: g.kh, Value: []byte{byte(req)}, WriteTS: at}) {
			out = append(out, s.M)
		}
		return out
	}
	holder := func() storage.TxnID {
		for _, v := range g.n.store.Versions(g.kh) {
			if v.State == mvcc.Intent {
				return v.Txn
			}
		}
		return 0
	}
	write(1, h)
	if holder() != h.ID {
		t.Fatal("H's intent was not laid")
	}
	for _, m := range append(write(2, y), write(3, o)...) {
		if p, ok := m.(*PushReq); ok && p.Type != PushQuery {
			t.Fatalf("a younger waiter pushed the holder with type %d; want a waiting push", p.Type)
		}
	}
	sent := g.deliver(g.c, &ResolveReq{Txn: h.ID, Keys: []string{g.kh}, Commit: true, TS: at, Record: g.l})
	if got := holder(); got != o.ID {
		t.Errorf("after H committed the key went to %v; want the oldest waiter O (%v), not the first to arrive (Y %v)", got, o.ID, y.ID)
	}
	for _, s := range sent {
		switch m := s.M.(type) {
		case *PushReq:
			if m.Type == PushAbort {
				t.Errorf("a waiter push-aborted %v right after the key was handed over", m.Pushee)
			}
		case *WriteResp:
			if m.Aborted || m.Req != 3 {
				t.Errorf("write answer %+v: want only O's (request 3), not aborted", m)
			}
		}
	}
}

// TestYCSBTNoAbortConvoy runs K2's YCSB-T (Zipf 0.8 over 100,000 keys, the simulator's default, 3 operations, half of
// them writes, 10 clients per region) for 5 s. Waiters woken in arrival order were push-aborted
// by the older waiters behind them at almost every hand-over of a hot key; the aborted retried
// with their old age and queued again, so aborts and queues grew together: one push-abort per
// ten commits in these 5 s, one per two after 20 s, when throughput had fallen to a fifth of
// the first second's. Woken oldest first, push-aborts stay near one per hundred commits.
func TestYCSBTNoAbortConvoy(t *testing.T) {
	res := prototest.Run(t, prototest.Case{Protocol: name, Seed: 1, Clients: 10, Duration: 5 * time.Second,
		Workload: prototest.YCSBT(0.8, func(c *ycsbt.Config) { c.Keys = 100_000 })})
	m := res.ProtocolMetrics.Counters
	commits, pushAborts := m["commit/ok"], m["abort/push-abort"]
	t.Logf("%d read-write commits, %d push-aborts, abort rate %.3f", commits, pushAborts, res.AbortRate)
	if commits < 500 {
		t.Fatalf("only %d read-write commits in 5 s", commits)
	}
	if pushAborts*30 > commits {
		t.Errorf("%d push-aborts for %d commits: waiters are aborting each other at hand-over", pushAborts, commits)
	}
}
