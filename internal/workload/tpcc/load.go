package tpcc

import (
	"math/rand/v2"
	"sort"
	"strconv"

	"github.com/meridiandb/meridian/client"
	"github.com/meridiandb/meridian/internal/workload"
)

// Initial values of §4.3.3.1, in cents.
const (
	initDistrictYTD = 3_000_000 // D_YTD 30,000.00
	initBalance     = -1000     // C_BALANCE −10.00
	initYTDPayment  = 1000      // C_YTD_PAYMENT 10.00; also the initial H_AMOUNT
	creditLimit     = 5_000_000 // C_CREDIT_LIM 50,000.00
)

// astr is a random alphanumeric string with length in [lo, hi] (§4.3.2.2), shortened in
// compact mode.
func (w *Workload) astr(rng *rand.Rand, lo, hi int) string {
	if w.cfg.Compact {
		hi = min(hi, 8)
		lo = min(lo, hi)
	}
	n := lo + rng.IntN(hi-lo+1)
	b := make([]byte, n)
	for i := range b {
		b[i] = 'a' + byte(rng.IntN(26))
	}
	return string(b)
}

// data is I_DATA or S_DATA: 10% of them contain "ORIGINAL" (§4.3.3.1).
func (w *Workload) data(rng *rand.Rand) string {
	s := w.astr(rng, 26, 50)
	if rng.IntN(10) == 0 {
		p := rng.IntN(len(s) + 1)
		s = s[:p] + "ORIGINAL" + s[p:]
	}
	return s
}

// distInfo stands for S_DIST_xx: a 24-character string determined by (warehouse, item,
// district), so stock rows need not store ten of them.
func distInfo(wh, i, d int) string {
	s := "dist-" + strconv.Itoa(wh) + "-" + strconv.Itoa(i) + "-" + strconv.Itoa(d) + "........................"
	return s[:24]
}

// Rows enumerates the initial database of §4.3.3.1 plus the index rows, deterministically
// (the loader's randomness comes from Config.Seed).
func (w *Workload) Rows(emit func(key string, value []byte) error) error {
	rng := rand.New(rand.NewPCG(w.cfg.Seed, 0x6c6f6164))
	cfg := w.cfg
	items := make([][]byte, cfg.Items+1)
	for i := 1; i <= cfg.Items; i++ {
		it := item{IMID: 1 + int64(rng.IntN(10000)), Price: 100 + int64(rng.IntN(9901)), Name: w.astr(rng, 14, 24), Data: w.data(rng)}
		items[i] = it.encode()
	}
	seenShard := map[int]bool{}
	for wh := 1; wh <= cfg.Warehouses; wh++ {
		// One ITEM copy per shard that holds a warehouse, written with its first warehouse.
		if s := int(w.shardOf[wh]); !seenShard[s] {
			seenShard[s] = true
			for i := 1; i <= cfg.Items; i++ {
				if err := emit(w.itemKey(wh, i), items[i]); err != nil {
					return err
				}
			}
		}
		if err := w.warehouseRows(rng, wh, emit); err != nil {
			return err
		}
	}
	return nil
}

func (w *Workload) warehouseRows(rng *rand.Rand, wh int, emit func(string, []byte) error) error {
	cfg := w.cfg
	wr := warehouse{Tax: int64(rng.IntN(2001)), YTD: int64(cfg.Districts) * initDistrictYTD, Name: w.astr(rng, 6, 10)}
	if cfg.Families {
		st := staticFamily{Tax: wr.Tax, Name: wr.Name}
		if err := emit(w.key(wh, "w"), st.encode()); err != nil {
			return err
		}
		if err := emit(w.key(wh, tableWarehouseYTD), encodeInts(wr.YTD)); err != nil {
			return err
		}
	} else if err := emit(w.key(wh, "w"), wr.encode()); err != nil {
		return err
	}
	for i := 1; i <= cfg.Items; i++ {
		s := stock{Quantity: 10 + int64(rng.IntN(91)), Data: w.data(rng)}
		if err := emit(w.key(wh, "s", i), s.encode()); err != nil {
			return err
		}
	}
	nCust := cfg.CustomersPerDistrict
	for d := 1; d <= cfg.Districts; d++ {
		dr := district{Tax: int64(rng.IntN(2001)), YTD: initDistrictYTD, NextOID: int64(nCust + 1), Name: w.astr(rng, 6, 10)}
		if err := w.emitDistrict(wh, d, &dr, emit); err != nil {
			return err
		}
		byName := map[string][]int{}
		firsts := make([]string, nCust+1)
		for c := 1; c <= nCust; c++ {
			num := c - 1
			if c > w.lastRange {
				num = nuRand(rng, 255, w.cLastLoad, 0, w.lastRange-1)
			}
			cr := customer{First: w.astr(rng, 8, 16), Middle: "OE", Last: LastName(num), Credit: "GC",
				Discount: int64(rng.IntN(5001)), CreditLim: creditLimit, Balance: initBalance, YTDPayment: initYTDPayment,
				PaymentCnt: 1, Data: w.astr(rng, 300, 500)}
			if rng.IntN(10) == 0 {
				cr.Credit = "BC"
			}
			firsts[c] = cr.First
			byName[cr.Last] = append(byName[cr.Last], c)
			if err := emit(w.key(wh, "c", d, c), cr.encode()); err != nil {
				return err
			}
			h := historyRow{CID: int64(c), CDID: int64(d), CWID: int64(wh), DID: int64(d), WID: int64(wh), Amount: initYTDPayment, Data: w.astr(rng, 12, 24)}
			if err := emit(w.historyKey(wh, "load-"+strconv.Itoa(d)+"-"+strconv.Itoa(c)), h.encode()); err != nil {
				return err
			}
		}
		names := make([]string, 0, len(byName))
		for n := range byName {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			ids := byName[n]
			sort.SliceStable(ids, func(i, j int) bool { return firsts[ids[i]] < firsts[ids[j]] })
			v := make([]int64, len(ids))
			for i, c := range ids {
				v[i] = int64(c)
			}
			if err := emit(w.lastNameKey(wh, d, n), encodeInts(v...)); err != nil {
				return err
			}
		}
		// Orders: O_C_ID is a random permutation of the customers, so each has one order.
		perm := rng.Perm(nCust)
		for o := 1; o <= nCust; o++ {
			c := perm[o-1] + 1
			delivered := o < w.firstNewO
			or := order{CID: int64(c), EntryD: 1, OLCnt: 5 + int64(rng.IntN(11)), AllLocal: 1}
			if delivered {
				or.CarrierID = 1 + int64(rng.IntN(10))
			}
			if err := emit(w.key(wh, "o", d, o), or.encode()); err != nil {
				return err
			}
			if err := emit(w.key(wh, "co", d, c), encodeInts(int64(o))); err != nil {
				return err
			}
			for n := 1; n <= int(or.OLCnt); n++ {
				i := 1 + rng.IntN(cfg.Items)
				ol := orderLine{IID: int64(i), SupplyWID: int64(wh), Quantity: 5, DistInfo: distInfo(wh, i, d)}
				if delivered {
					ol.DeliveryD = or.EntryD
				} else {
					ol.Amount = 1 + int64(rng.IntN(999_999))
				}
				if err := emit(w.key(wh, "ol", d, o, n), ol.encode()); err != nil {
					return err
				}
			}
			if !delivered {
				if err := emit(w.key(wh, "no", d, o), newOrderMark); err != nil {
					return err
				}
			}
		}
		if err := emit(w.key(wh, "dp", d), encodeInts(int64(w.firstNewO))); err != nil {
			return err
		}
	}
	return nil
}

// emitDistrict writes district d of warehouse wh as one row or, under Config.Families, as
// its static, D_NEXT_O_ID and D_YTD families.
func (w *Workload) emitDistrict(wh, d int, dr *district, emit func(string, []byte) error) error {
	if !w.cfg.Families {
		return emit(w.key(wh, "d", d), dr.encode())
	}
	st := staticFamily{Tax: dr.Tax, Name: dr.Name}
	if err := emit(w.key(wh, "d", d), st.encode()); err != nil {
		return err
	}
	if err := emit(w.key(wh, tableDistrictNext, d), encodeInts(dr.NextOID)); err != nil {
		return err
	}
	return emit(w.key(wh, tableDistrictYTD, d), encodeInts(dr.YTD))
}

// newOrderMark is the value of a NEW-ORDER row: its key says everything.
var newOrderMark = []byte{1}

// Load writes the initial database through db, 200 rows per transaction.
func (w *Workload) Load(db *client.DB) error {
	return workload.LoadRows(db, w.Rows, 200)
}
