package check

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/meridiandb/meridian/internal/history"
)

// implications pairs each model with the weaker models every history valid under it must also
// be valid under: a cycle the weaker model forbids is one the stronger forbids too (process order
// is part of real-time order; a fractured read closes a cycle with one rw edge).
var implications = map[string][]string{
	"opacity":             {"strict-serializable"},
	"strict-serializable": {"rls", "snapshot-isolation", "serializable-no-stale-reads"},
	"rls":                 {"serializable"},
	// Its real-time edges join transactions sharing a key, which strict serializability's join
	// too; ww ∪ wr ∪ rw is serializable's.
	"serializable-no-stale-reads": {"serializable"},
	"serializable":                {"read-atomic"},
	"snapshot-isolation":          {"psi"},
	"psi":                         {"causal"}, // the causal pattern is a cycle with one rw edge
}

// perturbReads breaks a valid history in n random places, each a value some committed
// transaction read: a list read loses its last element, one in the middle, or has two swapped;
// a register read sees another value or none. Every change keeps the history well-formed, so
// the checker must judge it rather than refuse it.
func perturbReads(rng *rand.Rand, ops []history.Op, n int) {
	type at struct{ op, micro int }
	var reads []at
	for i, op := range ops {
		if op.Type != history.OK {
			continue
		}
		for j, m := range op.Value {
			if m.F == history.FRead {
				reads = append(reads, at{i, j})
			}
		}
	}
	for range n {
		if len(reads) == 0 {
			return
		}
		r := reads[rng.IntN(len(reads))]
		v := &ops[r.op].Value[r.micro].Value
		switch v.Kind {
		case history.List:
			l := slices.Clone(v.List)
			switch {
			case len(l) == 0:
				continue
			case rng.IntN(3) == 0:
				l = l[:len(l)-1]
			case rng.IntN(2) == 0:
				i := rng.IntN(len(l))
				l = slices.Delete(l, i, i+1)
			default:
				i, j := rng.IntN(len(l)), rng.IntN(len(l))
				l[i], l[j] = l[j], l[i]
			}
			v.List = l
		case history.Int:
			if rng.IntN(3) == 0 {
				*v = history.Value{}
			} else {
				v.Int = 1 + rng.Int64N(v.Int+2)
			}
		case history.None:
			*v = history.IntValue(1 + rng.Int64N(3))
		}
	}
}

// FuzzModelImplications: however a history is broken, a stronger model never accepts what a
// weaker one refuses. A checker bug that loses an anomaly in one model's search but not in
// another's shows up as a broken implication. Plain `go test` replays the seeds below;
// `go test ./internal/check -run '^$' -fuzz FuzzModelImplications` explores.
func FuzzModelImplications(f *testing.F) {
	for seed := uint64(1); seed <= 60; seed++ {
		f.Add(seed, uint8(seed*37), uint8(seed%4))
	}
	f.Fuzz(func(t *testing.T, seed uint64, shape, breaks uint8) {
		rng := rand.New(rand.NewPCG(seed, uint64(shape)))
		cfg := genConfig{txns: 8 + int(shape%32), procs: 2 + int(shape>>5%4), keys: 2 + int(shape>>3%3),
			opsPerTxn: 1 + int(seed%4), regions: 1 + int(seed%3), register: shape&0x80 != 0, failPct: 10, infoPct: 5}
		ops, _ := generate(rng, cfg)
		perturbReads(rng, ops, int(breaks%8))
		verdicts := map[string]string{}
		for _, m := range Models() {
			r, err := Check(ops, m)
			if err != nil {
				t.Fatalf("model %s: %v", m, err)
			}
			verdicts[m] = r.Verdict
		}
		for strong, weaker := range implications {
			if verdicts[strong] != Valid {
				continue
			}
			for _, weak := range weaker {
				if verdicts[weak] != Valid {
					t.Errorf("valid under %s but %s under %s", strong, verdicts[weak], weak)
				}
			}
		}
	})
}

// FuzzReadAndCheck: any text given to `meridian check` is a one-line error or a verdict under
// every model, never a panic. Seeds are the anomaly fixtures in testdata.
func FuzzReadAndCheck(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.jsonl")
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, text []byte) {
		ops, err := history.Read(bytes.NewReader(text))
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error is not one line: %q", err)
			}
			return
		}
		for _, m := range Models() {
			if _, err := Check(ops, m); err != nil && strings.Contains(err.Error(), "\n") {
				t.Fatalf("model %s: error is not one line: %q", m, err)
			}
		}
	})
}
