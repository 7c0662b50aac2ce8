package tpcc

import (
	"encoding/binary"
	"errors"
	"strconv"
)

// Rows are encoded as a fixed sequence of zig-zag varints and length-prefixed strings, in the
// field order of each struct: compact and cheap to decode, which matters to the simulator.
// Money is in cents; tax and discount rates are in units of 1/10000.

type encoder struct{ b []byte }

func (e *encoder) int(v int64) { e.b = binary.AppendVarint(e.b, v) }
func (e *encoder) str(s string) {
	e.b = binary.AppendUvarint(e.b, uint64(len(s)))
	e.b = append(e.b, s...)
}

type decoder struct {
	b   []byte
	err error
}

var errMalformed = errors.New("malformed row")

func (d *decoder) int() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.err = errMalformed
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) str() string {
	if d.err != nil {
		return ""
	}
	l, n := binary.Uvarint(d.b)
	if n <= 0 || uint64(len(d.b)-n) < l {
		d.err = errMalformed
		return ""
	}
	s := string(d.b[n : n+int(l)])
	d.b = d.b[n+int(l):]
	return s
}

func (d *decoder) done() error {
	if d.err == nil && len(d.b) != 0 {
		d.err = errMalformed
	}
	return d.err
}

type warehouse struct {
	Tax, YTD int64
	Name     string
}

func (r *warehouse) encode() []byte {
	e := encoder{make([]byte, 0, 32)}
	e.int(r.Tax)
	e.int(r.YTD)
	e.str(r.Name)
	return e.b
}

func (r *warehouse) decode(b []byte) error {
	d := decoder{b: b}
	r.Tax, r.YTD, r.Name = d.int(), d.int(), d.str()
	return d.done()
}

type district struct {
	Tax, YTD, NextOID int64
	Name              string
}

func (r *district) encode() []byte {
	e := encoder{make([]byte, 0, 32)}
	e.int(r.Tax)
	e.int(r.YTD)
	e.int(r.NextOID)
	e.str(r.Name)
	return e.b
}

func (r *district) decode(b []byte) error {
	d := decoder{b: b}
	r.Tax, r.YTD, r.NextOID, r.Name = d.int(), d.int(), d.int(), d.str()
	return d.done()
}

// staticFamily is the static column family of a warehouse or district row under
// Config.Families: the columns no transaction writes (W_TAX, W_NAME; D_TAX, D_NAME). The hot
// columns (W_YTD; D_YTD, D_NEXT_O_ID) are single-int rows of their own (encodeInts).
type staticFamily struct {
	Tax  int64
	Name string
}

func (r *staticFamily) encode() []byte {
	e := encoder{make([]byte, 0, 16)}
	e.int(r.Tax)
	e.str(r.Name)
	return e.b
}

func (r *staticFamily) decode(b []byte) error {
	d := decoder{b: b}
	r.Tax, r.Name = d.int(), d.str()
	return d.done()
}

type customer struct {
	First, Middle, Last, Credit, Data                              string
	Discount, CreditLim, Balance, YTDPayment, PaymentCnt, DelivCnt int64
}

func (r *customer) encode() []byte {
	e := encoder{make([]byte, 0, 64+len(r.Data))}
	for _, s := range []string{r.First, r.Middle, r.Last, r.Credit, r.Data} {
		e.str(s)
	}
	for _, v := range []int64{r.Discount, r.CreditLim, r.Balance, r.YTDPayment, r.PaymentCnt, r.DelivCnt} {
		e.int(v)
	}
	return e.b
}

func (r *customer) decode(b []byte) error {
	d := decoder{b: b}
	r.First, r.Middle, r.Last, r.Credit, r.Data = d.str(), d.str(), d.str(), d.str(), d.str()
	r.Discount, r.CreditLim, r.Balance, r.YTDPayment, r.PaymentCnt, r.DelivCnt = d.int(), d.int(), d.int(), d.int(), d.int(), d.int()
	return d.done()
}

type order struct {
	CID, EntryD, CarrierID, OLCnt, AllLocal int64 // CarrierID 0 is SQL's null
}

func (r *order) encode() []byte {
	e := encoder{make([]byte, 0, 16)}
	for _, v := range []int64{r.CID, r.EntryD, r.CarrierID, r.OLCnt, r.AllLocal} {
		e.int(v)
	}
	return e.b
}

func (r *order) decode(b []byte) error {
	d := decoder{b: b}
	r.CID, r.EntryD, r.CarrierID, r.OLCnt, r.AllLocal = d.int(), d.int(), d.int(), d.int(), d.int()
	return d.done()
}

type orderLine struct {
	IID, SupplyWID, DeliveryD, Quantity, Amount int64 // DeliveryD 0 is null
	DistInfo                                    string
}

func (r *orderLine) encode() []byte {
	e := encoder{make([]byte, 0, 48)}
	for _, v := range []int64{r.IID, r.SupplyWID, r.DeliveryD, r.Quantity, r.Amount} {
		e.int(v)
	}
	e.str(r.DistInfo)
	return e.b
}

func (r *orderLine) decode(b []byte) error {
	d := decoder{b: b}
	r.IID, r.SupplyWID, r.DeliveryD, r.Quantity, r.Amount = d.int(), d.int(), d.int(), d.int(), d.int()
	r.DistInfo = d.str()
	return d.done()
}

type item struct {
	IMID, Price int64
	Name, Data  string
}

func (r *item) encode() []byte {
	e := encoder{make([]byte, 0, 80)}
	e.int(r.IMID)
	e.int(r.Price)
	e.str(r.Name)
	e.str(r.Data)
	return e.b
}

func (r *item) decode(b []byte) error {
	d := decoder{b: b}
	r.IMID, r.Price, r.Name, r.Data = d.int(), d.int(), d.str(), d.str()
	return d.done()
}

type stock struct {
	Quantity, YTD, OrderCnt, RemoteCnt int64
	Data                               string
}

func (r *stock) encode() []byte {
	e := encoder{make([]byte, 0, 64)}
	for _, v := range []int64{r.Quantity, r.YTD, r.OrderCnt, r.RemoteCnt} {
		e.int(v)
	}
	e.str(r.Data)
	return e.b
}

func (r *stock) decode(b []byte) error {
	d := decoder{b: b}
	r.Quantity, r.YTD, r.OrderCnt, r.RemoteCnt, r.Data = d.int(), d.int(), d.int(), d.int(), d.str()
	return d.done()
}

type historyRow struct {
	CID, CDID, CWID, DID, WID, Date, Amount int64
	Data                                    string
}

func (r *historyRow) encode() []byte {
	e := encoder{make([]byte, 0, 48)}
	for _, v := range []int64{r.CID, r.CDID, r.CWID, r.DID, r.WID, r.Date, r.Amount} {
		e.int(v)
	}
	e.str(r.Data)
	return e.b
}

func (r *historyRow) decode(b []byte) error {
	d := decoder{b: b}
	r.CID, r.CDID, r.CWID, r.DID, r.WID, r.Date, r.Amount = d.int(), d.int(), d.int(), d.int(), d.int(), d.int(), d.int()
	r.Data = d.str()
	return d.done()
}

// encodeInts encodes an index row: a list of ids (a customer name's ids, a pointer).
func encodeInts(v ...int64) []byte {
	e := encoder{make([]byte, 0, 2*len(v))}
	for _, x := range v {
		e.int(x)
	}
	return e.b
}

func decodeInts(b []byte) ([]int64, error) {
	var out []int64
	d := decoder{b: b}
	for len(d.b) > 0 && d.err == nil {
		out = append(out, d.int())
	}
	return out, d.err
}

// keyBuf builds keys without fmt.
type keyBuf []byte

func (k keyBuf) n(v int) keyBuf { return strconv.AppendInt(append(k, '/'), int64(v), 10) }
func (k keyBuf) s(v string) keyBuf {
	return append(append(k, '/'), v...)
}
