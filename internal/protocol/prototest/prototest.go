// Package prototest is the test scaffolding the protocol packages share: it runs a protocol in
// the simulator on a checkable or YCSB-T workload, with scripted faults, and asserts what the
// history checker says about the run. Every protocol is tested on the same deployment (the
// k2-5region preset, default layout, 200 ms warm-up) so that their tests stay comparable; what
// differs between protocols (clock bounds, workload shape, consistency model) is a parameter.
package prototest

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/meridiandb/meridian/client"
	"github.com/meridiandb/meridian/internal/bench"
	"github.com/meridiandb/meridian/internal/check"
	"github.com/meridiandb/meridian/internal/sim"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/wire"
	"github.com/meridiandb/meridian/internal/workload"
	"github.com/meridiandb/meridian/internal/workload/ycsbt"
)

// Topology is the preset every protocol test deploys on: five regions, WAN round trips of
// tens of milliseconds, so that commit waits and cross-region conflicts matter.
const Topology = "k2-5region"

// Warmup precedes every measured window: long enough for clients to reach a steady state,
// short enough to keep the tests fast.
const Warmup = 200 * time.Millisecond

// Workload builds a workload over the run's topology (known only once the protocol's layout
// is applied).
type Workload func(t *topo.Topology) (workload.Workload, error)

// Case is one simulated run.
type Case struct {
	Protocol string
	Options  map[string]string
	Seed     uint64
	Workload Workload
	Clients  int           // per region; 0 means 4
	Duration time.Duration // measured window; 0 means 2 s
	// Epsilon is the TrueTime uncertainty bound and MaxOffset the bound on local clock
	// offsets; 0 keeps the simulator's default.
	Epsilon, MaxOffset time.Duration
	Faults             func(s *sim.Sim, w bench.Window)
	// OneOpAtATime makes clients send batched operations one at a time (bench.Spec).
	OneOpAtATime bool
}

// SimConfig builds the simulator configuration of c's deployment; it fails on options the
// protocol rejects.
func SimConfig(c Case) (sim.Config, error) {
	base := sim.DefaultConfig()
	if c.Epsilon > 0 {
		base.Epsilon = c.Epsilon
	}
	if c.MaxOffset > 0 {
		base.MaxOffset = c.MaxOffset
	}
	l := topo.DefaultLayout()
	return bench.SimConfig(bench.Deployment{Protocol: c.Protocol, Options: c.Options, Topology: Topology,
		NodesPerRegion: l.NodesPerRegion, ShardsPerNode: l.ShardsPerNode, Seed: c.Seed, Base: &base})
}

// Run runs c, recording the history of checkable transactions.
func Run(t testing.TB, c Case) *bench.Result {
	t.Helper()
	res, _ := run(t, c, false)
	return res
}

// RunContent is Run with the simulator's content digest on (sim.Config.DigestContents): it
// also returns the digest of every delivered message's full contents, which the trace digest
// does not see. The run keeps what nodes persist, as a run with Faults does (bench.SimRun
// discards it only in a run without them); that leaves its trace as it was.
func RunContent(t testing.TB, c Case) (*bench.Result, uint64) {
	t.Helper()
	return run(t, c, true)
}

func run(t testing.TB, c Case, digestContents bool) (*bench.Result, uint64) {
	t.Helper()
	cfg, err := SimConfig(c)
	if err != nil {
		t.Fatal(err)
	}
	var s *sim.Sim
	if digestContents {
		// The simulation is reached through Faults, the one hook bench.SimRun hands it to.
		cfg.DigestContents = true
		faults := c.Faults
		c.Faults = func(sm *sim.Sim, w bench.Window) {
			s = sm
			if faults != nil {
				faults(sm, w)
			}
		}
	}
	wl, err := c.Workload(cfg.Topology)
	if err != nil {
		t.Fatal(err)
	}
	if c.Clients == 0 {
		c.Clients = 4
	}
	if c.Duration == 0 {
		c.Duration = 2 * time.Second
	}
	res, err := bench.SimRun(cfg, bench.Spec{Workload: wl, ClientsPerRegion: c.Clients, Warmup: Warmup,
		Duration: c.Duration, Record: true, Faults: c.Faults, OneOpAtATime: c.OneOpAtATime})
	if err != nil {
		t.Fatal(err)
	}
	if !digestContents {
		return res, 0
	}
	if s == nil {
		t.Fatal("prototest: the run never handed over its simulation (Faults was not called)")
	}
	content, err := s.ContentDigest()
	if err != nil {
		t.Fatal(err)
	}
	return res, content
}

// ListAppend is the checkable list-append workload over keys keys (few keys: high contention)
// in which a share local of the transactions keep to keys homed in the client's region.
func ListAppend(keys int, local float64) Workload { return listAppend("list-append", keys, local) }

// Register is ListAppend with read-write registers instead of lists.
func Register(keys int, local float64) Workload { return listAppend("rw-register", keys, local) }

func listAppend(name string, keys int, local float64) Workload {
	return func(t *topo.Topology) (workload.Workload, error) {
		p := bench.DefaultWorkloadParams(name)
		p.Keys, p.CRTRatio = keys, 1-local
		return bench.BuildWorkload(t, p)
	}
}

// SkewedListAppend is ListAppend over keys keys drawn from a scrambled Zipfian of skew theta,
// half of the transactions region-local.
func SkewedListAppend(keys int, theta float64) Workload {
	return func(t *topo.Topology) (workload.Workload, error) {
		p := bench.DefaultWorkloadParams("list-append")
		p.Keys, p.CRTRatio, p.Zipf = keys, 0.5, theta
		return bench.BuildWorkload(t, p)
	}
}

// SkewSweep checks a protocol's histories against model under YCSB-T's range of contention,
// Zipf θ from 0.5 to 0.99 over 200 keys, with the simulator's clock offsets and drift within
// their bounds, over seeds 1..seeds; every third seed also crashes region 1's first data node
// for 400 ms in the middle of the window; each run's final read must find every acknowledged
// write (ExpectDurable). MERIDIAN_LONG=1 widens it to 30 seeds
// (MERIDIAN_SWEEP_SEEDS=n to n). If mutant is set, the same runs at θ 0.99 with those options
// added must be caught: at least one history invalid, or a write lost.
func SkewSweep(t *testing.T, protocol string, opts, mutant map[string]string, model string, seeds uint64) {
	t.Helper()
	if os.Getenv("MERIDIAN_LONG") != "" {
		seeds = 30
		if v := os.Getenv("MERIDIAN_SWEEP_SEEDS"); v != "" {
			n, err := strconv.ParseUint(v, 10, 32)
			if err != nil || n == 0 {
				t.Fatalf("MERIDIAN_SWEEP_SEEDS=%q: want a positive number", v)
			}
			seeds = n
		}
	}
	for _, theta := range []float64{0.5, 0.8, 0.99} {
		for seed := uint64(1); seed <= seeds; seed++ {
			t.Run(fmt.Sprintf("zipf-%.2f/seed-%d", theta, seed), func(t *testing.T) {
				c := Case{Protocol: protocol, Options: opts, Seed: seed, Workload: SkewedListAppend(200, theta), Clients: 6}
				if seed%3 == 0 {
					c.Faults = CrashDataNode(1, 600*time.Millisecond, 400*time.Millisecond)
				}
				res := Run(t, c)
				t.Logf("%d commits, abort rate %.2f", res.Committed, res.AbortRate)
				ExpectValid(t, MustCheck(t, res, model), 20)
				ExpectDurable(t, res)
			})
		}
	}
	if mutant == nil {
		return
	}
	broken := maps.Clone(opts)
	if broken == nil {
		broken = map[string]string{}
	}
	maps.Copy(broken, mutant)
	caught := 0
	for seed := uint64(1); seed <= seeds; seed++ {
		c := Case{Protocol: protocol, Options: broken, Seed: seed, Workload: SkewedListAppend(200, 0.99), Clients: 6}
		if seed%3 == 0 {
			c.Faults = CrashDataNode(1, 600*time.Millisecond, 400*time.Millisecond)
		}
		res := Run(t, c)
		if rep := MustCheck(t, res, model); rep.Verdict == check.Invalid || res.Durability.Err() != nil {
			caught++
		}
	}
	t.Logf("mutant %v: caught in %d of %d runs", mutant, caught, seeds)
	if caught == 0 {
		t.Errorf("mutant %v: every history checked %s", mutant, model)
	}
}

// YCSBT is YCSB-T's K2 preset over 2000 keys with Zipf skew theta, adjusted by edit (nil: no
// change). It is built directly rather than through bench.BuildWorkload, which skips the load
// phase: here every key exists before the window opens, as in the paper.
func YCSBT(theta float64, edit func(*ycsbt.Config)) Workload {
	return func(t *topo.Topology) (workload.Workload, error) {
		cfg, err := ycsbt.Preset("k2")
		if err != nil {
			return nil, err
		}
		cfg.Keys, cfg.Theta = 2000, theta
		if edit != nil {
			edit(&cfg)
		}
		return ycsbt.New(t, cfg)
	}
}

// Crashes crashes each node of plan at the window's MeasureFrom plus its offset, and restarts
// it down later.
func Crashes(down time.Duration, plan map[topo.NodeID]time.Duration) func(s *sim.Sim, w bench.Window) {
	return func(s *sim.Sim, w bench.Window) {
		// Scheduling order breaks ties between events at one instant: sort for determinism.
		ids := make([]topo.NodeID, 0, len(plan))
		for id := range plan {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		for _, id := range ids {
			at := w.MeasureFrom + int64(plan[id])
			s.At(at, func() { s.Crash(id) })
			s.At(at+int64(down), func() {
				if err := s.Restart(id); err != nil {
					// No test is in reach of a simulator callback; stopping the run is the
					// only way to report it.
					panic(fmt.Sprintf("restart node %d: %v", id, err))
				}
			})
		}
	}
}

// CrashDataNode crashes the first data node of region at MeasureFrom+at, and restarts it down
// later. It is Crashes for tests that know a node by its role rather than its id.
func CrashDataNode(region topo.RegionID, at, down time.Duration) func(s *sim.Sim, w bench.Window) {
	return func(s *sim.Sim, w bench.Window) {
		Crashes(down, map[topo.NodeID]time.Duration{s.Topology().DataNodes(region)[0]: at})(s, w)
	}
}

// MustCheck checks res's history under model and fails the test if the checker cannot run.
func MustCheck(t testing.TB, res *bench.Result, model string) *check.Report {
	t.Helper()
	rep, err := check.Check(res.History, model)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

// ExpectVerdict fails the test unless the checker's verdict is want.
func ExpectVerdict(t testing.TB, rep *check.Report, want string) {
	t.Helper()
	if rep.Verdict != want {
		t.Fatalf("%s verdict %s, want %s (%d committed):\n%v", rep.Model, rep.Verdict, want, rep.Counts.OK, rep)
	}
}

// ExpectValid fails the test unless the history is valid and at least minOK transactions
// committed: a valid history of a handful of transactions proves little.
func ExpectValid(t testing.TB, rep *check.Report, minOK int) {
	t.Helper()
	ExpectVerdict(t, rep, check.Valid)
	if rep.Counts.OK < minOK {
		t.Fatalf("only %d committed transactions (want ≥ %d): the run checks too little", rep.Counts.OK, minOK)
	}
}

// ExpectDurable fails the test unless the run's final read found every acknowledged write and no
// failed one (bench.Durability): what the checker cannot see when no read came after a loss.
func ExpectDurable(t testing.TB, res *bench.Result) {
	t.Helper()
	if res.Durability == nil {
		t.Fatal("the run has no final read to judge (not a checked workload, or not recorded)")
	}
	if err := res.Durability.Err(); err != nil || res.Durability.NotRun != "" {
		t.Fatalf("durability: %v", res.Durability)
	}
}

// Deterministic runs c twice and fails unless both runs have one trace digest, content digest
// (every delivered message's full contents, RunContent) and commit count, and unless c under
// each of otherSeeds gives a different trace (the seed is really used). The content digest
// catches what the trace digest cannot: a message that arrives when it did but carries
// something else (keys listed in map order, a value picked from a map).
func Deterministic(t testing.TB, c Case, otherSeeds ...uint64) {
	t.Helper()
	a, ac := RunContent(t, c)
	b, bc := RunContent(t, c)
	if a.TraceDigest != b.TraceDigest || a.Committed != b.Committed {
		t.Fatalf("seed %d: digests %s vs %s, commits %d vs %d", c.Seed, a.TraceDigest, b.TraceDigest, a.Committed, b.Committed)
	}
	if ac != bc {
		t.Fatalf("seed %d: one trace %s, but message contents differ: content digests %016x vs %016x", c.Seed, a.TraceDigest, ac, bc)
	}
	t.Logf("seed %d: trace %s, content %016x, %d commits", c.Seed, a.TraceDigest, ac, a.Committed)
	for _, seed := range otherSeeds {
		o := c
		o.Seed = seed
		if r := Run(t, o); r.TraceDigest == a.TraceDigest {
			t.Fatalf("seeds %d and %d gave the same trace %s", c.Seed, seed, r.TraceDigest)
		}
	}
}

// Batches runs one client in region 0 through GetMany and PutMany on keys spread over every
// shard, and fails the test unless each batch's answers are the values written, in request
// order, with the transaction's own writes visible to its later batches. With concurrent set
// (a protocol that runs a batch's operations in parallel), a batch of reads of every shard must
// also take under half the virtual time of the same reads made one at a time.
func Batches(t *testing.T, protocol string, opts map[string]string, concurrent bool) {
	t.Helper()
	s := NewSim(t, Case{Protocol: protocol, Options: opts, Seed: 1})
	tp := s.Topology()
	var keys []string
	for sh := range tp.Shards {
		keys = append(keys, topo.PinnedKey(topo.ShardID(sh), fmt.Sprintf("batch/%d", sh)))
	}
	value := func(round, i int) []byte { return fmt.Appendf(nil, "r%d-%d", round, i) }
	var failures []string
	fail := func(format string, args ...any) { failures = append(failures, fmt.Sprintf(format, args...)) }
	var batchNanos, singleNanos int64
	runClient(t, s, 20*time.Second, func(db *client.DB) {
		rows := make([]wire.KV, len(keys))
		for i, k := range keys {
			rows[i] = wire.KV{Key: k, Value: value(1, i)}
		}
		if err := client.RunTxn(db, client.TxnOptions{}, func(tx *client.Txn) error { return tx.PutMany(rows) }); err != nil {
			fail("PutMany: %v", err)
			return
		}
		// Reversed order plus an absent key: answers must follow the request, not the shards.
		want := map[string][]byte{}
		var ask []string
		for i := len(keys) - 1; i >= 0; i-- {
			ask = append(ask, keys[i])
			want[keys[i]] = value(1, i)
		}
		ask = append(ask, topo.PinnedKey(0, "batch/absent"))
		err := client.RunTxn(db, client.TxnOptions{}, func(tx *client.Txn) error {
			start := db.Transport().Now()
			got, err := tx.GetMany(ask)
			if err != nil {
				return err
			}
			batchNanos = db.Transport().Now() - start
			for i, k := range ask {
				w, ok := want[k]
				if got[i].Found != ok || !bytes.Equal(got[i].Value, w) {
					fail("GetMany[%d] %s = %q found=%v, want %q found=%v", i, k, got[i].Value, got[i].Found, w, ok)
				}
			}
			// The transaction's own writes, then a batch mixing them with unwritten keys.
			if err := tx.PutMany([]wire.KV{{Key: keys[0], Value: value(2, 0)}, {Key: keys[1], Value: value(2, 1)}}); err != nil {
				return err
			}
			got, err = tx.GetMany(keys[:3])
			if err != nil {
				return err
			}
			for i, w := range [][]byte{value(2, 0), value(2, 1), value(1, 2)} {
				if !got[i].Found || !bytes.Equal(got[i].Value, w) {
					fail("read-your-writes GetMany[%d] = %q, want %q", i, got[i].Value, w)
				}
			}
			return nil
		})
		if err != nil {
			fail("GetMany transaction: %v", err)
			return
		}
		err = client.RunTxn(db, client.TxnOptions{ReadOnly: true}, func(tx *client.Txn) error {
			start := db.Transport().Now()
			for i, k := range keys {
				v, err := tx.Get(k)
				if err != nil {
					return err
				}
				w := value(1, i)
				if i < 2 {
					w = value(2, i)
				}
				if !bytes.Equal(v, w) {
					fail("after commit %s = %q, want %q", k, v, w)
				}
			}
			singleNanos = db.Transport().Now() - start
			return nil
		})
		if err != nil {
			fail("read-back transaction: %v", err)
		}
	})
	for _, f := range failures {
		t.Error(f)
	}
	t.Logf("%d reads: one batch %.1f ms, one at a time %.1f ms", len(keys), float64(batchNanos)/1e6, float64(singleNanos)/1e6)
	if concurrent && !t.Failed() && batchNanos*2 >= singleNanos {
		t.Errorf("a batch of %d reads took %.1f ms, one at a time %.1f ms: the reads did not run concurrently",
			len(keys), float64(batchNanos)/1e6, float64(singleNanos)/1e6)
	}
}

// runClient runs script as one client of region 0, at its first data node, and fails the test
// if the script has not returned within limit of virtual time.
func runClient(t testing.TB, s *sim.Sim, limit time.Duration, script func(db *client.DB)) {
	t.Helper()
	done := false
	s.AddClient(0, s.Topology().DataNodes(0)[0], int64(100*time.Millisecond), func(db *client.DB) {
		defer func() { done = true }()
		script(db)
	})
	s.RunUntil(int64(limit))
	s.Stop()
	if !done {
		t.Fatalf("the client did not finish in %v of virtual time", limit)
	}
}

// NewSim builds the simulator of c's deployment, for tests that script their own clients.
func NewSim(t testing.TB, c Case) *sim.Sim {
	t.Helper()
	cfg, err := SimConfig(c)
	if err != nil {
		t.Fatal(err)
	}
	s, err := sim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// A write the store refuses stops a real node: no protocol may send one.
	t.Cleanup(func() {
		if err := s.DiskError(); err != nil {
			t.Errorf("%v", err)
		}
	})
	return s
}

// KeysOn returns n keys named prefix/i whose primary is node id, spread over its shards.
func KeysOn(t testing.TB, tp *topo.Topology, id topo.NodeID, prefix string, n int) []string {
	t.Helper()
	var held []topo.ShardID
	for sh := range tp.Shards {
		if tp.Shards[sh].Primary() == id {
			held = append(held, topo.ShardID(sh))
		}
	}
	if len(held) == 0 {
		t.Fatalf("node %d holds no shard", id)
	}
	keys := make([]string, n)
	for i := range keys {
		keys[i] = topo.PinnedKey(held[i%len(held)], fmt.Sprintf("%s/%d", prefix, i))
	}
	return keys
}

// BatchMessages checks that a batch costs a data node one request and one answer, not one per
// key: under a CPU model every message costs the node service time, so a protocol that sent a
// batch key by key would pay for it in throughput. A transaction reads, with one GetMany, keys
// that one data node in another region holds, then overwrites them with one PutMany, and the
// simulator counts the messages each batch caused. Key by key that is at least 2 per key plus
// the client's request and answer; one message per node is 4, plus at most a few that the
// protocol sends on its own meanwhile (a durability note, a heartbeat), so the bar is one
// message per key.
func BatchMessages(t *testing.T, protocol string, opts map[string]string) {
	t.Helper()
	const n = 8
	s := NewSim(t, Case{Protocol: protocol, Options: opts, Seed: 1})
	tp := s.Topology()
	all := KeysOn(t, tp, tp.DataNodes(1)[0], "msgs", n+1)
	first, keys := all[n], all[:n]
	rows := make([]wire.KV, n)
	for i := range keys {
		rows[i] = wire.KV{Key: keys[i], Value: fmt.Appendf(nil, "v%d", i)}
	}
	var reads, writes uint64
	var failure error
	done := false
	s.AddClient(0, tp.DataNodes(0)[0], int64(100*time.Millisecond), func(db *client.DB) {
		defer func() { done = true }()
		failure = client.RunTxn(db, client.TxnOptions{}, func(tx *client.Txn) error {
			// A first operation, so that whatever a transaction does once (a timestamp, a
			// record) is not counted against the batches.
			if err := tx.Put(first, []byte("first")); err != nil {
				return err
			}
			before := s.Stats().Messages
			if _, err := tx.GetMany(keys); err != nil {
				return err
			}
			mid := s.Stats().Messages
			if err := tx.PutMany(rows); err != nil {
				return err
			}
			reads, writes = mid-before, s.Stats().Messages-mid
			return nil
		})
	})
	s.RunUntil(int64(20 * time.Second))
	s.Stop()
	switch {
	case !done:
		t.Fatal("the client did not finish in 20 virtual seconds")
	case failure != nil:
		t.Fatalf("transaction: %v", failure)
	}
	t.Logf("%s: %d reads on one node sent %d messages, %d writes %d", protocol, n, reads, n, writes)
	if reads > n || writes > n {
		t.Errorf("a batch of %d operations on one data node sent %d (reads) and %d (writes) messages: it went key by key", n, reads, writes)
	}
}
