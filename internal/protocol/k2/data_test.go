package k2

import (
	"testing"
	"time"

	"github.com/meridiandb/meridian/internal/node/nodetest"
	"github.com/meridiandb/meridian/internal/protocol/prototest"
	"github.com/meridiandb/meridian/internal/storage"
	"github.com/meridiandb/meridian/internal/storage/durable"
	"github.com/meridiandb/meridian/internal/storage/mvcc"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/ts"
)

// newScriptNode builds the first data node of region 0 of the protocol tests' deployment on a
// scriptEnv, with its incarnation persisted (ready to coordinate and serve).
func newScriptNode(t *testing.T, opts map[string]string) (*Node, *nodetest.ScriptEnv) {
	t.Helper()
	n, env := newStartingScriptNode(t, opts)
	env.Flush()
	return n, env
}

// newStartingScriptNode is newScriptNode before its incarnation's flush.
func newStartingScriptNode(t *testing.T, opts map[string]string) (*Node, *nodetest.ScriptEnv) {
	t.Helper()
	tp, c := scriptDeployment(t, opts)
	n, env := nodeOnDisk(t, tp, tp.DataNodes(0)[0], c, durable.NewMem(), int64(time.Second))
	env.Disk = nil // persists stay in memory: nothing restarts from it
	return n, env
}

// scriptDeployment is the protocol tests' deployment and k2's configuration under opts, with a
// 100 µs ε, for nodes a test builds by hand on a ScriptEnv.
func scriptDeployment(t *testing.T, opts map[string]string) (*topo.Topology, config) {
	t.Helper()
	cfg, err := prototest.SimConfig(prototest.Case{Protocol: "k2", Options: opts, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	c, err := parseConfig(100*time.Microsecond, 0, opts)
	if err != nil {
		t.Fatal(err)
	}
	return cfg.Topology, c
}

// nodeOnDisk starts node self of tp on disk, its clock reading clock, before its incarnation's
// flush: one life of the node, and a later call on the same disk its restart.
func nodeOnDisk(t *testing.T, tp *topo.Topology, self topo.NodeID, c config, disk *durable.Mem, clock int64) (*Node, *nodetest.ScriptEnv) {
	t.Helper()
	env := &nodetest.ScriptEnv{ID: self, Topo: tp, Clock: clock, Epsilon: 100 * time.Microsecond, Disk: disk}
	n, err := newNode(env, disk, c)
	if err != nil {
		t.Fatal(err)
	}
	return n, env
}

// ownIntent returns the value and write sequence number of txn's intent on key at n.
func ownIntent(t *testing.T, n *Node, key string, txn storage.TxnID) (string, uint32) {
	t.Helper()
	vis := n.store.VisibleAt(key, ts.Max, txn)
	if !vis.Found || vis.Version.Txn != txn || vis.Version.State != mvcc.Intent {
		t.Fatalf("no intent of the transaction on %s", key)
	}
	_, wseq, _ := decodeMeta(vis.Version.Meta)
	return string(vis.Version.Value), wseq
}

// TestStaleDuplicateWrite: a transaction writes a key twice (WSeq 1, then 2), and a copy of its
// first write arrives late, alone and inside a duplicated OpsReq. The node keeps the second
// write's intent (without the WSeq check the late copy put the first value back, and the
// transaction would commit it), answers nothing for the stale write but still answers the
// OpsReq's read, answers a late copy of the second write as the first copy was, and reports the
// second write durable once flushed.
func TestStaleDuplicateWrite(t *testing.T) {
	for _, pipelining := range []string{"on", "off"} {
		t.Run("pipelining-"+pipelining, func(t *testing.T) {
			n, env := newScriptNode(t, map[string]string{"write-pipelining": pipelining})
			tp := env.Topo
			coord := tp.DataNodes(1)[0]
			k := prototest.KeysOn(t, tp, n.self, "dup", 2)
			txn := storage.MakeTxnID(int32(coord), 1<<32|1)
			at := ts.Timestamp{Wall: env.Clock, Origin: uint32(coord)}
			first := WriteReq{ReqID: 1, Txn: txn, TS: at, Key: k[0], Value: []byte("first"), Recorder: n.self, CreateRecord: true, WSeq: 1}
			second := WriteReq{ReqID: 2, Txn: txn, TS: at, Key: k[0], Value: []byte("second"), Recorder: n.self, WSeq: 2}
			writeAnswers := func() []WriteResp {
				var out []WriteResp
				for _, s := range env.Take() {
					switch m := s.M.(type) {
					case *WriteResp:
						out = append(out, *m)
					case *OpsResp:
						out = append(out, m.Writes...)
					}
				}
				return out
			}

			n.Handle(coord, &first)
			env.Flush()
			n.Handle(coord, &second)
			env.Flush()
			if got := writeAnswers(); len(got) != 2 || got[0].Aborted || got[1].Aborted {
				t.Fatalf("answers to the two writes: %+v", got)
			}

			// The late copy of the first write, alone.
			n.Handle(coord, &first)
			env.Flush()
			if got := writeAnswers(); len(got) != 0 {
				t.Errorf("the stale write was answered: %+v", got)
			}
			if v, wseq := ownIntent(t, n, k[0], txn); v != "second" || wseq != 2 {
				t.Fatalf("after a late copy of write 1 the intent holds %q (write %d), want %q (write 2)", v, wseq, "second")
			}

			// A duplicated OpsReq holding the first write and a read of another key: the read is
			// answered, the stale write is not.
			n.Handle(coord, &OpsReq{Writes: []WriteReq{first}, Reads: []ReadReq{{ReqID: 3, Txn: txn, TS: at, Key: k[1]}}})
			env.Flush()
			var reads, writes int
			for _, s := range env.Take() {
				if m, ok := s.M.(*OpsResp); ok {
					reads, writes = reads+len(m.Reads), writes+len(m.Writes)
				}
			}
			if reads != 1 || writes != 0 {
				t.Errorf("a duplicated OpsReq got %d read and %d write answers, want 1 and 0", reads, writes)
			}
			if v, wseq := ownIntent(t, n, k[0], txn); v != "second" || wseq != 2 {
				t.Fatalf("after a duplicated OpsReq the intent holds %q (write %d), want %q (write 2)", v, wseq, "second")
			}

			// A late copy of the second write: answered as the first copy was, nothing changed.
			n.Handle(coord, &second)
			if pipelining == "off" {
				if got := writeAnswers(); len(got) != 0 {
					t.Errorf("without pipelining a copy of a write was answered before a flush: %+v", got)
				}
			}
			env.Flush()
			if got := writeAnswers(); len(got) != 1 || got[0].ReqID != 2 || got[0].Aborted || got[0].Pending {
				t.Errorf("answers to a copy of the durable write 2: %+v, want one, not aborted, not pending", got)
			}

			n.Handle(coord, &DurableReq{Txn: txn, Writes: []WriteRef{{Key: k[0], WSeq: 2}}})
			env.Flush()
			var durable []WriteDurable
			for _, s := range env.Take() {
				if m, ok := s.M.(*WriteDurable); ok {
					durable = append(durable, *m)
				}
			}
			if len(durable) != 1 || durable[0].Lost || len(durable[0].WSeqs) != 1 || durable[0].WSeqs[0] != 2 {
				t.Errorf("durability of write 2: %+v, want write 2 durable", durable)
			}
		})
	}
}

// TestNothingServedBeforeIncarnationDurable: a node that crashes before its first incarnation is
// durable restarts as new, without the recovery read floor, so its first life must not have set
// a read watermark: a read that arrives before the incarnation's flush is held and served only
// after it.
func TestNothingServedBeforeIncarnationDurable(t *testing.T) {
	n, env := newStartingScriptNode(t, nil)
	coord := env.Topo.DataNodes(1)[0]
	k := prototest.KeysOn(t, env.Topo, n.self, "early", 1)
	read := &ReadReq{ReqID: 7, Txn: storage.MakeTxnID(int32(coord), 1<<32|1), TS: ts.Timestamp{Wall: env.Clock, Origin: uint32(coord)}, Key: k[0]}
	answered := func() bool {
		for _, s := range env.Take() {
			if r, ok := s.M.(*ReadResp); ok && r.ReqID == read.ReqID {
				return true
			}
		}
		return false
	}
	n.Handle(coord, read)
	if answered() {
		t.Fatal("a read was served before the node's incarnation was durable")
	}
	env.Flush()
	if !answered() {
		t.Fatal("the held read was not served once the incarnation was durable")
	}
}
