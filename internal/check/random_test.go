package check

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/meridiandb/meridian/internal/history"
)

// TestSerialHistoriesValid: histories of serial executions (with failed and unknown-outcome
// transactions, concurrency in real time, several regions) are valid under every model.
func TestSerialHistoriesValid(t *testing.T) {
	for _, register := range []bool{false, true} {
		for seed := uint64(1); seed <= 40; seed++ {
			rng := rand.New(rand.NewPCG(seed, 7))
			cfg := genConfig{txns: 150, procs: 2 + int(seed%6), keys: 3 + int(seed%5), opsPerTxn: 4, regions: 1 + int(seed%3),
				register: register, failPct: 10, infoPct: 5}
			ops, _ := generate(rng, cfg)
			for _, m := range Models() {
				r, err := Check(ops, m)
				if err != nil {
					t.Fatalf("seed %d register %v: %v", seed, register, err)
				}
				if r.Verdict != Valid {
					t.Fatalf("seed %d register %v model %s: verdict %s, want valid\n%s", seed, register, m, r.Verdict, r)
				}
			}
		}
	}
}

// TestBrokenHistoriesFlagged: each mutant breaks a serial execution in one place; the models that
// forbid what it did must say invalid, on every seed where the mutant took effect.
func TestBrokenHistoriesFlagged(t *testing.T) {
	cases := []struct {
		mutant string
		models []string
	}{
		{mutantStale, []string{"strict-serializable", "rls", "opacity"}},
		{mutantLostUpdate, []string{"serializable", "strict-serializable", "rls", "snapshot-isolation", "psi", "opacity"}},
		{mutantAbortedRead, Models()},
	}
	for _, tc := range cases {
		exercised := 0
		for seed := uint64(1); seed <= 30; seed++ {
			rng := rand.New(rand.NewPCG(seed, 11))
			cfg := genConfig{txns: 120, procs: 4, keys: 4, opsPerTxn: 4, regions: 2, failPct: 15, infoPct: 3, mutant: tc.mutant}
			ops, mutated := generate(rng, cfg)
			if !mutated {
				continue
			}
			exercised++
			for _, m := range tc.models {
				r, err := Check(ops, m)
				if err != nil {
					t.Fatal(err)
				}
				if r.Verdict != Invalid {
					t.Errorf("%s seed %d model %s: verdict %s, want invalid\n%s", tc.mutant, seed, m, r.Verdict, r)
				}
			}
		}
		if exercised < 10 {
			t.Errorf("%s: only %d of 30 seeds exercised the mutant", tc.mutant, exercised)
		}
	}
}

func TestCheckErrors(t *testing.T) {
	ops, _ := generate(rand.New(rand.NewPCG(1, 1)), genConfig{txns: 5, procs: 2, keys: 2, opsPerTxn: 2, regions: 1})
	if _, err := Check(ops, "linearizable"); err == nil {
		t.Error("unknown model accepted")
	}
	// A completion with no invocation.
	bad := slices.Clone(ops[1:])
	for i := range bad {
		if bad[i].Type != "invoke" {
			bad = bad[i:]
			break
		}
	}
	if _, err := Check(bad, "serializable"); err == nil {
		t.Error("completion without invocation accepted")
	}
}

// TestMalformedInput: every kind of broken input is a one-line error naming where it is.
func TestMalformedInput(t *testing.T) {
	cases := []struct{ name, text, want string }{
		{"bad json", `{"index":0,"type":"invoke","process":1,"value":[["r",1,null]]}` + "\n" + `{"index":1,"type":"ok",`, "line 2"},
		{"unknown type", `{"index":0,"type":"begin","process":1}`, "line 1"},
		{"unknown micro-op", `{"index":0,"type":"invoke","process":1,"value":[["cas",1,2]]}`, "line 1"},
		{"trailing text", `{"index":0,"type":"invoke","process":1,"value":[["r",1,null]]} x`, "line 1"},
		{"orphan completion", `{"index":0,"type":"ok","process":1,"value":[["r",1,[]]]}`, "line 1 (index 0)"},
		{"list and register", `{"index":0,"type":"invoke","process":1,"value":[["append",1,1],["w",1,2]]}`, "key 1"},
		{"append of a list", `{"index":0,"type":"invoke","process":1,"value":[["append",1,[1]]]}`, "line 1 (index 0)"},
		// The blank line makes line and op numbers differ: the error must name the line.
		{"double invoke", `{"index":0,"type":"invoke","process":1,"value":[["r",1,null]]}` + "\n\n" + `{"index":1,"type":"invoke","process":1,"value":[["r",1,null]]}`, "line 3 (index 1)"},
		// A completion must restate its invocation: only the values read may differ.
		{"read completed as an append", `{"index":0,"type":"invoke","process":1,"value":[["r",1,null]]}` + "\n\n" + `{"index":1,"type":"ok","process":1,"value":[["append",1,9]]}`,
			`line 3 (index 1): ok completion of process 1 does not restate its invocation (index 0): micro-op 1 is ["append",1,9] where the invocation asked for ["r",1,null]`},
		{"other key", `{"index":0,"type":"invoke","process":1,"value":[["r",1,null]]}` + "\n" + `{"index":1,"type":"ok","process":1,"value":[["r",2,[1]]]}`, `micro-op 1 is ["r",2,[1]] where the invocation asked for ["r",1,null]`},
		{"other appended value", `{"index":0,"type":"invoke","process":1,"value":[["append",1,5]]}` + "\n" + `{"index":1,"type":"ok","process":1,"value":[["append",1,6]]}`, `micro-op 1 is ["append",1,6]`},
		{"other written value", `{"index":0,"type":"invoke","process":1,"value":[["w",1,5]]}` + "\n" + `{"index":1,"type":"ok","process":1,"value":[["w",1,6]]}`, `micro-op 1 is ["w",1,6]`},
		// A fail or info completion may reorder or stop early, but not name a write not asked for.
		{"info with another append", `{"index":0,"type":"invoke","process":1,"value":[["append",1,5]]}` + "\n" + `{"index":1,"type":"info","process":1,"value":[["append",1,6]]}`,
			`line 2 (index 1): info completion of process 1 records what its invocation (index 0) did not ask for: micro-op 1, ["append",1,6], is not among the invocation's`},
		{"fail with another key", `{"index":0,"type":"invoke","process":1,"value":[["r",1,null],["w",2,3]]}` + "\n" + `{"index":1,"type":"fail","process":1,"value":[["w",2,3],["r",3,4]]}`,
			`micro-op 2, ["r",3,4], is not among the invocation's`},
		{"ok missing a micro-op", `{"index":0,"type":"invoke","process":1,"value":[["r",1,null],["append",1,4]]}` + "\n" + `{"index":1,"type":"ok","process":1,"value":[["r",1,[]]]}`, "line 2 (index 1): ok completion of process 1 does not restate its invocation (index 0): it has 1 micro-ops, the invocation 2"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ops, err := history.Read(strings.NewReader(tc.text))
			if err == nil {
				_, err = Check(ops, "serializable")
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("error %v, want a one-line error mentioning %q", err, tc.want)
			}
		})
	}
}

// TestFailCompletionsNotRestated: a fail or info completion may record what the transaction
// performed, in the order it performed it (the list and register bodies buffer writes to the
// end), or stop early; it says nothing the checker uses, so it is not held to restating its
// invocation as an ok is. (Holding it so refused every crdb and spanner rw-register history.)
func TestFailCompletionsNotRestated(t *testing.T) {
	for _, typ := range []string{"fail", "info"} {
		text := `{"index":0,"type":"invoke","process":1,"value":[["r",2,null],["w",7,134]]}` + "\n" +
			`{"index":1,"type":"` + typ + `","process":1,"value":[["w",7,134],["r",2,null]]}` + "\n" +
			`{"index":2,"type":"invoke","process":2,"value":[["r",7,null]]}` + "\n" +
			`{"index":3,"type":"ok","process":2,"value":[["r",7,null]]}`
		ops, err := history.Read(strings.NewReader(text))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Check(ops, "serializable"); err != nil {
			t.Errorf("%s completion in another order: %v", typ, err)
		}
	}
}

// TestWidelyBrokenHistory: when a mutant strikes everywhere the graph has large strongly connected
// components; every model that forbids the mutant still reports it, with a cycle per component.
func TestWidelyBrokenHistory(t *testing.T) {
	ops, _ := generate(rand.New(rand.NewPCG(3, 3)), genConfig{txns: 3000, procs: 10, keys: 16, opsPerTxn: 4, regions: 2, failPct: 5,
		mutant: mutantLostUpdate, mutateAll: true})
	for _, m := range Models() {
		r, err := Check(ops, m)
		if err != nil {
			t.Fatal(err)
		}
		if r.Verdict != Invalid || len(r.Anomalies) < 10 {
			t.Errorf("%s: verdict %s with %d anomalies, want invalid with many", m, r.Verdict, len(r.Anomalies))
		}
		for _, a := range r.Anomalies {
			for i, e := range a.Cycle {
				if next := a.Cycle[(i+1)%len(a.Cycle)]; e.To != next.From {
					t.Fatalf("%s: %s cycle does not close: %+v", m, a.Type, a.Cycle)
				}
			}
		}
	}
}
