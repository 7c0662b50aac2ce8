package clock

import (
	"slices"
	"testing"
	"time"

	"github.com/meridiandb/meridian/internal/ts"
)

// paperScenario is K2's setting (notes/k2.md §2.4): TTL = batch span = 100 µs, 10 ns step,
// ε = 100 µs, D = 200 ppm, ~18 µs oracle round trip.
var paperScenario = k2Scenario{
	name: "paper", ttl: 100 * time.Microsecond, step: 10, eps: 100 * time.Microsecond,
	maxDrift: 200e-6, batching: true, coordinators: 3, oracles: 2,
	delayMin: 5 * time.Microsecond, delayMax: 13 * time.Microsecond, loss: 0.01,
	execMax: 300 * time.Microsecond, arrivalMean: 3 * time.Microsecond, horizon: 3 * time.Millisecond,
}

// driftScenario exaggerates drift (5%) and shrinks ε and delays so that the TTL check's drift
// direction decides the outcome: a slow clock overstays a TTL of 100 µs by ~10 µs.
var driftScenario = k2Scenario{
	name: "drift", ttl: 100 * time.Microsecond, step: 10, eps: 2 * time.Microsecond,
	maxDrift: 0.05, batching: true, coordinators: 2, oracles: 1,
	delayMin: 0, delayMax: 2 * time.Microsecond,
	execMax: 50 * time.Microsecond, arrivalMean: time.Microsecond, horizon: 3 * time.Millisecond,
}

func with(sc k2Scenario, edit func(*k2Scenario)) k2Scenario {
	edit(&sc)
	return sc
}

// TestK2TBProperty41 checks Property 4.1 of K2 for every timestamp handed out, across scenarios
// and seeds: each run is a deterministic discrete-event simulation in true time.
func TestK2TBProperty41(t *testing.T) {
	scenarios := []k2Scenario{
		paperScenario,
		driftScenario,
		with(paperScenario, func(sc *k2Scenario) {
			// Round trips up to 160 µs exceed the TTL: many batches arrive expired and must be refused.
			sc.name, sc.delayMin, sc.delayMax, sc.loss = "slow-oracle", 20*time.Microsecond, 80*time.Microsecond, 0.1
		}),
		with(paperScenario, func(sc *k2Scenario) {
			// Skews of different oracles differ by up to 2ε > TTL, so consecutive batches of one
			// coordinator go backwards and the monotonic guard must bump Logical.
			sc.name, sc.coordinators, sc.oracles = "many-oracles", 6, 4
		}),
		with(paperScenario, func(sc *k2Scenario) {
			// Uniqueness across coordinators whose batches from one oracle overlap.
			sc.name, sc.coordinators, sc.oracles, sc.loss = "shared-oracle", 8, 1, 0
		}),
		with(paperScenario, func(sc *k2Scenario) { sc.name, sc.batching = "strawman", false }),
		with(driftScenario, func(sc *k2Scenario) { sc.name, sc.batching, sc.delayMin = "strawman-drift", false, 1 }),
	}
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			var total BatcherStats
			for _, seed := range testSeeds(24) {
				res := runK2(t, sc, seed)
				if len(res.violations) > 0 {
					t.Fatalf("seed %#x: %d of %d timestamps violate abs(start) < ts < abs(end); first: %s",
						seed, len(res.violations), res.taken, res.violations[0])
				}
				if res.taken < 500 {
					t.Fatalf("seed %#x: only %d timestamps taken: the scenario tests nothing", seed, res.taken)
				}
				checkUnique(t, res.stamps)
				total = addStats(total, res.stats)
			}
			t.Logf("%+v", total)
			if sc.name == "many-oracles" && total.Bumped == 0 {
				t.Errorf("no timestamp was bumped: the monotonic guard was never exercised")
			}
			if sc.name == "slow-oracle" && total.ExpiredOnArrival == 0 {
				t.Errorf("no batch arrived expired: the arrival check was never exercised")
			}
		})
	}
}

// TestK2TBPropertyCanFail shows the property test has teeth: each broken variant violates
// Property 4.1 under some seed.
func TestK2TBPropertyCanFail(t *testing.T) {
	mutants := []k2Scenario{
		with(paperScenario, func(sc *k2Scenario) {
			sc.name, sc.mutation, sc.execMax = "no-commit-wait", MutationNoCommitWait, 50*time.Microsecond
		}),
		with(driftScenario, func(sc *k2Scenario) { sc.name, sc.mutation = "ttl-wrong-drift", MutationTTLWrongDrift }),
		with(paperScenario, func(sc *k2Scenario) { sc.name, sc.epsReported = "epsilon-under-reported", 10*time.Microsecond }),
		with(paperScenario, func(sc *k2Scenario) {
			sc.name, sc.batching, sc.mutation, sc.execMax = "strawman-no-commit-wait", false, MutationNoCommitWait, 50*time.Microsecond
		}),
	}
	for _, sc := range mutants {
		t.Run(sc.name, func(t *testing.T) {
			caught, violations := 0, 0
			seeds := testSeeds(24)
			for _, seed := range seeds {
				res := runK2(t, sc, seed)
				if len(res.violations) > 0 {
					caught++
					violations += len(res.violations)
				}
			}
			if caught == 0 {
				t.Fatalf("no seed violated Property 4.1: the property test cannot catch %s", sc.name)
			}
			t.Logf("%d of %d seeds caught it (%d violating timestamps)", caught, len(seeds), violations)
		})
	}
}

func checkUnique(t *testing.T, stamps []ts.Timestamp) {
	t.Helper()
	s := slices.Clone(stamps)
	slices.SortFunc(s, ts.Timestamp.Compare)
	for i := 1; i < len(s); i++ {
		if s[i] == s[i-1] {
			t.Fatalf("timestamp %v handed out twice", s[i])
		}
	}
}
