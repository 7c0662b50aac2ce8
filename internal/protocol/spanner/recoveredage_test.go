package spanner

import (
	"testing"
	"time"

	"github.com/meridiandb/meridian/internal/bench"
	"github.com/meridiandb/meridian/internal/node"
	"github.com/meridiandb/meridian/internal/node/nodetest"
	"github.com/meridiandb/meridian/internal/protocol"
	"github.com/meridiandb/meridian/internal/protocol/prototest"
	"github.com/meridiandb/meridian/internal/sim"
	"github.com/meridiandb/meridian/internal/storage"
	"github.com/meridiandb/meridian/internal/storage/durable"
	"github.com/meridiandb/meridian/internal/storage/locks"
	"github.com/meridiandb/meridian/internal/storage/mvcc"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/ts"
)

// wounds returns the transactions msgs wound, by the node the WoundReq went to.
func wounds(msgs []nodetest.Sent) map[storage.TxnID]node.ID {
	out := map[storage.TxnID]node.ID{}
	for _, s := range msgs {
		if w, ok := s.M.(*WoundReq); ok {
			out[w.Txn] = s.To
		}
	}
	return out
}

// TestRecoveredLocksKeepTheirAge: the locks a restarted participant takes back for a prepared
// transaction carry that transaction's age, so under wound-wait an older requester still wounds
// it (its coordinator aborts it unless it decided already) while a younger one waits. Taken back
// at age zero they were older than everything, nobody wounded them, and an older transaction
// waited for a younger one that was itself still waiting for locks at another participant: the
// fault sweep's list-append seed 33 (--loss 0.02 --duplicate 0.1 --partition 'SH|BJ@2s/1s'
// --crash gz-1@3s/300ms) deadlocked that way for good. Both kinds of prepared transaction are
// covered: a writer, whose intent brings back an exclusive lock, and a read-only voter, whose
// read-vote record brings back a shared one. The age records go with the decision.
func TestRecoveredLocksKeepTheirAge(t *testing.T) {
	for _, kind := range []string{"writer", "read-only"} {
		t.Run(kind, func(t *testing.T) {
			disk := durable.NewMem()
			env := &nodetest.ScriptEnv{ID: 1, Clock: int64(time.Second), Epsilon: time.Millisecond, Disk: disk}
			c := Config{Policy: locks.WoundWait, CommitWait: true, IdleTimeout: 5 * time.Second, DecisionTimeout: 500 * time.Millisecond}
			p := newParticipant(env, c, protocol.NewMetrics(), mvcc.New(mvcc.Options{SingleIntent: true}))
			const coord node.ID = 4
			prepared := storage.MakeTxnID(int32(coord), 1)
			age := ts.Timestamp{Wall: 100}
			p.onRead(coord, &ReadReq{Txn: prepared, Age: age, Key: "k"})
			prep := &PrepareReq{Txn: prepared, Age: age, Seen: 1}
			if kind == "writer" {
				prep.Writes = []Write{{Key: "k", Value: []byte("v")}}
			}
			p.onPrepare(coord, prep)
			env.Flush()
			if v := votes(env.Take())[prepared]; v == nil || !v.OK {
				t.Fatalf("no yes vote: %+v", v)
			}

			env2 := &nodetest.ScriptEnv{ID: 1, Clock: env.Clock + int64(time.Second), Epsilon: time.Millisecond, Disk: disk}
			store, err := mvcc.Recover(disk, mvcc.Options{SingleIntent: true})
			if err != nil {
				t.Fatal(err)
			}
			p2 := newParticipant(env2, c, protocol.NewMetrics(), store)
			if err := p2.recover(disk); err != nil {
				t.Fatal(err)
			}
			env2.Take()
			// A younger transaction's conflicting request waits without a wound; an older one's
			// wounds the recovered transaction. A writer's intent conflicts with a read, a read
			// lock with a write.
			conflict := func(id storage.TxnID, a ts.Timestamp) {
				if kind == "writer" {
					p2.onRead(2, &ReadReq{Txn: id, Age: a, Key: "k"})
				} else {
					p2.onPrepare(2, &PrepareReq{Txn: id, Age: a, Writes: []Write{{Key: "k", Value: []byte("w")}}})
				}
			}
			conflict(storage.MakeTxnID(2, 1), ts.Timestamp{Wall: 200})
			if to, ok := wounds(env2.Take())[prepared]; ok {
				t.Fatalf("a younger transaction wounded the recovered one (WoundReq to %d)", to)
			}
			conflict(storage.MakeTxnID(2, 2), ts.Timestamp{Wall: 50})
			if to, ok := wounds(env2.Take())[prepared]; !ok || to != coord {
				t.Fatalf("an older transaction waits for the recovered one without wounding it (WoundReq sent %v, to %d): its locks came back older than it", ok, to)
			}

			p2.onDecide(coord, &DecideReq{Txn: prepared, Commit: false})
			env2.Flush()
			// The younger writer prepared once the lock went, and keeps its own record.
			if err := disk.Scan(prepareAgePrefix, prepareAgeEnd, func(k, _ []byte) bool {
				if id, _ := recordTxn(prepareAgePrefix, k); id == prepared {
					t.Errorf("the decided transaction's prepare-age record is left on disk")
				}
				return true
			}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestCorruptPrepareAgeRefused: a prepare-age record that does not decode stops the restart, as
// a corrupt read-vote record does, rather than take locks back under a made-up age.
func TestCorruptPrepareAgeRefused(t *testing.T) {
	disk := durable.NewMem()
	if err := disk.Apply([]node.Write{{Key: recordKey(prepareAgePrefix, storage.MakeTxnID(4, 1)), Value: []byte{0xff}}}); err != nil {
		t.Fatal(err)
	}
	p, _ := newScriptParticipant(t, locks.WoundWait)
	if err := p.recover(disk); err == nil {
		t.Fatal("recovered from a corrupt prepare-age record")
	}
}

// TestFaultSweepSeed33Drains pins the fault-sweep run behind TestRecoveredLocksKeepTheirAge as
// the CLI runs it (meridian sim --protocol spanner --workload list-append --seed 33 --loss 0.02
// --duplicate 0.1 --partition 'SH|BJ@2s/1s' --crash gz-1@3s/300ms: CLI defaults, 10 clients per
// region, 1 s warm-up, 5 s window): every client's transaction ends well before the drain's
// 30 s limit. Before, a wound-wait cycle through a lock gz-1 took back at restart kept 46 of
// the 50 clients inside a transaction until the limit (36.0 virtual s, 115 committed, 189
// transactions without an outcome); now 6.9 s, 181 committed, and the 143 without an outcome
// are gz-1's own clients' attempts while it was down and one whose answer its crash lost.
func TestFaultSweepSeed33Drains(t *testing.T) {
	base := sim.DefaultConfig()
	l := topo.DefaultLayout()
	cfg, err := bench.SimConfig(bench.Deployment{Protocol: Name, Topology: "k2-5region",
		NodesPerRegion: l.NodesPerRegion, ShardsPerNode: l.ShardsPerNode, Seed: 33, Base: &base})
	if err != nil {
		t.Fatal(err)
	}
	tp := cfg.Topology
	wl, err := bench.BuildWorkload(tp, bench.DefaultWorkloadParams("list-append"))
	if err != nil {
		t.Fatal(err)
	}
	crash, err := bench.ParseCrash(tp, "gz-1@3s/300ms")
	if err != nil {
		t.Fatal(err)
	}
	cut, err := bench.ParsePartition(tp, "SH|BJ@2s/1s")
	if err != nil {
		t.Fatal(err)
	}
	res, err := bench.SimRun(cfg, bench.Spec{Workload: wl, ClientsPerRegion: 10, Warmup: time.Second, Duration: 5 * time.Second,
		Record: true, Crashes: []bench.Crash{crash}, Network: bench.NetFaults{Loss: 0.02, Duplicate: 0.1,
			DuplicateDelay: sim.DefaultDuplicateDelay, Partitions: []bench.Partition{cut}}})
	if err != nil {
		t.Fatal(err)
	}
	rep := prototest.MustCheck(t, res, "strict-serializable")
	t.Logf("committed %d, unfinished %d, virtual %.1f s, digest %s", res.Committed, rep.Counts.Info, res.VirtualSeconds, res.TraceDigest)
	// Window end (6 s) plus the crashed gz-1's own clients' unavailable attempts and a few
	// keep-alive periods: far below the drain's limit at 36 s.
	if res.VirtualSeconds > 20 {
		t.Errorf("the run drained until %.1f virtual s: a client still waited for its transaction", res.VirtualSeconds)
	}
	prototest.ExpectValid(t, rep, 100)
}
