package ycsbt

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/meridiandb/meridian/client"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/wire"
	"github.com/meridiandb/meridian/internal/workload/memdb"
)

// recorder is a Transport that answers every request at once and remembers what was asked.
type recorder struct{ reqs []wire.ClientRequest }

func (r *recorder) RoundTrip(req *wire.ClientRequest) (*wire.ClientReply, error) {
	r.reqs = append(r.reqs, *req)
	return &wire.ClientReply{Txn: req.Txn, Seq: req.Seq}, nil
}
func (r *recorder) Sleep(time.Duration) {}
func (r *recorder) Now() int64          { return 0 }

type access struct {
	key   string
	write bool
}

// runTrace runs one transaction against a recorder and returns its accesses (a
// read-modify-write shows as a read then a write of the same key).
func runTrace(t *testing.T, run func(*client.Txn) error, readOnly bool) []access {
	t.Helper()
	r := &recorder{}
	db := client.Open(r)
	tx := db.Begin(client.TxnOptions{ReadOnly: readOnly})
	if err := run(tx); err != nil {
		t.Fatal(err)
	}
	var out []access
	for _, q := range r.reqs {
		switch q.Op {
		case wire.OpGet:
			out = append(out, access{q.Key, false})
		case wire.OpPut:
			out = append(out, access{q.Key, true})
		}
	}
	return out
}

func testTopo(t *testing.T) *topo.Topology {
	t.Helper()
	tp, err := topo.FromPreset("k2-3region", topo.DefaultLayout())
	if err != nil {
		t.Fatal(err)
	}
	return tp
}

func mustNew(t *testing.T, cfg Config) *Workload {
	t.Helper()
	w, err := New(testTopo(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func within(t *testing.T, what string, got, want, tol float64) {
	t.Helper()
	if math.Abs(got-want) > tol {
		t.Errorf("%s = %.4f, want %.4f ± %.4f", what, got, want, tol)
	}
}

func TestPresets(t *testing.T) {
	for _, name := range []string{"k2", "rls", "wren", "fwkv"} {
		cfg, err := Preset(name)
		if err != nil {
			t.Fatal(err)
		}
		if name == "rls" || name == "k2" {
			cfg.Keys = 120_000 // the shape is what matters here, not the size
		}
		w := mustNew(t, cfg)
		c := w.NewClient(0, 1, rand.New(rand.NewPCG(1, 2)))
		for i := 0; i < 200; i++ {
			tx := c.Next()
			acc := runTrace(t, tx.Run, tx.ReadOnly)
			reads, writes := 0, 0
			for _, a := range acc {
				if a.write {
					writes++
				} else {
					reads++
				}
			}
			switch name {
			case "rls": // 5 reads + 5 read-modify-writes
				if reads != 10 || writes != 5 {
					t.Fatalf("rls: %d gets, %d puts; want 10, 5", reads, writes)
				}
			case "wren": // 19 reads, then 1 write
				if reads != 19 || writes != 1 || !acc[19].write {
					t.Fatalf("wren: %d reads, %d writes, last write? %v", reads, writes, acc[len(acc)-1].write)
				}
			case "fwkv": // 2 keys read (and written unless read-only)
				if reads != 2 || (writes != 0 && writes != 2) || tx.ReadOnly != (writes == 0) {
					t.Fatalf("fwkv: %d reads, %d writes, read-only %v", reads, writes, tx.ReadOnly)
				}
			case "k2":
				if reads+writes != 3 {
					t.Fatalf("k2: %d operations, want 3", reads+writes)
				}
			}
		}
	}
	if _, err := Preset("tatp"); err == nil {
		t.Error("unknown preset accepted")
	}
}

func TestRatios(t *testing.T) {
	const txns = 20_000
	cases := []struct {
		name                      string
		cfg                       Config
		writeShare, readOnlyShare float64
	}{
		{"per-op-50%", Config{Keys: 10_000, OpsPerTxn: 3, WriteRatio: 0.5, Theta: 0.8}, 0.5, 0.125},
		{"per-op-10%-ro-30%", Config{Keys: 10_000, OpsPerTxn: 4, WriteRatio: 0.1, ReadOnlyRatio: 0.3, Distribution: "uniform"},
			0.7 * 0.1, 0.3 + 0.7*math.Pow(0.9, 4)},
	}
	for _, c := range cases {
		w := mustNew(t, c.cfg)
		g := w.NewClient(3, 0, rand.New(rand.NewPCG(4, 4)))
		ops, writes, ro := 0, 0, 0
		for i := 0; i < txns; i++ {
			tx := g.Next()
			acc := runTrace(t, tx.Run, tx.ReadOnly)
			ops += len(acc)
			for _, a := range acc {
				if a.write {
					writes++
				}
			}
			if tx.ReadOnly {
				ro++
			}
		}
		within(t, c.name+" write share", float64(writes)/float64(ops), c.writeShare, 0.01)
		within(t, c.name+" read-only share", float64(ro)/txns, c.readOnlyShare, 0.01)
	}
}

func TestRegionLocality(t *testing.T) {
	tp := testTopo(t)
	w := mustNew(t, Config{Keys: 12_000, OpsPerTxn: 10, WriteRatio: 0.5, RMW: true, Theta: 0.75, RegionLocal: true, CrossRegionRatio: 0.1})
	const txns = 20_000
	for region := topo.RegionID(0); region < 3; region++ {
		g := w.NewClient(int(region), region, rand.New(rand.NewPCG(uint64(region), 8)))
		crossTxns := 0
		for i := 0; i < txns; i++ {
			tx := g.Next()
			acc := runTrace(t, tx.Run, tx.ReadOnly)
			remote, local, keys := 0, 0, map[string]bool{}
			for _, a := range acc {
				if a.write {
					continue
				}
				keys[a.key] = true
				if tp.HomeOf(a.key) == region {
					local++
				} else {
					remote++
				}
			}
			if len(keys) != 10 {
				t.Fatalf("%d distinct keys, want 10", len(keys))
			}
			if remote > 0 {
				crossTxns++
				if local == 0 || tp.HomeOf(acc[0].key) == region {
					t.Fatalf("cross-region transaction must start with a remote key and touch a local one: %v", acc)
				}
			}
		}
		within(t, "cross-region share", float64(crossTxns)/txns, 0.1, 0.01)
	}
}

// The arithmetic local-key mapping is a bijection onto the keys of the region's shards.
func TestLocalKeyMapping(t *testing.T) {
	tp := testTopo(t)
	w := mustNew(t, Config{Keys: 1205, OpsPerTxn: 2, RegionLocal: true, Distribution: "uniform"})
	for r := 0; r < 3; r++ {
		seen := map[uint64]bool{}
		n := w.local[r].N()
		if n != 1200/3 {
			t.Fatalf("region %d: %d local keys, want 400", r, n)
		}
		for j := uint64(0); j < n; j++ {
			k := w.localKey(r, j)
			if k >= 1205 || seen[k] || tp.HomeOf(w.KeyName(k)) != topo.RegionID(r) {
				t.Fatalf("region %d: index %d maps to key %d (seen %v, home %d)", r, j, k, seen[k], tp.HomeOf(w.KeyName(k)))
			}
			seen[k] = true
		}
	}
}

func TestPartitionsPerTxn(t *testing.T) {
	tp := testTopo(t)
	w := mustNew(t, Config{Keys: 12_000, OpsPerTxn: 20, WriteRatio: 0.05, FixedMix: true, Distribution: "zipfian", Theta: 0.99, PartitionsPerTxn: 4})
	g := w.NewClient(0, 0, rand.New(rand.NewPCG(2, 2)))
	for i := 0; i < 2000; i++ {
		tx := g.Next()
		shards := map[topo.ShardID]int{}
		for _, a := range runTrace(t, tx.Run, tx.ReadOnly) {
			shards[tp.ShardOf(a.key)]++
		}
		if len(shards) != 4 {
			t.Fatalf("transaction touched %d shards, want 4: %v", len(shards), shards)
		}
	}
}

func TestRMWCountsAgainstSerialStore(t *testing.T) {
	w := mustNew(t, Config{Keys: 50, OpsPerTxn: 2, WriteRatio: 1, RMW: true, Distribution: "uniform", ValueBytes: 12})
	s := memdb.New()
	if err := w.Load(client.Open(s.Transport())); err != nil {
		t.Fatal(err)
	}
	if s.Len() != 50 {
		t.Fatalf("loaded %d keys, want 50", s.Len())
	}
	db := client.Open(s.Transport())
	g := w.NewClient(0, 0, rand.New(rand.NewPCG(6, 6)))
	const txns = 300
	for i := 0; i < txns; i++ {
		tx := g.Next()
		if err := client.RunTxn(db, client.TxnOptions{ReadOnly: tx.ReadOnly}, tx.Run); err != nil {
			t.Fatal(err)
		}
	}
	total := uint64(0)
	for i := uint64(0); i < 50; i++ {
		v, _ := s.Get(w.KeyName(i))
		if len(v) != 12 {
			t.Fatalf("key %d: %d bytes, want 12", i, len(v))
		}
		total += binary.LittleEndian.Uint64(v)
	}
	if total != 2*txns {
		t.Fatalf("counters sum to %d after %d two-key read-modify-writes, want %d", total, txns, 2*txns)
	}
}

func TestDeterministic(t *testing.T) {
	w := mustNew(t, Config{Keys: 100_000, OpsPerTxn: 5, WriteRatio: 0.5, Theta: 0.99, RegionLocal: true, CrossRegionRatio: 0.3})
	draw := func() [][]access {
		g := w.NewClient(1, 2, rand.New(rand.NewPCG(77, 1)))
		var out [][]access
		for i := 0; i < 200; i++ {
			tx := g.Next()
			out = append(out, runTrace(t, tx.Run, tx.ReadOnly))
		}
		return out
	}
	if a, b := draw(), draw(); !reflect.DeepEqual(a, b) {
		t.Fatal("equal seeds gave different transactions")
	}
}

func TestBadConfig(t *testing.T) {
	for _, c := range []Config{
		{Keys: 1, OpsPerTxn: 1},
		{Keys: 100, OpsPerTxn: 0},
		{Keys: 100, OpsPerTxn: 1, WriteRatio: 1.5},
		{Keys: 100, OpsPerTxn: 1, Theta: 1},
		{Keys: 100, OpsPerTxn: 1, Distribution: "gauss"},
		{Keys: 100, OpsPerTxn: 1, ValueBytes: 4},
		{Keys: 100, OpsPerTxn: 1, PartitionsPerTxn: 99},
		{Keys: 100, OpsPerTxn: 1, PartitionsPerTxn: 2, RegionLocal: true},
		{Keys: 20, OpsPerTxn: 10, RegionLocal: true},
		// Refused before the O(keys) zeta sum, which would take minutes.
		{Keys: 2_000_000_000, OpsPerTxn: 1},
		{Keys: 2_000_000_000, OpsPerTxn: 1, Distribution: "latest"},
	} {
		if _, err := New(testTopo(t), c); err == nil {
			t.Errorf("accepted %+v", c)
		}
	}
}

// A uniform key choice costs nothing to set up, so it keeps the larger bound.
func TestUniformAcceptsHugeKeySpace(t *testing.T) {
	if _, err := New(testTopo(t), Config{Keys: 2_000_000_000, OpsPerTxn: 1, Distribution: "uniform"}); err != nil {
		t.Fatal(err)
	}
}

// TestScans: a share ScanRatio of the reads are scans of 1..ScanLength rows from their key
// within its shard (one shard per scan), which against a loaded serial store return that many
// rows of the shard in key order; transactions that scan are typed apart.
func TestScans(t *testing.T) {
	tp := testTopo(t)
	w := mustNew(t, Config{Keys: 2000, OpsPerTxn: 4, WriteRatio: 0.25, FixedMix: true, Distribution: "uniform", ValueBytes: 16, ScanRatio: 0.5, ScanLength: 20})
	s := memdb.New()
	if err := w.Load(client.Open(s.Transport())); err != nil {
		t.Fatal(err)
	}
	db := client.Open(s.Transport())
	g := w.NewClient(0, 0, rand.New(rand.NewPCG(8, 8)))
	reads, scans, scanTxns := 0, 0, 0
	for range 500 {
		tx := g.Next()
		r := &recorder{}
		if err := tx.Run(client.Open(r).Begin(client.TxnOptions{ReadOnly: tx.ReadOnly})); err != nil {
			t.Fatal(err)
		}
		scanned := false
		for _, q := range r.reqs {
			switch q.Op {
			case wire.OpGet:
				reads++
			case wire.OpScan:
				scans++
				scanned = true
				shard, ok := tp.RangeShard(q.Key, q.EndKey)
				if !ok || shard != tp.ShardOf(q.Key) {
					t.Fatalf("scan [%q, %q) is not within its key's shard", q.Key, q.EndKey)
				}
				if q.Limit < 1 || q.Limit > 20 {
					t.Fatalf("scan of %d rows, want 1..20", q.Limit)
				}
			}
		}
		if scanned != (tx.Type == "ycsbt-scan" || tx.Type == "ycsbt-ro-scan") {
			t.Fatalf("transaction of type %q scanned: %v", tx.Type, scanned)
		}
		if scanned {
			scanTxns++
		}
		if err := client.RunTxn(db, client.TxnOptions{ReadOnly: tx.ReadOnly}, func(ctx *client.Txn) error {
			if !scanned {
				return tx.Run(ctx)
			}
			// The scan's rows: the limit's worth of the shard's keys from the start key on.
			for _, q := range r.reqs {
				if q.Op != wire.OpScan {
					continue
				}
				rows, err := ctx.Scan(q.Key, q.EndKey, int(q.Limit))
				if err != nil {
					return err
				}
				if len(rows) == 0 || rows[0].Key != q.Key || len(rows) > int(q.Limit) {
					t.Fatalf("scan [%q, %q) limit %d over the loaded store: %v", q.Key, q.EndKey, q.Limit, rows)
				}
			}
			return tx.Run(ctx)
		}); err != nil {
			t.Fatal(err)
		}
	}
	within(t, "scan share of reads", float64(scans)/float64(scans+reads), 0.5, 0.05)
	if scanTxns == 0 {
		t.Fatal("no transaction scanned")
	}
}

// TestScanLengthBounded: a scan length whose rows cannot fit one scan answer is refused.
func TestScanLengthBounded(t *testing.T) {
	if _, err := New(testTopo(t), Config{Keys: 100, OpsPerTxn: 1, ValueBytes: 1_000_000, ScanRatio: 0.1, ScanLength: 10}); err == nil {
		t.Fatal("10 rows of 1 MB per scan accepted")
	}
	if _, err := New(testTopo(t), Config{Keys: 100, OpsPerTxn: 1, ValueBytes: 8, ScanRatio: 0.1, ScanLength: -1}); err == nil {
		t.Fatal("negative scan length accepted")
	}
}
