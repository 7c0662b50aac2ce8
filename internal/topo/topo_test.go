package topo

import (
	"strings"
	"testing"
	"time"
)

func TestPresets(t *testing.T) {
	for _, name := range []string{"k2-5region", "k2-3region", "wren-3dc", "wren-5dc", "single-dc", "uniform:10:50"} {
		tp, err := FromPreset(name, DefaultLayout())
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(tp.Shards) == 0 || len(tp.Nodes) == 0 {
			t.Fatalf("%s: empty", name)
		}
	}
	tp, _ := FromPreset("k2-5region", DefaultLayout())
	sh, _ := tp.RegionByName("SH")
	sg, _ := tp.RegionByName("SG")
	if got := tp.OneWay(sh, sg); got != 34650*time.Microsecond {
		t.Fatalf("SH→SG one-way %v, want 34.65ms", got)
	}
	if got := tp.OneWay(sh, sh); got != 100*time.Microsecond {
		t.Fatalf("intra-region one-way %v, want 0.1ms", got)
	}
	u, _ := FromPreset("uniform:10:50", DefaultLayout())
	if u.RTT[3][7] != 50*time.Millisecond {
		t.Fatalf("uniform RTT %v", u.RTT[3][7])
	}
}

func TestShardPinningAndHoming(t *testing.T) {
	l := DefaultLayout()
	l.NodesPerRegion = 2
	tp, err := FromPreset("k2-5region", l)
	if err != nil {
		t.Fatal(err)
	}
	for s := range tp.Shards {
		k := PinnedKey(ShardID(s), "row/7")
		if got := tp.ShardOf(k); got != ShardID(s) {
			t.Fatalf("pinned key %q on shard %d, want %d", k, got, s)
		}
		if tp.Nodes[tp.PrimaryOf(k)].Region != tp.Shards[s].Home {
			t.Fatalf("shard %d primary outside its home region", s)
		}
	}
	if tp.ShardOf("w1/d/3") != tp.ShardOf("w1/c/9") {
		t.Fatal("keys sharing a routing prefix must share a shard")
	}
	for r := range tp.Regions {
		if n := len(tp.ShardsHomedIn(RegionID(r))); n != 8 {
			t.Fatalf("region %d homes %d shards, want 8", r, n)
		}
	}
}

func TestReplication(t *testing.T) {
	l := DefaultLayout()
	tp, err := FromPreset("wren-3dc", l)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range tp.Shards {
		if len(s.Replicas) != 3 {
			t.Fatalf("wren shard %d has %d replicas, want one per DC", s.ID, len(s.Replicas))
		}
	}
	l.NodesPerRegion, l.Replication, l.Backups = 3, ReplicateLocalBackup, 2
	fp, err := FromPreset("single-dc", l)
	if err != nil {
		t.Fatal(err)
	}
	if len(fp.Shards[0].Replicas) != 3 {
		t.Fatalf("primary-backup shard has %d replicas", len(fp.Shards[0].Replicas))
	}
}

func TestParseFile(t *testing.T) {
	good := `name = "tri"
intra_rtt_ms = 0.2
[[region]]
name = "A"
rtt_ms = { B = 10, C = 20 }
[[region]]
name = "B"
rtt_ms = { C = 30 }
[[region]]
name = "C"
[layout]
nodes_per_region = 2
`
	tp, err := Parse("good.toml", good, DefaultLayout())
	if err != nil {
		t.Fatal(err)
	}
	if tp.RTT[2][1] != 30*time.Millisecond || len(tp.DataNodes(0)) != 2 {
		t.Fatalf("parsed wrong: %v", tp.RTT)
	}
	bad := []struct{ text, want string }{
		{"name = \n", "bad.toml:1"},
		{"[[region]]\nname = \"A\"\nrtt_ms = { Z = 3 }\n[[region]]\nname=\"B\"\n", "bad.toml:3: region \"A\": rtt_ms names unknown region \"Z\""},
		{"[[region]]\nname = \"A\"\n[[region]]\nname = \"B\"\n", "no rtt_ms between"},
		{"[[region]]\nname = \"A\"\nrtt_ms = { B = -1 }\n[[region]]\nname=\"B\"\n", "must be 0..100000"},
		{"colour = 3\n[[region]]\nname = \"A\"\n", "bad.toml:1: unknown key \"colour\""},
		{"", "no [[region]]"},
	}
	for _, b := range bad {
		_, err := Parse("bad.toml", b.text, DefaultLayout())
		if err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("Parse(%q) error %v, want it to contain %q", b.text, err, b.want)
		}
		if err != nil && strings.Contains(err.Error(), "\n") {
			t.Errorf("error is not one line: %q", err)
		}
	}
}
