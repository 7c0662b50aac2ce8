package client

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/meridiandb/meridian/internal/wire"
)

// TestBatchFitsAFrame: every op of a batch is within the limits, but together they may not fit
// one frame (wire.MaxFrameBytes): a node reading a longer frame closes the connection, so a
// PutMany of 20 values of 1 MiB failed as "unavailable: connection lost" and left its
// transaction unusable. A batch too large to travel as one request goes one op at a time, as a
// batch of more than wire.MaxBatchOps does.
func TestBatchFitsAFrame(t *testing.T) {
	ft := &fakeTransport{data: map[string][]byte{}}
	tx := Open(ft).Begin(TxnOptions{})
	rows := make([]wire.KV, 20)
	for i := range rows {
		rows[i] = wire.KV{Key: fmt.Sprintf("k%02d", i), Value: bytes.Repeat([]byte{'v'}, MaxValueBytes)}
	}
	if err := tx.PutMany(rows); err != nil {
		t.Fatal(err)
	}
	for _, r := range ft.sent {
		enc, err := wire.Encode(&r)
		if err != nil {
			t.Fatal(err)
		}
		if len(enc) > wire.MaxFrameBytes {
			t.Fatalf("sent a %v request of %d bytes, more than a frame holds (%d)", r.Op, len(enc), wire.MaxFrameBytes)
		}
	}
	if len(ft.data) != len(rows) {
		t.Fatalf("%d of %d rows written", len(ft.data), len(rows))
	}
}
