package locks

import (
	"fmt"
	"slices"
	"testing"

	"github.com/meridiandb/meridian/internal/storage"
)

// TestOwnLocksUnderRangeNoSelfDeadlock: a transaction's own shared lock on a key, point or range,
// is never a reason for it to wait behind an exclusive request that waits for that very lock.
// a scans (or reads) k, b's write of k queues behind a's lock, and a then reads, writes or scans
// k again. With point locks alone a's re-read is granted and its write is an upgrade of the sole
// holder, granted at once; a range lock must behave the same, or a and b wait for each other: a
// deadlock that only an abort breaks (wait-die kills a, wound-wait wounds b, detect and timeout
// abort one of them) in every scan-then-write transaction that meets a writer.
func TestOwnLocksUnderRangeNoSelfDeadlock(t *testing.T) {
	const a, b = 1, 2
	tests := []struct {
		name  string
		first step // a's lock covering k
		again step // a's later request on k
	}{
		{"scan then write", acqRange(a, "a", "z", Wait, 2, Granted), acq(a, "k", Exclusive, Wait, 2, Granted)},
		{"scan then read", acqRange(a, "a", "z", Wait, 2, Granted), acq(a, "k", Shared, Wait, 2, Granted)},
		{"scan then wider scan", acqRange(a, "a", "m", Wait, 2, Granted), acqRange(a, "a", "z", Wait, 2, Granted)},
		{"read then scan", acq(a, "k", Shared, Wait, 2, Granted), acqRange(a, "a", "z", Wait, 2, Granted)},
	}
	for _, pol := range []Policy{Wait, WaitDie} {
		for _, tt := range tests {
			t.Run(fmt.Sprintf("%v/%s", pol, tt.name), func(t *testing.T) {
				tab := New()
				first, again := tt.first, tt.again
				first.policy, again.policy = pol, pol
				// b is older than a, so it waits under wait-die too.
				runSteps(t, tab, []step{first, acq(b, "k", Exclusive, pol, 1, Waiting).conflictsWith(a), again})
				var cycle bool
				tab.WaitsFor(func(w storage.TxnID, _ Age, bl []storage.TxnID) {
					cycle = cycle || w == a && slices.Contains(bl, b)
				})
				if cycle {
					t.Fatal("a waits for b, which waits for a")
				}
				if got := tab.Release(a); len(got) != 1 || got[0].Txn != b {
					t.Fatalf("a's release granted %v, want b's write", got)
				}
			})
		}
	}
}
