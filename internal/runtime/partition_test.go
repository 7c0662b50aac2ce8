package runtime

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/meridiandb/meridian/internal/topo"
)

// keyAt returns a key whose primary is node id.
func keyAt(t *testing.T, cfg *Config, id topo.NodeID, prefix string) string {
	t.Helper()
	for i := range 10000 {
		if k := fmt.Sprintf("%s%d", prefix, i); cfg.Topology.PrimaryOf(k) == id {
			return k
		}
	}
	t.Fatalf("no key of %s found on node %d", prefix, id)
	return ""
}

// A cut between SH and BJ stops sh-1's transactions on bj-1's keys, not those on its own or
// SG's, and once healed the same transactions commit again over fresh connections.
func TestPartitionCutsAndHeals(t *testing.T) {
	cfg := testConfig(t, func(text string) string {
		// A transaction whose node is cut off gives up after op-timeout; keep that short.
		return strings.Replace(text, `ttl = "5ms"`, "ttl = \"5ms\"\nop-timeout = \"300ms\"", 1)
	})
	servers := startCluster(t, cfg)
	sh := dial(t, cfg, 0)
	onSH, onBJ, onSG := keyAt(t, cfg, 0, "cut-sh"), keyAt(t, cfg, 1, "cut-bj"), keyAt(t, cfg, 2, "cut-sg")
	for _, k := range []string{onSH, onBJ, onSG} {
		if err := put(sh, k, "before"); err != nil {
			t.Fatalf("put %s before the cut: %v", k, err)
		}
	}
	cut := func(regions map[string][]string) {
		t.Helper()
		for _, s := range servers {
			if err := s.SetCut(regions[cfg.Topology.Regions[s.me.Region].Name]); err != nil {
				t.Fatal(err)
			}
		}
	}
	cut(map[string][]string{"SH": {"BJ"}, "BJ": {"SH"}})
	for _, k := range []string{onSH, onSG} {
		if err := put(sh, k, "during"); err != nil {
			t.Errorf("put %s from SH during the SH|BJ cut: %v", k, err)
		}
	}
	if err := put(sh, onBJ, "during"); err == nil {
		t.Errorf("put %s (on bj-1) from SH committed across the SH|BJ cut", onBJ)
	}
	cut(nil)
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := put(sh, onBJ, "after")
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("put %s 10s after the cut healed: %v", onBJ, err)
		}
	}
	if got, err := get(dial(t, cfg, 1), onBJ); err != nil || got != "after" {
		t.Errorf("bj-1 reads %s = %q, %v after the heal; want after", onBJ, got, err)
	}
	for _, bad := range [][]string{{"XX"}, {"SH"}} {
		if err := servers[0].SetCut(bad); err == nil {
			t.Errorf("sh-1 cut off from %v: accepted", bad)
		}
	}
}

// A frame sent while its regions are cut is lost even when the cut heals before its emulated
// delay has passed, as the simulator loses it: it was checked only as it left, after the delay,
// and arrived.
func TestFrameSentDuringCutIsLost(t *testing.T) {
	cfg := testConfig(t, func(text string) string { return strings.Replace(text, "scale = 0.02", "scale = 5", 1) })
	servers := startCluster(t, cfg)
	sh, bj := servers[0], servers[1]
	oneWay := cfg.delay(sh.me.Region, bj.me.Region)
	undecodable := []byte{0xee, 0xee, 0xee, 0xee} // counted by the receiver as it drops it
	sh.peers[bj.id].enqueue(bj.id, undecodable)
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal(what)
			}
		}
	}
	waitFor("the first frame never arrived", func() bool { return bj.decodeErrs.Load() == 1 })
	for _, s := range []*Server{sh, bj} {
		if err := s.SetCut([]string{map[topo.RegionID]string{0: "BJ", 1: "SH"}[s.me.Region]}); err != nil {
			t.Fatal(err)
		}
	}
	sh.peers[bj.id].enqueue(bj.id, undecodable)
	for _, s := range []*Server{sh, bj} {
		_ = s.SetCut(nil)
	}
	sh.peers[bj.id].enqueue(bj.id, undecodable) // after the heal: arrives, after the one cut if that were not lost
	waitFor("the frame sent after the heal never arrived", func() bool { return bj.decodeErrs.Load() >= 2 })
	time.Sleep(oneWay / 2) // anything behind it would have come by now: one link, one delay
	if got := bj.decodeErrs.Load(); got != 2 {
		t.Errorf("bj-1 received %d frames of three, the second sent during a cut; want 2", got)
	}
}
