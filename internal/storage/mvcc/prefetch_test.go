package mvcc

import (
	"testing"

	"github.com/meridiandb/meridian/internal/storage"
	"github.com/meridiandb/meridian/internal/ts"
)

// TestPrefetchChangesNothing: Prefetch only reads, so a data node may call it on any key of a
// batch, present or not, without changing what the store holds, records or answers.
func TestPrefetchChangesNothing(t *testing.T) {
	s := New(Options{})
	if err := s.PutCommitted("a", Version{TS: ts.New(10), Txn: 1, Value: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutIntent("a", Version{TS: ts.New(20), Txn: 2, Value: []byte("y")}); err != nil {
		t.Fatal(err)
	}
	s.TakeWrites()
	for _, k := range []string{"a", "absent", ""} {
		s.Prefetch(k)
	}
	if s.Len() != 1 {
		t.Fatalf("Len = %d after Prefetch, want 1", s.Len())
	}
	if w := s.TakeWrites(); len(w) != 0 {
		t.Fatalf("Prefetch recorded %d writes", len(w))
	}
	if vs := s.Versions("absent"); vs != nil {
		t.Fatalf("Prefetch created absent: %v", vs)
	}
	vis := s.VisibleAt("a", ts.New(30), storage.TxnID(3))
	if !vis.Found || string(vis.Version.Value) != "x" || len(vis.Pending) != 1 {
		t.Fatalf("VisibleAt after Prefetch = %+v", vis)
	}
}
