package client

import (
	"errors"
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
