package repro

import (
	"encoding/csv"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/meridiandb/meridian/internal/bench"
	_ "github.com/meridiandb/meridian/internal/protocol/k2" // registers k2
)

// With --seeds, every point runs once per seed, the report shows each point's mean and says so,
// and the CSV gives the range over the seeds.
func TestExecuteAveragesSeeds(t *testing.T) {
	tiny := Scale{Name: "tiny", NodesPerRegion: 1, ClientsPerRegion: 3, Warmup: 100 * time.Millisecond, Duration: 300 * time.Millisecond}
	e := &Experiment{
		Name: "seeds-test", Paper: "none", About: "two loads of list-append",
		Plan: func(sc Scale, seed uint64) []*Run {
			var runs []*Run
			for _, clients := range []int{1, 3} {
				s := bench.Spec{ClientsPerRegion: clients, Warmup: sc.Warmup, Duration: sc.Duration}
				p := bench.DefaultWorkloadParams("list-append")
				p.Keys = 20
				runs = append(runs, &Run{Series: "k2", X: float64(clients), Spec: s, Params: p,
					Deploy: bench.Deployment{Protocol: "k2", Topology: "k2-5region", NodesPerRegion: sc.NodesPerRegion, ShardsPerNode: 1, Seed: seed}})
			}
			return runs
		},
		// Throughput still rises at 3 clients, so the sweep grows to 6 (and on while it rises).
		Extend: extendLoadSweep,
		Report: func(runs []*Run, dir string) (string, error) {
			return sweepReport(runs, dir, "clients", "clients", "test", []metric{{"throughput (txn/s)", "throughput", "throughput", false, throughput}})
		},
	}
	out := t.TempDir()
	var progress [][2]int
	path, err := Execute(e, Options{Scale: tiny, Seed: 5, Seeds: 3, Out: out, Parallel: 1,
		Progress: func(done, total int) { progress = append(progress, [2]int{done, total}) }})
	if err != nil {
		t.Fatal(err)
	}
	// Progress counts on through the extension rounds: it counted each round from zero
	// against that round's own total, and the bar of the first round finished early.
	for i, p := range progress {
		if p[0] != i+1 || p[0] > p[1] || (i > 0 && p[1] < progress[i-1][1]) {
			t.Fatalf("progress %v: want done to count 1, 2, ... up to a total that never falls", progress)
		}
	}
	if last := progress[len(progress)-1]; last[0] != last[1] || last[1] <= 6 {
		t.Errorf("progress ends at %v: want every run done, more than the first round's 6", last)
	}
	body, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(body), "seeds 5–7") || !strings.Contains(string(body), "--seed 5 --seeds 3") {
		t.Errorf("the report does not say which seeds it averaged:\n%s", body)
	}
	f, err := os.Open(filepath.Join(out, e.Name, "results.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(rows[0], ","); got != "series,clients,throughput (txn/s),throughput (txn/s) min,throughput (txn/s) max" {
		t.Fatalf("CSV header %q", got)
	}
	differ, extended := false, false
	for _, row := range rows[1:] {
		extended = extended || row[1] == "6.000"
		mean, _ := strconv.ParseFloat(row[2], 64)
		lo, _ := strconv.ParseFloat(row[3], 64)
		hi, _ := strconv.ParseFloat(row[4], 64)
		if !(lo <= mean && mean <= hi) || lo <= 0 {
			t.Errorf("row %v: mean outside its range", row)
		}
		differ = differ || lo < hi
	}
	if !extended {
		t.Errorf("the sweep was not extended past its rising edge: %v", rows)
	}
	if !differ {
		t.Error("three seeds gave identical throughputs at every point: the seeds were not applied")
	}
}
