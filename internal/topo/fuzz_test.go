package topo

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzParse: a topology file, however malformed, is a one-line error or a topology that holds
// together (every region reachable from every other at a finite round trip), never a panic.
// `go test ./internal/topo -fuzz FuzzParse` explores; plain `go test` replays the seeds.
func FuzzParse(f *testing.F) {
	f.Add("name = \"tri\"\nintra_rtt_ms = 0.2\n[[region]]\nname = \"A\"\nrtt_ms = { B = 10 }\n[[region]]\nname = \"B\"\n[layout]\nnodes_per_region = 2\nreplication = \"backups\"\nbackups = 1\n")
	files, _ := filepath.Glob("../../configs/*.toml")
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(string(b))
		}
	}
	f.Fuzz(func(t *testing.T, text string) {
		tp, err := Parse("fuzz.toml", text, DefaultLayout())
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error is not one line: %q", err)
			}
			return
		}
		n := len(tp.Regions)
		if n == 0 || len(tp.RTT) != n {
			t.Fatalf("%d regions, an RTT matrix of %d rows", n, len(tp.RTT))
		}
		for i := range n {
			if len(tp.RTT[i]) != n {
				t.Fatalf("RTT row %d has %d entries for %d regions", i, len(tp.RTT[i]), n)
			}
			for j := range n {
				if tp.RTT[i][j] < 0 || tp.RTT[i][j] != tp.RTT[j][i] {
					t.Fatalf("RTT[%d][%d]=%v, RTT[%d][%d]=%v", i, j, tp.RTT[i][j], j, i, tp.RTT[j][i])
				}
			}
			if len(tp.DataNodes(RegionID(i))) == 0 {
				t.Fatalf("region %d has no data node", i)
			}
		}
	})
}
