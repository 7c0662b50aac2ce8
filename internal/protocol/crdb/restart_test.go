package crdb

import (
	"fmt"
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
	"github.com/meridiandb/meridian/internal/wire"
)

// TestRequestsResentAfterRestart: a transaction of a live coordinator C sends a request to a
// leaseholder (and record holder) X that crashes, before it arrives (the write) or with it in
// flight (the commit's staging and proof). X restarts 300 ms later. The transaction must go on
// once X is back, as CockroachDB's DistSender retries on the broken connection. Before, nothing
// told C: the request was awaited until the idle timeout (5 s), the put then aborted
// (coordinator-timeout) and the commit answered "unknown", while the transaction's intents
// and live record blocked every other transaction on its keys; under three 300 ms crashes in a
// 20-key list-append run that stalled the whole cluster for four seconds.
func TestRequestsResentAfterRestart(t *testing.T) {
	const down = 300 * time.Millisecond
	for _, tc := range []struct {
		name string
		// beforePut: X crashes before the put; otherwise just after the client asks to commit
		// (the staging and the proof are then on their way to X, a WAN away).
		beforePut bool
	}{{"write-while-down", true}, {"commit-in-flight", false}} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBatchSim(t, nil)
			s, tp := b.s, b.tp
			defer s.Stop()
			x, c := tp.DataNodes(0)[0], tp.DataNodes(1)[0]
			k := prototest.KeysOn(t, tp, x, "restart", 1)[0]
			var failures []string
			fail := func(format string, args ...any) { failures = append(failures, fmt.Sprintf(format, args...)) }
			var restartAt, doneAt int64
			crash := func(at int64) {
				restartAt = at + int64(down)
				s.At(at, func() { s.Crash(x) })
				s.At(restartAt, func() {
					if err := s.Restart(x); err != nil {
						fail("restart: %v", err)
					}
				})
			}
			var got string
			s.AddClient(1, c, 100*ms, func(db *client.DB) {
				if tc.beforePut {
					crash(s.Now())
				}
				tx := db.Begin(client.TxnOptions{})
				if err := tx.Put(k, []byte("v")); err != nil {
					fail("put: %v", err)
					return
				}
				if !tc.beforePut {
					crash(s.Now() + ms)
				}
				if err := tx.Commit(); err != nil {
					fail("commit: %v", err)
					return
				}
				doneAt = s.Now()
				if err := client.RunTxn(db, client.TxnOptions{ReadOnly: true}, func(tx *client.Txn) error {
					v, err := tx.Get(k)
					got = string(v)
					return err
				}); err != nil {
					fail("read back: %v", err)
				}
			})
			s.RunUntil(int64(10 * time.Second))
			for _, f := range failures {
				t.Error(f)
			}
			if t.Failed() {
				return
			}
			resent := s.Handler(c).(*Node).m.Counters["rpc/resent"]
			t.Logf("X back at %v, committed %v later; C resent %d requests", time.Duration(restartAt),
				time.Duration(doneAt-restartAt), resent)
			// A few WAN round trips after X is back, not the idle timeout.
			if doneAt-restartAt > int64(time.Second) {
				t.Errorf("committed %v after X restarted", time.Duration(doneAt-restartAt))
			}
			if got != "v" {
				t.Errorf("read back %q, want v", got)
			}
		})
	}
}

// TestStaleAnswerAfterRestart: a gateway G sends a read to a leaseholder L, then crashes and
// restarts; a client of the new life reads another key on L. L's answer to the earlier life's
// read (it waited on an intent until after the restart) reaches the new life. It must not be
// taken for the answer to the new read: both lives numbered their requests from 1, so the
// answer completed the new read, whose client got the other key's value. A node also sends
// nothing before its life's number is durable: a life that crashes first leaves the number to
// the next one.
func TestStaleAnswerAfterRestart(t *testing.T) {
	cfg, err := prototest.SimConfig(prototest.Case{Protocol: name, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	tp := cfg.Topology
	self, l := tp.DataNodes(0)[0], tp.DataNodes(1)[0]
	cl := topo.NodeID(len(tp.Nodes) + 1)
	keys := prototest.KeysOn(t, tp, l, "stale", 2)
	disk := durable.NewMem()
	life := func() (*Node, *nodetest.ScriptEnv) { return scriptedLife(t, self, tp, disk, int64(time.Second)) }
	read := func(n *Node, env *nodetest.ScriptEnv, txn uint64, key string) *ReadReq {
		t.Helper()
		n.Handle(cl, &wire.ClientRequest{Txn: txn, Op: wire.OpGet, Key: key})
		for _, s := range env.Take() {
			if m, ok := s.M.(*ReadReq); ok && s.To == l && m.Key == key {
				return m
			}
		}
		t.Fatalf("no read of %q sent to %d", key, l)
		return nil
	}
	n, env := life()
	if sent := env.Take(); len(sent) > 0 {
		t.Fatalf("sent %d messages before its life's number was durable", len(sent))
	}
	env.Flush()
	old := read(n, env, 1, keys[0])

	n, env = life() // the crash
	env.Flush()
	env.Take() // the restart notice
	fresh := read(n, env, 2, keys[1])
	t.Logf("request ids: earlier life %#x, new life %#x", old.Req, fresh.Req)

	n.Handle(l, &ReadResp{Req: old.Req, Found: true, Value: []byte("the other key's")})
	n.Handle(l, &ReadResp{Req: fresh.Req, Found: true, Value: []byte("its own")})
	var got []string
	for _, s := range env.Take() {
		if m, ok := s.M.(*wire.ClientReply); ok && s.To == cl {
			got = append(got, string(m.Value))
		}
	}
	if len(got) != 1 || got[0] != "its own" {
		t.Fatalf("the new life's client read %q, want only %q", got, "its own")
	}

	// A third life, before its number is durable, is asked for a key of its own on which an
	// earlier life left an intent: the read waits, and its push goes out only once the number
	// is durable.
	c := tp.DataNodes(2)[0]
	mine := prototest.KeysOn(t, tp, self, "stale", 1)[0]
	at, later := ts.Timestamp{Wall: 3 * int64(time.Second)}, ts.Timestamp{Wall: 3*int64(time.Second) + int64(400*time.Millisecond)}
	n.Handle(c, &WriteReq{Req: 1, Txn: TxnMeta{ID: storage.MakeTxnID(int32(c), 1), Age: at, RecordNode: l, Coord: c},
		Key: mine, Value: []byte("x"), WriteTS: at})
	env.Flush()
	// Its clock has reached the read's timestamp less max-offset: a leaseholder holds a read
	// further ahead until it has (Handle).
	n, env = scriptedLife(t, self, tp, disk, 3*int64(time.Second))
	n.Handle(c, &ReadReq{Req: 1, Txn: TxnMeta{ID: storage.MakeTxnID(int32(c), 2), Age: at, RecordNode: -1, Coord: c},
		Key: mine, ReadTS: later, Limit: later})
	pushes := func() (ids []uint64) {
		for _, s := range env.Take() {
			if m, ok := s.M.(*PushReq); ok {
				ids = append(ids, m.Req)
			}
		}
		return ids
	}
	if ids := pushes(); len(ids) > 0 {
		t.Fatalf("pushes %#x sent before the life's number was durable", ids)
	}
	env.Flush()
	if ids := pushes(); len(ids) != 1 || ids[0]>>48 != n.inc.N {
		t.Fatalf("pushes %#x once the life's number %d was durable, want one under it", ids, n.inc.N)
	}
}

// scriptedLife starts node self from disk in a fresh scripted environment whose clock reads
// clock: whatever an earlier life on disk had not persisted is gone, as after a crash.
func scriptedLife(t testing.TB, self topo.NodeID, tp *topo.Topology, disk *durable.Mem, clock int64) (*Node, *nodetest.ScriptEnv) {
	t.Helper()
	env := &nodetest.ScriptEnv{ID: self, Topo: tp, Clock: clock, Disk: disk}
	h, err := proto{}.NewNode(node.Config{Env: env, Durable: disk})
	if err != nil {
		t.Fatal(err)
	}
	return h.(*Node), env
}
