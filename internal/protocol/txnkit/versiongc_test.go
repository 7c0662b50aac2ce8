package txnkit

import (
	"fmt"
	"testing"
	"time"

	"github.com/meridiandb/meridian/internal/node/nodetest"
	"github.com/meridiandb/meridian/internal/protocol"
	"github.com/meridiandb/meridian/internal/storage"
	"github.com/meridiandb/meridian/internal/storage/mvcc"
	"github.com/meridiandb/meridian/internal/ts"
	"github.com/meridiandb/meridian/internal/wire"
)

// TestVersionGCSchedule: no pass runs while nothing is queued; a pass runs once the oldest
// decision has fallen gc-ttl behind the clock, removes what no reader at or above the horizon
// can see, hands the deletes to persistence, and from then on operations below the horizon are
// TooOld.
func TestVersionGCSchedule(t *testing.T) {
	const ttl = time.Second
	env := &nodetest.ScriptEnv{Clock: int64(10 * time.Second)}
	store := mvcc.New(mvcc.Options{})
	persisted := 0
	m := protocol.NewMetrics()
	g := NewVersionGC(env, store, ttl, func() { persisted += len(store.TakeWrites()) }, m)
	put := func(w int64) {
		if err := store.PutCommitted("k", mvcc.Version{TS: ts.New(w), Txn: storage.TxnID(w), Value: []byte(fmt.Sprint(w))}); err != nil {
			t.Fatal(err)
		}
		store.TakeWrites()
		g.Kick()
	}
	g.Kick()
	env.Advance(time.Minute)
	if m.Counters["gc/passes"] != 0 {
		t.Fatalf("%d passes with nothing to collect", m.Counters["gc/passes"])
	}
	now := env.Clock
	put(now)
	put(now + int64(100*time.Millisecond))
	put(now + int64(200*time.Millisecond))
	// The first version's key held nothing else: only the later two queue the key.
	env.Advance(ttl + 50*time.Millisecond)
	if m.Counters["gc/passes"] != 0 {
		t.Fatalf("a pass ran before any queued decision was gc-ttl old: %v", m.Counters)
	}
	env.Advance(100 * time.Millisecond)
	if m.Counters["gc/passes"] != 1 || m.Counters["gc/versions-removed"] != 1 || persisted != 2 {
		t.Fatalf("after the second decision aged: %v, %d writes persisted; want one pass removing the first version (a delete and the horizon record)", m.Counters, persisted)
	}
	if !g.TooOld(ts.New(now+int64(50*time.Millisecond))) || g.TooOld(ts.New(now+int64(100*time.Millisecond))) {
		t.Fatalf("horizon %v: an operation below it must be TooOld, one at it not", store.GCHorizon())
	}
	env.Advance(ttl)
	if m.Counters["gc/passes"] != 2 || len(store.Versions("k")) != 1 {
		t.Fatalf("%v, %d versions left: want a second pass leaving only the newest", m.Counters, len(store.Versions("k")))
	}
}

// TestOutboxOneMessagePerDestination: notes added during one piece of work leave after it, one
// message per destination, destinations ascending, notes in the order added.
func TestOutboxOneMessagePerDestination(t *testing.T) {
	env := &nodetest.ScriptEnv{}
	o := NewOutbox(env, func(notes []uint64) wire.Msg { return &wire.ClientReply{Txn: notes[0], Seq: uint32(len(notes))} })
	o.Add(3, 30)
	o.Add(1, 10)
	o.Add(3, 31)
	if sent := env.Take(); len(sent) != 0 {
		t.Fatalf("%d messages sent before the work ended", len(sent))
	}
	env.Advance(0)
	sent := env.Take()
	if len(sent) != 2 || sent[0].To != 1 || sent[1].To != 3 {
		t.Fatalf("sent %+v, want one message to 1, then one to 3", sent)
	}
	if r := sent[1].M.(*wire.ClientReply); r.Txn != 30 || r.Seq != 2 {
		t.Fatalf("message to 3 carries %+v, want both its notes, first 30", r)
	}
	o.Add(2, 20)
	env.Advance(0)
	if sent := env.Take(); len(sent) != 1 || sent[0].To != 2 {
		t.Fatalf("after the first batch went out, %+v: want one message to 2", sent)
	}
}

// TestVersionGCCatchesUpWithLongTTL: a backlog larger than a pass's budget is worked off in
// passes at most gcCatchUpGap apart, whatever the TTL. With passes a hundredth of the TTL apart,
// a node with gc-ttl 1h collected at most gcBudget keys per 36 s, less than a busy node decides,
// so its queue and its versions grew for ever.
func TestVersionGCCatchesUpWithLongTTL(t *testing.T) {
	const ttl = time.Hour
	env := &nodetest.ScriptEnv{Clock: int64(10 * time.Second)}
	store := mvcc.New(mvcc.Options{Volatile: true})
	m := protocol.NewMetrics()
	g := NewVersionGC(env, store, ttl, func() {}, m)
	const keys = 3*gcBudget + 1
	for k := 0; k < keys; k++ {
		key := fmt.Sprint("k", k)
		for _, w := range []int64{env.Clock, env.Clock + 1} {
			if err := store.PutCommitted(key, mvcc.Version{TS: ts.New(w), Txn: storage.TxnID(w), Value: []byte("v")}); err != nil {
				t.Fatal(err)
			}
		}
	}
	g.Kick()
	env.Advance(ttl + 1) // the second versions are gc-ttl old: the first pass
	if got := m.Counters["gc/versions-removed"]; got != gcBudget {
		t.Fatalf("first pass removed %d versions, want a full budget, %d", got, gcBudget)
	}
	env.Advance(4 * gcCatchUpGap)
	if got := m.Counters["gc/versions-removed"]; got != keys {
		t.Fatalf("%v after the first pass: %d of %d superseded versions removed, %d passes; want the backlog gone", 4*gcCatchUpGap, got, keys, m.Counters["gc/passes"])
	}
}
