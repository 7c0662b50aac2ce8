package main

import (
	"testing"

	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/workload/listappend"
)

// kv exec and the list-append workload must name keys alike, or they would not see each other's
// data.
func TestExecKeysMatchListAppend(t *testing.T) {
	for _, preset := range []string{"k2-3region", "k2-5region", "single-dc"} {
		tp, err := topo.FromPreset(preset, topo.DefaultLayout())
		if err != nil {
			t.Fatal(err)
		}
		w, err := listappend.New(tp, listappend.Config{Keys: 200})
		if err != nil {
			t.Fatal(err)
		}
		for k := int64(0); k < 200; k++ {
			if got, want := laKey(tp, k), w.KeyName(k); got != want {
				t.Fatalf("%s: key %d: kv exec uses %q, list-append %q", preset, k, got, want)
			}
		}
	}
}
