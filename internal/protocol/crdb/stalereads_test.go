package crdb

import (
	"errors"
	"testing"
	"time"

	"github.com/meridiandb/meridian/client"
	"github.com/meridiandb/meridian/internal/node"
	"github.com/meridiandb/meridian/internal/node/nodetest"
	"github.com/meridiandb/meridian/internal/protocol/prototest"
	"github.com/meridiandb/meridian/internal/storage"
	"github.com/meridiandb/meridian/internal/storage/durable"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/ts"
)

// TestNoStaleReadAfterLeaseholderStart: a restarted leaseholder takes a read floor 2×max-offset
// ahead of its clock (it cannot know which reads it served before the crash), so a write in
// its first second is pushed above every clock. Its commit must not be acknowledged before the
// gateway's clock passes that timestamp: acknowledged at once, a read begun afterwards through
// another gateway, whose uncertainty interval ends max-offset above its clock, did not find the
// write (and so it was on a new cluster, whose nodes took the floor too until a first life
// went without it).
func TestNoStaleReadAfterLeaseholderStart(t *testing.T) {
	s := prototest.NewSim(t, prototest.Case{Protocol: name, Seed: 1})
	tp := s.Topology()
	if len(tp.Regions) < 3 {
		t.Fatalf("topology %s has %d regions, want 3", tp.Name, len(tp.Regions))
	}
	// The key's leaseholder is in region 2; the writer's gateway in region 0, the reader's in 1.
	shard := tp.ShardsHomedIn(2)[0]
	key := topo.PinnedKey(shard, "k")
	holder := tp.Shards[shard].Primary()
	s.At(int64(100*time.Millisecond), func() { s.Crash(holder) })
	s.At(int64(200*time.Millisecond), func() {
		if err := s.Restart(holder); err != nil {
			t.Errorf("restart: %v", err)
		}
	})
	committedAt := int64(-1)
	var found bool
	var readErr error
	read := false
	s.AddClient(0, tp.DataNodes(0)[0], 0, func(db *client.DB) {
		db.Transport().Sleep(300 * time.Millisecond) // the leaseholder is back
		if err := client.RunTxn(db, client.TxnOptions{}, func(tx *client.Txn) error { return tx.Put(key, []byte("v")) }); err != nil {
			t.Errorf("put: %v", err)
			return
		}
		committedAt = db.Transport().Now()
	})
	s.AddClient(1, tp.DataNodes(1)[0], 0, func(db *client.DB) {
		for committedAt < 0 {
			db.Transport().Sleep(time.Millisecond)
		}
		readErr = client.RunTxn(db, client.TxnOptions{ReadOnly: true}, func(tx *client.Txn) error {
			_, err := tx.Get(key)
			found = err == nil
			if errors.Is(err, client.ErrNotFound) {
				return nil
			}
			return err
		})
		read = true
	})
	s.RunUntil(int64(5 * time.Second))
	s.Stop()
	if !read || readErr != nil {
		t.Fatalf("read done %v: %v", read, readErr)
	}
	if !found {
		t.Errorf("the put committed at %v; a read begun after that through another gateway did not find it", time.Duration(committedAt))
	}
}

// TestFirstLifeServesNothingBeforeDurable: a node's first life takes no read floor, which is
// safe only if it served nothing before its incarnation was durable (a crash before that leaves
// no trace of a life, so the next would again take none, under a read the crash forgot). A read
// that arrives earlier waits, and is served once the incarnation is durable.
func TestFirstLifeServesNothingBeforeDurable(t *testing.T) {
	cfg, err := prototest.SimConfig(prototest.Case{Protocol: name, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	tp := cfg.Topology
	env := &nodetest.ScriptEnv{ID: tp.DataNodes(0)[0], Topo: tp, Clock: int64(time.Second), Disk: durable.NewMem()}
	h, err := proto{}.NewNode(node.Config{Env: env, Durable: env.Disk})
	if err != nil {
		t.Fatal(err)
	}
	n := h.(*Node)
	if !n.store.ReadFloor().IsZero() {
		t.Errorf("a first life took read floor %v", n.store.ReadFloor())
	}
	c := tp.DataNodes(1)[0]
	key := prototest.KeysOn(t, tp, n.self, "first", 1)[0]
	at := ts.Timestamp{Wall: int64(time.Second)}
	n.Handle(c, &ReadReq{Req: 1, Txn: TxnMeta{ID: storage.MakeTxnID(int32(c), 1), Age: at, RecordNode: -1, Coord: c}, Key: key, ReadTS: at, Limit: at})
	answered := func() bool {
		for _, s := range env.Take() {
			if _, ok := s.M.(*ReadResp); ok {
				return true
			}
		}
		return false
	}
	if answered() {
		t.Fatal("a read was served before the first incarnation was durable")
	}
	env.Flush()
	env.Advance(0)
	env.Flush()
	if !answered() {
		t.Fatal("the read that waited was not served once the incarnation was durable")
	}
}
