package crdb

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/meridiandb/meridian/client"
	"github.com/meridiandb/meridian/internal/protocol/prototest"
	"github.com/meridiandb/meridian/internal/sim"
	"github.com/meridiandb/meridian/internal/topo"
)

// TestReadOwnLostPipelinedWrite: a transaction's pipelined write of k is acknowledged by k's
// leaseholder X before its intent is durable; X crashes before the flush ends and restarts 300
// ms later. The transaction lives on (its record is on its coordinator) and reads k again, by a
// get or a scan: it must see its own write, or not commit. The read returned k's value from
// below the lost write, and a second write of k then laid the intent the commit's proof found:
// a committed transaction had read past its own write (a real 3-node cluster without latency
// emulation showed 30 such commits under 24 kill -9s of X: the crash review's probe).
func TestReadOwnLostPipelinedWrite(t *testing.T) {
	for _, scan := range []bool{false, true} {
		t.Run(map[bool]string{false: "get", true: "scan"}[scan], func(t *testing.T) {
			s, x, c, k, r := slowDiskSim(t, "own")
			defer s.Stop()
			var failures []string
			fail := func(format string, args ...any) { failures = append(failures, fmt.Sprintf(format, args...)) }
			var crashed, done bool
			s.AddClient(1, c, int64(time.Second), func(db *client.DB) {
				defer func() { done = true }()
				tx := db.Begin(client.TxnOptions{})
				if err := tx.Put(r, []byte("a")); err != nil {
					fail("put r: %v", err)
					return
				}
				if err := tx.Put(k, []byte("v1")); err != nil {
					fail("put k: %v", err)
					return
				}
				now := s.Now()
				s.At(now, func() {
					// The intent must still be in flight to X's disk, or the scene is not set.
					crashed = !durableHas(t, s, x, k)
					s.Crash(x)
				})
				s.At(now+int64(300*time.Millisecond), func() {
					if err := s.Restart(x); err != nil {
						fail("restart: %v", err)
					}
				})
				db.Transport().Sleep(time.Second) // past the restart, well inside the idle timeout
				var got string
				if scan {
					rows, err := tx.Scan(k, k+"\x00", 0)
					if err != nil {
						t.Logf("scan of k: %v (the transaction cannot go on: fine)", err)
						return
					}
					for _, row := range rows {
						got = string(row.Value)
					}
				} else {
					v, err := tx.Get(k)
					if err != nil && !errors.Is(err, client.ErrNotFound) {
						t.Logf("read of k: %v (the transaction cannot go on: fine)", err)
						return
					}
					got = string(v)
				}
				if err := tx.Put(k, []byte("v2")); err != nil {
					t.Logf("second put of k: %v (fine)", err)
					return
				}
				if err := tx.Commit(); err != nil {
					t.Logf("commit: %v (fine)", err)
					return
				}
				if got != "v1" {
					fail("the transaction read k as %q after writing v1 there, and then committed", got)
				}
			})
			s.RunUntil(int64(20 * time.Second))
			if !done {
				t.Fatal("the client did not finish")
			}
			if !crashed {
				t.Fatal("X's crash did not find the put's intent in flight to its disk: the scene is not set")
			}
			for _, f := range failures {
				t.Error(f)
			}
		})
	}
}

// slowDiskSim builds a simulation whose disks take 200 ms a flush, so that a pipelined write is
// answered long before its intent is on disk, and returns it with a data node x, a gateway c in
// another region, a key k that x leads, and a key r that c leads (a transaction that writes r
// first keeps its record on its gateway, away from x's crashes).
func slowDiskSim(t *testing.T, prefix string) (s *sim.Sim, x, c topo.NodeID, k, r string) {
	t.Helper()
	cfg, err := prototest.SimConfig(prototest.Case{Protocol: name, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	cfg.FlushLatency = 200 * time.Millisecond
	if s, err = sim.New(cfg); err != nil {
		t.Fatal(err)
	}
	tp := cfg.Topology
	x, c = tp.DataNodes(0)[0], tp.DataNodes(1)[0]
	return s, x, c, prototest.KeysOn(t, tp, x, prefix, 1)[0], prototest.KeysOn(t, tp, c, "rec", 1)[0]
}

// durableHas reports whether node's durable state holds a version of key (any key with it as
// a substring: the store's encoding keeps the key's bytes).
func durableHas(t *testing.T, s *sim.Sim, node topo.NodeID, key string) bool {
	t.Helper()
	found := false
	_ = s.Durable(node).Scan(nil, nil, func(k, _ []byte) bool {
		if bytes.Contains(k, []byte(key)) {
			found = true
			return false
		}
		return true
	})
	return found
}

// TestOwnWriteGoneAfterPushIsAPushAbort: a read of a key the transaction wrote finds its intent
// gone because an older writer's push aborted the transaction there, not because a crash lost
// it: the answer says so, and the transaction aborts as pushed (push-abort), not write-lost,
// which is kept for writes a crash took (18 of a fault-free read-back run's aborts were
// labelled write-lost).
func TestOwnWriteGoneAfterPushIsAPushAbort(t *testing.T) {
	g := newGCScript(t, false)
	meta := TxnMeta{ID: g.txn, Age: g.at, RecordNode: g.n.self, Coord: g.c}
	g.writeAnswer(&WriteReq{Req: 1, Txn: meta, Key: g.kh, Value: []byte("v"), WriteTS: g.at, CreateRecord: true})
	g.deliver(g.l, &ResolveReq{Txn: g.txn, Keys: []string{g.kh}, Commit: false, Record: g.n.self}) // the pusher's resolution
	read := &ReadReq{Req: 2, Txn: meta, Key: g.kh, ReadTS: g.at, Limit: g.at, OwnWrite: true}
	var got *ReadResp
	for _, s := range g.deliver(g.c, read) {
		if r, ok := s.M.(*ReadResp); ok && r.Req == read.Req {
			got = r
		}
	}
	if got == nil || !got.WriteLost || !got.Aborted {
		t.Fatalf("read of its own aborted write: %+v, want WriteLost and Aborted", got)
	}
	if n := g.n.m.Counters["read/own-write-lost"]; n != 0 {
		t.Errorf("read/own-write-lost = %d, want 0: it counts writes a crash lost", n)
	}
}
