package spanner

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/meridiandb/meridian/client"
	"github.com/meridiandb/meridian/internal/node"
	"github.com/meridiandb/meridian/internal/protocol/prototest"
	"github.com/meridiandb/meridian/internal/storage"
	"github.com/meridiandb/meridian/internal/storage/locks"
	"github.com/meridiandb/meridian/internal/storage/mvcc"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/ts"
	"github.com/meridiandb/meridian/internal/workload"
)

// rywWorkload's transactions write two keys on different shards, delete one, and read each
// back between the writes; every read must return the transaction's own latest write. Few keys,
// so transactions conflict, abort and retry often.
type rywWorkload struct {
	keys []string

	mu        sync.Mutex
	next      int
	checked   int
	violation []string
}

func newRYW(t *topo.Topology) (workload.Workload, error) {
	w := &rywWorkload{}
	for i := range 6 {
		w.keys = append(w.keys, topo.PinnedKey(topo.ShardID(i%len(t.Shards)), "ryw/"+strconv.Itoa(i)))
	}
	return w, nil
}

func (w *rywWorkload) Name() string          { return "read-your-writes" }
func (w *rywWorkload) Load(*client.DB) error { return nil }
func (w *rywWorkload) NewClient(_ int, _ topo.RegionID, rng *rand.Rand) workload.Client {
	return rywClient{w: w, rng: rng}
}

type rywClient struct {
	w   *rywWorkload
	rng *rand.Rand
}

func (w *rywWorkload) value() []byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.next++
	return []byte(strconv.Itoa(w.next))
}

func (w *rywWorkload) expect(tx *client.Txn, key string, want []byte) error {
	got, err := tx.Get(key)
	if err != nil && !errors.Is(err, client.ErrNotFound) {
		return err // an abort: the driver retries
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.checked++
	if (want == nil) != errors.Is(err, client.ErrNotFound) || (want != nil && string(got) != string(want)) {
		w.violation = append(w.violation, fmt.Sprintf("read %s = %q (err %v), own write was %q", key, got, err, want))
		return errors.New("read-your-writes violated")
	}
	return nil
}

func (c rywClient) Next() workload.Txn {
	a := c.w.keys[c.rng.IntN(len(c.w.keys))]
	b := c.w.keys[c.rng.IntN(len(c.w.keys))]
	for b == a {
		b = c.w.keys[c.rng.IntN(len(c.w.keys))]
	}
	return workload.Txn{Type: "ryw", Run: func(tx *client.Txn) error {
		if _, err := tx.Get(a); err != nil && !errors.Is(err, client.ErrNotFound) {
			return err
		}
		va, vb := c.w.value(), c.w.value()
		steps := []func() error{
			func() error { return tx.Put(a, va) }, // upgrades the shared lock just taken
			func() error { return c.w.expect(tx, a, va) },
			func() error { return tx.Delete(b) },
			func() error { return c.w.expect(tx, b, nil) },
			func() error { return tx.Put(b, vb) },
			func() error { return c.w.expect(tx, b, vb) },
			func() error { return c.w.expect(tx, a, va) },
		}
		for _, s := range steps {
			if err := s(); err != nil {
				return err
			}
		}
		return nil
	}}
}

// TestReadYourWrites: in both write-lock modes a transaction's reads return its own writes and
// deletes — from the coordinator's buffer (buffered) or the participant's pending writes (eager)
// — under contention, aborts and retries.
func TestReadYourWrites(t *testing.T) {
	for _, writeLocks := range []string{"buffered", "eager"} {
		t.Run(writeLocks, func(t *testing.T) {
			var w *rywWorkload
			res := prototest.Run(t, prototest.Case{Protocol: Name, Seed: 1, Options: map[string]string{"write-locks": writeLocks},
				Workload: func(tp *topo.Topology) (workload.Workload, error) {
					wl, err := newRYW(tp)
					w, _ = wl.(*rywWorkload)
					return wl, err
				}, Clients: 3, Duration: 3 * time.Second})
			if len(w.violation) > 0 {
				t.Fatalf("%d reads missed the transaction's own write, first: %s", len(w.violation), w.violation[0])
			}
			if res.Committed < 10 || w.checked < 40 {
				t.Fatalf("too little exercised: %d commits, %d own-write reads", res.Committed, w.checked)
			}
			t.Logf("commits=%d own-write reads=%d aborts=%v", res.Committed, w.checked, res.AbortsByCause)
		})
	}
}

// TestEagerWriteAtParticipant replays one eager transaction at a participant: its write upgrades
// its shared lock at once, is invisible to another transaction (whose read waits on the
// exclusive lock) and to snapshot reads, is returned to its own read, and becomes an intent at
// prepare without a new lock acquisition; the waiting reader gets the committed value after the
// decision.
func TestEagerWriteAtParticipant(t *testing.T) {
	p, env := newScriptParticipant(t, locks.WoundWait)
	p.cfg.EagerWrites = true
	const key = "k"
	const coord, other node.ID = 2, 3
	txn := storage.MakeTxnID(int32(coord), 1)
	reader := storage.MakeTxnID(int32(other), 1)
	age, readerAge := ts.Timestamp{Wall: 100}, ts.Timestamp{Wall: 200}
	if err := p.Store().Preload(key, []byte("old")); err != nil {
		t.Fatal(err)
	}

	p.onRead(coord, &ReadReq{Txn: txn, Age: age, Seq: 1, Key: key})
	p.onWrite(coord, &WriteReq{Txn: txn, Age: age, Seq: 2, Key: key, Value: []byte("new"), Seen: 1})
	sent := env.Take()
	if len(sent) != 2 {
		t.Fatalf("want a read reply and a write reply, got %d messages", len(sent))
	}
	if r, ok := sent[1].M.(*WriteResp); !ok || !r.OK || r.Seq != 2 {
		t.Fatalf("write not granted at once (upgrade of the sole shared lock): %+v", sent[1].M)
	}
	if holders, mode := p.locks.Holders(key); len(holders) != 1 || holders[0] != txn || mode != locks.Exclusive {
		t.Fatalf("holders of %q = %v (%v), want the writer's exclusive lock", key, holders, mode)
	}

	p.onRead(other, &ReadReq{Txn: reader, Age: readerAge, Seq: 1, Key: key})
	p.onSnapRead(other, &SnapReadReq{Txn: storage.MakeTxnID(int32(other), 2), Seq: 1, Key: key, At: ts.Timestamp{Wall: env.Clock}})
	p.onRead(coord, &ReadReq{Txn: txn, Age: age, Seq: 3, Key: key, Seen: 2})
	for _, s := range env.Take() {
		switch m := s.M.(type) {
		case *ReadResp:
			if m.Txn == reader {
				t.Fatalf("another transaction read %q under the writer's exclusive lock: %+v", key, m)
			}
			if !m.OK || !m.Found || string(m.Value) != "new" {
				t.Fatalf("own read = %+v, want the pending write", m)
			}
		case *SnapReadResp:
			if string(m.Value) != "old" {
				t.Fatalf("snapshot read saw %q, want the committed %q", m.Value, "old")
			}
		}
	}

	p.onPrepare(coord, &PrepareReq{Txn: txn, Age: age, Seen: 3})
	env.Flush()
	v := votes(env.Take())[txn]
	if v == nil || !v.OK {
		t.Fatalf("no yes vote: %+v", v)
	}
	if keys := p.Store().IntentKeys(txn); len(keys) != 1 || keys[0] != key {
		t.Fatalf("intents after prepare: %v", keys)
	}
	commitTS := ts.Timestamp{Wall: v.TS.Wall + 1, Origin: uint32(coord)}
	p.onDecide(coord, &DecideReq{Txn: txn, Commit: true, TS: commitTS})
	env.Flush()
	var got *ReadResp
	for _, s := range env.Take() {
		if r, ok := s.M.(*ReadResp); ok && r.Txn == reader {
			got = r
		}
	}
	if got == nil || !got.OK || string(got.Value) != "new" || got.Version != commitTS {
		t.Fatalf("waiting reader after commit: %+v", got)
	}
	if v, ok := p.Store().Latest(key); !ok || v.State != mvcc.Committed || string(v.Value) != "new" {
		t.Fatalf("latest version of %q: %+v", key, v)
	}
}
