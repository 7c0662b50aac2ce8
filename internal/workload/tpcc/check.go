package tpcc

import (
	"fmt"
	"strings"

	"github.com/meridiandb/meridian/client"
	"github.com/meridiandb/meridian/internal/wire"
)

// maxLines bounds O_OL_CNT (§2.4.1.3), so probing lines 1..maxLines finds every ORDER-LINE row
// of an order without a scan.
const maxLines = 15

// checkOrdersPerTxn bounds the reads of one checking transaction; checkHistoryPerTxn the
// HISTORY rows one scans and checkCustomersPerTxn the CUSTOMER rows one reads.
const (
	checkOrdersPerTxn    = 50
	checkHistoryPerTxn   = 500
	checkCustomersPerTxn = 200
)

// condDeliveryPointer names the workload's own condition on its delivery pointer.
const condDeliveryPointer = "delivery-pointer"

// Violation is one failed consistency condition.
type Violation struct {
	Condition string // "3.3.2.1" …, or condDeliveryPointer
	Detail    string
}

func (v Violation) String() string { return v.Condition + ": " + v.Detail }

// CheckError lists the violated consistency conditions.
type CheckError struct{ Violations []Violation }

func (e *CheckError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "tpcc: %d consistency violations", len(e.Violations))
	for i, v := range e.Violations {
		if i == 10 {
			fmt.Fprintf(&b, "; …")
			break
		}
		b.WriteString("; ")
		b.WriteString(v.String())
	}
	return b.String()
}

// Check verifies the consistency conditions of §3.3.2 on a quiescent database (no transaction
// running), reading it through db in read-only transactions of bounded size:
//
//	3.3.2.1  W_YTD = Σ D_YTD over the warehouse's districts;
//	3.3.2.2  D_NEXT_O_ID − 1 = max(O_ID) = max(NO_O_ID) per district;
//	3.3.2.3  max(NO_O_ID) − min(NO_O_ID) + 1 = the number of NEW-ORDER rows per district;
//	3.3.2.4  Σ O_OL_CNT = the number of ORDER-LINE rows per district;
//	3.3.2.5  O_CARRIER_ID is null exactly when the order has a NEW-ORDER row;
//	3.3.2.6  each order has exactly O_OL_CNT lines;
//	3.3.2.7  OL_DELIVERY_D is null exactly when the order's O_CARRIER_ID is null;
//	3.3.2.8  W_YTD = Σ H_AMOUNT over the warehouse's HISTORY rows (H_W_ID), relative to the
//	         loaded values (below);
//	3.3.2.9  D_YTD = Σ H_AMOUNT over the district's HISTORY rows (H_W_ID, H_D_ID), likewise;
//	3.3.2.10 C_BALANCE = Σ OL_AMOUNT of the customer's delivered order lines (OL_DELIVERY_D
//	         not null) − Σ H_AMOUNT of the customer's payments (H_C_W_ID, H_C_D_ID, H_C_ID);
//	3.3.2.12 C_BALANCE + C_YTD_PAYMENT = Σ OL_AMOUNT of the customer's delivered order lines;
//	delivery-pointer  the district's delivery pointer ("dp", see the package comment) is
//	         min(NO_O_ID), or D_NEXT_O_ID when the district has no NEW-ORDER row: Delivery takes
//	         the NEW-ORDER row at the pointer, so a pointer behind it finds none there and
//	         Delivery skips the district for good, and one ahead of it leaves orders undelivered.
//
// Conditions 10 and 12, which the spec states for randomly selected customers, are checked
// for every customer: Check reads every order line and every HISTORY row anyway, and the
// customers add one read per customer to the 17 per order it makes. Condition 11 (count(ORDER) − count(NEW-ORDER) = 2100 per
// district) holds only as loaded, every Delivery raises the difference, and is not checked.
//
// Conditions 8 and 9 as the spec states them hold for Spec's sizes only: the loader gives each
// district D_YTD 30,000.00 (W_YTD their sum) and each customer one HISTORY row of 10.00, so a
// district starts with Σ H_AMOUNT = CustomersPerDistrict · 10.00, which is 30,000.00 for 3000
// customers but 3,000.00 for Small's 300. Check therefore holds D_YTD − Σ H_AMOUNT (and W_YTD −
// Σ H_AMOUNT) to its loaded value, ytdOffset per district: every Payment adds its amount to
// both sides, and the offset is 0 under Spec, where these are the spec's conditions exactly.
// Conditions 10 and 12 need no offset at any size: a customer is loaded with C_BALANCE −10.00,
// C_YTD_PAYMENT 10.00, one HISTORY row of 10.00 and delivered lines of OL_AMOUNT 0.
//
// It returns a *CheckError listing what failed, or another error if the database could not
// be read.
func (w *Workload) Check(db *client.DB) error {
	var vs []Violation
	add := func(cond, format string, args ...any) {
		vs = append(vs, Violation{Condition: cond, Detail: fmt.Sprintf(format, args...)})
	}
	ro := client.TxnOptions{ReadOnly: true}
	hist, err := w.readHistory(db, add)
	if err != nil {
		return err
	}
	offset := w.ytdOffset()
	for wh := 1; wh <= w.cfg.Warehouses; wh++ {
		dists := make([]districtFacts, w.cfg.Districts+1)
		var wYTD int64
		err := client.RunTxn(db, ro, func(tx *client.Txn) error {
			var err error
			wYTD, err = w.readDistricts(tx, wh, dists)
			return err
		})
		if err != nil {
			return fmt.Errorf("tpcc check: warehouse %d: %w", wh, err)
		}
		var sumYTD, sumH int64
		for d := 1; d <= w.cfg.Districts; d++ {
			sumYTD += dists[d].ytd
			sumH += hist.district[wh][d]
		}
		if wYTD != sumYTD {
			add("3.3.2.1", "warehouse %d: W_YTD %d ≠ Σ D_YTD %d", wh, wYTD, sumYTD)
		}
		if want := sumH + int64(w.cfg.Districts)*offset; wYTD != want {
			add("3.3.2.8", "warehouse %d: W_YTD %d ≠ Σ H_AMOUNT %d + loaded offset %d", wh, wYTD, sumH, int64(w.cfg.Districts)*offset)
		}
		for d := 1; d <= w.cfg.Districts; d++ {
			if dYTD, sumH := dists[d].ytd, hist.district[wh][d]; dYTD != sumH+offset {
				add("3.3.2.9", "district %d/%d: D_YTD %d ≠ Σ H_AMOUNT %d + loaded offset %d", wh, d, dYTD, sumH, offset)
			}
			if err := w.checkDistrict(db, wh, d, dists[d], hist.customer[wh][d], add); err != nil {
				return fmt.Errorf("tpcc check: district %d/%d: %w", wh, d, err)
			}
		}
	}
	if len(vs) > 0 {
		return &CheckError{Violations: vs}
	}
	return nil
}

// ytdOffset is D_YTD − Σ H_AMOUNT of a freshly loaded district: 0 under the spec's 3000
// customers per district (see Check).
func (w *Workload) ytdOffset() int64 {
	return initDistrictYTD - int64(w.cfg.CustomersPerDistrict)*initYTDPayment
}

// districtFacts are the columns of a district that Check reads with its warehouse.
type districtFacts struct {
	ytd  int64 // D_YTD
	next int   // D_NEXT_O_ID
	ptr  int   // the delivery pointer
}

// readDistricts reads warehouse wh's W_YTD and fills dists[d] with each district's D_YTD,
// D_NEXT_O_ID and delivery pointer. Under Config.Families it also reads the static families,
// so a missing one is reported even though no condition is about their columns.
func (w *Workload) readDistricts(tx *client.Txn, wh int, dists []districtFacts) (wYTD int64, err error) {
	for d := 1; d <= w.cfg.Districts; d++ {
		p, err := getInt(tx, w.key(wh, "dp", d))
		if err != nil {
			return 0, err
		}
		dists[d].ptr = int(p)
	}
	if !w.cfg.Families {
		var wr warehouse
		if err := get(tx, w.key(wh, "w"), &wr); err != nil {
			return 0, err
		}
		for d := 1; d <= w.cfg.Districts; d++ {
			var dr district
			if err := get(tx, w.key(wh, "d", d), &dr); err != nil {
				return 0, err
			}
			dists[d].ytd, dists[d].next = dr.YTD, int(dr.NextOID)
		}
		return wr.YTD, nil
	}
	var st staticFamily
	if err := get(tx, w.key(wh, "w"), &st); err != nil {
		return 0, err
	}
	if wYTD, err = getInt(tx, w.key(wh, tableWarehouseYTD)); err != nil {
		return 0, err
	}
	for d := 1; d <= w.cfg.Districts; d++ {
		if err := get(tx, w.key(wh, "d", d), &st); err != nil {
			return 0, err
		}
		dYTD, err := getInt(tx, w.key(wh, tableDistrictYTD, d))
		if err != nil {
			return 0, err
		}
		n, err := getInt(tx, w.key(wh, tableDistrictNext, d))
		if err != nil {
			return 0, err
		}
		dists[d].ytd, dists[d].next = dYTD, int(n)
	}
	return wYTD, nil
}

// historySums are the HISTORY rows' H_AMOUNTs summed by the district paid (H_W_ID, H_D_ID:
// conditions 8 and 9) and by the customer who paid (H_C_W_ID, H_C_D_ID, H_C_ID: condition 10),
// each indexed from 1.
type historySums struct {
	district [][]int64   // [wh][d]
	customer [][][]int64 // [wh][d][c]
}

// readHistory scans every warehouse's HISTORY rows ("h/wh/…", keyed by the paying warehouse:
// "load-d-c" as loaded, "t<terminal>-<seq>" for a Payment), checkHistoryPerTxn rows per
// transaction, and sums their amounts. A row that names a district or customer that does not
// exist, or a warehouse other than the one it is filed under, is a violation of the condition
// it would count towards. These are the workload's only scans: a Payment's key is not known
// without it (the terminals and their sequence numbers are the driver's).
func (w *Workload) readHistory(db *client.DB, add func(cond, format string, args ...any)) (*historySums, error) {
	cfg := w.cfg
	h := &historySums{district: make([][]int64, cfg.Warehouses+1), customer: make([][][]int64, cfg.Warehouses+1)}
	for wh := 1; wh <= cfg.Warehouses; wh++ {
		h.district[wh] = make([]int64, cfg.Districts+1)
		h.customer[wh] = make([][]int64, cfg.Districts+1)
		for d := 1; d <= cfg.Districts; d++ {
			h.customer[wh][d] = make([]int64, cfg.CustomersPerDistrict+1)
		}
	}
	ro := client.TxnOptions{ReadOnly: true}
	for wh := 1; wh <= cfg.Warehouses; wh++ {
		start, end := w.key(wh, "h")+"/", w.key(wh, "h")+"0" // '0' follows '/'
		for {
			var rows []client.KV
			err := client.RunTxn(db, ro, func(tx *client.Txn) error {
				var err error
				rows, err = tx.Scan(start, end, checkHistoryPerTxn)
				return err
			})
			if err != nil {
				return nil, fmt.Errorf("tpcc check: history of warehouse %d: %w", wh, err)
			}
			for _, r := range rows {
				var hr historyRow
				if err := hr.decode(r.Value); err != nil {
					return nil, fmt.Errorf("tpcc check: history of warehouse %d: %w", wh, errRow(r.Key, err))
				}
				if hr.WID != int64(wh) || hr.DID < 1 || hr.DID > int64(cfg.Districts) {
					add("3.3.2.8", "warehouse %d: history row %q has H_W_ID %d, H_D_ID %d", wh, r.Key, hr.WID, hr.DID)
				} else {
					h.district[wh][hr.DID] += hr.Amount
				}
				if hr.CWID < 1 || hr.CWID > int64(cfg.Warehouses) || hr.CDID < 1 || hr.CDID > int64(cfg.Districts) ||
					hr.CID < 1 || hr.CID > int64(cfg.CustomersPerDistrict) {
					add("3.3.2.10", "warehouse %d: history row %q names customer %d/%d/%d, which does not exist", wh, r.Key, hr.CWID, hr.CDID, hr.CID)
				} else {
					h.customer[hr.CWID][hr.CDID][hr.CID] += hr.Amount
				}
			}
			if len(rows) < checkHistoryPerTxn {
				break
			}
			start = rows[len(rows)-1].Key + "\x00"
		}
	}
	return h, nil
}

type orderFacts struct {
	exists, newOrder bool
	o                order
	lines            []orderLine // found lines, in line-number order
	lineNos          []int
}

// checkDistrict checks district d of warehouse wh: its orders, NEW-ORDER rows and order lines
// (conditions 2 to 7), its delivery pointer, and its customers (conditions 10 and 12; paid[c]
// is Σ H_AMOUNT of customer c's payments).
func (w *Workload) checkDistrict(db *client.DB, wh, d int, df districtFacts, paid []int64, add func(cond, format string, args ...any)) error {
	ro := client.TxnOptions{ReadOnly: true}
	next := df.next
	facts := make([]orderFacts, next+1) // O_IDs 1..next; next itself must not exist
	for lo := 1; lo <= next; lo += checkOrdersPerTxn {
		hi := min(next, lo+checkOrdersPerTxn-1)
		err := client.RunTxn(db, ro, func(tx *client.Txn) error {
			// Every row an order may have (the order, its NEW-ORDER row, lines 1..maxLines) for
			// the whole chunk of orders, in one batch.
			const perOrder = 2 + maxLines
			keys := make([]string, 0, (hi-lo+1)*perOrder)
			for oid := lo; oid <= hi; oid++ {
				keys = append(keys, w.key(wh, "o", d, oid), w.key(wh, "no", d, oid))
				for n := 1; n <= maxLines; n++ {
					keys = append(keys, w.key(wh, "ol", d, oid, n))
				}
			}
			reads, err := tx.GetMany(keys)
			if err != nil {
				return err
			}
			for oid := lo; oid <= hi; oid++ {
				at := (oid - lo) * perOrder
				f := orderFacts{exists: reads[at].Found, newOrder: reads[at+1].Found}
				if f.exists {
					if err := f.o.decode(reads[at].Value); err != nil {
						return errRow(keys[at], err)
					}
				}
				for n := 1; n <= maxLines; n++ {
					r := reads[at+1+n]
					if !r.Found {
						continue
					}
					var ol orderLine
					if err := ol.decode(r.Value); err != nil {
						return errRow(keys[at+1+n], err)
					}
					f.lines = append(f.lines, ol)
					f.lineNos = append(f.lineNos, n)
				}
				facts[oid] = f
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	maxO, maxNO, minNO, countNO := 0, 0, 0, 0
	var sumOLCnt, countOL int64
	delivered := make([]int64, w.cfg.CustomersPerDistrict+1) // Σ OL_AMOUNT of delivered lines, by O_C_ID
	for oid := 1; oid <= next; oid++ {
		f := facts[oid]
		countOL += int64(len(f.lines))
		if f.newOrder {
			countNO++
			maxNO = oid
			if minNO == 0 {
				minNO = oid
			}
		}
		if !f.exists {
			if oid < next {
				add("3.3.2.2", "district %d/%d: order %d below D_NEXT_O_ID %d is missing", wh, d, oid, next)
			}
			if len(f.lines) > 0 || f.newOrder {
				add("3.3.2.4", "district %d/%d: order %d is missing but has %d lines or a new-order row", wh, d, oid, len(f.lines))
			}
			continue
		}
		maxO = oid
		sumOLCnt += f.o.OLCnt
		if (f.o.CarrierID == 0) != f.newOrder {
			add("3.3.2.5", "district %d/%d: order %d has O_CARRIER_ID %d and new-order row %v", wh, d, oid, f.o.CarrierID, f.newOrder)
		}
		if int64(len(f.lines)) != f.o.OLCnt || (len(f.lines) > 0 && f.lineNos[len(f.lineNos)-1] != len(f.lines)) {
			add("3.3.2.6", "district %d/%d: order %d has O_OL_CNT %d but lines %v", wh, d, oid, f.o.OLCnt, f.lineNos)
		}
		var amount int64
		for i, ol := range f.lines {
			if (ol.DeliveryD == 0) != (f.o.CarrierID == 0) {
				add("3.3.2.7", "district %d/%d: order %d line %d has OL_DELIVERY_D %d with O_CARRIER_ID %d", wh, d, oid, f.lineNos[i], ol.DeliveryD, f.o.CarrierID)
			}
			if ol.DeliveryD != 0 {
				amount += ol.Amount
			}
		}
		if c := f.o.CID; c >= 1 && c <= int64(w.cfg.CustomersPerDistrict) {
			delivered[c] += amount
		} else {
			add("3.3.2.10", "district %d/%d: order %d has O_C_ID %d, which does not exist", wh, d, oid, c)
		}
	}
	if maxO != next-1 {
		add("3.3.2.2", "district %d/%d: D_NEXT_O_ID − 1 = %d but max(O_ID) = %d", wh, d, next-1, maxO)
	}
	if countNO > 0 && maxNO != next-1 {
		add("3.3.2.2", "district %d/%d: D_NEXT_O_ID − 1 = %d but max(NO_O_ID) = %d", wh, d, next-1, maxNO)
	}
	if countNO > 0 && maxNO-minNO+1 != countNO {
		add("3.3.2.3", "district %d/%d: new-order ids %d..%d but %d rows", wh, d, minNO, maxNO, countNO)
	}
	if sumOLCnt != countOL {
		add("3.3.2.4", "district %d/%d: Σ O_OL_CNT = %d but %d order-line rows", wh, d, sumOLCnt, countOL)
	}
	switch {
	case countNO > 0 && df.ptr != minNO:
		add(condDeliveryPointer, "district %d/%d: delivery pointer %d but min(NO_O_ID) = %d", wh, d, df.ptr, minNO)
	case countNO == 0 && df.ptr != next:
		add(condDeliveryPointer, "district %d/%d: delivery pointer %d but no new-order rows and D_NEXT_O_ID %d", wh, d, df.ptr, next)
	}
	return w.checkCustomers(db, wh, d, delivered, paid, add)
}

// checkCustomers reads the customers of district d of warehouse wh, checkCustomersPerTxn per
// transaction, and checks conditions 10 and 12 against delivered[c], Σ OL_AMOUNT of customer
// c's delivered order lines, and paid[c], Σ H_AMOUNT of its payments.
func (w *Workload) checkCustomers(db *client.DB, wh, d int, delivered, paid []int64, add func(cond, format string, args ...any)) error {
	ro := client.TxnOptions{ReadOnly: true}
	n := w.cfg.CustomersPerDistrict
	custs := make([]customer, n+1)
	for lo := 1; lo <= n; lo += checkCustomersPerTxn {
		hi := min(n, lo+checkCustomersPerTxn-1)
		err := client.RunTxn(db, ro, func(tx *client.Txn) error {
			fs := make([]*fetch, 0, hi-lo+1)
			for c := lo; c <= hi; c++ {
				fs = append(fs, &fetch{key: w.key(wh, "c", d, c), into: &custs[c]})
			}
			return fetchAll(tx, fs...)
		})
		if err != nil {
			return err
		}
	}
	for c := 1; c <= n; c++ {
		cr := &custs[c]
		if cr.Balance != delivered[c]-paid[c] {
			add("3.3.2.10", "customer %d/%d/%d: C_BALANCE %d ≠ Σ OL_AMOUNT delivered %d − Σ H_AMOUNT %d", wh, d, c, cr.Balance, delivered[c], paid[c])
		}
		if cr.Balance+cr.YTDPayment != delivered[c] {
			add("3.3.2.12", "customer %d/%d/%d: C_BALANCE + C_YTD_PAYMENT = %d ≠ Σ OL_AMOUNT delivered %d", wh, d, c, cr.Balance+cr.YTDPayment, delivered[c])
		}
	}
	return nil
}

// CheckFresh fails if the database holds orders beyond the loaded ones, as a cluster does that
// ran TPC-C before: loading rewrites the initial rows but not the orders, lines and history an
// earlier run added, and §3.3.2's conditions would then fail for reasons of their own.
func (w *Workload) CheckFresh(db *client.DB) error {
	firstNew := w.cfg.CustomersPerDistrict + 1 // the loader writes orders 1..CustomersPerDistrict
	var keys []string
	for wh := 1; wh <= w.cfg.Warehouses; wh++ {
		for d := 1; d <= w.cfg.Districts; d++ {
			keys = append(keys, w.key(wh, "o", d, firstNew))
		}
	}
	for lo := 0; lo < len(keys); lo += wire.MaxBatchOps {
		chunk := keys[lo:min(len(keys), lo+wire.MaxBatchOps)]
		var found string
		err := client.RunTxn(db, client.TxnOptions{ReadOnly: true}, func(tx *client.Txn) error {
			reads, err := tx.GetMany(chunk)
			for i, r := range reads {
				if r.Found && found == "" {
					found = chunk[i]
				}
			}
			return err
		})
		if err != nil {
			return fmt.Errorf("tpcc: checking the database is fresh: %w", err)
		}
		if found != "" {
			return fmt.Errorf("tpcc: the database already holds orders of an earlier run (%q); TPC-C needs an empty cluster: "+
				"stop it (meridian cluster stop) and start it with a new --data-dir, or delete its data directory before starting it again", found)
		}
	}
	return nil
}
