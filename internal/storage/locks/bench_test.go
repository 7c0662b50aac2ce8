package locks

import (
	"fmt"
	"testing"

	"github.com/meridiandb/meridian/internal/storage"
	"github.com/meridiandb/meridian/internal/ts"
)

// BenchmarkRangeLockAmongManyLocks: a shared range lock over 20 keys while 10,000 other keys
// are locked exclusively elsewhere in the table (a busy node under a limited scan's step).
func BenchmarkRangeLockAmongManyLocks(b *testing.B) {
	t := New()
	for i := range 10000 {
		t.Acquire(storage.MakeTxnID(1, uint64(i+1)), fmt.Sprintf("k%06d", i), Exclusive, WoundWait, ts.Timestamp{Wall: int64(i + 1)})
	}
	scanner := storage.MakeTxnID(2, 1)
	rg := Range{Start: "s000000", End: "s000020"}
	b.ReportAllocs()
	for b.Loop() {
		if r := t.AcquireRange(scanner, rg, WoundWait, ts.Timestamp{Wall: 1 << 40}); r.Outcome != Granted {
			b.Fatalf("range lock: %+v", r)
		}
		t.Release(scanner)
	}
}
