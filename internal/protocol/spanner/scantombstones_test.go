package spanner

import (
	"fmt"
	"slices"
	"testing"

	"github.com/meridiandb/meridian/internal/storage"
	"github.com/meridiandb/meridian/internal/storage/locks"
	"github.com/meridiandb/meridian/internal/storage/mvcc"
	"github.com/meridiandb/meridian/internal/ts"
)

// TestScanOverTombstonesHoldsOneRange: a read-write scan limited to one row whose range starts
// with 2000 deleted rows takes a step per tombstone, each granted at once; the lock table keeps
// their adjacent parts as the one range they make, not 2001 entries that every later range
// check walks (the steps cost O(n²): 23 ms for 2000 tombstones, 107 ms for 4000, 556 ms for
// 8000, and each exclusive request at the participant paid for the list while it was held).
func TestScanOverTombstonesHoldsOneRange(t *testing.T) {
	s := newScanScript(t, locks.WoundWait, "zz")
	for i := range 2000 {
		if err := s.p.store.PutCommitted(s.key(fmt.Sprintf("r-%06d", i)), mvcc.Version{TS: ts.Timestamp{Wall: 5}, Txn: storage.MakeTxnID(3, 1), Tombstone: true}); err != nil {
			t.Fatal(err)
		}
	}
	scanner := storage.MakeTxnID(int32(scanCoord), 1)
	r := s.scan(scanner, 100, 1)
	if r == nil || !r.OK {
		t.Fatalf("scan: %+v", r)
	}
	if got, want := s.rowNames(r.Rows), []string{"zz=zz"}; !slices.Equal(got, want) {
		t.Fatalf("scan, limit 1: %v, want %v", got, want)
	}
	if got, want := s.p.locks.HeldRanges(scanner), []locks.Range{{Start: s.rg.Start, End: s.key("r-zz") + "\x00"}}; !slices.Equal(got, want) {
		t.Fatalf("range locks: %d of them, from %v to %v; want %v", len(got), got[0], got[len(got)-1], want)
	}
}
