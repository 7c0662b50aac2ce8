package mvcc

import (
	"strings"
	"testing"

	"github.com/meridiandb/meridian/internal/storage"
	"github.com/meridiandb/meridian/internal/storage/durable"
	"github.com/meridiandb/meridian/internal/ts"
)

// TestLargestKeyPersists: the longest key the store accepts, made of the byte its encoding
// escapes (each zero byte takes two), still makes a record the durable store accepts. A batch
// the durable store refuses stops a real node for good, so a key that passes the store's own
// check must never be refused there.
func TestLargestKeyPersists(t *testing.T) {
	s := New(Options{})
	key := strings.Repeat("\x00", storage.MaxKeyBytes)
	max := ts.Timestamp{Wall: 1<<63 - 1, Logical: 1<<32 - 1, Origin: 1<<32 - 1}
	if err := s.PutIntent(key, Version{TS: max, Txn: storage.TxnID(1<<64 - 1), Value: []byte("v"), Meta: []byte(strings.Repeat("m", storage.MaxMetaBytes))}); err != nil {
		t.Fatal(err)
	}
	batch := s.TakeWrites()
	if err := durable.ValidateBatch(batch); err != nil {
		t.Fatalf("a %d-byte key the store accepted makes a record the durable store refuses: %v", len(key), err)
	}
	for _, w := range batch {
		if k, _, _, err := DecodeVersionKey(w.Key); err == nil && k != key {
			t.Fatalf("the record's key decodes to %d bytes, want the %d written", len(k), len(key))
		}
	}
}
