package client

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/meridiandb/meridian/internal/wire"
)

// fakeTransport answers from a map, logs every request, and refuses batches if told to.
type fakeTransport struct {
	data          map[string][]byte
	refuseBatches bool
	sent          []wire.ClientRequest
}

func (f *fakeTransport) RoundTrip(req *wire.ClientRequest) (*wire.ClientReply, error) {
	f.sent = append(f.sent, *req)
	rep := &wire.ClientReply{Txn: req.Txn, Seq: req.Seq, Code: wire.CodeOK}
	one := func(op wire.Op, key string, value []byte) wire.BatchResult {
		switch op {
		case wire.OpGet:
			v, ok := f.data[key]
			return wire.BatchResult{Found: ok, Value: v}
		case wire.OpPut:
			f.data[key] = value
		case wire.OpDelete:
			delete(f.data, key)
		}
		return wire.BatchResult{}
	}
	switch req.Op {
	case wire.OpBatch:
		if f.refuseBatches {
			return &wire.ClientReply{Txn: req.Txn, Seq: req.Seq, Code: wire.CodeBadArgument, Error: wire.BatchUnsupported}, nil
		}
		for _, op := range req.Batch {
			rep.Results = append(rep.Results, one(op.Op, op.Key, op.Value))
		}
	case wire.OpGet, wire.OpPut, wire.OpDelete:
		r := one(req.Op, req.Key, req.Value)
		rep.Found, rep.Value = r.Found, r.Value
	}
	return rep, nil
}

func (f *fakeTransport) Sleep(time.Duration) {}
func (f *fakeTransport) Now() int64          { return 0 }

// TestBatchFallback: a protocol that refuses OpBatch gets the operations one at a time, the
// refused request's sequence number is reused (so the first request is still number 0 and
// carries the label), and the DB remembers not to try again.
func TestBatchFallback(t *testing.T) {
	for _, c := range []struct {
		name      string
		refuse    bool
		batching  bool
		wantBatch bool
	}{
		{"native", false, true, true},
		{"refused", true, true, false},
		{"turned-off", false, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			ft := &fakeTransport{data: map[string][]byte{"a": []byte("1")}, refuseBatches: c.refuse}
			db := Open(ft)
			db.SetBatching(c.batching)
			for round := 0; round < 2; round++ {
				ft.sent = nil
				tx := db.Begin(TxnOptions{Label: "l"})
				got, err := tx.GetMany([]string{"b", "a"})
				if err != nil {
					t.Fatal(err)
				}
				if got[0].Found || !got[1].Found || string(got[1].Value) != "1" {
					t.Fatalf("GetMany = %+v, want b absent and a=1", got)
				}
				if err := tx.PutMany([]wire.KV{{Key: "c", Value: []byte("3")}, {Key: "d"}}); err != nil {
					t.Fatal(err)
				}
				if err := tx.Commit(); err != nil {
					t.Fatal(err)
				}
				var batches int
				var seqs []uint32
				for _, r := range ft.sent {
					if r.Op == wire.OpBatch {
						batches++
					}
					seqs = append(seqs, r.Seq)
				}
				if c.refuse && round == 0 {
					// The refused batch is in the log once, with the seq it gave back.
					if ft.sent[0].Op != wire.OpBatch || ft.sent[0].Seq != 0 || ft.sent[1].Seq != 0 || ft.sent[1].Label != "l" {
						t.Fatalf("after a refusal the first single op must reuse seq 0 with the label: %+v", ft.sent[:2])
					}
					batches--
					seqs = seqs[1:]
				}
				if (batches > 0) != c.wantBatch {
					t.Fatalf("round %d: %d batch requests, want batches=%v", round, batches, c.wantBatch)
				}
				for i, s := range seqs {
					if s != uint32(i) {
						t.Fatalf("round %d: sequence numbers %v, want 0, 1, 2, …", round, seqs)
					}
				}
			}
			if string(ft.data["c"]) != "3" || ft.data["d"] == nil {
				t.Fatalf("writes not applied: %q", ft.data)
			}
		})
	}
}

// TestBatchBadInput: duplicate keys and writes in a read-only transaction are refused before
// anything is sent.
func TestBatchBadInput(t *testing.T) {
	ft := &fakeTransport{data: map[string][]byte{}}
	db := Open(ft)
	if _, err := db.Begin(TxnOptions{}).GetMany([]string{"a", "a"}); !errors.Is(err, ErrBadArgument) {
		t.Fatalf("duplicate keys: %v, want ErrBadArgument", err)
	}
	if err := db.Begin(TxnOptions{ReadOnly: true}).PutMany([]wire.KV{{Key: "a"}, {Key: "b"}}); !errors.Is(err, ErrBadArgument) {
		t.Fatalf("write in read-only: %v, want ErrBadArgument", err)
	}
	if _, err := db.Begin(TxnOptions{}).GetMany([]string{"a", ""}); !errors.Is(err, ErrBadArgument) {
		t.Fatalf("empty key: %v, want ErrBadArgument", err)
	}
	if len(ft.sent) != 0 {
		t.Fatalf("sent %d requests for bad input", len(ft.sent))
	}
}

// TestNonUTF8Refused: a key or label that is not UTF-8 is refused before anything is sent. A
// node cannot decode a request holding one, so it used to be dropped: the client waited out its
// timeout and reported the outcome unknown.
func TestNonUTF8Refused(t *testing.T) {
	ft := &fakeTransport{data: map[string][]byte{}}
	db := Open(ft)
	const bad = "k\xff"
	for _, tc := range []struct {
		name string
		opts TxnOptions
		run  func(tx *Txn) error
	}{
		{"get", TxnOptions{}, func(tx *Txn) error { _, err := tx.Get(bad); return err }},
		{"put", TxnOptions{}, func(tx *Txn) error { return tx.Put(bad, []byte("v")) }},
		{"delete", TxnOptions{}, func(tx *Txn) error { return tx.Delete(bad) }},
		{"scan start", TxnOptions{}, func(tx *Txn) error { _, err := tx.Scan(bad, "z", 0); return err }},
		{"scan end", TxnOptions{}, func(tx *Txn) error { _, err := tx.Scan("a", bad, 0); return err }},
		{"batch", TxnOptions{}, func(tx *Txn) error { _, err := tx.GetMany([]string{"a", bad}); return err }},
		{"label", TxnOptions{Label: "new-order\xc3"}, func(tx *Txn) error { _, err := tx.Get("a"); return err }},
	} {
		err := tc.run(db.Begin(tc.opts))
		if !errors.Is(err, ErrBadArgument) || !strings.Contains(err.Error(), "UTF-8") {
			t.Errorf("%s: %v, want ErrBadArgument about UTF-8", tc.name, err)
		}
	}
	if len(ft.sent) != 0 {
		t.Fatalf("sent %d requests for bad input", len(ft.sent))
	}
	// A refused label does not stick to later transactions, and valid multi-byte keys pass.
	if err := db.Begin(TxnOptions{Label: "café"}).Put("clé", []byte("v")); err != nil {
		t.Fatal(err)
	}
}

// TestScanLimitOutOfRange: a limit the wire's int32 cannot carry is refused, not wrapped (2^31
// became negative and 2^32 became 0, both "no limit").
func TestScanLimitOutOfRange(t *testing.T) {
	ft := &fakeTransport{data: map[string][]byte{}}
	db := Open(ft)
	for _, limit := range []int{-1, math.MaxInt32 + 1, 1 << 32} {
		if _, err := db.Begin(TxnOptions{}).Scan("a", "b", limit); !errors.Is(err, ErrBadArgument) {
			t.Errorf("limit %d: %v, want ErrBadArgument", limit, err)
		}
	}
	if len(ft.sent) != 0 {
		t.Fatalf("sent %d requests for bad limits", len(ft.sent))
	}
	if _, err := db.Begin(TxnOptions{}).Scan("a", "b", math.MaxInt32); err != nil {
		t.Errorf("limit MaxInt32: %v", err)
	}
}

// TestTxnIDsGrowWithFirstRequests: coordinators refuse a first request numbered at or below a
// transaction of the endpoint that has ended (txnkit.EndedTxns takes it for a late copy), so a
// transaction begun before another but first heard from after it ended must still carry the
// higher id.
func TestTxnIDsGrowWithFirstRequests(t *testing.T) {
	f := &fakeTransport{data: map[string][]byte{}}
	db := Open(f)
	early, late := db.Begin(TxnOptions{}), db.Begin(TxnOptions{})
	if err := late.Put("a", []byte("1")); err != nil {
		t.Fatal(err)
	}
	if err := late.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := early.Put("b", []byte("2")); err != nil {
		t.Fatal(err)
	}
	var firsts []uint64
	for _, r := range f.sent {
		if r.Seq == 0 {
			firsts = append(firsts, r.Txn)
		}
	}
	if len(firsts) != 2 || firsts[0] >= firsts[1] {
		t.Fatalf("first requests carried txn ids %v, want them growing in the order sent", firsts)
	}
	if early.ID() != firsts[1] {
		t.Fatalf("ID() = %d after its first request carried %d", early.ID(), firsts[1])
	}
}

// codeTransport answers every request with one code, and err ("x" if empty).
type codeTransport struct {
	code wire.Code
	err  string
}

func (c codeTransport) RoundTrip(req *wire.ClientRequest) (*wire.ClientReply, error) {
	msg := c.err
	if msg == "" {
		msg = "x"
	}
	return &wire.ClientReply{Txn: req.Txn, Seq: req.Seq, Code: c.code, Error: msg}, nil
}
func (codeTransport) Sleep(time.Duration) {}
func (codeTransport) Now() int64          { return 0 }

// TestUnknownCodeAtCommitIsUnknown: a commit answered with a code this client does not know
// has an unknown outcome (it was reported unavailable, which kv exec and the bench record as a
// failure); an unavailable commit was refused before it ran and stays unavailable.
func TestUnknownCodeAtCommitIsUnknown(t *testing.T) {
	for _, c := range []struct {
		code    wire.Code
		unknown bool
	}{{wire.Code(99), true}, {wire.CodeUnavailable, false}} {
		tx := Open(codeTransport{code: c.code}).Begin(TxnOptions{})
		tx.seq = 1 // as after a put, so the commit is sent
		err := tx.Commit()
		var u *UnknownError
		if errors.As(err, &u) != c.unknown || (!c.unknown && !errors.Is(err, ErrUnavailable)) {
			t.Errorf("commit answered %v: %v, want unknown outcome %v", c.code, err, c.unknown)
		}
	}
}

// loseTransport fails the request numbered lose in transit (its fate unknown) and answers the
// rest OK, logging what it was sent.
type loseTransport struct {
	lose uint32
	sent []wire.Op
}

func (l *loseTransport) RoundTrip(req *wire.ClientRequest) (*wire.ClientReply, error) {
	l.sent = append(l.sent, req.Op)
	if req.Seq == l.lose {
		return nil, errors.New("connection reset")
	}
	return &wire.ClientReply{Txn: req.Txn, Seq: req.Seq, Code: wire.CodeOK}, nil
}
func (*loseTransport) Sleep(time.Duration) {}
func (*loseTransport) Now() int64          { return 0 }

// TestLostRequestLeavesOnlyAbort: once a request of a transaction is lost in transit, nothing
// but Abort is sent: a coordinator that never saw the lost put would commit the transaction
// without it.
func TestLostRequestLeavesOnlyAbort(t *testing.T) {
	lt := &loseTransport{lose: 1}
	tx := Open(lt).Begin(TxnOptions{})
	if err := tx.Put("a", []byte("1")); err != nil {
		t.Fatal(err)
	}
	if err := tx.Put("b", []byte("2")); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("lost put: %v, want ErrUnavailable", err)
	}
	if err := tx.Put("c", []byte("3")); !errors.Is(err, ErrUnavailable) {
		t.Errorf("put after a lost one: %v, want refused", err)
	}
	if err := tx.Commit(); err == nil {
		t.Error("commit after a lost put succeeded")
	}
	if err := tx.Abort(); err != nil {
		t.Errorf("abort: %v", err)
	}
	if want := []wire.Op{wire.OpPut, wire.OpPut, wire.OpAbort}; !slices.Equal(lt.sent, want) {
		t.Errorf("sent %v, want %v", lt.sent, want)
	}
}

// TestLongLabelRefused: a label over MaxLabelBytes is refused before anything is sent.
func TestLongLabelRefused(t *testing.T) {
	f := &fakeTransport{data: map[string][]byte{}}
	tx := Open(f).Begin(TxnOptions{Label: strings.Repeat("x", MaxLabelBytes+1)})
	if _, err := tx.Get("k"); !errors.Is(err, ErrBadArgument) || len(f.sent) != 0 {
		t.Fatalf("get with a %d-byte label: %v, %d requests sent", MaxLabelBytes+1, err, len(f.sent))
	}
}

// TestCommitAfterLostRequestAborts: a body that does not stop at a lost request's error (it
// reads "not found" and an unreachable coordinator alike as "no value", say) returns nil, and
// RunTxn commits. The commit is refused without being sent, and RunTxn, which aborts only after
// the body's own error, returned that refusal with the transaction still open at its
// coordinator, holding its locks (intents, records) until the idle timeout. The abort must
// still go out.
func TestCommitAfterLostRequestAborts(t *testing.T) {
	lt := &loseTransport{lose: 1}
	err := RunTxn(Open(lt), TxnOptions{}, func(tx *Txn) error {
		if err := tx.Put("a", []byte("1")); err != nil {
			return err
		}
		_, _ = tx.Get("b") // lost; the body carries on
		return nil
	})
	if !errors.Is(err, ErrUnavailable) {
		t.Errorf("RunTxn: %v, want ErrUnavailable", err)
	}
	if want := []wire.Op{wire.OpPut, wire.OpGet, wire.OpAbort}; !slices.Equal(lt.sent, want) {
		t.Errorf("sent %v, want %v", lt.sent, want)
	}
}
