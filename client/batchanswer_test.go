package client

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/meridiandb/meridian/internal/wire"
)

// bigAnswerFake is a coordinator, as far as this test needs, that runs a batch and then refuses
// its answer when the reads' values exceed wire.MaxScanBytes (wire.BatchAnswerTooLarge), as the
// protocols do. It takes each request's sequence number as the coordinators do: one at or below
// the last taken is a duplicate, which a coordinator drops (the client would wait out its
// timeout), reported here as a transport error.
type bigAnswerFake struct {
	data map[string][]byte
	next map[uint64]uint32 // per transaction, the lowest sequence number not yet taken
	sent []wire.ClientRequest
}

func (*bigAnswerFake) Sleep(time.Duration) {}
func (*bigAnswerFake) Now() int64          { return 0 }

func (f *bigAnswerFake) RoundTrip(req *wire.ClientRequest) (*wire.ClientReply, error) {
	f.sent = append(f.sent, *req)
	if req.Seq < f.next[req.Txn] {
		return nil, errors.New("dropped as a duplicate")
	}
	f.next[req.Txn] = req.Seq + 1
	rep := &wire.ClientReply{Txn: req.Txn, Seq: req.Seq, Code: wire.CodeOK}
	switch req.Op {
	case wire.OpBatch:
		size := 0
		for _, op := range req.Batch {
			var r wire.BatchResult
			switch op.Op {
			case wire.OpGet:
				r.Value, r.Found = f.data[op.Key]
			case wire.OpPut:
				f.data[op.Key] = op.Value
			}
			size += len(r.Value) + 8
			rep.Results = append(rep.Results, r)
		}
		if size > wire.MaxScanBytes {
			return &wire.ClientReply{Txn: req.Txn, Seq: req.Seq, Code: wire.CodeBadArgument, Error: wire.BatchAnswerTooLarge}, nil
		}
	case wire.OpGet:
		rep.Value, rep.Found = f.data[req.Key]
	case wire.OpPut:
		f.data[req.Key] = req.Value
	}
	return rep, nil
}

// TestBatchAnswerTooLargeFallsBack: a GetMany whose values exceed what one answer may carry
// (wire.MaxScanBytes; the coordinator refuses it with wire.BatchAnswerTooLarge, since a larger
// reply would not fit a frame and the node's reader would drop the connection) returns every
// value, read one at a time, without the caller seeing the refusal. The coordinator ran the
// refused batch and took its sequence number, so the reads that follow go on from the next one
// (reusing it, as after wire.BatchUnsupported, would be dropped as a duplicate); the transaction
// stays usable, and later batches still go as batches.
func TestBatchAnswerTooLargeFallsBack(t *testing.T) {
	f := &bigAnswerFake{data: map[string][]byte{}, next: map[uint64]uint32{}}
	var keys []string
	for i := range 5 {
		k := fmt.Sprintf("big%d", i)
		keys = append(keys, k)
		f.data[k] = bytes.Repeat([]byte{byte('a' + i)}, MaxValueBytes)
	}
	keys = append(keys, "absent")
	db := Open(f)
	tx := db.Begin(TxnOptions{Label: "l"})
	got, err := tx.GetMany(keys)
	if err != nil {
		t.Fatalf("GetMany over %d MiB: %v", wire.MaxScanBytes>>20, err)
	}
	for i, k := range keys {
		w, ok := f.data[k]
		if got[i].Found != ok || !bytes.Equal(got[i].Value, w) {
			t.Errorf("GetMany[%d] %s: found=%v, %d bytes; want found=%v, %d bytes", i, k, got[i].Found, len(got[i].Value), ok, len(w))
		}
	}
	if len(f.sent) != 1+len(keys) || f.sent[0].Op != wire.OpBatch {
		t.Fatalf("sent %d requests, want the batch and then %d gets", len(f.sent), len(keys))
	}
	for i, r := range f.sent {
		if r.Seq != uint32(i) {
			t.Errorf("request %d (%v) numbered %d", i, r.Op, r.Seq)
		}
	}
	if f.sent[0].Label != "l" {
		t.Errorf("the first request carries label %q, want l", f.sent[0].Label)
	}
	f.sent = nil
	got, err = tx.GetMany([]string{"big0", "absent"})
	if err != nil {
		t.Fatalf("a small GetMany after the fallback: %v", err)
	}
	if len(f.sent) != 1 || f.sent[0].Op != wire.OpBatch || !got[0].Found {
		t.Errorf("a small GetMany after the fallback sent %d requests (%+v), want one batch", len(f.sent), got)
	}
	if err := tx.Put("k", []byte("v")); err != nil {
		t.Fatalf("put after the fallback: %v", err)
	}
}
