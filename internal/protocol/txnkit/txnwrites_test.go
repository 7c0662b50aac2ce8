package txnkit

import (
	"bytes"
	"testing"

	"github.com/meridiandb/meridian/internal/wire"
)

// TestTxnWritesBound: a transaction's writes count each key once, at its latest write (a
// delete its key only), and a request that would pass wire.MaxTxnWriteBytes is refused whole,
// leaving the count as it was.
func TestTxnWritesBound(t *testing.T) {
	mib := bytes.Repeat([]byte{1}, 1<<20)
	put := func(key string, v []byte) *wire.ClientRequest {
		return &wire.ClientRequest{Op: wire.OpPut, Key: key, Value: v}
	}
	var w TxnWrites
	for i := range 7 {
		if !w.Admit(put(string(rune('a'+i)), mib)) {
			t.Fatalf("put %d of 1 MiB refused at %d bytes", i+1, w.total)
		}
	}
	if want := 7 * wire.TxnWriteBytes("a", mib); w.total != want {
		t.Fatalf("7 puts of 1 MiB count %d, want %d", w.total, want)
	}
	if w.Admit(put("h", mib)) {
		t.Fatalf("an eighth put of 1 MiB taken: %d bytes, bound %d", w.total, wire.MaxTxnWriteBytes)
	}
	// A rewrite replaces its key's count: rewriting a value of the same size always fits.
	if !w.Admit(put("a", mib)) {
		t.Fatal("a rewrite of the same size refused")
	}
	before := w.total
	batch := &wire.ClientRequest{Op: wire.OpBatch, Batch: []wire.BatchOp{
		{Op: wire.OpGet, Key: "z"}, {Op: wire.OpPut, Key: "h", Value: []byte("x")}, {Op: wire.OpPut, Key: "i", Value: mib}}}
	if w.Admit(batch) || w.total != before {
		t.Fatalf("a batch past the bound: count %d -> %d, want refused and unchanged", before, w.total)
	}
	// Deleting a key counts its key only, whatever value the request carries.
	if !w.Admit(&wire.ClientRequest{Op: wire.OpDelete, Key: "a", Value: mib}) {
		t.Fatal("a delete of a written key refused")
	}
	if want := before - len(mib); w.total != want {
		t.Fatalf("after deleting a 1 MiB write: %d, want %d", w.total, want)
	}
	if !w.Admit(batch) {
		t.Fatalf("the batch refused with room for it (%d bytes)", w.total)
	}
	for _, op := range []wire.Op{wire.OpGet, wire.OpScan, wire.OpCommit, wire.OpAbort} {
		if !w.Admit(&wire.ClientRequest{Op: op, Key: "k"}) {
			t.Errorf("%v refused", op)
		}
	}
}
