package k2

import (
	"errors"
	"testing"
	"time"

	"github.com/meridiandb/meridian/client"
	"github.com/meridiandb/meridian/internal/bench"
	"github.com/meridiandb/meridian/internal/node"
	"github.com/meridiandb/meridian/internal/protocol/prototest"
	"github.com/meridiandb/meridian/internal/sim"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/wire"
	"github.com/meridiandb/meridian/internal/workload/ycsbt"
)

// Scenarios around a data node's crash as its coordinators see it: a node that restarts says
// so (Restarted), a coordinator with operations out there probes it once (OpsProbe), and what
// the crash lost aborts the transaction (op-lost). Nothing of this happens without a crash.

// TestOpsLostWithDataNode: a data node crashes while a transaction's operation is out at it (a
// read parked on PUSHWS, or a write waiting for its flush without pipelining), or the operation
// is sent while the node is down. It is lost and will never be answered. A node that restarts
// tells the coordinator, whose probe hears the operation is missing: the transaction aborts
// (op-lost) a few WAN trips after the restart, the write is not applied, and a retry commits.
// A node that stays down says nothing, and nothing guesses that a silent node is dead (a guess
// aborted healthy transactions whenever a WAN request outlasted it): the transaction waits out
// op-timeout (cause "timeout"), as before crashes were noticed at all.
func TestOpsLostWithDataNode(t *testing.T) {
	const opTimeout = 2 * time.Second
	const crashAt = 300 * ms
	for _, c := range []struct {
		name  string
		write bool
		// sendAt, if set, is when the operation is sent; else as soon as the transaction has its
		// timestamp, before the crash.
		sendAt int64
		// restarts are the node's restarts, each preceded by a crash (the first at crashAt, the
		// next ones 2 ms after the previous restart); none: the node stays down.
		restarts  []int64
		wantCause string
	}{
		{name: "parked-read/restart", restarts: []int64{350 * ms}, wantCause: "op-lost"},
		// The probe answering the first notice reaches a node that crashed again; the second
		// notice's probe tells.
		{name: "parked-read/restart-twice", restarts: []int64{350 * ms, 420 * ms}, wantCause: "op-lost"},
		{name: "parked-read/down", wantCause: "timeout"},
		{name: "write-in-flush/restart", write: true, sendAt: crashAt - 60*ms, restarts: []int64{350 * ms}, wantCause: "op-lost"},
		{name: "write-in-flush/down", write: true, sendAt: crashAt - 60*ms, wantCause: "timeout"},
		// Sent to the node while it is down: the new life never received it.
		{name: "read-sent-while-down/restart", sendAt: crashAt + 20*ms, restarts: []int64{400 * ms}, wantCause: "op-lost"},
	} {
		t.Run(c.name, func(t *testing.T) {
			opts := map[string]string{"op-timeout": opTimeout.String()}
			edit := func(*sim.Config) {}
			if c.write {
				// The write is answered only once durable, and its flush outlasts the crash.
				opts["write-pipelining"] = "off"
				edit = func(cfg *sim.Config) { cfg.FlushLatency = 200 * time.Millisecond }
			}
			s := newScript(t, opts, edit)
			tp := s.Topology()
			coord, d, holder := tp.DataNodes(0)[0], tp.DataNodes(1)[0], tp.DataNodes(2)[0]
			k := prototest.KeysOn(t, tp, d, "lost", 2)
			var fail failures
			if !c.write {
				// The holder's commit fails with its recorder (d) down: not what is tested.
				var holderFail failures
				holdIntents(s, 2, holder, 100*ms, time.Second, k[:1], &holderFail)
			}
			s.At(crashAt, func() { s.Crash(d) })
			for i, at := range c.restarts {
				if i > 0 {
					s.At(c.restarts[i-1]+2*ms, func() { s.Crash(d) })
				}
				s.At(at, func() {
					if err := s.Restart(d); err != nil {
						fail.add("restart: %v", err)
					}
				})
			}
			var sent, took int64
			var cause string
			s.AddClient(0, coord, 200*ms, func(db *client.DB) {
				tx := db.Begin(client.TxnOptions{})
				if _, err := tx.GetMany(k[1:]); err != nil { // takes the timestamp
					fail.add("first read: %v", err)
					return
				}
				if c.sendAt > 0 {
					db.Transport().Sleep(time.Duration(c.sendAt-db.Transport().Now()) * time.Nanosecond)
				}
				sent = db.Transport().Now()
				var err error
				if c.write {
					err = tx.Put(k[0], []byte("lost"))
				} else {
					_, err = tx.GetMany(k[:1])
				}
				took = db.Transport().Now() - sent
				var ae *client.AbortError
				if !errors.As(err, &ae) {
					fail.add("operation at the crashed node: %v, want an abort", err)
					return
				}
				cause = ae.Cause
				if len(c.restarts) == 0 || !c.write {
					return
				}
				// The lost write was not applied, and the transaction can be run again.
				err = client.RunTxn(db, client.TxnOptions{}, func(tx *client.Txn) error { return tx.Put(k[0], []byte("retried")) })
				if err != nil {
					fail.add("retry: %v", err)
					return
				}
				err = client.RunTxn(db, client.TxnOptions{ReadOnly: true}, func(tx *client.Txn) error {
					v, err := tx.Get(k[0])
					if err == nil && string(v) != "retried" {
						fail.add("read back %q, want %q", v, "retried")
					}
					return err
				})
				if err != nil {
					fail.add("read back: %v", err)
				}
			})
			s.RunUntil(4 * int64(time.Second))
			fail.report(t)
			probes := s.Handler(coord).(*Node).m.Snapshot().Counters["probe"]
			t.Logf("operation sent at %.1f ms, node %d crashed at %.0f ms, restarted at %v ms; aborted after %.1f ms, cause %q, %d probes",
				float64(sent)/1e6, d, float64(crashAt)/1e6, msList(c.restarts), float64(took)/1e6, cause, probes)
			if took == 0 || (c.sendAt == 0 && sent >= crashAt) || (c.sendAt > crashAt && sent < crashAt) {
				t.Fatalf("the operation was not sent when the scenario needs: it tests nothing")
			}
			if cause != c.wantCause {
				t.Fatalf("aborted after %.1f ms with cause %q, want %q", float64(took)/1e6, cause, c.wantCause)
			}
			if len(c.restarts) == 0 {
				// No restart, no notice, no probe: the one timer decides.
				if took < int64(opTimeout) || took > int64(opTimeout)+5*ms || probes != 0 {
					t.Errorf("aborted after %.1f ms with %d probes; want op-timeout (%v) and none", float64(took)/1e6, probes, opTimeout)
				}
				return
			}
			// The last restart's notice, not a timer, ended the transaction: after the restart,
			// within the WAN trips of the notice, the probe and its answer (region 1 is 13.7 ms
			// away), and with one probe per notice.
			last := c.restarts[len(c.restarts)-1]
			if end := sent + took; end < last || end > last+60*ms || took > int64(opTimeout)/4 || probes != int64(len(c.restarts)) {
				t.Errorf("aborted at %.1f ms (%.1f ms after the last restart) with %d probes; want within 60 ms of the restart at %.0f ms, with %d",
					float64(end)/1e6, float64(end-last)/1e6, probes, float64(last)/1e6, len(c.restarts))
			}
		})
	}
}

func msList(ns []int64) []float64 {
	out := make([]float64, len(ns))
	for i, v := range ns {
		out[i] = float64(v) / 1e6
	}
	return out
}

// TestOpsProbedWhileRecovering: a transaction's reads are sent to a data node while it is down
// and arrive once it has restarted, while it holds every request until its read floor is set,
// here for most of a second (its oracle is cut off). The node's restart notice reaches the
// coordinator while the reads are out, and its probe reaches the node while it recovers: the
// node must count the held reads as held, or the transaction would abort as if they were lost.
// It commits once the node recovers.
func TestOpsProbedWhileRecovering(t *testing.T) {
	s := newScript(t, nil, nil)
	tp := s.Topology()
	coord, d := tp.DataNodes(0)[0], tp.DataNodes(1)[0]
	k := prototest.KeysOn(t, tp, d, "probed", 2)
	var fail failures
	const restartAt = 150 * ms
	s.At(100*ms, func() { s.Crash(d) })
	s.At(restartAt, func() {
		s.PartitionNodes(d, tp.Oracle(1))
		if err := s.Restart(d); err != nil {
			fail.add("restart: %v", err)
		}
	})
	s.At(restartAt+40*ms, func() {
		n := s.Handler(d).(*Node)
		if !n.recovering || len(n.held) == 0 {
			fail.add("node %d recovering %v, holding %d requests: the scenario tests nothing", d, n.recovering, len(n.held))
		}
	})
	s.At(1000*ms, s.Heal)
	var sent, took int64
	s.AddClient(0, coord, 140*ms, func(db *client.DB) {
		tx := db.Begin(client.TxnOptions{})
		sent = db.Transport().Now()
		// Reads only: the node's read floor, once set, refuses writes of a timestamp this old.
		_, err := tx.GetMany(k)
		took = db.Transport().Now() - sent
		if err == nil {
			err = tx.Commit()
		}
		if err != nil {
			fail.add("batch held during recovery: %v", err)
		}
	})
	s.RunUntil(3 * int64(time.Second))
	fail.report(t)
	probes := s.Handler(coord).(*Node).m.Snapshot().Counters["probe"]
	t.Logf("batch sent at %.1f ms, answered after %.1f ms, %d probes", float64(sent)/1e6, float64(took)/1e6, probes)
	if sent >= restartAt || took < 700*ms || probes != 1 {
		t.Errorf("batch sent at %.1f ms, answered after %.1f ms with %d probes: want sent before the restart, held, and probed once",
			float64(sent)/1e6, float64(took)/1e6, probes)
	}
}

// TestOpsToNewLifeUnaffected: operations that reach a data node after it restarted are the new
// life's, whatever the coordinator knew when it sent them. Here each is sent after the restart
// and before its notice reaches the coordinator, and it waits at the node (a read parked on
// PUSHWS, alone or in an OpsReq; a write waiting for its flush) when the notice's probe
// arrives: the node holds it, and the transaction commits.
func TestOpsToNewLifeUnaffected(t *testing.T) {
	const restartAt = 350 * ms
	for _, c := range []struct {
		name  string
		write bool
		keys  int
	}{
		{name: "read", keys: 1},
		{name: "batch-of-reads", keys: 2},
		{name: "write-in-flush", write: true, keys: 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			var opts map[string]string
			edit := func(*sim.Config) {}
			if c.write {
				opts = map[string]string{"write-pipelining": "off"}
				edit = func(cfg *sim.Config) { cfg.FlushLatency = 100 * time.Millisecond }
			}
			s := newScript(t, opts, edit)
			tp := s.Topology()
			coord, d, holder := tp.DataNodes(0)[0], tp.DataNodes(1)[0], tp.DataNodes(2)[0]
			k := prototest.KeysOn(t, tp, d, "newlife", c.keys)
			var fail failures
			if !c.write {
				var holderFail failures // its recorder restarts under it: not what is tested
				holdIntents(s, 2, holder, 100*ms, 700*time.Millisecond, k, &holderFail)
			}
			s.At(300*ms, func() { s.Crash(d) })
			s.At(restartAt, func() {
				if err := s.Restart(d); err != nil {
					fail.add("restart: %v", err)
				}
			})
			var sent, took int64
			s.AddClient(0, coord, restartAt+2*ms, func(db *client.DB) {
				err := client.RunTxn(db, client.TxnOptions{}, func(tx *client.Txn) error {
					start := db.Transport().Now()
					var err error
					switch {
					case c.write:
						err = tx.Put(k[0], []byte("new-life"))
					case c.keys == 1:
						_, err = tx.Get(k[0])
					default:
						_, err = tx.GetMany(k)
					}
					if sent == 0 { // the first try: a retry would hide an abort
						sent, took = start, db.Transport().Now()-start
					}
					return err
				})
				if err != nil {
					fail.add("transaction: %v", err)
				}
			})
			s.RunUntil(3 * int64(time.Second))
			fail.report(t)
			m := s.Handler(coord).(*Node).m.Snapshot().Counters
			t.Logf("sent at %.1f ms, answered after %.1f ms; %d probes, %d op-lost aborts", float64(sent)/1e6, float64(took)/1e6, m["probe"], m["abort.op-lost"])
			// The notice reaches the coordinator one WAN trip (13.7 ms) after the restart, and
			// its probe the node another trip later: the operation must still wait then.
			if m["probe"] != 1 || m["abort.op-lost"] != 0 {
				t.Fatalf("%d probes and %d op-lost aborts; want 1 probe and no abort", m["probe"], m["abort.op-lost"])
			}
			if sent < restartAt || sent > restartAt+10*ms || took < 50*ms {
				t.Errorf("the operation was not waiting at the new life when the probe came: the scenario tests nothing")
			}
		})
	}
}

// countingProto is k2 with the messages its nodes send counted by kind.
type countingProto struct {
	proto
	sent map[wire.Kind]int
}

func (p countingProto) NewNode(cfg node.Config) (node.Handler, error) {
	cfg.Env = countingEnv{Env: cfg.Env, sent: p.sent}
	return p.proto.NewNode(cfg)
}

type countingEnv struct {
	node.Env
	sent map[wire.Kind]int
}

func (e countingEnv) Send(to node.ID, m wire.Msg) {
	e.sent[m.Kind()]++
	e.Env.Send(to, m)
}

// crossRegionRun runs YCSB-T with every transaction crossing the WAN and op-timeout 240 ms,
// counting the messages k2 sends: a request's WAN round trip (27-78 ms on this topology) is a
// good part of op-timeout, the setting in which probing a node that merely answers slowly did
// harm. It returns the run's result, the messages sent, and the number of data nodes.
func crossRegionRun(t *testing.T, faults func(*sim.Sim, bench.Window)) (*bench.Result, map[wire.Kind]int, int) {
	t.Helper()
	opts := map[string]string{"op-timeout": "240ms"}
	cfg, err := prototest.SimConfig(prototest.Case{Protocol: "k2", Options: opts, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	sent := map[wire.Kind]int{}
	cfg.Protocol = countingProto{sent: sent}
	wl, err := prototest.YCSBT(0.8, func(c *ycsbt.Config) { c.RegionLocal, c.CrossRegionRatio = true, 1 })(cfg.Topology)
	if err != nil {
		t.Fatal(err)
	}
	res, err := bench.SimRun(cfg, bench.Spec{Workload: wl, ClientsPerRegion: 10, Warmup: prototest.Warmup,
		Duration: 2 * time.Second, Faults: faults})
	if err != nil {
		t.Fatal(err)
	}
	// A client of a crashed node loses the commit it had out there (outcome unknown) and finds
	// the node unreachable until it restarts, as over a reset connection; any other failure (a
	// timeout) is a transaction the protocol left hanging.
	if res.Committed < 500 || res.Failed > res.Unavailable+res.Unknown {
		t.Fatalf("committed %d, failed %d (%d finding the coordinator unreachable, %d with unknown outcome)",
			res.Committed, res.Failed, res.Unavailable, res.Unknown)
	}
	return res, sent, len(dataNodes(cfg.Topology))
}

// TestNoCrashNoProbes: crash detection costs a run without crashes nothing: no restart notice,
// no restart probe. Probing the nodes of operations still out every op-timeout/16 sent
// thousands here; the loss probes (lostops.go), which back off from a retransmission timeout,
// ask about the few operations slower than that (a WAN round trip is a good part of this
// run's 240 ms op-timeout) and abort nothing. The crashing run shows that the count sees
// restart probes: one notice to each other data node, and probes.
func TestNoCrashNoProbes(t *testing.T) {
	for _, c := range []struct {
		name   string
		faults func(*sim.Sim, bench.Window)
	}{
		{name: "no-crash"},
		{name: "crash", faults: prototest.CrashDataNode(1, 500*time.Millisecond, 200*time.Millisecond)},
	} {
		t.Run(c.name, func(t *testing.T) {
			res, sent, nodes := crossRegionRun(t, c.faults)
			notices, answers := sent[(&Restarted{}).Kind()], sent[(&OpsProbeResp{}).Kind()]
			probes, lossProbes := res.ProtocolMetrics.Counters["probe"], res.ProtocolMetrics.Counters["probe.loss"]
			read := res.ProtocolMetrics.Distributions["phase.read"]
			t.Logf("%d commits; phase.read p50 %.1f ms; %d restart notices; in the window %d restart probes, %d loss probes; %d probe answers in all; aborts %v",
				res.Committed, read.P50, notices, probes, lossProbes, answers, res.AbortsByCause)
			if read.P50 < 240.0/16 {
				t.Fatalf("phase.read p50 %.1f ms: requests are not out long enough for periodic probing to show", read.P50)
			}
			if c.faults == nil {
				if notices != 0 || probes != 0 || lossProbes*10 > res.Committed || res.AbortsByCause["op-lost"] != 0 {
					t.Errorf("a run without crashes sent %d restart notices, %d restart probes and %d loss probes for %d commits, and aborted %d op-lost; want no notice or restart probe, few loss probes, no op-lost",
						notices, probes, lossProbes, res.Committed, res.AbortsByCause["op-lost"])
				}
				return
			}
			if notices != nodes-1 || probes == 0 {
				t.Errorf("a run with one restart sent %d restart notices (want %d, one per other data node) and %d restart probes",
					notices, nodes-1, probes)
			}
		})
	}
}

// TestShortOpTimeoutNoFalseAborts: with op-timeout short next to the WAN (240 ms against round
// trips up to 78 ms) and no crash, every abort is K2-MVTO's conflict abort. Taking a node that
// left probes unanswered for op-timeout/4 (60 ms) for a dead one (node-silent) aborted a third
// of these transactions.
func TestShortOpTimeoutNoFalseAborts(t *testing.T) {
	res, _, _ := crossRegionRun(t, nil)
	t.Logf("%d commits, abort rate %.4f, aborts by cause %v", res.Committed, res.AbortRate, res.AbortsByCause)
	for cause, n := range res.AbortsByCause {
		if cause != "read-watermark" {
			t.Errorf("%d aborts with cause %q in a run without crashes", n, cause)
		}
	}
	if n := res.ProtocolMetrics.Counters["abort.op-lost"]; n != 0 {
		t.Errorf("%d op-lost aborts in a run without crashes", n)
	}
}

// TestServingEmptyWhenQuiet: a data node keeps the operations it holds unanswered (n.serving)
// so that a probe after its restart can tell them from lost ones; each leaves it when answered.
// Under contention (reads parked on PUSHWS, alone or in OpsReqs) and without write pipelining
// (writes waiting for their flush), the record fills during the run and is empty on every data
// node once the run has gone quiet: an entry left behind would be a leak for the node's life.
func TestServingEmptyWhenQuiet(t *testing.T) {
	for _, c := range []struct {
		name string
		opts map[string]string
	}{
		{name: "pipelined"},
		{name: "no-pipelining", opts: map[string]string{"write-pipelining": "off"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var s *sim.Sim
			most := 0
			res := prototest.Run(t, prototest.Case{Protocol: "k2", Seed: 1, Options: c.opts, Workload: prototest.ListAppend(10, 0.5),
				Duration: time.Second, Faults: func(sm *sim.Sim, w bench.Window) {
					s = sm
					for at := w.Start; at < w.End; at += ms {
						s.At(at, func() {
							for _, id := range dataNodes(s.Topology()) {
								most = max(most, len(s.Handler(id).(*Node).serving))
							}
						})
					}
				}})
			if res.Committed < 50 {
				t.Fatalf("%d commits: the run tests little", res.Committed)
			}
			// The clients are done; what they left (finalizations, parked reads of aborted
			// transactions, lease aborts) settles within a few leases.
			s.RunFor(5 * time.Second)
			left := map[topo.NodeID]int{}
			for _, id := range dataNodes(s.Topology()) {
				if n := len(s.Handler(id).(*Node).serving); n > 0 {
					left[id] = n
				}
			}
			t.Logf("%d commits; at most %d operations held unanswered at a node during the run; left when quiet: %v", res.Committed, most, left)
			if most == 0 {
				t.Fatalf("no operation was ever held unanswered: the run tests nothing")
			}
			if len(left) > 0 {
				t.Errorf("operations held unanswered after the run went quiet, by node: %v", left)
			}
		})
	}
}

// dataNodes lists every data node of a deployment.
func dataNodes(tp *topo.Topology) []topo.NodeID {
	var out []topo.NodeID
	for r := range tp.Regions {
		out = append(out, tp.DataNodes(topo.RegionID(r))...)
	}
	return out
}
