package k2

import (
	"errors"
	"testing"
	"time"

	"github.com/meridiandb/meridian/client"
	"github.com/meridiandb/meridian/internal/bench"
	"github.com/meridiandb/meridian/internal/protocol/prototest"
	"github.com/meridiandb/meridian/internal/sim"
)

// TestLostOpCostsBoundedDelay: a client of coordinator C (SH) reads or writes a key led by X
// (BJ) while the link between them is cut for a moment, losing the request or its answer. The
// operation must still succeed, about a retransmission timeout after it was sent (the probe
// finds it missing and sends it again), not abort at op-timeout (2 s) as it did.
func TestLostOpCostsBoundedDelay(t *testing.T) {
	for _, tc := range []struct {
		name          string
		write, answer bool
	}{{"read", false, false}, {"read-answer", false, true}, {"write", true, false}, {"write-answer", true, true}} {
		t.Run(tc.name, func(t *testing.T) {
			s := prototest.NewSim(t, prototest.Case{Protocol: "k2", Seed: 1})
			defer s.Stop()
			tp := s.Topology()
			c, x := tp.DataNodes(0)[0], tp.DataNodes(1)[0]
			k := prototest.KeysOn(t, tp, x, "lost", 1)[0]
			oneWay := tp.OneWay(tp.RegionOf(c), tp.RegionOf(x))
			var took time.Duration
			var opErr error
			done := false
			s.AddClient(0, c, int64(100*time.Millisecond), func(db *client.DB) {
				defer func() { done = true }()
				tx := db.Begin(client.TxnOptions{})
				if _, err := tx.GetMany([]string{"warm"}); err != nil { // the timestamp first, so the cut hits the operation
					opErr = err
					return
				}
				from, until := s.Now(), s.Now()+int64(oneWay)/2
				if tc.answer {
					from, until = s.Now()+int64(oneWay)/2, s.Now()+3*int64(oneWay)/2
				}
				s.At(from, func() { s.PartitionNodes(c, x) })
				s.At(until, func() { s.Heal() })
				start := s.Now()
				if tc.write {
					opErr = tx.Put(k, []byte("v"))
				} else if _, err := tx.Get(k); err != nil && !errors.Is(err, client.ErrNotFound) {
					opErr = err
				}
				took = time.Duration(s.Now() - start)
				if opErr == nil {
					opErr = tx.Commit()
				}
			})
			s.RunUntil(int64(10 * time.Second))
			if !done || opErr != nil {
				t.Fatalf("done %v, err %v", done, opErr)
			}
			n := s.Handler(c).(*Node)
			rto := n.rto(x)
			if took > rto+6*oneWay || took < rto {
				t.Errorf("the operation took %v; want one retransmission timeout (%v) and two round trips (probe, resend)", took, rto)
			}
			if got := n.Metrics().Counters["op.resent"]; got != 1 {
				t.Errorf("op.resent = %d, want 1", got)
			}
			t.Logf("%s: %v (rto %v, one way %v)", tc.name, took, rto, oneWay)
		})
	}
}

// TestLossyNetworkCommits: under 2% loss between nodes almost no transaction waits out
// op-timeout any more: a lost operation is found by its probe and sent again.
func TestLossyNetworkCommits(t *testing.T) {
	for seed := uint64(1); seed <= 3; seed++ {
		res := prototest.Run(t, prototest.Case{Protocol: "k2", Seed: seed, Clients: 10, Duration: 5 * time.Second,
			Workload: prototest.ListAppend(0, 0.5), Faults: func(s *sim.Sim, _ bench.Window) {
				s.SetClientLinksReliable(true)
				s.SetLoss(0.02)
			}})
		rep := prototest.MustCheck(t, res, "strict-serializable")
		prototest.ExpectValid(t, rep, 100)
		timeouts := res.AbortsByCause["timeout"]
		t.Logf("seed %d: %d committed, %d aborted on timeout", seed, res.Committed, timeouts)
		if timeouts*20 > res.Committed {
			t.Errorf("seed %d: %d timeouts for %d commits: lost operations wait out op-timeout", seed, timeouts, res.Committed)
		}
	}
}

// TestLostFirstOpsRespFoundWhileRestWaits: a batch sends data node X two reads; one is
// answered at once (the first OpsResp), the other parks on PUSHWS behind a writer that commits
// a second later. The first OpsResp is lost. X must tell the loss probe that the answered read
// is not held, so that it is sent again about a retransmission timeout after the batch went
// out; holding it with the parked read hid the loss until the writer committed and one more,
// doubled, timeout passed (here ~1.9 s, against op-timeout's 2 s).
func TestLostFirstOpsRespFoundWhileRestWaits(t *testing.T) {
	s := prototest.NewSim(t, prototest.Case{Protocol: "k2", Seed: 1})
	defer s.Stop()
	tp := s.Topology()
	c, x := tp.DataNodes(0)[0], tp.DataNodes(1)[0]
	k := prototest.KeysOn(t, tp, x, "parked", 2)
	warm := prototest.KeysOn(t, tp, c, "warm", 1)[0]
	oneWay := tp.OneWay(tp.RegionOf(c), tp.RegionOf(x))
	var fail failures
	var committed int64
	s.AddClient(1, x, 100*ms, func(db *client.DB) {
		tx := db.Begin(client.TxnOptions{})
		if err := tx.Put(k[0], []byte("held")); err != nil {
			fail.add("holder: %v", err)
			return
		}
		db.Transport().Sleep(time.Second)
		if err := tx.Commit(); err != nil {
			fail.add("holder commit: %v", err)
		}
		committed = s.Now()
	})
	var start, end int64
	s.AddClient(0, c, 200*ms, func(db *client.DB) {
		tx := db.Begin(client.TxnOptions{})
		if _, err := tx.GetMany([]string{warm}); err != nil { // the timestamp first, above the holder's
			fail.add("warm read: %v", err)
			return
		}
		start = s.Now()
		s.At(start+int64(oneWay)/2, func() { s.PartitionNodes(c, x) }) // loses the first OpsResp
		s.At(start+3*int64(oneWay)/2, func() { s.Heal() })
		got, err := tx.GetMany(k)
		end = s.Now()
		if err != nil {
			fail.add("batch read: %v", err)
			return
		}
		if len(got) != 2 || string(got[0].Value) != "held" {
			fail.add("batch read returned %+v", got)
		}
		if err := tx.Commit(); err != nil {
			fail.add("reader commit: %v", err)
		}
	})
	s.RunUntil(int64(10 * time.Second))
	fail.report(t)
	n := s.Handler(c).(*Node)
	rto := n.rto(x)
	t.Logf("batch read took %v; the holder committed %v after it began (rto %v)", time.Duration(end-start), time.Duration(committed-start), rto)
	if end == 0 || committed == 0 {
		t.Fatal("the scenario did not run to its end")
	}
	if late := time.Duration(end - committed); late > rto {
		t.Errorf("the batch was answered %v after the parked read could be: the lost answer was found only after the rest", late)
	}
	if got := n.Metrics().Counters["op.resent"]; got != 1 {
		t.Errorf("op.resent = %d, want 1", got)
	}
}
