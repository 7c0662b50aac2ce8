package tpcc

import (
	"errors"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"

	"github.com/meridiandb/meridian/client"
	"github.com/meridiandb/meridian/internal/wire"
	"github.com/meridiandb/meridian/internal/workload"
	"github.com/meridiandb/meridian/internal/workload/memdb"
)

func familiesConfig(wh int) Config {
	c := tinyConfig(wh)
	c.Families = true
	return c
}

// table is the table part of a TPC-C key "#shard/table/…".
func table(key string) string {
	parts := strings.SplitN(key, "/", 3)
	if len(parts) < 2 {
		return ""
	}
	return parts[1]
}

func TestFamiliesConsistencyAfterRun(t *testing.T) {
	w, s := runChecked(t, familiesConfig(4))
	intRow := func(key string) int64 { return oneInt(t, s, key) }
	// The hot families moved: orders were added and payments made.
	if next := intRow(w.key(1, tableDistrictNext, 1)); next <= 31 {
		t.Errorf("district 1/1: D_NEXT_O_ID %d after the run", next)
	}
	if ytd := intRow(w.key(1, tableWarehouseYTD)); ytd <= int64(w.cfg.Districts)*initDistrictYTD {
		t.Errorf("warehouse 1: W_YTD %d after the run, no payment counted", ytd)
	}
	// The static families still decode as such: nothing wrote a whole row over them.
	for _, k := range []string{w.key(1, "w"), w.key(1, "d", 1)} {
		v, _ := s.Get(k)
		var st staticFamily
		if err := st.decode(v); err != nil {
			t.Errorf("static family %q: %v", k, err)
		}
	}
}

// TestFamiliesSameLogicalDatabase loads both layouts and finds the same warehouse and
// district columns, and every other row byte for byte: Families changes only where the
// columns live.
func TestFamiliesSameLogicalDatabase(t *testing.T) {
	rows := func(families bool) map[string][]byte {
		cfg := tinyConfig(3)
		cfg.Families = families
		w, err := New(testTopo(t), cfg)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string][]byte{}
		if err := w.Rows(func(k string, v []byte) error { m[k] = v; return nil }); err != nil {
			t.Fatal(err)
		}
		return m
	}
	whole, split := rows(false), rows(true)
	w, err := New(testTopo(t), tinyConfig(3))
	if err != nil {
		t.Fatal(err)
	}
	single := func(k string) int64 {
		x, err := decodeInts(split[k])
		if err != nil || len(x) != 1 {
			t.Fatalf("family row %q: %v, %v", k, x, err)
		}
		return x[0]
	}
	hot := 0
	for k, v := range split {
		switch table(k) {
		case tableWarehouseYTD, tableDistrictYTD, tableDistrictNext:
			hot++
		case "w", "d":
		default:
			if string(whole[k]) != string(v) {
				t.Errorf("row %q differs between layouts", k)
			}
		}
	}
	if want := 3 * (1 + 2*w.cfg.Districts); hot != want {
		t.Errorf("%d hot-column rows, want %d", hot, want)
	}
	if len(split) != len(whole)+hot {
		t.Errorf("split layout has %d rows, want %d + %d", len(split), len(whole), hot)
	}
	for wh := 1; wh <= 3; wh++ {
		var wr warehouse
		var ws staticFamily
		if err := wr.decode(whole[w.key(wh, "w")]); err != nil {
			t.Fatal(err)
		}
		if err := ws.decode(split[w.key(wh, "w")]); err != nil {
			t.Fatal(err)
		}
		if got := (warehouse{Tax: ws.Tax, YTD: single(w.key(wh, tableWarehouseYTD)), Name: ws.Name}); got != wr {
			t.Errorf("warehouse %d: split layout has %+v, whole row %+v", wh, got, wr)
		}
		for d := 1; d <= w.cfg.Districts; d++ {
			var dr district
			var ds staticFamily
			if err := dr.decode(whole[w.key(wh, "d", d)]); err != nil {
				t.Fatal(err)
			}
			if err := ds.decode(split[w.key(wh, "d", d)]); err != nil {
				t.Fatal(err)
			}
			got := district{Tax: ds.Tax, YTD: single(w.key(wh, tableDistrictYTD, d)), NextOID: single(w.key(wh, tableDistrictNext, d)), Name: ds.Name}
			if got != dr {
				t.Errorf("district %d/%d: split layout has %+v, whole row %+v", wh, d, got, dr)
			}
		}
	}
}

// recorder is a transport that notes every key its transactions read or write.
type recorder struct {
	*memdb.Transport
	keys map[string]bool
}

func (r *recorder) RoundTrip(req *wire.ClientRequest) (*wire.ClientReply, error) {
	switch req.Op {
	case wire.OpGet, wire.OpPut, wire.OpDelete:
		r.keys[req.Key] = true
	case wire.OpBatch:
		for _, op := range req.Batch {
			r.keys[op.Key] = true
		}
	}
	return r.Transport.RoundTrip(req)
}

// footprint runs n transactions of type typ on a freshly loaded database and returns the
// tables of the keys they touched.
func footprint(t *testing.T, families bool, typ string, n int) map[string]bool {
	t.Helper()
	cfg := tinyConfig(3)
	cfg.Families, cfg.RollbackRatio = families, 0
	for i, ty := range Types {
		cfg.Mix[i] = 0
		if ty == typ {
			cfg.Mix[i] = 1
		}
	}
	w, err := New(testTopo(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	s := memdb.New()
	if err := w.Load(client.Open(s.Transport())); err != nil {
		t.Fatal(err)
	}
	rec := &recorder{Transport: s.Transport(), keys: map[string]bool{}}
	db := client.Open(rec)
	g := w.NewClient(1, 1, rand.New(rand.NewPCG(5, 5)))
	for i := 0; i < n; i++ {
		tx := g.Next()
		if tx.Type != typ {
			t.Fatalf("mix of only %s drew %s", typ, tx.Type)
		}
		if err := client.RunTxn(db, client.TxnOptions{ReadOnly: tx.ReadOnly}, tx.Run); err != nil && !errors.Is(err, workload.ErrUserAbort) {
			t.Fatalf("%s: %v", typ, err)
		}
	}
	tables := map[string]bool{}
	for k := range rec.keys {
		tables[table(k)] = true
	}
	return tables
}

func TestFamiliesFootprint(t *testing.T) {
	cases := []struct {
		families  bool
		typ       string
		want, not []string // tables touched, tables never touched
	}{
		{true, NewOrder, []string{"w", "d", tableDistrictNext}, []string{tableWarehouseYTD, tableDistrictYTD}},
		{true, Payment, []string{"w", "d", tableWarehouseYTD, tableDistrictYTD}, []string{tableDistrictNext}},
		{true, StockLevel, []string{tableDistrictNext}, []string{"w", "d", tableWarehouseYTD, tableDistrictYTD}},
		{true, Delivery, nil, []string{"w", "d", tableWarehouseYTD, tableDistrictYTD, tableDistrictNext}},
		{true, OrderStatus, nil, []string{"w", "d", tableWarehouseYTD, tableDistrictYTD, tableDistrictNext}},
		// The default layout has no families: New-Order and Payment share the whole rows.
		{false, NewOrder, []string{"w", "d"}, []string{tableWarehouseYTD, tableDistrictYTD, tableDistrictNext}},
		{false, Payment, []string{"w", "d"}, []string{tableWarehouseYTD, tableDistrictYTD, tableDistrictNext}},
	}
	for _, c := range cases {
		name := c.typ
		if c.families {
			name += "/families"
		}
		t.Run(name, func(t *testing.T) {
			got := footprint(t, c.families, c.typ, 30)
			for _, tb := range c.want {
				if !got[tb] {
					t.Errorf("touched no %q key; tables %v", tb, sortedKeys(got))
				}
			}
			for _, tb := range c.not {
				if got[tb] {
					t.Errorf("touched a %q key; tables %v", tb, sortedKeys(got))
				}
			}
		})
	}
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func TestFamiliesKeysOnWarehouseShard(t *testing.T) {
	tp := testTopo(t)
	w, err := New(tp, familiesConfig(7))
	if err != nil {
		t.Fatal(err)
	}
	for wh := 1; wh <= 7; wh++ {
		for _, k := range []string{w.key(wh, tableWarehouseYTD), w.key(wh, tableDistrictYTD, 2), w.key(wh, tableDistrictNext, 3)} {
			if tp.ShardOf(k) != w.WarehouseShard(wh) {
				t.Errorf("key %q of warehouse %d is on shard %d, want %d", k, wh, tp.ShardOf(k), w.WarehouseShard(wh))
			}
		}
	}
}

func TestFamiliesCheckCatchesCorruption(t *testing.T) {
	w, err := New(testTopo(t), familiesConfig(2))
	if err != nil {
		t.Fatal(err)
	}
	bump := func(s *memdb.Store, key string, delta int64) {
		s.Put(key, encodeInts(oneInt(t, s, key)+delta))
	}
	cases := []struct {
		name, cond string
		corrupt    func(s *memdb.Store)
	}{
		{"W_YTD", "3.3.2.1", func(s *memdb.Store) { bump(s, w.key(2, tableWarehouseYTD), 1) }},
		{"D_YTD", "3.3.2.1", func(s *memdb.Store) { bump(s, w.key(1, tableDistrictYTD, 3), -7) }},
		{"D_NEXT_O_ID", "3.3.2.2", func(s *memdb.Store) { bump(s, w.key(1, tableDistrictNext, 2), 1) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			expectViolation(t, w, c.cond, c.corrupt)
		})
	}
	// A Payment lost from both YTD families: W_YTD = Σ D_YTD still holds, HISTORY does not agree.
	t.Run("W_YTD and D_YTD", func(t *testing.T) {
		expectViolations(t, w, []string{"3.3.2.8", "3.3.2.9"}, func(s *memdb.Store) {
			bump(s, w.key(2, tableWarehouseYTD), -4321)
			bump(s, w.key(2, tableDistrictYTD, 3), -4321)
		})
	})
	t.Run("missing family", func(t *testing.T) {
		s, db, _ := run(t, w, 3, 100)
		s.Delete(w.key(1, tableDistrictYTD, 1))
		var ce *CheckError
		if err := w.Check(db); err == nil || errors.As(err, &ce) {
			t.Fatalf("Check with a missing D_YTD family returned %v, want a read error", err)
		}
	})
}

// oneInt reads a hot-column row: a single encoded number.
func oneInt(t *testing.T, s *memdb.Store, key string) int64 {
	t.Helper()
	v, ok := s.Get(key)
	if !ok {
		t.Fatalf("no row %q", key)
	}
	x, err := decodeInts(v)
	if err != nil || len(x) != 1 {
		t.Fatalf("row %q: %v, %v", key, x, err)
	}
	return x[0]
}
