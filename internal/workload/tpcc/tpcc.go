// Package tpcc is TPC-C (revision 5.11) over Meridian's key-value API: the loader of §4.3.3,
// the five transactions of §2.4–2.8 with the mix 45/43/4/4/4 (New-Order, Payment, Order-Status,
// Delivery, Stock-Level), NURand with run-time constants chosen as §2.1.6 requires, 1% remote
// order lines and 1% rolled-back New-Orders, 15% remote-customer Payments, 60% customer look-ups
// by last name, and the consistency conditions of §3.3.2.1–3.3.2.10 and 3.3.2.12 checked after a
// run (Check), with the delivery pointer's own.
//
// Placement. Warehouse w (1-based) is homed in region (w−1) mod R, on that region's shards in
// turn, and every row of the warehouse (district, customer, history, order, new-order, order
// line, stock and the indexes below) shares its routing prefix topo.PinnedKey(shard, …), so a
// transaction on a home warehouse touches one shard unless it reaches a remote warehouse. The
// read-only ITEM table is copied under every shard that holds a warehouse ("#s/i/<id>"), so
// reading an item never leaves the warehouse's shard, and costs Items rows per such shard.
//
// Get and Put only. TPC-C's scans and secondary look-ups are replaced by index rows the
// transactions maintain, so every protocol can run TPC-C whether or not it supports Scan (only
// Check scans, the HISTORY rows, in read-only transactions):
//   - customer by last name: "cl/w/d/LAST" holds the customer ids with that name, ordered by
//     C_FIRST (the names never change, so the loader writes it once);
//   - a customer's last order (Order-Status): "co/w/d/c" holds the customer's latest O_ID,
//     written by New-Order;
//   - oldest undelivered order (Delivery): "dp/w/d" holds the next O_ID to deliver; Delivery
//     takes the NEW-ORDER row at that id if it exists and advances the pointer;
//   - the last 20 orders (Stock-Level) are D_NEXT_O_ID−20 … D_NEXT_O_ID−1, each order's lines
//     numbered 1 … O_OL_CNT.
//
// Column families (Config.Families). By default a row is one value under one key, so a
// transaction that reads one column of a row conflicts with one that writes another: every
// New-Order reads W_TAX from the warehouse row that every Payment read-modify-writes for W_YTD,
// and the district row carries D_TAX (read by New-Order and Payment), D_NEXT_O_ID (written by
// New-Order, read by Stock-Level) and D_YTD (written by Payment). Under multi-version timestamp
// ordering New-Order's read raises the warehouse row's read watermark and aborts a concurrent
// Payment's later W_YTD write; under 2PL the shared lock blocks the exclusive one. A SQL
// database has the same problem and CockroachDB's TPC-C offers --families, which puts such hot
// columns in separate column families (separate KV keys). Families does the same: the static
// part of a warehouse (W_NAME, W_TAX) stays under "w/wh" and W_YTD moves to "wy/wh"; the static
// part of a district (D_NAME, D_TAX) stays under "d/wh/d", D_YTD moves to "dy/wh/d" and
// D_NEXT_O_ID to "dn/wh/d", all under the warehouse's routing prefix. Each transaction reads and
// writes only the families it needs. It is a physical layout change only: the logical tables,
// the loaded values (drawn from the same random stream), the transactions and their inputs are
// those of the default layout, and Check verifies the same conditions over the split keys.
//
// No transaction body reads a key after writing it, so none relies on read-your-own-writes; a
// New-Order draws distinct item ids for its lines for the same reason.
//
// Deviations, for simulation speed and the key-value model: money is in integer cents; dates
// are per-client sequence numbers; S_DIST_xx is derived from (w, i, d) rather than stored;
// Delivery runs as one interactive transaction, not deferred; Compact shortens filler strings.
package tpcc

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"

	"github.com/meridiandb/meridian/internal/topo"
)

// Transaction types, as reported in Txn.Type.
const (
	NewOrder    = "new-order"
	Payment     = "payment"
	OrderStatus = "order-status"
	Delivery    = "delivery"
	StockLevel  = "stock-level"
)

// Types lists the transaction types in mix order.
var Types = []string{NewOrder, Payment, OrderStatus, Delivery, StockLevel}

// Config sizes the database and shapes the run. Zero fields take the specification's values.
type Config struct {
	Warehouses           int
	Districts            int    // per warehouse; spec 10
	CustomersPerDistrict int    // spec 3000; also the initial orders per district
	Items                int    // spec 100000
	Mix                  [5]int // weights of Types; spec 45, 43, 4, 4, 4
	RemoteItemRatio      float64
	// OneRemoteLine makes exactly one line of every New-Order come from another warehouse (and
	// ignores RemoteItemRatio): K2's Table 2 case "stock in a remote region".
	OneRemoteLine      bool
	RemotePaymentRatio float64
	ByLastNameRatio    float64
	RollbackRatio      float64
	Compact            bool   // short filler strings (names, addresses, data): smaller rows
	Seed               uint64 // seeds the loader and the NURand constants
	// Families stores W_YTD, D_YTD and D_NEXT_O_ID under keys of their own, apart from the
	// static columns of their rows (see "Column families" in the package comment).
	Families bool
}

// Spec returns the specification's configuration for w warehouses.
func Spec(w int) Config {
	return Config{Warehouses: w, Districts: 10, CustomersPerDistrict: 3000, Items: 100_000, Mix: [5]int{45, 43, 4, 4, 4},
		RemoteItemRatio: 0.01, RemotePaymentRatio: 0.15, ByLastNameRatio: 0.60, RollbackRatio: 0.01}
}

// Small returns a simulation-sized configuration: the spec's mix and ratios, 10 districts,
// 300 customers per district, 1000 items, compact rows.
func Small(w int) Config {
	c := Spec(w)
	c.CustomersPerDistrict, c.Items, c.Compact = 300, 1000, true
	return c
}

// Workload is a TPC-C database and its transaction generator.
type Workload struct {
	cfg        Config
	t          *topo.Topology
	shardOf    []topo.ShardID // by warehouse (index 0 unused)
	byRegion   [][]int        // warehouses homed in each region
	itemShards []topo.ShardID // shards holding a warehouse, ascending: each has an ITEM copy
	lastRange  int            // last names are drawn from numbers [0, lastRange)
	firstNewO  int            // initial orders ≥ this are undelivered
	cLast      int            // NURand C for C_LAST at run time
	cLastLoad  int            // NURand C for C_LAST at load time
	cID, cItem int            // NURand C for C_ID and OL_I_ID
}

// New validates cfg and places warehouses on t.
func New(t *topo.Topology, cfg Config) (*Workload, error) {
	def := Spec(cfg.Warehouses)
	if cfg.Districts == 0 {
		cfg.Districts = def.Districts
	}
	if cfg.CustomersPerDistrict == 0 {
		cfg.CustomersPerDistrict = def.CustomersPerDistrict
	}
	if cfg.Items == 0 {
		cfg.Items = def.Items
	}
	if cfg.Mix == [5]int{} {
		cfg.Mix = def.Mix
	}
	switch {
	case t == nil || len(t.Shards) == 0:
		return nil, errors.New("tpcc: topology has no shards")
	case cfg.Warehouses < 1 || cfg.Warehouses > 100_000:
		return nil, fmt.Errorf("tpcc: warehouses must be 1..100000, got %d", cfg.Warehouses)
	case cfg.Districts < 1 || cfg.Districts > 100:
		return nil, fmt.Errorf("tpcc: districts must be 1..100, got %d", cfg.Districts)
	case cfg.CustomersPerDistrict < 10 || cfg.CustomersPerDistrict > 1_000_000:
		return nil, fmt.Errorf("tpcc: customers per district must be 10..1000000, got %d", cfg.CustomersPerDistrict)
	case cfg.Items < 15 || cfg.Items > 10_000_000:
		return nil, fmt.Errorf("tpcc: items must be 15..10000000 (a New-Order has up to 15 distinct items), got %d", cfg.Items)
	}
	for _, r := range []float64{cfg.RemoteItemRatio, cfg.RemotePaymentRatio, cfg.ByLastNameRatio, cfg.RollbackRatio} {
		if !(r >= 0 && r <= 1) {
			return nil, fmt.Errorf("tpcc: ratios must be in [0, 1], got %v", r)
		}
	}
	total := 0
	for _, m := range cfg.Mix {
		if m < 0 {
			return nil, fmt.Errorf("tpcc: negative mix weight in %v", cfg.Mix)
		}
		total += m
	}
	if total == 0 {
		return nil, errors.New("tpcc: mix weights sum to zero")
	}
	w := &Workload{cfg: cfg, t: t, shardOf: make([]topo.ShardID, cfg.Warehouses+1), byRegion: make([][]int, len(t.Regions))}
	R := len(t.Regions)
	used := map[topo.ShardID]bool{}
	for wh := 1; wh <= cfg.Warehouses; wh++ {
		r := topo.RegionID((wh - 1) % R)
		local := t.ShardsHomedIn(r)
		if len(local) == 0 {
			return nil, fmt.Errorf("tpcc: region %s homes no shard for warehouse %d", t.Regions[r].Name, wh)
		}
		s := local[((wh-1)/R)%len(local)]
		w.shardOf[wh] = s
		w.byRegion[r] = append(w.byRegion[r], wh)
		used[s] = true
	}
	for s := range used {
		w.itemShards = append(w.itemShards, s)
	}
	sort.Slice(w.itemShards, func(i, j int) bool { return w.itemShards[i] < w.itemShards[j] })
	w.lastRange = min(1000, cfg.CustomersPerDistrict)
	w.firstNewO = cfg.CustomersPerDistrict*7/10 + 1 // spec: orders 2101..3000 of 3000 are new
	rng := rand.New(rand.NewPCG(cfg.Seed, 0x7470636363))
	w.cLastLoad = rng.IntN(256)
	w.cLast = runConstant(w.cLastLoad, rng)
	w.cID, w.cItem = rng.IntN(1024), rng.IntN(8192)
	return w, nil
}

// runConstant picks C_LAST's run-time constant so that |C_RUN − C_LOAD| ∈ [65, 119] and is
// neither 96 nor 112 (§2.1.6.1).
func runConstant(load int, rng *rand.Rand) int {
	for {
		delta := 65 + rng.IntN(55)
		if delta == 96 || delta == 112 {
			continue
		}
		if load+delta <= 255 {
			return load + delta
		}
		return load - delta
	}
}

// Name is "tpcc".
func (w *Workload) Name() string { return "tpcc" }

// Config returns the configuration in use.
func (w *Workload) Config() Config { return w.cfg }

// WarehouseShard is the shard of warehouse wh.
func (w *Workload) WarehouseShard(wh int) topo.ShardID { return w.shardOf[wh] }

// nuRand is NURand(A, x, y) = (((random(0, A) | random(x, y)) + C) % (y − x + 1)) + x.
func nuRand(rng *rand.Rand, a, c, x, y int) int {
	return (((rng.IntN(a+1) | (x + rng.IntN(y-x+1))) + c) % (y - x + 1)) + x
}

var syllables = [10]string{"BAR", "OUGHT", "ABLE", "PRI", "PRES", "ESE", "ANTI", "CALLY", "ATION", "EING"}

// LastName is C_LAST for number n ∈ [0, 999] (§4.3.2.3).
func LastName(n int) string { return syllables[n/100] + syllables[n/10%10] + syllables[n%10] }

// key returns the key of a row of warehouse wh: "#shard/table/wh/id…".
func (w *Workload) key(wh int, table string, ids ...int) string {
	b := make(keyBuf, 0, 40)
	b = append(b, '#')
	b = strconv.AppendInt(b, int64(w.shardOf[wh]), 10)
	b = b.s(table).n(wh)
	for _, id := range ids {
		b = b.n(id)
	}
	return string(b)
}

// Tables of the hot-column families under Config.Families; the static families keep the
// row's own table ("w", "d").
const (
	tableWarehouseYTD = "wy" // W_YTD
	tableDistrictYTD  = "dy" // D_YTD
	tableDistrictNext = "dn" // D_NEXT_O_ID
)

// itemKey is the copy of item i on the shard of warehouse wh.
func (w *Workload) itemKey(wh, i int) string {
	return topo.PinnedKey(w.shardOf[wh], "i/"+strconv.Itoa(i))
}

func (w *Workload) lastNameKey(wh, d int, last string) string {
	return string(keyBuf(w.key(wh, "cl", d)).s(last))
}

func (w *Workload) historyKey(wh int, tag string) string {
	return string(keyBuf(w.key(wh, "h")).s(tag))
}

// regionOf is the region warehouse wh is homed in.
func (w *Workload) regionOf(wh int) topo.RegionID { return topo.RegionID((wh - 1) % len(w.t.Regions)) }
