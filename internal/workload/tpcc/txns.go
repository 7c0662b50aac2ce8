package tpcc

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"

	"github.com/meridiandb/meridian/client"
	"github.com/meridiandb/meridian/internal/topo"
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

// get reads key and decodes it into r; client errors come back as they are.
func get(tx *client.Txn, key string, r interface{ decode([]byte) error }) error {
	v, err := tx.Get(key)
	if err != nil {
		if errors.Is(err, client.ErrNotFound) {
			return errRow(key, err)
		}
		return err
	}
	if err := r.decode(v); err != nil {
		return errRow(key, err)
	}
	return nil
}

func getInts(tx *client.Txn, key string) ([]int64, error) {
	v, err := tx.Get(key)
	if err != nil {
		if errors.Is(err, client.ErrNotFound) {
			return nil, errRow(key, err)
		}
		return nil, err
	}
	out, err := decodeInts(v)
	if err != nil {
		return nil, errRow(key, err)
	}
	return out, nil
}

// getInt reads a single-int row: a hot-column family under Config.Families.
func getInt(tx *client.Txn, key string) (int64, error) {
	v, err := getInts(tx, key)
	if err != nil {
		return 0, err
	}
	if len(v) != 1 {
		return 0, errRow(key, errMalformed)
	}
	return v[0], nil
}

// findCustomer resolves a customer reference: by last name it takes the one at position
// ⌈n/2⌉ of the customers with that name ordered by first name (§2.5.2.2).
func (w *Workload) findCustomer(tx *client.Txn, ref customerRef) (int, *customer, error) {
	id := ref.id
	if ref.last != "" {
		ids, err := getInts(tx, w.lastNameKey(ref.wh, ref.d, ref.last))
		if err != nil {
			return 0, nil, err
		}
		if len(ids) == 0 {
			return 0, nil, fmt.Errorf("tpcc: empty last-name index for %q", ref.last)
		}
		id = int(ids[(len(ids)-1)/2])
	}
	c := &customer{}
	if err := get(tx, w.key(ref.wh, "c", ref.d, id), c); err != nil {
		return 0, nil, err
	}
	return id, c, nil
}

// takeOrderID is New-Order's reading of W_TAX and D_TAX and its increment of D_NEXT_O_ID,
// whose old value it returns. Under Config.Families it touches neither W_YTD nor D_YTD.
func (w *Workload) takeOrderID(tx *client.Txn, wh, d int) (int, error) {
	dk := w.key(wh, "d", d)
	if w.cfg.Families {
		var ws, ds staticFamily
		if err := get(tx, w.key(wh, "w"), &ws); err != nil {
			return 0, err
		}
		if err := get(tx, dk, &ds); err != nil {
			return 0, err
		}
		nk := w.key(wh, tableDistrictNext, d)
		next, err := getInt(tx, nk)
		if err != nil {
			return 0, err
		}
		return int(next), tx.Put(nk, encodeInts(next+1))
	}
	var wr warehouse
	if err := get(tx, w.key(wh, "w"), &wr); err != nil {
		return 0, err
	}
	var dr district
	if err := get(tx, dk, &dr); err != nil {
		return 0, err
	}
	oid := int(dr.NextOID)
	dr.NextOID++
	return oid, tx.Put(dk, dr.encode())
}

func (w *Workload) newOrder(tx *client.Txn, wh int, p *params) error {
	oid, err := w.takeOrderID(tx, wh, p.d)
	if err != nil {
		return err
	}
	var c customer
	if err := get(tx, w.key(wh, "c", p.d, p.cust.id), &c); err != nil {
		return err
	}
	allLocal := int64(1)
	for _, l := range p.lines {
		if l.supplyWH != wh {
			allLocal = 0
		}
	}
	o := order{CID: int64(p.cust.id), EntryD: int64(p.seq), OLCnt: int64(len(p.lines)), AllLocal: allLocal}
	if err := tx.Put(w.key(wh, "o", p.d, oid), o.encode()); err != nil {
		return err
	}
	if err := tx.Put(w.key(wh, "no", p.d, oid), newOrderMark); err != nil {
		return err
	}
	if err := tx.Put(w.key(wh, "co", p.d, p.cust.id), encodeInts(int64(oid))); err != nil {
		return err
	}
	for n, l := range p.lines {
		ik := w.itemKey(wh, l.item)
		v, err := tx.Get(ik)
		switch {
		case errors.Is(err, client.ErrNotFound) && l.item > w.cfg.Items:
			return workload.ErrUserAbort // the 1% rolled-back New-Order (§2.4.2.3)
		case errors.Is(err, client.ErrNotFound):
			return errRow(ik, err)
		case err != nil:
			return err
		}
		var it item
		if err := it.decode(v); err != nil {
			return errRow(ik, err)
		}
		sk := w.key(l.supplyWH, "s", l.item)
		var s stock
		if err := get(tx, sk, &s); err != nil {
			return err
		}
		q := int64(l.qty)
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
		if err := tx.Put(sk, s.encode()); err != nil {
			return err
		}
		ol := orderLine{IID: int64(l.item), SupplyWID: int64(l.supplyWH), Quantity: q, Amount: q * it.Price, DistInfo: distInfo(l.supplyWH, l.item, p.d)}
		if err := tx.Put(w.key(wh, "ol", p.d, oid, n+1), ol.encode()); err != nil {
			return err
		}
	}
	// The order's total, (Σ OL_AMOUNT)·(1 − C_DISCOUNT)·(1 + W_TAX + D_TAX), goes to the
	// terminal in the spec; nothing stores it.
	return nil
}

// addYTD is Payment's increment of W_YTD and D_YTD by amount; it returns W_NAME and D_NAME
// for the history row. Under Config.Families it touches no D_NEXT_O_ID.
func (w *Workload) addYTD(tx *client.Txn, wh, d int, amount int64) (wName, dName string, err error) {
	wk, dk := w.key(wh, "w"), w.key(wh, "d", d)
	if w.cfg.Families {
		var ws, ds staticFamily
		if err := get(tx, wk, &ws); err != nil {
			return "", "", err
		}
		if err := addInt(tx, w.key(wh, tableWarehouseYTD), amount); err != nil {
			return "", "", err
		}
		if err := get(tx, dk, &ds); err != nil {
			return "", "", err
		}
		if err := addInt(tx, w.key(wh, tableDistrictYTD, d), amount); err != nil {
			return "", "", err
		}
		return ws.Name, ds.Name, nil
	}
	var wr warehouse
	if err := get(tx, wk, &wr); err != nil {
		return "", "", err
	}
	wr.YTD += amount
	if err := tx.Put(wk, wr.encode()); err != nil {
		return "", "", err
	}
	var dr district
	if err := get(tx, dk, &dr); err != nil {
		return "", "", err
	}
	dr.YTD += amount
	if err := tx.Put(dk, dr.encode()); err != nil {
		return "", "", err
	}
	return wr.Name, dr.Name, nil
}

// addInt adds delta to the single-int row at key.
func addInt(tx *client.Txn, key string, delta int64) error {
	v, err := getInt(tx, key)
	if err != nil {
		return err
	}
	return tx.Put(key, encodeInts(v+delta))
}

func (w *Workload) payment(tx *client.Txn, wh, terminalID int, p *params) error {
	wName, dName, err := w.addYTD(tx, wh, p.d, p.amount)
	if err != nil {
		return err
	}
	cid, c, err := w.findCustomer(tx, p.cust)
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
	if err := tx.Put(w.key(p.cust.wh, "c", p.cust.d, cid), c.encode()); err != nil {
		return err
	}
	h := historyRow{CID: int64(cid), CDID: int64(p.cust.d), CWID: int64(p.cust.wh), DID: int64(p.d), WID: int64(wh),
		Date: int64(p.seq), Amount: p.amount, Data: wName + "    " + dName}
	return tx.Put(w.historyKey(wh, "t"+strconv.Itoa(terminalID)+"-"+strconv.Itoa(p.seq)), h.encode())
}

func (w *Workload) orderStatus(tx *client.Txn, p *params) error {
	cid, _, err := w.findCustomer(tx, p.cust)
	if err != nil {
		return err
	}
	last, err := getInts(tx, w.key(p.cust.wh, "co", p.cust.d, cid))
	if err != nil || len(last) != 1 {
		return fmt.Errorf("tpcc: customer %d/%d/%d has no last-order index: %v", p.cust.wh, p.cust.d, cid, err)
	}
	oid := int(last[0])
	var o order
	if err := get(tx, w.key(p.cust.wh, "o", p.cust.d, oid), &o); err != nil {
		return err
	}
	for n := 1; n <= int(o.OLCnt); n++ {
		var ol orderLine
		if err := get(tx, w.key(p.cust.wh, "ol", p.cust.d, oid, n), &ol); err != nil {
			return err
		}
	}
	return nil
}

func (w *Workload) delivery(tx *client.Txn, wh int, p *params) error {
	for d := 1; d <= w.cfg.Districts; d++ {
		pk := w.key(wh, "dp", d)
		ptr, err := getInts(tx, pk)
		if err != nil {
			return err
		}
		if len(ptr) != 1 {
			return errRow(pk, errMalformed)
		}
		oid := int(ptr[0])
		nk := w.key(wh, "no", d, oid)
		if _, err := tx.Get(nk); errors.Is(err, client.ErrNotFound) {
			continue // no undelivered order in this district (§2.7.4.2: skipped)
		} else if err != nil {
			return err
		}
		if err := tx.Delete(nk); err != nil {
			return err
		}
		if err := tx.Put(pk, encodeInts(int64(oid+1))); err != nil {
			return err
		}
		ok := w.key(wh, "o", d, oid)
		var o order
		if err := get(tx, ok, &o); err != nil {
			return err
		}
		o.CarrierID = int64(p.carrier)
		if err := tx.Put(ok, o.encode()); err != nil {
			return err
		}
		var sum int64
		for n := 1; n <= int(o.OLCnt); n++ {
			lk := w.key(wh, "ol", d, oid, n)
			var ol orderLine
			if err := get(tx, lk, &ol); err != nil {
				return err
			}
			sum += ol.Amount
			ol.DeliveryD = int64(p.seq)
			if err := tx.Put(lk, ol.encode()); err != nil {
				return err
			}
		}
		ck := w.key(wh, "c", d, int(o.CID))
		var c customer
		if err := get(tx, ck, &c); err != nil {
			return err
		}
		c.Balance += sum
		c.DelivCnt++
		if err := tx.Put(ck, c.encode()); err != nil {
			return err
		}
	}
	return nil
}

// nextOrderID reads D_NEXT_O_ID: the whole district row, or under Config.Families only its
// own family.
func (w *Workload) nextOrderID(tx *client.Txn, wh, d int) (int, error) {
	if w.cfg.Families {
		next, err := getInt(tx, w.key(wh, tableDistrictNext, d))
		return int(next), err
	}
	var dr district
	if err := get(tx, w.key(wh, "d", d), &dr); err != nil {
		return 0, err
	}
	return int(dr.NextOID), nil
}

func (w *Workload) stockLevel(tx *client.Txn, wh int, p *params) error {
	next, err := w.nextOrderID(tx, wh, p.d)
	if err != nil {
		return err
	}
	items := map[int64]bool{}
	for oid := max(1, next-20); oid < next; oid++ {
		var o order
		if err := get(tx, w.key(wh, "o", p.d, oid), &o); err != nil {
			return err
		}
		for n := 1; n <= int(o.OLCnt); n++ {
			var ol orderLine
			if err := get(tx, w.key(wh, "ol", p.d, oid, n), &ol); err != nil {
				return err
			}
			items[ol.IID] = true
		}
	}
	ids := make([]int, 0, len(items))
	for i := range items {
		ids = append(ids, int(i))
	}
	sort.Ints(ids) // a deterministic read order
	low := 0
	for _, i := range ids {
		var s stock
		if err := get(tx, w.key(wh, "s", i), &s); err != nil {
			return err
		}
		if s.Quantity < int64(p.thresh) {
			low++
		}
	}
	p.lowStock = low // the spec shows it on the terminal; tests look at it
	return nil
}
