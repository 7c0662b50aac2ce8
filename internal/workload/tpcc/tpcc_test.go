package tpcc

import (
	"errors"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/meridiandb/meridian/client"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/workload"
	"github.com/meridiandb/meridian/internal/workload/memdb"
)

func testTopo(t *testing.T) *topo.Topology {
	t.Helper()
	tp, err := topo.FromPreset("k2-3region", topo.DefaultLayout())
	if err != nil {
		t.Fatal(err)
	}
	return tp
}

func tinyConfig(wh int) Config {
	c := Small(wh)
	c.Districts, c.CustomersPerDistrict, c.Items = 3, 30, 100
	return c
}

func within(t *testing.T, what string, got, want, tol float64) {
	t.Helper()
	if math.Abs(got-want) > tol {
		t.Errorf("%s = %.4f, want %.4f ± %.4f", what, got, want, tol)
	}
}

// chiSquareCritical is the upper 0.01% quantile of χ²(df) (Wilson–Hilferty).
func chiSquareCritical(df int) float64 {
	k := float64(df)
	c := 1 - 2/(9*k) + 3.719*math.Sqrt(2/(9*k))
	return k * c * c * c
}

// nuRandLaw is NURand's exact distribution, by enumerating every (random(0,A), random(x,y)).
func nuRandLaw(a, c, x, y int) []float64 {
	p := make([]float64, y-x+1)
	unit := 1 / float64((a+1)*(y-x+1))
	for i := 0; i <= a; i++ {
		for j := x; j <= y; j++ {
			p[((i|j)+c)%(y-x+1)] += unit
		}
	}
	return p
}

func TestNURandMatchesItsLaw(t *testing.T) {
	const samples = 1_000_000
	cases := []struct{ a, c, x, y int }{{255, 123, 0, 999}, {1023, 259, 1, 3000}, {8191, 7911, 1, 1000}}
	for i, c := range cases {
		law := nuRandLaw(c.a, c.c, c.x, c.y)
		uniform := make([]float64, len(law))
		for k := range uniform {
			uniform[k] = 1 / float64(len(law))
		}
		counts := make([]int, len(law))
		rng := rand.New(rand.NewPCG(uint64(i), 3))
		for s := 0; s < samples; s++ {
			v := nuRand(rng, c.a, c.c, c.x, c.y)
			if v < c.x || v > c.y {
				t.Fatalf("NURand(%d, %d, %d) = %d out of range", c.a, c.x, c.y, v)
			}
			counts[v-c.x]++
		}
		stat := func(p []float64) (s float64, df int) {
			for k, pk := range p {
				if e := pk * samples; e > 0 {
					s += (float64(counts[k]) - e) * (float64(counts[k]) - e) / e
					df++
				}
			}
			return s, df - 1
		}
		if s, df := stat(law); s > chiSquareCritical(df) {
			t.Errorf("NURand(%d, %d, %d): χ² = %.1f > %.1f (%d df)", c.a, c.x, c.y, s, chiSquareCritical(df), df)
		}
		if s, df := stat(uniform); s <= chiSquareCritical(df) {
			t.Errorf("NURand(%d, %d, %d) is indistinguishable from uniform (χ² = %.1f)", c.a, c.x, c.y, s)
		}
	}
}

func TestRunConstant(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	for load := 0; load < 256; load++ {
		for i := 0; i < 20; i++ {
			run := runConstant(load, rng)
			d := run - load
			if d < 0 {
				d = -d
			}
			if run < 0 || run > 255 || d < 65 || d > 119 || d == 96 || d == 112 {
				t.Fatalf("C_LOAD %d: C_RUN %d (delta %d) breaks §2.1.6.1", load, run, d)
			}
		}
	}
}

func TestMixAndRemoteRatios(t *testing.T) {
	w, err := New(testTopo(t), Small(10))
	if err != nil {
		t.Fatal(err)
	}
	g := w.NewClient(4, 1, rand.New(rand.NewPCG(8, 8))).(*terminal)
	const n = 400_000
	types := map[string]int{}
	var lines, remoteLines, rollbacks, payRemote, byName, lookups, olCnt int
	for i := 0; i < n; i++ {
		p := g.draw()
		types[p.typ]++
		switch p.typ {
		case NewOrder:
			olCnt += len(p.lines)
			if p.rollback {
				rollbacks++
				if p.lines[len(p.lines)-1].item != w.cfg.Items+1 {
					t.Fatal("rolled-back New-Order does not end with an unused item")
				}
			}
			for _, l := range p.lines {
				lines++
				if l.supplyWH != g.wh {
					remoteLines++
				}
			}
		case Payment:
			if p.cust.wh != g.wh {
				payRemote++
			}
			fallthrough
		case OrderStatus:
			lookups++
			if p.cust.last != "" {
				byName++
			}
		case StockLevel:
			if p.d != g.district {
				t.Fatal("Stock-Level left the terminal's district")
			}
		}
	}
	for i, typ := range Types {
		within(t, typ+" share", float64(types[typ])/n, float64(w.cfg.Mix[i])/100, 0.004)
	}
	within(t, "remote order-line share", float64(remoteLines)/float64(lines), 0.01, 0.001)
	within(t, "rolled-back New-Order share", float64(rollbacks)/float64(types[NewOrder]), 0.01, 0.001)
	within(t, "mean O_OL_CNT", float64(olCnt)/float64(types[NewOrder]), 10, 0.03)
	within(t, "remote Payment share", float64(payRemote)/float64(types[Payment]), 0.15, 0.004)
	within(t, "by-last-name share", float64(byName)/float64(lookups), 0.60, 0.004)
}

func TestPlacement(t *testing.T) {
	tp := testTopo(t)
	w, err := New(tp, tinyConfig(7))
	if err != nil {
		t.Fatal(err)
	}
	R := len(tp.Regions)
	perShard := map[topo.ShardID]int{}
	err = w.Rows(func(k string, v []byte) error {
		perShard[tp.ShardOf(k)]++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for wh := 1; wh <= 7; wh++ {
		s := w.WarehouseShard(wh)
		if tp.Shards[s].Home != topo.RegionID((wh-1)%R) {
			t.Errorf("warehouse %d on shard %d homed in region %d, want %d", wh, s, tp.Shards[s].Home, (wh-1)%R)
		}
		for _, k := range []string{w.key(wh, "w"), w.key(wh, "c", 2, 7), w.key(wh, "s", 50), w.itemKey(wh, 9), w.lastNameKey(wh, 1, LastName(3))} {
			if tp.ShardOf(k) != s {
				t.Errorf("key %q of warehouse %d is on shard %d, want %d", k, wh, tp.ShardOf(k), s)
			}
		}
	}
	// Warehouses 1..7 over 3 regions of 4 shards: 7 distinct shards, each with its own item copy.
	if len(w.itemShards) != 7 || len(perShard) != 7 {
		t.Errorf("%d item copies on %d shards, want 7 and 7", len(w.itemShards), len(perShard))
	}
	// The terminal of a client is bound to a warehouse of its region.
	for id := 0; id < 20; id++ {
		for r := topo.RegionID(0); r < 3; r++ {
			g := w.NewClient(id, r, rand.New(rand.NewPCG(1, 1))).(*terminal)
			if (g.wh-1)%R != int(r) {
				t.Fatalf("client %d of region %d got warehouse %d", id, r, g.wh)
			}
		}
	}
}

// run loads a database into a serial store that aborts 10% of commits, runs txns
// transactions from clients terminals, and returns the store and the rollback count.
func run(t *testing.T, w *Workload, clients, txns int) (*memdb.Store, *client.DB, int) {
	t.Helper()
	s := memdb.New()
	db := client.Open(s.Transport())
	if err := w.Load(db); err != nil {
		t.Fatal(err)
	}
	if err := w.Check(db); err != nil {
		t.Fatalf("freshly loaded database: %v", err)
	}
	s.AbortCommits(0.1, 5)
	var dbs []*client.DB
	var terms []workload.Client
	for i := 0; i < clients; i++ {
		dbs = append(dbs, client.Open(s.Transport()))
		terms = append(terms, w.NewClient(i, topo.RegionID(i%3), rand.New(rand.NewPCG(uint64(i), 42))))
	}
	rollbacks := 0
	for i := 0; i < txns; i++ {
		c := i % clients
		tx := terms[c].Next()
		err := client.RunTxnWith(dbs[c], client.TxnOptions{ReadOnly: tx.ReadOnly}, client.RetryPolicy{MaxAttempts: 100}, tx.Run)
		switch {
		case errors.Is(err, workload.ErrUserAbort) && tx.Type == NewOrder:
			rollbacks++
		case err != nil:
			t.Fatalf("txn %d (%s): %v", i, tx.Type, err)
		}
	}
	s.AbortCommits(0, 0)
	return s, db, rollbacks
}

// runChecked runs 4000 transactions of six terminals under cfg and fails unless the database
// then meets TPC-C's consistency conditions and some New-Orders rolled back.
func runChecked(t *testing.T, cfg Config) (*Workload, *memdb.Store) {
	t.Helper()
	w, err := New(testTopo(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	s, db, rollbacks := run(t, w, 6, 4000)
	if err := w.Check(db); err != nil {
		t.Fatal(err)
	}
	if rollbacks == 0 {
		t.Error("no New-Order rolled back in 4000 transactions")
	}
	return w, s
}

func TestConsistencyAfterRun(t *testing.T) {
	w, s := runChecked(t, tinyConfig(4))
	// The run did real work: orders were added and delivered.
	var dr district
	v, _ := s.Get(w.key(1, "d", 1))
	if err := dr.decode(v); err != nil || dr.NextOID <= 31 {
		t.Errorf("district 1/1: D_NEXT_O_ID %d after the run (err %v)", dr.NextOID, err)
	}
	ptr, _ := s.Get(w.key(1, "dp", 1))
	if p, _ := decodeInts(ptr); len(p) != 1 || p[0] <= int64(w.firstNewO) {
		t.Errorf("district 1/1: delivery pointer %v, nothing delivered", p)
	}
}

func TestCheckCatchesCorruption(t *testing.T) {
	w, err := New(testTopo(t), tinyConfig(2))
	if err != nil {
		t.Fatal(err)
	}
	edit := func(s *memdb.Store, key string, r row, f func()) { editRow(t, s, key, r, f) }
	// The first undelivered order of district 2/2 after the run, found by the pointer.
	firstNew := func(s *memdb.Store) int {
		v, _ := s.Get(w.key(2, "dp", 2))
		p, _ := decodeInts(v)
		return int(p[0])
	}
	cases := []struct {
		cond    string
		corrupt func(s *memdb.Store)
	}{
		{"3.3.2.1", func(s *memdb.Store) {
			var d district
			edit(s, w.key(1, "d", 2), &d, func() { d.YTD += 1 })
		}},
		{"3.3.2.2", func(s *memdb.Store) {
			var d district
			edit(s, w.key(2, "d", 1), &d, func() { d.NextOID++ })
		}},
		{"3.3.2.3", func(s *memdb.Store) {
			s.Delete(w.key(2, "no", 2, firstNew(s)+1))
		}},
		{"3.3.2.4", func(s *memdb.Store) {
			s.Delete(w.key(1, "ol", 3, 5, 1))
		}},
		{"3.3.2.5", func(s *memdb.Store) {
			var o order
			edit(s, w.key(2, "o", 2, firstNew(s)), &o, func() { o.CarrierID = 4 })
		}},
		{"3.3.2.7", func(s *memdb.Store) {
			var ol orderLine
			edit(s, w.key(1, "ol", 1, 2, 1), &ol, func() { ol.DeliveryD = 0 })
		}},
	}
	for _, c := range cases {
		t.Run(c.cond, func(t *testing.T) {
			expectViolation(t, w, c.cond, c.corrupt)
		})
	}
}

func TestDeterministic(t *testing.T) {
	digest := func() uint64 {
		w, err := New(testTopo(t), tinyConfig(3))
		if err != nil {
			t.Fatal(err)
		}
		h := fnv.New64a()
		_ = w.Rows(func(k string, v []byte) error {
			h.Write([]byte(k))
			h.Write(v)
			return nil
		})
		g := w.NewClient(2, 2, rand.New(rand.NewPCG(3, 3))).(*terminal)
		for i := 0; i < 1000; i++ {
			p := g.draw()
			h.Write([]byte(p.typ + p.cust.last))
			for _, l := range p.lines {
				h.Write([]byte{byte(l.item), byte(l.supplyWH), byte(l.qty)})
			}
		}
		return h.Sum64()
	}
	if a, b := digest(), digest(); a != b {
		t.Fatal("equal seeds gave different databases or transactions")
	}
}

func TestBadConfig(t *testing.T) {
	for _, c := range []Config{
		{Warehouses: 0},
		{Warehouses: 2, Districts: -1},
		{Warehouses: 2, Items: 5},
		{Warehouses: 2, CustomersPerDistrict: 3},
		{Warehouses: 2, RemoteItemRatio: 2},
		{Warehouses: 2, Mix: [5]int{-1, 0, 0, 0, 2}},
	} {
		if _, err := New(testTopo(t), c); err == nil {
			t.Errorf("accepted %+v", c)
		}
	}
}

func TestRowCodecs(t *testing.T) {
	c := customer{First: "a", Middle: "OE", Last: "BARBAR", Credit: "BC", Data: "xyz", Discount: 12, CreditLim: 5, Balance: -1000, YTDPayment: 3, PaymentCnt: 1, DelivCnt: 2}
	var c2 customer
	if err := c2.decode(c.encode()); err != nil || !reflect.DeepEqual(c, c2) {
		t.Fatalf("customer round trip: %+v, %v", c2, err)
	}
	if err := c2.decode(c.encode()[:5]); err == nil {
		t.Fatal("truncated row decoded")
	}
	if err := c2.decode(append(c.encode(), 0)); err == nil {
		t.Fatal("row with trailing bytes decoded")
	}
}

// BenchmarkMixOnSerialStore runs the standard mix on a Small(4) database in memory: the cost
// of generating and executing a transaction without any protocol.
func BenchmarkMixOnSerialStore(b *testing.B) {
	tp, _ := topo.FromPreset("k2-3region", topo.DefaultLayout())
	w, err := New(tp, Small(4))
	if err != nil {
		b.Fatal(err)
	}
	s := memdb.New()
	db := client.Open(s.Transport())
	if err := w.Load(db); err != nil {
		b.Fatal(err)
	}
	g := w.NewClient(0, 0, rand.New(rand.NewPCG(1, 1)))
	b.ReportAllocs()
	for b.Loop() {
		tx := g.Next()
		if err := client.RunTxn(db, client.TxnOptions{ReadOnly: tx.ReadOnly}, tx.Run); err != nil && !errors.Is(err, workload.ErrUserAbort) {
			b.Fatal(err)
		}
	}
}

// expectViolation runs the workload, corrupts the database with corrupt, and requires Check to
// report a violation of condition cond.
func expectViolation(t *testing.T, w *Workload, cond string, corrupt func(*memdb.Store)) {
	t.Helper()
	expectViolations(t, w, []string{cond}, corrupt)
}

// expectViolations is expectViolation for a corruption that breaks every one of conds.
func expectViolations(t *testing.T, w *Workload, conds []string, corrupt func(*memdb.Store)) {
	t.Helper()
	s, db, _ := run(t, w, 3, 600)
	corrupt(s)
	err := w.Check(db)
	var ce *CheckError
	if !errors.As(err, &ce) {
		t.Fatalf("corruption for %v: Check returned %v", conds, err)
	}
	reported := map[string]bool{}
	for _, v := range ce.Violations {
		reported[v.Condition] = true
	}
	for _, cond := range conds {
		if !reported[cond] {
			t.Errorf("corruption for %s reported as %v", cond, ce)
		}
	}
}

// TestCheckCatchesLostPaymentsAndDeliveries corrupts a database after a run as a protocol that
// loses an update would, in ways conditions 1–7 cannot see, and requires Check to report them:
// a Payment lost from W_YTD and D_YTD together (so W_YTD = Σ D_YTD still holds) or from a
// customer, a Delivery credited twice, and the delivery pointer off the oldest NEW-ORDER row.
func TestCheckCatchesLostPaymentsAndDeliveries(t *testing.T) {
	w, err := New(testTopo(t), tinyConfig(2))
	if err != nil {
		t.Fatal(err)
	}
	edit := func(s *memdb.Store, key string, r row, f func()) { editRow(t, s, key, r, f) }
	ptr := func(s *memdb.Store, wh, d int) int { return int(oneInt(t, s, w.key(wh, "dp", d))) }
	cases := []struct {
		name    string
		conds   []string
		corrupt func(s *memdb.Store)
	}{
		// Two Payments to district 1/1 both read W_YTD and D_YTD and both write them: one amount
		// is lost from both, while its HISTORY row and customer keep it.
		{"payment lost from W_YTD and D_YTD", []string{"3.3.2.8", "3.3.2.9"}, func(s *memdb.Store) {
			var wr warehouse
			var dr district
			edit(s, w.key(1, "w"), &wr, func() { wr.YTD -= 12345 })
			edit(s, w.key(1, "d", 1), &dr, func() { dr.YTD -= 12345 })
		}},
		// A Payment's customer write lost to a concurrent one.
		{"payment lost from the customer", []string{"3.3.2.10"}, func(s *memdb.Store) {
			var c customer
			edit(s, w.key(1, "c", 1, 7), &c, func() { c.Balance += 5000; c.YTDPayment -= 5000; c.PaymentCnt-- })
		}},
		// A Payment's HISTORY row lost, the YTDs and the customer kept.
		{"payment's history row lost", []string{"3.3.2.8", "3.3.2.9", "3.3.2.10"}, func(s *memdb.Store) {
			prefix := w.key(1, "h") + "/t"
			for _, k := range s.Keys() {
				if strings.HasPrefix(k, prefix) {
					s.Delete(k)
					return
				}
			}
			t.Fatal("no Payment history row in warehouse 1")
		}},
		// Two Deliveries deliver the last order delivered in district 1/2: its customer is
		// credited twice.
		{"delivery credited twice", []string{"3.3.2.10", "3.3.2.12"}, func(s *memdb.Store) {
			oid := ptr(s, 1, 2) - 1
			if oid < w.firstNewO {
				t.Fatalf("district 1/2: no order delivered in the run (pointer %d)", oid+1)
			}
			var o order
			if v, _ := s.Get(w.key(1, "o", 2, oid)); o.decode(v) != nil {
				t.Fatalf("order %d unreadable", oid)
			}
			var sum int64
			for n := 1; n <= int(o.OLCnt); n++ {
				var ol orderLine
				if v, _ := s.Get(w.key(1, "ol", 2, oid, n)); ol.decode(v) != nil {
					t.Fatalf("order %d line %d unreadable", oid, n)
				}
				sum += ol.Amount
			}
			var c customer
			edit(s, w.key(1, "c", 2, int(o.CID)), &c, func() { c.Balance += sum; c.DelivCnt++ })
		}},
		// The delivery pointer moved back onto delivered orders: Delivery finds no NEW-ORDER
		// row there and skips the district for good.
		{"delivery pointer moved back", []string{condDeliveryPointer}, func(s *memdb.Store) {
			s.Put(w.key(2, "dp", 2), encodeInts(int64(ptr(s, 2, 2)-3)))
		}},
		// Moved ahead: the order it skipped is never delivered.
		{"delivery pointer moved ahead", []string{condDeliveryPointer}, func(s *memdb.Store) {
			s.Put(w.key(2, "dp", 3), encodeInts(int64(ptr(s, 2, 3)+1)))
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			expectViolations(t, w, c.conds, c.corrupt)
		})
	}
}

// TestYTDOffset: the loader's D_YTD exceeds Σ H_AMOUNT of the district's loaded HISTORY rows by
// ytdOffset (W_YTD by Districts times it), which is 0 under Spec's sizes, where conditions 8
// and 9 are the spec's exactly, and a freshly loaded Spec-sized warehouse passes Check.
func TestYTDOffset(t *testing.T) {
	spec := Spec(1)
	spec.Items, spec.Compact = 100, true // the item count plays no part in the YTDs
	for _, cfg := range []Config{spec, Small(2), tinyConfig(2)} {
		w, err := New(testTopo(t), cfg)
		if err != nil {
			t.Fatal(err)
		}
		wYTD, dYTD := map[string]int64{}, map[string]int64{}
		wH, dH := map[int64]int64{}, map[[2]int64]int64{}
		err = w.Rows(func(k string, v []byte) error {
			switch table(k) {
			case "w":
				var r warehouse
				if err := r.decode(v); err != nil {
					return err
				}
				wYTD[k] = r.YTD
			case "d":
				var r district
				if err := r.decode(v); err != nil {
					return err
				}
				dYTD[k] = r.YTD
			case "h":
				var r historyRow
				if err := r.decode(v); err != nil {
					return err
				}
				wH[r.WID] += r.Amount
				dH[[2]int64{r.WID, r.DID}] += r.Amount
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		off := w.ytdOffset()
		if cfg.CustomersPerDistrict == 3000 && off != 0 {
			t.Errorf("Spec: offset %d, want 0", off)
		}
		for wh := 1; wh <= cfg.Warehouses; wh++ {
			if got, want := wYTD[w.key(wh, "w")], wH[int64(wh)]+int64(cfg.Districts)*off; got != want {
				t.Errorf("%d customers: warehouse %d loaded with W_YTD %d, want %d", cfg.CustomersPerDistrict, wh, got, want)
			}
			for d := 1; d <= cfg.Districts; d++ {
				if got, want := dYTD[w.key(wh, "d", d)], dH[[2]int64{int64(wh), int64(d)}]+off; got != want {
					t.Errorf("%d customers: district %d/%d loaded with D_YTD %d, want %d", cfg.CustomersPerDistrict, wh, d, got, want)
				}
			}
		}
	}
	if testing.Short() {
		return
	}
	w, err := New(testTopo(t), spec)
	if err != nil {
		t.Fatal(err)
	}
	s := memdb.New()
	db := client.Open(s.Transport())
	if err := w.Load(db); err != nil {
		t.Fatal(err)
	}
	if err := w.Check(db); err != nil {
		t.Fatalf("freshly loaded Spec-sized warehouse: %v", err)
	}
}

// TestCheckFresh: a freshly loaded database passes, one a run has added orders to does not.
func TestCheckFresh(t *testing.T) {
	w, err := New(testTopo(t), tinyConfig(2))
	if err != nil {
		t.Fatal(err)
	}
	fresh := memdb.New()
	if err := w.Load(client.Open(fresh.Transport())); err != nil {
		t.Fatal(err)
	}
	if err := w.CheckFresh(client.Open(fresh.Transport())); err != nil {
		t.Fatalf("freshly loaded: %v", err)
	}
	w, used := runChecked(t, tinyConfig(2))
	if err := w.CheckFresh(client.Open(used.Transport())); err == nil || !strings.Contains(err.Error(), "earlier run") {
		t.Fatalf("after a run: %v, want an earlier-run error", err)
	}
}

// A New-Order's stock and order-line writes are built in one slice of the right size, not grown
// by doubling (a paper-scale simulation allocated 460 MB growing them).
func TestLineWritesSizedOnce(t *testing.T) {
	w, err := New(testTopo(t), tinyConfig(2))
	if err != nil {
		t.Fatal(err)
	}
	p := &params{d: 1, lines: []orderLineInput{{1, 1, 5}, {2, 2, 5}, {3, 1, 5}, {4, 1, 5}, {5, 2, 5}}}
	items, stocks := make([]item, len(p.lines)), make([]stock, len(p.lines))
	for _, remote := range []bool{false, true} {
		ops := w.lineWrites(1, p, 7, items, stocks, func(i int) bool { return (p.lines[i].supplyWH != 1) == remote })
		want := 2 * 3
		if remote {
			want = 2 * 2
		}
		if len(ops) != want || cap(ops) != len(ops) {
			t.Errorf("remote=%v: %d writes in a slice of capacity %d, want %d in %d", remote, len(ops), cap(ops), want, want)
		}
	}
}

// row is a TPC-C row a test can rewrite.
type row interface {
	decode([]byte) error
	encode() []byte
}

// editRow rewrites the row at key in s: decoded into r, changed by f, encoded back.
func editRow(t *testing.T, s *memdb.Store, key string, r row, f func()) {
	t.Helper()
	v, ok := s.Get(key)
	if !ok {
		t.Fatalf("no row %q", key)
	}
	if err := r.decode(v); err != nil {
		t.Fatal(err)
	}
	f()
	s.Put(key, r.encode())
}
