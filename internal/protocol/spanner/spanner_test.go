package spanner

import (
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/meridiandb/meridian/internal/bench"
	"github.com/meridiandb/meridian/internal/check"
	"github.com/meridiandb/meridian/internal/protocol/prototest"
	"github.com/meridiandb/meridian/internal/sim"
	"github.com/meridiandb/meridian/internal/storage/locks"
	"github.com/meridiandb/meridian/internal/workload/ycsbt"
)

func TestSmoke(t *testing.T) {
	res := prototest.Run(t, prototest.Case{Protocol: Name, Seed: 1, Workload: prototest.ListAppend(10, 0)})
	rep := prototest.MustCheck(t, res, "strict-serializable")
	t.Logf("commits=%d aborts=%v tput=%.1f verdict=%s counts=%+v metrics=%+v", res.Committed, res.AbortsByCause, res.Throughput, rep.Verdict, rep.Counts, res.ProtocolMetrics)
	prototest.ExpectValid(t, rep, 0)
}

// crashOne crashes region 1's data node during the window and restarts it 400 ms later: its
// unprepared transactions are lost, its prepared ones recovered from intents.
var crashOne = prototest.CrashDataNode(1, 300*time.Millisecond, 400*time.Millisecond)

// TestStrictSerializable runs list-append at high contention under both write-lock modes, every
// lock policy, several seeds, the default drifting clocks (within bounds) and a node crash, and
// checks each history.
func TestStrictSerializable(t *testing.T) {
	for _, writeLocks := range []string{"buffered", "eager"} {
		for _, policy := range []string{"no-wait", "wait-die", "wound-wait", "detect", "timeout"} {
			for _, seed := range []uint64{1, 2, 3} {
				for _, keys := range []int{5, 20} {
					name := fmt.Sprintf("%s/%s/seed%d/keys%d", writeLocks, policy, seed, keys)
					t.Run(name, func(t *testing.T) {
						c := prototest.Case{Protocol: Name, Seed: seed,
							Options:  map[string]string{"lock-policy": policy, "write-locks": writeLocks},
							Workload: prototest.ListAppend(keys, 0), Duration: 5 * time.Second}
						if seed == 2 {
							c.Faults = crashOne
						}
						res := prototest.Run(t, c)
						rep := prototest.MustCheck(t, res, "strict-serializable")
						prototest.ExpectValid(t, rep, 5)
						t.Logf("ok=%d info=%d deadlocks=%d", rep.Counts.OK, rep.Counts.Info, res.ProtocolMetrics.Counters["deadlocks"])
					})
				}
			}
		}
	}
}

// TestCommitWaitOffSerializable: K2's configuration (commit wait off) keeps conflict order and
// timestamp order aligned, so histories with snapshot reads are still serializable.
func TestCommitWaitOffSerializable(t *testing.T) {
	for _, seed := range []uint64{1, 2} {
		t.Run(fmt.Sprintf("seed-%d", seed), func(t *testing.T) {
			res := prototest.Run(t, prototest.Case{Protocol: Name, Seed: seed, Options: map[string]string{"commit-wait": "off"},
				Workload: prototest.ListAppend(10, 0), Duration: 4 * time.Second})
			prototest.ExpectValid(t, prototest.MustCheck(t, res, "serializable"), 0)
		})
	}
}

// TestMutantsCaught: each deliberately broken variant yields an invalid history for a seed
// committed here. early-release answers before commit wait; with ε = 10 ms (RLS's emulated
// TrueTime) a snapshot read that starts after the reply can pick a timestamp below the commit
// timestamp and miss the write: a real-time cycle. no-read-lock reads without shared locks.
func TestMutantsCaught(t *testing.T) {
	cases := []struct {
		mutant, model string
		writeLocks    string
		epsilon       time.Duration
		keys          int
		seed          uint64
	}{
		{MutantEarlyRelease, "strict-serializable", "buffered", 10 * time.Millisecond, 5, 1},
		{MutantNoReadLock, "serializable", "buffered", 0, 5, 1},
		{MutantEagerNoLock, "serializable", "eager", 0, 5, 1},
	}
	for _, c := range cases {
		t.Run(c.mutant, func(t *testing.T) {
			run := prototest.Case{Protocol: Name, Seed: c.seed, Options: map[string]string{"mutant": c.mutant, "write-locks": c.writeLocks},
				Epsilon: c.epsilon, Workload: prototest.ListAppend(c.keys, 0), Clients: 6, Duration: 5 * time.Second}
			rep := prototest.MustCheck(t, prototest.Run(t, run), c.model)
			prototest.ExpectVerdict(t, rep, check.Invalid)
			t.Logf("caught: %v", rep.AnomalyTypes)
			// The same run without the mutant is valid: the checker is not crying wolf.
			run.Options = map[string]string{"write-locks": c.writeLocks}
			prototest.ExpectValid(t, prototest.MustCheck(t, prototest.Run(t, run), c.model), 0)
		})
	}
}

// TestDeterministic: one seed, one trace, in both write-lock modes.
func TestDeterministic(t *testing.T) {
	for _, writeLocks := range []string{"buffered", "eager"} {
		t.Run(writeLocks, func(t *testing.T) {
			prototest.Deterministic(t, prototest.Case{Protocol: Name, Seed: 7, Options: map[string]string{"write-locks": writeLocks},
				Workload: prototest.ListAppend(8, 0), Faults: crashOne})
		})
	}
}

// TestYCSBDeadlocksReported: YCSB-T from Zipf 0.5 to 0.99 under each policy commits, reports
// lock-policy aborts as deadlocks, and more skew means more of them.
func TestYCSBDeadlocksReported(t *testing.T) {
	for _, policy := range []string{"no-wait", "wait-die", "wound-wait", "detect", "timeout"} {
		var prev int64 = -1
		for _, theta := range []float64{0.5, 0.99} {
			res := prototest.Run(t, prototest.Case{Protocol: Name, Seed: 1, Options: map[string]string{"lock-policy": policy},
				Workload: prototest.YCSBT(theta, func(c *ycsbt.Config) { c.ValueBytes = 16 }), Clients: 10, Duration: 3 * time.Second})
			if res.Committed == 0 || res.ProtocolMetrics == nil {
				t.Fatalf("%s θ=%.2f: nothing committed", policy, theta)
			}
			d := res.ProtocolMetrics.Counters["deadlocks"]
			t.Logf("%s θ=%.2f: commits=%d tput=%.1f deadlocks=%d aborts=%v", policy, theta, res.Committed, res.Throughput, d, res.AbortsByCause)
			if d <= prev {
				t.Errorf("%s: deadlocks did not grow with skew: %d then %d", policy, prev, d)
			}
			prev = d
		}
	}
}

func TestBadOptions(t *testing.T) {
	for _, opts := range []map[string]string{
		{"lock-policy": "sometimes"}, {"commit-wait": "maybe"}, {"mutant": "gremlin"}, {"idle-timeout": "0s"},
		{"write-locks": "lazy"}, {"mutant": MutantEagerNoLock}, {"mutant": MutantEagerNoLock, "write-locks": "buffered"},
		{"lock-timeout": "100ms"}, {"lock-policy": "detect", "lock-timeout": "100ms"},
		{"lock-policy": "timeout", "lock-timeout": "0s"}, {"lock-policy": "timeout", "lock-timeout": "-1s"},
		{"lock-policy": "timeout", "lock-timeout": "soon"},
	} {
		if _, err := ParseOptions(opts); err == nil {
			t.Errorf("%v accepted", opts)
		}
	}
	c, err := ParseOptions(nil)
	if err != nil || c.Policy.String() != "wound-wait" || !c.CommitWait || c.EagerWrites || c.LockTimeout != 0 {
		t.Fatalf("defaults: %+v, %v", c, err)
	}
	c, err = ParseOptions(map[string]string{"lock-policy": "timeout", "lock-timeout": "250ms"})
	if err != nil || c.Policy != locks.Wait || c.LockTimeout != 250*time.Millisecond || c.DetectDeadlocks {
		t.Fatalf("lock-policy=timeout lock-timeout=250ms: %+v, %v", c, err)
	}
}

// TestStrictSerializableSweep widens TestStrictSerializable to many seeds (every third one with
// a node crash): new schedules once exposed a wound that released a read lock after its
// participant had voted. MERIDIAN_LONG=1 runs it; MERIDIAN_SWEEP_SEEDS=n sets how many seeds.
func TestStrictSerializableSweep(t *testing.T) {
	if os.Getenv("MERIDIAN_LONG") == "" {
		t.Skip("set MERIDIAN_LONG=1 for the seed sweep")
	}
	seeds := uint64(30)
	if v := os.Getenv("MERIDIAN_SWEEP_SEEDS"); v != "" {
		n, err := strconv.ParseUint(v, 10, 32)
		if err != nil || n == 0 {
			t.Fatalf("MERIDIAN_SWEEP_SEEDS=%q: want a positive number", v)
		}
		seeds = n
	}
	for _, writeLocks := range []string{"buffered", "eager"} {
		for _, policy := range []string{"no-wait", "wait-die", "wound-wait", "detect", "timeout"} {
			for seed := uint64(1); seed <= seeds; seed++ {
				for _, keys := range []int{5, 20} {
					t.Run(fmt.Sprintf("%s/%s/seed%d/keys%d", writeLocks, policy, seed, keys), func(t *testing.T) {
						c := prototest.Case{Protocol: Name, Seed: seed,
							Options:  map[string]string{"lock-policy": policy, "write-locks": writeLocks},
							Workload: prototest.ListAppend(keys, 0), Duration: 5 * time.Second}
						if seed%3 == 2 {
							c.Faults = crashOne
						}
						prototest.ExpectValid(t, prototest.MustCheck(t, prototest.Run(t, c), "strict-serializable"), 5)
					})
				}
			}
		}
	}
}

// TestDetectBreaksEveryDeadlock: under lock-policy=detect every conflict waits, so the
// contended read-modify-write runs below deadlock constantly (two readers upgrading, cycles
// across shards). Every one must be found by the detector: a cycle it missed would sit until
// the participants' idle timeout aborted a waiter, so with no crash there must be none of
// those, and the run must keep committing to the end.
func TestDetectBreaksEveryDeadlock(t *testing.T) {
	for _, writeLocks := range []string{"buffered", "eager"} {
		for _, seed := range []uint64{1, 2, 3} {
			t.Run(fmt.Sprintf("%s/seed%d", writeLocks, seed), func(t *testing.T) {
				res := prototest.Run(t, prototest.Case{Protocol: Name, Seed: seed,
					Options:  map[string]string{"lock-policy": "detect", "write-locks": writeLocks},
					Workload: prototest.ListAppend(10, 0), Clients: 6, Duration: 3 * time.Second})
				c := res.ProtocolMetrics.Counters
				t.Logf("commits=%d detected=%d deadlock-aborts=%d idle=%d", res.Committed, c["deadlocks-detected"], c["deadlocks"], c["idle-aborts"])
				if c["deadlocks-detected"] == 0 {
					t.Fatalf("no deadlock detected: the scenario no longer exercises the detector")
				}
				if c["idle-aborts"] != 0 {
					t.Errorf("%d transactions sat in a wait until the idle timeout: a deadlock went undetected", c["idle-aborts"])
				}
				if res.Committed < 20 {
					t.Errorf("only %d commits in 3 s", res.Committed)
				}
			})
		}
	}
}

// TestLiveCoordinatorKeepsItsLocks: a participant's idle timeout frees the locks of a
// transaction whose coordinator died; it must not fire while the coordinator is alive and the
// transaction waits — here, or at another participant — for longer than the timeout. With
// blocking (detect) at high skew and a 200 ms idle timeout, waits routinely exceed it; without
// crashes no transaction may be idle-aborted.
func TestLiveCoordinatorKeepsItsLocks(t *testing.T) {
	res := prototest.Run(t, prototest.Case{Protocol: Name, Seed: 1,
		Options:  map[string]string{"lock-policy": "detect", "write-locks": "eager", "idle-timeout": "200ms"},
		Workload: prototest.YCSBT(0.99, func(c *ycsbt.Config) { c.ValueBytes = 16 }), Clients: 10, Duration: 3 * time.Second})
	waits := res.ProtocolMetrics.Distributions["lock_wait"]
	t.Logf("commits=%d lock_wait p99=%.0f ms idle-aborts=%d", res.Committed, waits.P99, res.ProtocolMetrics.Counters["idle-aborts"])
	if waits.P99 < 200 {
		t.Fatalf("lock waits p99 %.0f ms: the scenario no longer waits past the idle timeout", waits.P99)
	}
	if n := res.ProtocolMetrics.Counters["idle-aborts"]; n != 0 {
		t.Errorf("%d transactions of live coordinators idled out", n)
	}
}

// TestDuplicatedMessages: the network delivers one message in twenty twice — client requests
// and replies, batches' OpsReqs and OpsResps, prepares, votes, decisions — with a node crash in
// half the runs, and histories stay strictly serializable. A duplicated commit used to draw a
// "request while another is in flight" refusal that reached the client before the commit's
// answer, so committed transactions were reported failed (G1a in buffered/wound-wait/seed1 and
// eager/wound-wait/seed3).
func TestDuplicatedMessages(t *testing.T) {
	for _, writeLocks := range []string{"buffered", "eager"} {
		for _, policy := range []string{"wound-wait", "detect"} {
			for _, seed := range []uint64{1, 2, 3} {
				t.Run(fmt.Sprintf("%s/%s/seed%d", writeLocks, policy, seed), func(t *testing.T) {
					c := prototest.Case{Protocol: Name, Seed: seed,
						Options:  map[string]string{"lock-policy": policy, "write-locks": writeLocks},
						Workload: prototest.ListAppend(int(5+seed%3*5), 0), Duration: 3 * time.Second,
						Faults: func(s *sim.Sim, w bench.Window) {
							s.SetDuplication(0.05)
							if seed == 2 {
								crashOne(s, w)
							}
						}}
					res := prototest.Run(t, c)
					rep := prototest.MustCheck(t, res, "strict-serializable")
					prototest.ExpectValid(t, rep, 5)
				})
			}
		}
	}
}

// TestBatchMessages: a batch costs each participant one request and one answer.
func TestBatchMessages(t *testing.T) {
	prototest.BatchMessages(t, "spanner", nil)
}

// TestSkewSweep: with commit wait on, strictly serializable from Zipf 0.5 to 0.99 under both
// write-lock modes, Spanner's buffered writes and the K2 paper's eager d2PL, with drift and a
// crash; each mode's mutant, on the same runs, is caught.
func TestSkewSweep(t *testing.T) {
	for _, m := range []struct{ writeLocks, mutant string }{{"buffered", MutantNoReadLock}, {"eager", MutantEagerNoLock}} {
		writeLocks, mutant := m.writeLocks, m.mutant
		t.Run(writeLocks, func(t *testing.T) {
			prototest.SkewSweep(t, Name, map[string]string{"write-locks": writeLocks}, map[string]string{"mutant": mutant},
				"strict-serializable", 2)
		})
	}
}

// TestNothingHangsAfterCrash: after a data node's crash and restart, every transaction of a
// live coordinator ends, and no lock stays held: 6 s after the window (more than the idle timeout
// the crashed coordinator's transactions need to free their locks elsewhere) no coordinator runs
// a transaction and no participant holds a lock. (The clients of the crashed coordinator itself
// still wait for the answers its crash lost, until their own timeout — the simulator's minute,
// so the run still drains for 30 s; no protocol can answer them.) Read-only transactions whose
// snapshot read the crash swallowed used to wait for it for good at their live coordinators (in
// each of these runs, one to three of them).
func TestNothingHangsAfterCrash(t *testing.T) {
	for _, writeLocks := range []string{"buffered", "eager"} {
		for _, seed := range []uint64{1, 2, 3} {
			t.Run(fmt.Sprintf("%s/seed%d", writeLocks, seed), func(t *testing.T) {
				checked := false
				faults := func(s *sim.Sim, w bench.Window) {
					crashOne(s, w)
					s.At(w.End+int64(6*time.Second), func() {
						checked = true
						for _, nd := range s.Topology().Nodes {
							n, ok := s.Handler(nd.ID).(*Node)
							if !ok {
								continue
							}
							for _, ct := range n.Coord.byID {
								t.Errorf("node %d still runs %v (read-only %v, phase %d, request %+v)", nd.ID, ct.id, ct.readOnly, ct.phase, ct.pending)
							}
							if k := n.Part.locks.Len(); k != 0 {
								t.Errorf("node %d still holds locks on %d keys", nd.ID, k)
							}
						}
					})
				}
				res := prototest.Run(t, prototest.Case{Protocol: Name, Seed: seed, Options: map[string]string{"write-locks": writeLocks},
					Workload: prototest.ListAppend(10, 0), Duration: 3 * time.Second, Faults: faults})
				t.Logf("commits=%d lost-read aborts=%d virtual end %.1f s checked=%v", res.Committed,
					res.AbortsByCause[causeLostRead], res.VirtualSeconds, checked)
			})
		}
	}
}
