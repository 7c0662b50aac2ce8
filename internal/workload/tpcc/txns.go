package tpcc

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"

	"github.com/meridiandb/meridian/client"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/wire"
	"github.com/meridiandb/meridian/internal/workload"
)

// NewClient returns the terminal of client id in region: its home warehouse is one of the
// region's warehouses (chosen by id), or any warehouse if the region has none; its Stock-Level
// district is fixed per terminal, as §2.8.1.1 requires.
func (w *Workload) NewClient(id int, region topo.RegionID, rng *rand.Rand) workload.Client {
	if id < 0 {
		id = -id
	}
	var home []int
	if int(region) >= 0 && int(region) < len(w.byRegion) {
		home = w.byRegion[region]
	}
	g := &terminal{w: w, id: id, rng: rng}
	if len(home) > 0 {
		g.wh = home[id%len(home)]
		g.district = (id/len(home))%w.cfg.Districts + 1
	} else {
		g.wh = id%w.cfg.Warehouses + 1
		g.district = (id/w.cfg.Warehouses)%w.cfg.Districts + 1
	}
	return g
}

type terminal struct {
	w        *Workload
	id       int
	rng      *rand.Rand
	wh       int // home warehouse
	district int // Stock-Level district
	seq      int // per-terminal sequence: dates and history keys
}

// Home is a key of the terminal's home warehouse: drivers send the terminal's transactions to a
// coordinator on that warehouse's node (workload.Homed), as TPC-C terminals are bound to their
// warehouse.
func (t *terminal) Home() string { return t.w.key(t.wh, "w") }

// customerRef selects a customer by id or, if Last is set, by last name.
type customerRef struct {
	wh, d, id int
	last      string
}

type orderLineInput struct {
	item, supplyWH, qty int
}

// params are one transaction's inputs, drawn by Next; the body only reads them, so it can be
// re-run on retry.
type params struct {
	typ      string
	d        int
	cust     customerRef
	lines    []orderLineInput // New-Order
	rollback bool             // New-Order whose last item is unused
	amount   int64            // Payment, in cents
	carrier  int              // Delivery
	thresh   int              // Stock-Level
	lowStock int              // Stock-Level's result, from the latest run
	seq      int
}

// Next draws the next transaction.
func (g *terminal) Next() workload.Txn {
	p := g.draw()
	w := g.w
	txn := workload.Txn{Type: p.typ}
	switch p.typ {
	case NewOrder:
		txn.Label = labelOf(w, g.wh, p)
		txn.Run = func(tx *client.Txn) error { return w.newOrder(tx, g.wh, p) }
	case Payment:
		txn.Run = func(tx *client.Txn) error { return w.payment(tx, g.wh, g.id, p) }
	case OrderStatus:
		txn.ReadOnly = true
		txn.Run = func(tx *client.Txn) error { return w.orderStatus(tx, p) }
	case Delivery:
		txn.Run = func(tx *client.Txn) error { return w.delivery(tx, g.wh, p) }
	case StockLevel:
		txn.ReadOnly = true
		txn.Run = func(tx *client.Txn) error { return w.stockLevel(tx, g.wh, p) }
	}
	return txn
}

// labelOf names a New-Order by where its stock is, as K2's Table 2 splits New-Order latency:
// "new-order/remote-stock" when a line's supplying warehouse is homed in another region.
func labelOf(w *Workload, home int, p *params) string {
	for _, l := range p.lines {
		if w.regionOf(l.supplyWH) != w.regionOf(home) {
			return NewOrder + "/remote-stock"
		}
	}
	return NewOrder + "/local-stock"
}

func (g *terminal) draw() *params {
	w, cfg, rng := g.w, g.w.cfg, g.rng
	g.seq++
	p := &params{seq: g.seq}
	total := 0
	for _, m := range cfg.Mix {
		total += m
	}
	x := rng.IntN(total)
	for i, m := range cfg.Mix {
		if x < m {
			p.typ = Types[i]
			break
		}
		x -= m
	}
	p.d = 1 + rng.IntN(cfg.Districts)
	switch p.typ {
	case NewOrder:
		p.cust = customerRef{wh: g.wh, d: p.d, id: nuRand(rng, 1023, w.cID, 1, cfg.CustomersPerDistrict)}
		n := 5 + rng.IntN(11)
		p.rollback = rng.Float64() < cfg.RollbackRatio
		seen := make(map[int]bool, n)
		remoteLine := -1 // OneRemoteLine: the one line supplied by another warehouse
		if cfg.OneRemoteLine && cfg.Warehouses > 1 {
			remoteLine = rng.IntN(n)
		}
		for i := 0; i < n; i++ {
			var it int
			if p.rollback && i == n-1 {
				it = cfg.Items + 1 // an unused item number (§2.4.1.4)
			} else {
				for {
					it = nuRand(rng, 8191, w.cItem, 1, cfg.Items)
					if !seen[it] {
						break
					}
				}
				seen[it] = true
			}
			supply := g.wh
			switch {
			case cfg.OneRemoteLine:
				if i == remoteLine {
					supply = g.otherWarehouse()
				}
			case cfg.Warehouses > 1 && rng.Float64() < cfg.RemoteItemRatio:
				supply = g.otherWarehouse()
			}
			p.lines = append(p.lines, orderLineInput{item: it, supplyWH: supply, qty: 1 + rng.IntN(10)})
		}
	case Payment:
		p.cust = customerRef{wh: g.wh, d: p.d}
		if cfg.Warehouses > 1 && rng.Float64() < cfg.RemotePaymentRatio {
			p.cust.wh, p.cust.d = g.otherWarehouse(), 1+rng.IntN(cfg.Districts)
		}
		g.pickCustomer(&p.cust)
		p.amount = 100 + int64(rng.IntN(500_000-100+1))
	case OrderStatus:
		p.cust = customerRef{wh: g.wh, d: p.d}
		g.pickCustomer(&p.cust)
	case Delivery:
		p.carrier = 1 + rng.IntN(10)
	case StockLevel:
		p.d = g.district
		p.thresh = 10 + rng.IntN(11)
	}
	return p
}

func (g *terminal) pickCustomer(c *customerRef) {
	w := g.w
	if g.rng.Float64() < w.cfg.ByLastNameRatio {
		c.last = LastName(nuRand(g.rng, 255, w.cLast, 0, w.lastRange-1))
	} else {
		c.id = nuRand(g.rng, 1023, w.cID, 1, w.cfg.CustomersPerDistrict)
	}
}

// otherWarehouse is a warehouse other than the home one, uniformly.
func (g *terminal) otherWarehouse() int {
	o := 1 + g.rng.IntN(g.w.cfg.Warehouses-1)
	if o >= g.wh {
		o++
	}
	return o
}

// errRow wraps a missing or malformed row: the database is not what the loader wrote.
func errRow(key string, err error) error {
	if errors.Is(err, client.ErrNotFound) {
		return fmt.Errorf("tpcc: row %q missing", key)
	}
	return fmt.Errorf("tpcc: row %q: %w", key, err)
}

// fetch is one row read by fetchAll: its key, where to decode it, and whether it may be absent.
type fetch struct {
	key      string
	into     interface{ decode([]byte) error }
	optional bool // absence is not an error: found says whether it was there
	found    bool
}

// intRow is a row holding a list of integers (indexes, pointers, hot-column families).
type intRow struct{ v []int64 }

func (r *intRow) decode(b []byte) error {
	v, err := decodeInts(b)
	r.v = v
	return err
}

// one is the row's single integer (a hot-column family, a pointer).
func (r *intRow) one(key string) (int64, error) {
	if len(r.v) != 1 {
		return 0, errRow(key, errMalformed)
	}
	return r.v[0], nil
}

// batcher sends a transaction's operations in batches, as the TPC-C of chogori-platform (the
// public ancestor of K2's code base) issues a transaction's independent reads and writes
// concurrently. A write waits for the next batch of reads and travels with it: the row's write
// then follows its read by one round, while a row read but not yet written is a conflict window
// (K2 aborts the write if a younger transaction read the row meanwhile; 2PL holds its lock that
// long). So transactions read their hot home-region rows first and what is slow to read (rows
// homed in other regions) in a later batch that carries the hot rows' writes.
type batcher struct {
	tx      *client.Txn
	pending []wire.BatchOp
}

// write queues writes for the next batch.
func (b *batcher) write(ops ...wire.BatchOp) { b.pending = append(b.pending, ops...) }

// read sends the queued writes and reads the rows in one batch, and decodes them.
func (b *batcher) read(fs ...*fetch) error {
	// One allocation for the batch, not one per doubling: a New-Order reads about 25 rows.
	ops := slices.Grow(b.pending, len(fs))
	b.pending = nil
	for _, f := range fs {
		ops = append(ops, wire.BatchOp{Op: wire.OpGet, Key: f.key})
	}
	res, err := b.tx.Batch(ops)
	if err != nil {
		return err
	}
	res = res[len(res)-len(fs):]
	for i, f := range fs {
		f.found = res[i].Found
		if !f.found {
			if f.optional {
				continue
			}
			return errRow(f.key, client.ErrNotFound)
		}
		if err := f.into.decode(res[i].Value); err != nil {
			return errRow(f.key, err)
		}
	}
	return nil
}

// flush sends the queued writes.
func (b *batcher) flush() error {
	if len(b.pending) == 0 {
		return nil
	}
	_, err := b.tx.Batch(b.pending)
	b.pending = nil
	return err
}

// fetchAll reads the rows in one batch and decodes them.
func fetchAll(tx *client.Txn, fs ...*fetch) error { return (&batcher{tx: tx}).read(fs...) }

// put is a write of a batch.
func put(key string, value []byte) wire.BatchOp {
	return wire.BatchOp{Op: wire.OpPut, Key: key, Value: value}
}

// customerFetch is the read that starts resolving a customer reference: the customer row
// itself when it is named by id, else the last-name index.
func (w *Workload) customerFetch(ref customerRef, c *customer, idx *intRow) *fetch {
	if ref.last != "" {
		return &fetch{key: w.lastNameKey(ref.wh, ref.d, ref.last), into: idx}
	}
	return &fetch{key: w.key(ref.wh, "c", ref.d, ref.id), into: c}
}

// finishCustomer completes customerFetch: by last name it takes the customer at position
// ⌈n/2⌉ of those with that name ordered by first name (§2.5.2.2) and reads that row.
func (w *Workload) finishCustomer(b *batcher, ref customerRef, c *customer, idx *intRow) (int, error) {
	if ref.last == "" {
		return ref.id, nil
	}
	if len(idx.v) == 0 {
		return 0, fmt.Errorf("tpcc: empty last-name index for %q", ref.last)
	}
	id := int(idx.v[(len(idx.v)-1)/2])
	return id, b.read(&fetch{key: w.key(ref.wh, "c", ref.d, id), into: c})
}

// newOrder reads the warehouse, district, customer, items and the stock homed in its own region
// in a first batch; a second writes the district's next order id (D_NEXT_O_ID's family under
// Config.Families, which touches no W_YTD or D_YTD), the order, its NEW-ORDER row, the
// customer's last-order index, that stock and its order lines, and reads the stock homed in
// other regions, if any; a last one writes that stock and its lines (see batcher).
func (w *Workload) newOrder(tx *client.Txn, wh int, p *params) error {
	var (
		wr     warehouse
		dr     district
		ws, ds staticFamily
		next   intRow
		c      customer
	)
	b := &batcher{tx: tx}
	dk, nk := w.key(wh, "d", p.d), w.key(wh, tableDistrictNext, p.d)
	fs := []*fetch{{key: w.key(wh, "c", p.d, p.cust.id), into: &c}}
	if w.cfg.Families {
		fs = append(fs, &fetch{key: w.key(wh, "w"), into: &ws}, &fetch{key: dk, into: &ds}, &fetch{key: nk, into: &next})
	} else {
		fs = append(fs, &fetch{key: w.key(wh, "w"), into: &wr}, &fetch{key: dk, into: &dr})
	}
	items, stocks := make([]item, len(p.lines)), make([]stock, len(p.lines))
	itemFetches := make([]*fetch, len(p.lines))
	far := make([]bool, len(p.lines)) // the line's stock is homed in another region
	var farStock []*fetch
	allLocal := int64(1)
	for i, l := range p.lines {
		unused := l.item > w.cfg.Items // the 1% rolled-back New-Order (§2.4.2.3)
		itemFetches[i] = &fetch{key: w.itemKey(wh, l.item), into: &items[i], optional: unused}
		fs = append(fs, itemFetches[i])
		far[i] = w.regionOf(l.supplyWH) != w.regionOf(wh)
		switch sf := (&fetch{key: w.key(l.supplyWH, "s", l.item), into: &stocks[i]}); {
		case unused:
		case far[i]:
			farStock = append(farStock, sf)
		default:
			fs = append(fs, sf)
		}
		if l.supplyWH != wh {
			allLocal = 0
		}
	}
	if err := b.read(fs...); err != nil {
		return err
	}
	for _, f := range itemFetches {
		if !f.found {
			return workload.ErrUserAbort
		}
	}
	var oid int
	if w.cfg.Families {
		n, err := next.one(nk)
		if err != nil {
			return err
		}
		oid = int(n)
		b.write(put(nk, encodeInts(n+1)))
	} else {
		oid = int(dr.NextOID)
		dr.NextOID++
		b.write(put(dk, dr.encode()))
	}
	o := order{CID: int64(p.cust.id), EntryD: int64(p.seq), OLCnt: int64(len(p.lines)), AllLocal: allLocal}
	b.write(put(w.key(wh, "o", p.d, oid), o.encode()), put(w.key(wh, "no", p.d, oid), newOrderMark),
		put(w.key(wh, "co", p.d, p.cust.id), encodeInts(int64(oid))))
	b.write(w.lineWrites(wh, p, oid, items, stocks, func(i int) bool { return !far[i] })...)
	if len(farStock) > 0 {
		if err := b.read(farStock...); err != nil {
			return err
		}
		b.write(w.lineWrites(wh, p, oid, items, stocks, func(i int) bool { return far[i] })...)
	}
	// The order's total, (Σ OL_AMOUNT)·(1 − C_DISCOUNT)·(1 + W_TAX + D_TAX), goes to the
	// terminal in the spec; nothing stores it.
	return b.flush()
}

// lineWrites is the stock update and the order line of each New-Order line that pick selects.
func (w *Workload) lineWrites(wh int, p *params, oid int, items []item, stocks []stock, pick func(i int) bool) []wire.BatchOp {
	picked := 0
	for n := range p.lines {
		if pick(n) {
			picked++
		}
	}
	ops := make([]wire.BatchOp, 0, 2*picked)
	for n, l := range p.lines {
		if !pick(n) {
			continue
		}
		s, q := &stocks[n], int64(l.qty)
		if s.Quantity >= q+10 {
			s.Quantity -= q
		} else {
			s.Quantity += 91 - q
		}
		s.YTD += q
		s.OrderCnt++
		if l.supplyWH != wh {
			s.RemoteCnt++
		}
		ol := orderLine{IID: int64(l.item), SupplyWID: int64(l.supplyWH), Quantity: q, Amount: q * items[n].Price, DistInfo: distInfo(l.supplyWH, l.item, p.d)}
		ops = append(ops, put(w.key(l.supplyWH, "s", l.item), s.encode()), put(w.key(wh, "ol", p.d, oid, n+1), ol.encode()))
	}
	return ops
}

// get reads one row and decodes it into r.
func get(tx *client.Txn, key string, r interface{ decode([]byte) error }) error {
	return fetchAll(tx, &fetch{key: key, into: r})
}

// getInt reads a single-int row: a hot-column family under Config.Families.
func getInt(tx *client.Txn, key string) (int64, error) {
	var r intRow
	if err := get(tx, key, &r); err != nil {
		return 0, err
	}
	return r.one(key)
}

// payment reads the warehouse and district (under Config.Families their names and YTD
// families, so no D_NEXT_O_ID) with the customer if it is homed in the same region; the YTDs'
// writes go out with the customer's reads when it is elsewhere or named by last name, and the
// customer and the history row are written last (see batcher).
func (w *Workload) payment(tx *client.Txn, wh, terminalID int, p *params) error {
	var (
		wr         warehouse
		dr         district
		ws, ds     staticFamily
		wYTD, dYTD intRow
		c          customer
		idx        intRow
	)
	b := &batcher{tx: tx}
	wk, dk := w.key(wh, "w"), w.key(wh, "d", p.d)
	wyk, dyk := w.key(wh, tableWarehouseYTD), w.key(wh, tableDistrictYTD, p.d)
	var fs []*fetch
	if w.cfg.Families {
		fs = append(fs, &fetch{key: wk, into: &ws}, &fetch{key: wyk, into: &wYTD}, &fetch{key: dk, into: &ds}, &fetch{key: dyk, into: &dYTD})
	} else {
		fs = append(fs, &fetch{key: wk, into: &wr}, &fetch{key: dk, into: &dr})
	}
	near := w.regionOf(p.cust.wh) == w.regionOf(wh)
	if near {
		fs = append(fs, w.customerFetch(p.cust, &c, &idx))
	}
	if err := b.read(fs...); err != nil {
		return err
	}
	wName, dName := wr.Name, dr.Name
	if w.cfg.Families {
		wy, err := wYTD.one(wyk)
		if err != nil {
			return err
		}
		dy, err := dYTD.one(dyk)
		if err != nil {
			return err
		}
		wName, dName = ws.Name, ds.Name
		b.write(put(wyk, encodeInts(wy+p.amount)), put(dyk, encodeInts(dy+p.amount)))
	} else {
		wr.YTD += p.amount
		dr.YTD += p.amount
		b.write(put(wk, wr.encode()), put(dk, dr.encode()))
	}
	if !near {
		if err := b.read(w.customerFetch(p.cust, &c, &idx)); err != nil {
			return err
		}
	}
	cid, err := w.finishCustomer(b, p.cust, &c, &idx)
	if err != nil {
		return err
	}
	c.Balance -= p.amount
	c.YTDPayment += p.amount
	c.PaymentCnt++
	if c.Credit == "BC" {
		c.Data = fmt.Sprintf("%d %d %d %d %d %d|", cid, p.cust.d, p.cust.wh, p.d, wh, p.amount) + c.Data
		if len(c.Data) > 500 {
			c.Data = c.Data[:500]
		}
	}
	h := historyRow{CID: int64(cid), CDID: int64(p.cust.d), CWID: int64(p.cust.wh), DID: int64(p.d), WID: int64(wh),
		Date: int64(p.seq), Amount: p.amount, Data: wName + "    " + dName}
	b.write(put(w.key(p.cust.wh, "c", p.cust.d, cid), c.encode()),
		put(w.historyKey(wh, "t"+strconv.Itoa(terminalID)+"-"+strconv.Itoa(p.seq)), h.encode()))
	return b.flush()
}

// orderLineFetches reads the lines 1..count of order oid of district d.
func (w *Workload) orderLineFetches(wh, d, oid int, lines []orderLine) []*fetch {
	fs := make([]*fetch, len(lines))
	for n := range lines {
		fs[n] = &fetch{key: w.key(wh, "ol", d, oid, n+1), into: &lines[n]}
	}
	return fs
}

func (w *Workload) orderStatus(tx *client.Txn, p *params) error {
	var (
		c   customer
		idx intRow
	)
	b := &batcher{tx: tx}
	if err := b.read(w.customerFetch(p.cust, &c, &idx)); err != nil {
		return err
	}
	cid, err := w.finishCustomer(b, p.cust, &c, &idx)
	if err != nil {
		return err
	}
	var last intRow
	lk := w.key(p.cust.wh, "co", p.cust.d, cid)
	if err := fetchAll(tx, &fetch{key: lk, into: &last}); err != nil {
		return err
	}
	oid, err := last.one(lk)
	if err != nil {
		return err
	}
	var o order
	if err := fetchAll(tx, &fetch{key: w.key(p.cust.wh, "o", p.cust.d, int(oid)), into: &o}); err != nil {
		return err
	}
	return fetchAll(tx, w.orderLineFetches(p.cust.wh, p.cust.d, int(oid), make([]orderLine, o.OLCnt))...)
}

// delivery delivers the oldest undelivered order of every district: the districts' delivery
// pointers, their NEW-ORDER rows, the orders, and the order lines with the customers are each
// read in one batch, and every write goes out in a last one.
func (w *Workload) delivery(tx *client.Txn, wh int, p *params) error {
	nd := w.cfg.Districts
	ptrs := make([]intRow, nd)
	fs := make([]*fetch, nd)
	for d := 1; d <= nd; d++ {
		fs[d-1] = &fetch{key: w.key(wh, "dp", d), into: &ptrs[d-1]}
	}
	if err := fetchAll(tx, fs...); err != nil {
		return err
	}
	oids := make([]int, nd)
	marks := make([]intRow, nd)
	noFetches := make([]*fetch, nd)
	for d := 1; d <= nd; d++ {
		oid, err := ptrs[d-1].one(fs[d-1].key)
		if err != nil {
			return err
		}
		oids[d-1] = int(oid)
		noFetches[d-1] = &fetch{key: w.key(wh, "no", d, int(oid)), into: &marks[d-1], optional: true}
	}
	if err := fetchAll(tx, noFetches...); err != nil {
		return err
	}
	var ds []int // districts with an undelivered order (§2.7.4.2: the others are skipped)
	for d := 1; d <= nd; d++ {
		if noFetches[d-1].found {
			ds = append(ds, d)
		}
	}
	if len(ds) == 0 {
		return nil
	}
	orders := make([]order, len(ds))
	fs = fs[:0]
	for i, d := range ds {
		fs = append(fs, &fetch{key: w.key(wh, "o", d, oids[d-1]), into: &orders[i]})
	}
	if err := fetchAll(tx, fs...); err != nil {
		return err
	}
	lines := make([][]orderLine, len(ds))
	custs := make([]customer, len(ds))
	fs = fs[:0]
	for i, d := range ds {
		lines[i] = make([]orderLine, orders[i].OLCnt)
		fs = append(fs, w.orderLineFetches(wh, d, oids[d-1], lines[i])...)
		fs = append(fs, &fetch{key: w.key(wh, "c", d, int(orders[i].CID)), into: &custs[i]})
	}
	if err := fetchAll(tx, fs...); err != nil {
		return err
	}
	var ops []wire.BatchOp
	for i, d := range ds {
		oid := oids[d-1]
		ops = append(ops, wire.BatchOp{Op: wire.OpDelete, Key: w.key(wh, "no", d, oid)}, put(w.key(wh, "dp", d), encodeInts(int64(oid+1))))
		orders[i].CarrierID = int64(p.carrier)
		ops = append(ops, put(w.key(wh, "o", d, oid), orders[i].encode()))
		var sum int64
		for n := range lines[i] {
			sum += lines[i][n].Amount
			lines[i][n].DeliveryD = int64(p.seq)
			ops = append(ops, put(w.key(wh, "ol", d, oid, n+1), lines[i][n].encode()))
		}
		custs[i].Balance += sum
		custs[i].DelivCnt++
		ops = append(ops, put(w.key(wh, "c", d, int(orders[i].CID)), custs[i].encode()))
	}
	_, err := tx.Batch(ops)
	return err
}

// stockLevel reads D_NEXT_O_ID (the whole district row, or under Config.Families only its
// family), then the last 20 orders, their lines and the stock of their items, each in one batch.
func (w *Workload) stockLevel(tx *client.Txn, wh int, p *params) error {
	var next int
	if w.cfg.Families {
		n, err := getInt(tx, w.key(wh, tableDistrictNext, p.d))
		if err != nil {
			return err
		}
		next = int(n)
	} else {
		var dr district
		if err := fetchAll(tx, &fetch{key: w.key(wh, "d", p.d), into: &dr}); err != nil {
			return err
		}
		next = int(dr.NextOID)
	}
	first := max(1, next-20)
	orders := make([]order, max(0, next-first))
	fs := make([]*fetch, len(orders))
	for i := range orders {
		fs[i] = &fetch{key: w.key(wh, "o", p.d, first+i), into: &orders[i]}
	}
	if len(fs) == 0 {
		p.lowStock = 0
		return nil
	}
	if err := fetchAll(tx, fs...); err != nil {
		return err
	}
	lines := make([][]orderLine, len(orders))
	fs = fs[:0]
	for i := range orders {
		lines[i] = make([]orderLine, orders[i].OLCnt)
		fs = append(fs, w.orderLineFetches(wh, p.d, first+i, lines[i])...)
	}
	if err := fetchAll(tx, fs...); err != nil {
		return err
	}
	items := map[int64]bool{}
	for _, ls := range lines {
		for _, ol := range ls {
			items[ol.IID] = true
		}
	}
	ids := make([]int, 0, len(items))
	for i := range items {
		ids = append(ids, int(i))
	}
	sort.Ints(ids) // a deterministic read order
	stocks := make([]stock, len(ids))
	fs = fs[:0]
	for i, id := range ids {
		fs = append(fs, &fetch{key: w.key(wh, "s", id), into: &stocks[i]})
	}
	if err := fetchAll(tx, fs...); err != nil {
		return err
	}
	low := 0
	for _, s := range stocks {
		if s.Quantity < int64(p.thresh) {
			low++
		}
	}
	p.lowStock = low // the spec shows it on the terminal; tests look at it
	return nil
}
