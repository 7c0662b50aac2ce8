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

// checkOrdersPerTxn bounds the reads of one checking transaction.
const checkOrdersPerTxn = 50

// Violation is one failed consistency condition.
type Violation struct {
	Condition string // "3.3.2.1" …
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
//	3.3.2.7  OL_DELIVERY_D is null exactly when the order's O_CARRIER_ID is null.
//
// It returns a *CheckError listing what failed, or another error if the database could not
// be read.
func (w *Workload) Check(db *client.DB) error {
	var vs []Violation
	add := func(cond, format string, args ...any) {
		vs = append(vs, Violation{Condition: cond, Detail: fmt.Sprintf(format, args...)})
	}
	ro := client.TxnOptions{ReadOnly: true}
	for wh := 1; wh <= w.cfg.Warehouses; wh++ {
		next := make([]int, w.cfg.Districts+1)
		var wYTD, sumYTD int64
		err := client.RunTxn(db, ro, func(tx *client.Txn) error {
			var err error
			wYTD, sumYTD, err = w.readYTD(tx, wh, next)
			return err
		})
		if err != nil {
			return fmt.Errorf("tpcc check: warehouse %d: %w", wh, err)
		}
		if wYTD != sumYTD {
			add("3.3.2.1", "warehouse %d: W_YTD %d ≠ Σ D_YTD %d", wh, wYTD, sumYTD)
		}
		for d := 1; d <= w.cfg.Districts; d++ {
			if err := w.checkDistrict(db, wh, d, next[d], add); err != nil {
				return fmt.Errorf("tpcc check: district %d/%d: %w", wh, d, err)
			}
		}
	}
	if len(vs) > 0 {
		return &CheckError{Violations: vs}
	}
	return nil
}

// readYTD reads warehouse wh's W_YTD and the sum of its districts' D_YTD, and fills next[d]
// with D_NEXT_O_ID. Under Config.Families it also reads the static families, so a missing one
// is reported even though no condition is about their columns.
func (w *Workload) readYTD(tx *client.Txn, wh int, next []int) (wYTD, sumYTD int64, err error) {
	if !w.cfg.Families {
		var wr warehouse
		if err := get(tx, w.key(wh, "w"), &wr); err != nil {
			return 0, 0, err
		}
		for d := 1; d <= w.cfg.Districts; d++ {
			var dr district
			if err := get(tx, w.key(wh, "d", d), &dr); err != nil {
				return 0, 0, err
			}
			sumYTD += dr.YTD
			next[d] = int(dr.NextOID)
		}
		return wr.YTD, sumYTD, nil
	}
	var st staticFamily
	if err := get(tx, w.key(wh, "w"), &st); err != nil {
		return 0, 0, err
	}
	if wYTD, err = getInt(tx, w.key(wh, tableWarehouseYTD)); err != nil {
		return 0, 0, err
	}
	for d := 1; d <= w.cfg.Districts; d++ {
		if err := get(tx, w.key(wh, "d", d), &st); err != nil {
			return 0, 0, err
		}
		dYTD, err := getInt(tx, w.key(wh, tableDistrictYTD, d))
		if err != nil {
			return 0, 0, err
		}
		n, err := getInt(tx, w.key(wh, tableDistrictNext, d))
		if err != nil {
			return 0, 0, err
		}
		sumYTD += dYTD
		next[d] = int(n)
	}
	return wYTD, sumYTD, nil
}

type orderFacts struct {
	exists, newOrder bool
	o                order
	lines            []orderLine // found lines, in line-number order
	lineNos          []int
}

func (w *Workload) checkDistrict(db *client.DB, wh, d, next int, add func(cond, format string, args ...any)) error {
	ro := client.TxnOptions{ReadOnly: true}
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
		for i, ol := range f.lines {
			if (ol.DeliveryD == 0) != (f.o.CarrierID == 0) {
				add("3.3.2.7", "district %d/%d: order %d line %d has OL_DELIVERY_D %d with O_CARRIER_ID %d", wh, d, oid, f.lineNos[i], ol.DeliveryD, f.o.CarrierID)
			}
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
