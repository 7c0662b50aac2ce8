package k2

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/meridiandb/meridian/internal/bench"
	"github.com/meridiandb/meridian/internal/check"
	"github.com/meridiandb/meridian/internal/history"
	"github.com/meridiandb/meridian/internal/protocol"
	"github.com/meridiandb/meridian/internal/protocol/prototest"
	"github.com/meridiandb/meridian/internal/sim"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/workload/ycsbt"
)

const model = "strict-serializable"

func skewOracle(region topo.RegionID, by time.Duration) func(s *sim.Sim, w bench.Window) {
	return func(s *sim.Sim, w bench.Window) {
		s.SkewClock(s.Topology().Oracle(region), by)
	}
}

// TestStrictSerializable runs checkable histories under contention from extreme (10 keys, every
// transaction crossing the WAN) to local hot spots, over several seeds, with the simulator's
// clock offsets and drift within the declared bounds.
func TestStrictSerializable(t *testing.T) {
	cases := []struct {
		name   string
		wl     prototest.Workload
		opts   map[string]string
		minOK  int
		faults func(s *sim.Sim, w bench.Window)
	}{
		{name: "10-keys-wan", wl: prototest.ListAppend(10, 0), minOK: 10},
		{name: "20-keys-local", wl: prototest.ListAppend(20, 0.8), minOK: 100},
		{name: "register", wl: prototest.Register(20, 0.8), minOK: 100},
		{name: "strawman-timestamps", wl: prototest.ListAppend(20, 0.8), opts: map[string]string{"ts-batching": "off"}, minOK: 100},
		{name: "no-mv-reads", wl: prototest.ListAppend(20, 0.8), opts: map[string]string{"mv-reads": "off"}, minOK: 50},
		{name: "one-intent-per-key", wl: prototest.ListAppend(20, 0.8), opts: map[string]string{"mv-writes": "off"}, minOK: 50},
		{name: "sync-finalize", wl: prototest.ListAppend(20, 0.8), opts: map[string]string{"async-finalize": "off"}, minOK: 100},
		{name: "crashes", wl: prototest.ListAppend(20, 0.8), minOK: 50, faults: prototest.Crashes(400*time.Millisecond,
			map[topo.NodeID]time.Duration{0: 300 * time.Millisecond, 2: 700 * time.Millisecond, 4: 1200 * time.Millisecond})},
	}
	for _, c := range cases {
		for _, seed := range []uint64{1, 2, 3} {
			t.Run(fmt.Sprintf("%s/seed-%d", c.name, seed), func(t *testing.T) {
				res := prototest.Run(t, prototest.Case{Protocol: "k2", Seed: seed, Options: c.opts, Workload: c.wl, Faults: c.faults})
				prototest.ExpectValid(t, prototest.MustCheck(t, res, model), c.minOK)
			})
		}
	}
}

// TestMutantCaught shows the checker catches a missing commit wait. The missing wait is only
// observable when a timestamp runs ahead of true time by more than the transaction's own
// duration, so region 0's oracle is skewed 20 ms ahead: a region-0 writer then ends before true
// time reaches its timestamp, and a client elsewhere that starts after it ends takes a smaller
// timestamp and misses its write. With ε declared as 25 ms the skew is within the bound: the
// correct protocol's commit wait (2·(TTL+ε)·(1+D) ≈ 51 ms) absorbs it and the history is valid,
// while the mutant, which skips the wait, is caught. With the default ε (100 µs) the skew is
// beyond the bound and even the correct protocol is caught, which shows that the checker sees
// clock faults the protocol cannot be expected to survive.
func TestMutantCaught(t *testing.T) {
	cases := []struct {
		name    string
		opts    map[string]string
		verdict string
	}{
		{"correct-within-epsilon", map[string]string{"epsilon": "25ms"}, check.Valid},
		{"mutant-within-epsilon", map[string]string{"epsilon": "25ms", "mutant": "no-commit-wait"}, check.Invalid},
		{"mutant-beyond-epsilon", map[string]string{"mutant": "no-commit-wait"}, check.Invalid},
		{"correct-beyond-epsilon", map[string]string{}, check.Invalid},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := prototest.Run(t, prototest.Case{Protocol: "k2", Seed: 2, Options: c.opts, Workload: prototest.ListAppend(20, 0.8),
				Clients: 6, Faults: skewOracle(0, 20*time.Millisecond)})
			rep := prototest.MustCheck(t, res, model)
			prototest.ExpectVerdict(t, rep, c.verdict)
			if c.verdict == check.Invalid && !slices.Contains(rep.AnomalyTypes, "G-single-realtime") {
				t.Errorf("anomalies %v: want a real-time violation", rep.AnomalyTypes)
			}
		})
	}
}

// TestCoordinatorFailure crashes every coordinator of region 1 mid-run. Their recorders stop
// hearing heartbeats and abort the undecided transactions, when the lease runs out or when the
// restarted coordinator, asked, says it ended them (whichever comes first), and readers meeting
// the dead transactions' intents are released through PUSHWS: too few commits means they were
// not.
func TestCoordinatorFailure(t *testing.T) {
	// Whether the crash catches a transaction after its first write (so that a recorder holds
	// an undecided record) depends on the seed; over these seeds it does several times.
	var leaseAborts int64
	for seed := uint64(1); seed <= 6; seed++ {
		t.Run(fmt.Sprintf("seed-%d", seed), func(t *testing.T) {
			// The lease is shortened so that the restarted recorder's lease aborts, too, fall
			// inside the measured window (metrics are read when it closes).
			res := prototest.Run(t, prototest.Case{Protocol: "k2", Seed: seed, Workload: prototest.ListAppend(20, 0.8), Clients: 16,
				Options: map[string]string{"lease": "500ms"},
				Faults:  prototest.CrashDataNode(1, 300*time.Millisecond, 1500*time.Millisecond), Duration: 3 * time.Second})
			prototest.ExpectValid(t, prototest.MustCheck(t, res, model), 100)
			c := res.ProtocolMetrics.Counters
			leaseAborts += c["recorder.lease-abort"] + c["recorder.ended-abort"]
		})
	}
	if leaseAborts == 0 {
		t.Errorf("no transaction of a dead coordinator was aborted by its recorder")
	}
}

// TestDeterministic runs one seed twice and compares the simulator's trace digests and the
// digests of every delivered message's contents (prototest.Deterministic).
func TestDeterministic(t *testing.T) {
	prototest.Deterministic(t, prototest.Case{Protocol: "k2", Seed: 7, Workload: prototest.ListAppend(20, 0.8),
		Faults: prototest.Crashes(200*time.Millisecond, map[topo.NodeID]time.Duration{1: 300 * time.Millisecond})}, 8)
}

// TestYCSBT runs YCSB-T from mild (θ 0.5) to heavy (θ 0.99) skew and checks that transactions
// commit, aborts come only from the read watermark, and every phase of K2's Table 2 is measured.
func TestYCSBT(t *testing.T) {
	for _, theta := range []float64{0.5, 0.99} {
		t.Run(fmt.Sprint(theta), func(t *testing.T) {
			res := prototest.Run(t, prototest.Case{Protocol: "k2", Seed: 1, Duration: time.Second,
				Workload: prototest.YCSBT(theta, func(c *ycsbt.Config) { c.RegionLocal, c.CrossRegionRatio = true, 0.1 })})
			if res.Committed < 100 || res.Failed > 0 || res.Unknown > 0 {
				t.Fatalf("committed %d, failed %d, unknown %d", res.Committed, res.Failed, res.Unknown)
			}
			for cause := range res.AbortsByCause {
				if cause != "read-watermark" {
					t.Errorf("abort cause %q: K2-MVTO's only conflict abort is the read watermark", cause)
				}
			}
			// Every such abort is a write a data node refused; under heavy skew some of those
			// refusals meet the watermark of a reader that had waited by PUSHWS.
			c := res.ProtocolMetrics.Counters
			refused, waiting := c["write-refused.read-watermark"], c["write-refused.read-watermark/waiting-reader"]
			t.Logf("aborts %d, refused writes %d, of which by a waiting reader %d", c["abort.read-watermark"], refused, waiting)
			if refused < c["abort.read-watermark"] || waiting > refused || (theta > 0.9 && waiting == 0) {
				t.Errorf("aborts %d, refused writes %d, by a waiting reader %d", c["abort.read-watermark"], refused, waiting)
			}
			for _, phase := range []string{"phase.get-ts", "phase.read", "phase.write", "phase.commit", "commit-wait"} {
				if res.ProtocolMetrics.Distributions[phase].Count == 0 {
					t.Errorf("phase %s not measured", phase)
				}
			}
			// The driver labels each transaction with its type; every committed read-write
			// transaction's phases are kept under that label too (Table 2's form).
			all := res.ProtocolMetrics.Distributions["txn.read"].Count
			for _, phase := range []string{"get-ts", "read", "pushws", "write", "commit"} {
				if got := res.ProtocolMetrics.Distributions["txn."+phase+"/ycsbt"].Count; got != all || all == 0 {
					t.Errorf("txn.%s/ycsbt has %d samples, txn.read %d", phase, got, all)
				}
			}
		})
	}
}

func TestBadOptions(t *testing.T) {
	for _, opts := range []map[string]string{
		{"ttl": "soon"}, {"ttl": "0s"}, {"step": "1ms", "ttl": "500us"}, {"lease": "-1s"},
		{"mv-reads": "maybe"}, {"max-drift": "2"}, {"mutant": "no-locks"}, {"no-such-option": "1"},
		{"gc-ttl": "1ms"}, {"gc-ttl": "2000h"}, {"gc-ttl": "never"},
	} {
		// Options are rejected either by the protocol's option check or by its node factory.
		cfg, err := prototest.SimConfig(prototest.Case{Protocol: "k2", Seed: 1, Options: opts})
		if err == nil {
			_, err = sim.New(cfg)
		}
		if err == nil {
			t.Errorf("options %v accepted", opts)
		}
	}
}

// The batch life's default follows the region's round trip where 500µs would not outlast it
// (Wren's data centers, 0.7 ms apart inside): with a fixed 500µs a k2 run on wren-3dc was
// refused. A ttl given that does not outlast the request is still refused.
func TestDefaultTTLOutlastsTheOracleRequest(t *testing.T) {
	var p proto
	for _, c := range []struct {
		rtt, want time.Duration
	}{{0, 500 * time.Microsecond}, {200 * time.Microsecond, 500 * time.Microsecond}, {700 * time.Microsecond, 1750 * time.Microsecond}} {
		if got := defaultTTL(c.rtt); got != c.want {
			t.Errorf("defaultTTL(%v) = %v, want %v", c.rtt, got, c.want)
		}
		facts := protocol.DeploymentFacts{IntraRTT: c.rtt, OracleServiceTime: 5 * time.Microsecond}
		if err := p.CheckDeployment(nil, facts); err != nil {
			t.Errorf("default ttl refused at a %v round trip: %v", c.rtt, err)
		}
		if err := p.CheckDeployment(map[string]string{"ttl": c.rtt.String()}, facts); err == nil {
			t.Errorf("ttl %v accepted at a %v round trip", c.rtt, c.rtt)
		}
	}
	if _, err := bench.SimConfig(bench.Deployment{Protocol: "k2", Topology: "wren-3dc", NodesPerRegion: 1, ShardsPerNode: 1, Seed: 1}); err != nil {
		t.Fatalf("k2 on wren-3dc: %v", err)
	}
}

// TestDeclaredClockBoundsCoverTheDeployment: k2 takes epsilon and max-drift on trust, so a
// deployment whose clocks stray further than declared is refused, and one declaring more than its
// clocks need (K2's 25 ms ε on 100 µs clocks) is not.
func TestDeclaredClockBoundsCoverTheDeployment(t *testing.T) {
	var p proto
	facts := protocol.DeploymentFacts{Epsilon: 100 * time.Microsecond, MaxDrift: 200e-6}
	for _, c := range []struct {
		opts map[string]string
		want string // "" when accepted
	}{
		{nil, ""},
		{map[string]string{"epsilon": "25ms", "max-drift": "0.001"}, ""},
		{map[string]string{"epsilon": "100us", "max-drift": "200e-6"}, ""},
		{map[string]string{"epsilon": "50us"}, "epsilon 50µs is below the oracles' TrueTime uncertainty 100µs"},
		{map[string]string{"max-drift": "100e-6"}, "max-drift 0.0001 is below the local clocks' drift bound 0.0002"},
	} {
		err := p.CheckDeployment(c.opts, facts)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%v refused: %v", c.opts, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%v: got %v, want an error saying %q", c.opts, err, c.want)
		}
	}
}

// TestCrashLosesPipelinedWrites crashes data nodes while they hold acknowledged writes that are
// not yet durable: with write pipelining a write is answered from memory, and a 20 ms flush
// keeps many such writes in flight. Two data nodes per region make most of those writes come
// from a coordinator that survives the crash. Their transactions must abort (the restarted node
// reports the intents lost, or the coordinator's wait for durability fails), never commit: the
// history stays strictly serializable, and since clients keep reading the crashed nodes' keys
// after the restart, a committed append that the crash lost would show up as an anomaly.
// Without pipelining the same crashes find no acknowledged write off disk.
func TestCrashLosesPipelinedWrites(t *testing.T) {
	for _, pipelining := range []string{"on", "off"} {
		var lostAborts int64
		for _, seed := range []uint64{1, 2, 3} {
			t.Run(fmt.Sprintf("pipelining-%s/seed-%d", pipelining, seed), func(t *testing.T) {
				base := sim.DefaultConfig()
				base.FlushLatency = 20 * time.Millisecond
				cfg, err := bench.SimConfig(bench.Deployment{Protocol: "k2", Options: map[string]string{"write-pipelining": pipelining},
					Topology: prototest.Topology, NodesPerRegion: 2, ShardsPerNode: topo.DefaultLayout().ShardsPerNode, Seed: seed, Base: &base})
				if err != nil {
					t.Fatal(err)
				}
				wl, err := prototest.ListAppend(50, 1)(cfg.Topology)
				if err != nil {
					t.Fatal(err)
				}
				unflushed := 0
				faults := func(s *sim.Sim, w bench.Window) {
					plan := map[topo.NodeID]time.Duration{}
					for r, at := range []time.Duration{300 * time.Millisecond, 600 * time.Millisecond, 900 * time.Millisecond} {
						id := s.Topology().DataNodes(topo.RegionID(r))[1]
						plan[id] = at
						// Just before the crash: how many acknowledged writes are not on disk.
						s.At(w.MeasureFrom+int64(at)-1, func() { unflushed += len(s.Handler(id).(*Node).unflushed) })
					}
					prototest.Crashes(300*time.Millisecond, plan)(s, w)
				}
				res, err := bench.SimRun(cfg, bench.Spec{Workload: wl, ClientsPerRegion: 16, Warmup: prototest.Warmup,
					Duration: 2 * time.Second, Record: true, Faults: faults})
				if err != nil {
					t.Fatal(err)
				}
				prototest.ExpectValid(t, prototest.MustCheck(t, res, model), 100)
				if lost := lostAppends(res.History); len(lost) > 0 {
					t.Errorf("committed appends missing from reads that began after they committed: %v", lost)
				}
				switch {
				case pipelining == "off" && unflushed > 0:
					t.Errorf("%d writes acknowledged before they were durable without pipelining", unflushed)
				case pipelining == "on" && unflushed == 0:
					t.Errorf("no crash caught an acknowledged write in flight: the run checks nothing new")
				}
				lostAborts += res.ProtocolMetrics.Counters["abort.write-lost"]
			})
		}
		if pipelining == "on" && lostAborts == 0 {
			t.Errorf("no transaction aborted because a crash lost its acknowledged write")
		}
	}
}

// lostAppends returns the committed appends, as "key:element", that a committed read of their
// key invoked after the append's transaction completed does not contain. The checker's cycle
// search needs some read to place an element before it can see it missing; this catches an
// append that a crash lost before any reader saw it.
func lostAppends(h []history.Op) []string {
	type appended struct {
		key, elem int64
		done      int64
	}
	type read struct {
		key     int64
		invoked int64
		list    []int64
	}
	var appends []appended
	var reads []read
	invoked := map[int]int64{} // process → time of its open invocation
	for _, op := range h {
		switch op.Type {
		case history.Invoke:
			invoked[op.Process] = op.Time
		case history.OK:
			for _, m := range op.Value {
				switch {
				case m.F == history.FAppend && m.Value.Kind == history.Int:
					appends = append(appends, appended{m.Key, m.Value.Int, op.Time})
				case m.F == history.FRead && m.Value.Kind == history.List:
					reads = append(reads, read{m.Key, invoked[op.Process], m.Value.List})
				}
			}
		}
	}
	var lost []string
	for _, a := range appends {
		for _, r := range reads {
			if r.key == a.key && r.invoked > a.done && !slices.Contains(r.list, a.elem) {
				lost = append(lost, fmt.Sprintf("%d:%d", a.key, a.elem))
				break
			}
		}
	}
	return lost
}

// TestBatches runs GetMany and PutMany through K2: answers in request order, read-your-writes
// across batches, and a batch's reads concurrent (one round trip, not one per shard).
func TestBatches(t *testing.T) {
	prototest.Batches(t, "k2", nil, true)
}

// TestBatchMessages: a batch costs each data node one request and one answer.
func TestBatchMessages(t *testing.T) {
	prototest.BatchMessages(t, "k2", nil)
}

// TestSkewSweep: strictly serializable from Zipf 0.5 to 0.99, with drift and a crash. K2's
// mutant (no commit wait) needs a clock running ahead to show, so TestMutantCaught covers it.
func TestSkewSweep(t *testing.T) {
	prototest.SkewSweep(t, "k2", nil, nil, model, 3)
}

// K2-TB's claim is the share of timestamps served without waiting: with one oracle request per
// transaction every timestamp waits, and with batching some do not (here, with a few hundred
// transactions a second per coordinator, most still do: a batch lives 500µs). The
// count survives the coordinator's counting misses instead of marking every queued transaction
// at each one.
func TestTimestampsWaitedCounted(t *testing.T) {
	for _, batching := range []string{"off", "on"} {
		res := prototest.Run(t, prototest.Case{Protocol: "k2", Seed: 1, Duration: 500 * time.Millisecond, Clients: 40,
			Options: map[string]string{"ts-batching": batching}, Workload: prototest.YCSBT(0.5, nil)})
		c := res.ProtocolMetrics.Counters
		taken, waited := c["ts.taken"], c["ts.waited"]
		t.Logf("ts-batching=%s: %d timestamps taken, %d waited for", batching, taken, waited)
		if taken == 0 || (batching == "off" && waited != taken) || (batching == "on" && !(0 < waited && waited < taken)) {
			t.Errorf("ts-batching=%s: %d timestamps taken, %d waited for", batching, taken, waited)
		}
	}
}
