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
		{"[[region]]\nname = \"A\"\nrtt_ms = { a = 10 }\n[[region]]\nname = \"a\"\n", `regions "A" and "a" differ only in case`},
		{"[[region]]\nname = \"A\"\nrtt_ms = { A = 10 }\n[[region]]\nname = \"A\"\n", `region "A" defined twice`},
		{"[[region]]\nname = \"X|Y\"\n", `region name "X|Y": use letters, digits`},
		{"[[region]]\nname = \" \"\n", `region name " ": use letters, digits`},
		{"[[region]]\nname = \"line1\\nline2\"\n", `region name "line1\nline2": use letters, digits`},
		{"", "no [[region]]"},
		{"[[region]]\nname = \"A\"\nrtt_ms = { B = nan }\n[[region]]\nname=\"B\"\n", "bad.toml:3: region \"A\": rtt_ms to \"B\" must be 0..100000, got NaN"},
		{"intra_rtt_ms = 1e30\n[[region]]\nname = \"A\"\n", "bad.toml:1: intra_rtt_ms must be 0..100000, got 1e+30"},
		{"intra_rtt_ms = nan\n[[region]]\nname = \"A\"\n", "bad.toml:1: intra_rtt_ms must be 0..100000, got NaN"},
		{"intra_rtt_ms = -1\n[[region]]\nname = \"A\"\n", "bad.toml:1: intra_rtt_ms must be 0..100000, got -1"},
		{"[[region]]\nname = \"A\"\n[layout]\nshards_per_node = -3\n", "bad.toml:4: shards_per_node must be 1..1024, got -3"},
		{"[[region]]\nname = \"A\"\n[layout]\nshards_per_node = 100000\n", "bad.toml:4: shards_per_node must be 1..1024, got 100000"},
		{"[[region]]\nname = \"A\"\n[layout]\nnodes_per_region = -3\n", "bad.toml:4: nodes_per_region must be 1..1000, got -3"},
		{"[[region]]\nname = \"A\"\n[layout]\nnodes_per_region = 0\n", "bad.toml:4: nodes_per_region must be 1..1000, got 0"},
		{"[[region]]\nname = \"A\"\n[layout]\nshards_per_node = 0\n", "bad.toml:4: shards_per_node must be 1..1024, got 0"},
		{"[[region]]\nname = \"A\"\n[layout]\nnodes_per_region = 5000\n", "bad.toml:4: nodes_per_region must be 1..1000, got 5000"},
		{"[[region]]\nname = \"A\"\n[layout]\nreplication = \"backups\"\nbackups = -2\n", "bad.toml:5: backups must not be negative, got -2"},
		// Each value within its bound, the product far beyond memory.
		{"[[region]]\nname = \"A\"\nrtt_ms = { B = 3 }\n[[region]]\nname=\"B\"\n[layout]\nnodes_per_region = 1000\nshards_per_node = 1024\n", "2048000 shard replicas; at most 1048576"},
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

func TestBuildRefusesHugeLayouts(t *testing.T) {
	cases := []struct {
		preset string
		l      Layout
		want   string
	}{
		{"uniform:100:5", Layout{NodesPerRegion: 1000, ShardsPerNode: 1024}, "at most 1048576"},
		{"uniform:100:5", Layout{NodesPerRegion: 100, ShardsPerNode: 4, Replication: ReplicateEveryRegion}, "4000000 shard replicas"},
		{"k2-3region", Layout{NodesPerRegion: 1, ShardsPerNode: 5000}, "shards per node must be 1..1024"},
		{"single-dc", Layout{NodesPerRegion: 3, ShardsPerNode: 1, Replication: ReplicateLocalBackup, Backups: -1}, "backups must not be negative"},
	}
	for _, c := range cases {
		_, err := FromPreset(c.preset, c.l)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %+v: error %v, want it to contain %q", c.preset, c.l, err, c.want)
		}
	}
	// The largest layouts the flags allow on a small topology still build.
	if _, err := FromPreset("k2-5region", Layout{NodesPerRegion: 100, ShardsPerNode: 1024}); err != nil {
		t.Fatalf("5 regions × 100 nodes × 1024 shards: %v", err)
	}
}

// TestRangeShard: every range RangeShard places on one shard holds only that shard's keys,
// checked over all short strings of an alphabet that covers the boundary cases ('/' and the
// byte after it), and the ranges a prefix scan makes are placed.
func TestRangeShard(t *testing.T) {
	tp, err := FromPreset("k2-5region", DefaultLayout())
	if err != nil {
		t.Fatal(err)
	}
	alphabet := []byte("#1/0a.")
	var keys []string
	var grow func(prefix string)
	grow = func(prefix string) {
		keys = append(keys, prefix)
		if len(prefix) < 4 {
			for _, c := range alphabet {
				grow(prefix + string(c))
			}
		}
	}
	grow("")
	placed := 0
	for _, start := range keys {
		for _, end := range keys {
			s, ok := tp.RangeShard(start, end)
			if !ok {
				continue
			}
			placed++
			for _, k := range keys {
				if start <= k && k < end && tp.ShardOf(k) != s {
					t.Fatalf("RangeShard(%q, %q) = %d, but %q in the range is on shard %d", start, end, s, k, tp.ShardOf(k))
				}
			}
		}
	}
	if placed == 0 {
		t.Fatal("no range placed on one shard")
	}
	for _, p := range keys {
		end := PrefixEnd(p)
		for _, k := range keys {
			if in := p <= k && (end == "" || k < end); in != strings.HasPrefix(k, p) {
				t.Fatalf("key %q in [%q, PrefixEnd = %q): %v, but it begins with the prefix: %v", k, p, end, in, !in)
			}
		}
	}
	for _, c := range []struct {
		start, end string
		one        bool
	}{
		{"#3/", PrefixEnd("#3/"), true},
		{"#3/row-", PrefixEnd("#3/row-"), true},
		{"w1/a", "w1/b", true},
		{"w1/a", "w2/a", false},
		{"w1", "w1/z", false}, // "w1.x" lies between, a prefix of its own
		{"#3/", "", false},
		{"a", "b", false},
		{"w1/b", "w1/a", false},
	} {
		if _, ok := tp.RangeShard(c.start, c.end); ok != c.one {
			t.Errorf("RangeShard(%q, %q) placed %v, want %v", c.start, c.end, ok, c.one)
		}
	}
	for in, want := range map[string]string{"#3/": "#30", "a\x7f": "a\u0080", "\ud7ff": "\ue000", "a\U0010ffff": "b",
		"\U0010ffff": "", "a\xff": "b", "\xff\xff": "", "": ""} {
		if got := PrefixEnd(in); got != want {
			t.Errorf("PrefixEnd(%q) = %q, want %q", in, got, want)
		}
	}
}
