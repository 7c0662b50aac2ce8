package client

import (
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/meridiandb/meridian/internal/wire"
)

// coordFake models what a coordinator does with a client's requests, as far as this test needs:
// writes are buffered per transaction and applied by a commit, which forgets the transaction; a
// later request (Seq > 0) of a transaction it does not hold is a retryable abort
// (txnkit.AnswerUnheld's unknown-transaction).
type coordFake struct {
	data map[string][]byte
	txns map[uint64]map[string][]byte
	sent []wire.ClientRequest
}

func (*coordFake) Sleep(time.Duration) {}
func (*coordFake) Now() int64          { return 0 }

func (c *coordFake) RoundTrip(req *wire.ClientRequest) (*wire.ClientReply, error) {
	c.sent = append(c.sent, *req)
	rep := &wire.ClientReply{Txn: req.Txn, Seq: req.Seq, Code: wire.CodeOK}
	w, held := c.txns[req.Txn]
	if !held {
		if req.Seq != 0 {
			rep.Code, rep.Cause = wire.CodeAborted, "unknown-transaction"
			return rep, nil
		}
		w = map[string][]byte{}
		c.txns[req.Txn] = w
	}
	switch req.Op {
	case wire.OpGet:
		v, ok := w[req.Key]
		if !ok {
			v, ok = c.data[req.Key]
		}
		rep.Found, rep.Value = ok, v
	case wire.OpPut:
		w[req.Key] = req.Value
	case wire.OpCommit:
		for k, v := range w {
			c.data[k] = v
		}
		delete(c.txns, req.Txn)
	case wire.OpAbort:
		delete(c.txns, req.Txn)
	default:
		rep.Code, rep.Error = wire.CodeBadArgument, "unsupported op"
	}
	return rep, nil
}

// TestBatchRefusesNonDataOps: Batch takes OpGet, OpPut and OpDelete only. Any other op must be
// refused before anything is sent: a batch of one operation (or any batch once batching is off)
// goes out as single requests, so an OpCommit in it committed the transaction in the middle of
// its body, with the Txn still open; the body's real Commit then found no transaction and was
// answered with a retryable abort, and RunTxn ran the body again — applying it once per attempt.
func TestBatchRefusesNonDataOps(t *testing.T) {
	for _, op := range []wire.Op{wire.OpCommit, wire.OpAbort, wire.OpScan, wire.OpBatch, 0, 99} {
		for _, n := range []int{1, 2} {
			ft := &fakeTransport{data: map[string][]byte{}}
			ops := []wire.BatchOp{{Op: op, Key: "a"}}
			if n == 2 {
				ops = append(ops, wire.BatchOp{Op: wire.OpGet, Key: "b"})
			}
			if _, err := Open(ft).Begin(TxnOptions{}).Batch(ops); !errors.Is(err, ErrBadArgument) {
				t.Errorf("batch of %d with op %v: %v, want ErrBadArgument", n, op, err)
			}
			if len(ft.sent) != 0 {
				t.Errorf("batch of %d with op %v: sent %d requests, want none", n, op, len(ft.sent))
			}
		}
	}

	// What it cost: a counter incremented once per attempt.
	c := &coordFake{data: map[string][]byte{}, txns: map[uint64]map[string][]byte{}}
	db := Open(c)
	_ = RunTxn(db, TxnOptions{}, func(tx *Txn) error {
		v, err := tx.Get("n")
		if err != nil && !errors.Is(err, ErrNotFound) {
			return err
		}
		var n uint64
		if len(v) == 8 {
			n = binary.BigEndian.Uint64(v)
		}
		_, err = tx.Batch([]wire.BatchOp{
			{Op: wire.OpPut, Key: "n", Value: binary.BigEndian.AppendUint64(nil, n+1)},
		})
		if err != nil {
			return err
		}
		_, err = tx.Batch([]wire.BatchOp{{Op: wire.OpCommit}}) // bad input
		return err
	})
	if v := c.data["n"]; len(v) == 8 && binary.BigEndian.Uint64(v) > 1 {
		t.Fatalf("one RunTxn incremented the counter %d times", binary.BigEndian.Uint64(v))
	}
}
