package check

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/meridiandb/meridian/internal/history"
)

// A fixture is a hand-written history in testdata/*.jsonl. Its leading "#" lines describe it and
// label every model: "# valid: …", "# invalid: …" and "# unknown: …" together must name each
// model exactly once, and the test asserts each verdict.
type fixture struct {
	name     string
	verdicts map[string]string
	ops      []history.Op
}

func loadFixtures(t *testing.T) []fixture {
	t.Helper()
	paths, err := filepath.Glob("testdata/*.jsonl")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	var out []fixture
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		f := fixture{name: strings.TrimSuffix(filepath.Base(p), ".jsonl"), verdicts: map[string]string{}}
		var body bytes.Buffer
		sc := bufio.NewScanner(bytes.NewReader(data))
		for sc.Scan() {
			line := sc.Text()
			if !strings.HasPrefix(line, "#") {
				body.WriteString(line + "\n")
				continue
			}
			label, models, ok := strings.Cut(strings.TrimSpace(strings.TrimPrefix(line, "#")), ":")
			if !ok || !slices.Contains([]string{Valid, Invalid, Unknown}, label) {
				continue
			}
			for _, m := range strings.Fields(models) {
				if _, dup := f.verdicts[m]; dup {
					t.Fatalf("%s: model %s labelled twice", p, m)
				}
				f.verdicts[m] = label
			}
		}
		for _, m := range Models() {
			if _, ok := f.verdicts[m]; !ok {
				t.Fatalf("%s: model %s has no expected verdict", p, m)
			}
		}
		if len(f.verdicts) != len(Models()) {
			t.Fatalf("%s: labels name a model that does not exist: %v", p, f.verdicts)
		}
		f.ops, err = history.Read(&body)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		out = append(out, f)
	}
	return out
}

func TestFixtures(t *testing.T) {
	for _, f := range loadFixtures(t) {
		for _, m := range Models() {
			t.Run(f.name+"/"+m, func(t *testing.T) {
				r, err := Check(f.ops, m)
				if err != nil {
					t.Fatalf("Check: %v", err)
				}
				if r.Verdict != f.verdicts[m] {
					t.Errorf("verdict %s, want %s\n%s", r.Verdict, f.verdicts[m], r)
				}
				if r.Verdict == Invalid {
					for _, a := range r.Anomalies {
						if a.Type == "" || a.Explanation == "" {
							t.Errorf("anomaly without type or explanation: %+v", a)
						}
					}
				}
			})
		}
	}
}

// TestFixtureAnomalyTypes pins the anomaly each fixture is about, under the strongest model that
// reports it, so a fixture cannot pass for the wrong reason.
func TestFixtureAnomalyTypes(t *testing.T) {
	want := []struct {
		fixture, model, anomaly string
	}{
		{"g0", "serializable", "G0"},
		{"g1a", "serializable", "G1a"},
		{"g1b", "serializable", "G1b"},
		{"g1c", "serializable", "G1c"},
		{"g-single-read-skew", "serializable", "G-single"},
		{"g-single-read-skew", "causal", "causality-violation"},
		{"g2-write-skew", "serializable", "G2-item"},
		{"lost-update", "snapshot-isolation", "lost-update"},
		{"long-fork", "snapshot-isolation", "G-nonadjacent"},
		{"realtime-one-region", "strict-serializable", "G-single-realtime"},
		{"realtime-one-region", "rls", "G-single-realtime"},
		{"causality-violation", "causal", "causality-violation"},
		{"causality-violation", "psi", "G-single-process"},
		{"fractured-read", "read-atomic", "fractured-read"},
		{"fractured-read", "causal", "fractured-read"},
		{"opacity-aborted-snapshot", "opacity", "G-single-aborted-reader"},
		{"internal", "serializable", "internal"},
		{"duplicate-append", "serializable", "duplicate-append"},
		{"incompatible-order", "serializable", "incompatible-order"},
		{"register-write-skew", "serializable", "G2-item"},
		{"register-lost-update", "psi", "lost-update"},
		{"register-g1b", "serializable", "G1b"},
	}
	fixtures := map[string]fixture{}
	for _, f := range loadFixtures(t) {
		fixtures[f.name] = f
	}
	for _, w := range want {
		f, ok := fixtures[w.fixture]
		if !ok {
			t.Fatalf("no fixture %s", w.fixture)
		}
		r, err := Check(f.ops, w.model)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(r.AnomalyTypes, w.anomaly) {
			t.Errorf("%s under %s: anomalies %v, want %s\n%s", w.fixture, w.model, r.AnomalyTypes, w.anomaly, r)
		}
	}
}
