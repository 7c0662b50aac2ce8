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

// TestNoEntryLeftByUnqueuedRequests: a request granted without an entry of its own (a read under
// the transaction's own range lock) or refused at once (a write against another's range lock
// under NO_WAIT) leaves no lock behind: such entries stayed for good, and range checks walked them.
func TestNoEntryLeftByUnqueuedRequests(t *testing.T) {
	tab := New()
	old, young := Age{Wall: 1}, Age{Wall: 2}
	if r := tab.AcquireRange(1, Range{Start: "a", End: "z"}, NoWait, old); r.Outcome != Granted {
		t.Fatalf("range lock: %+v", r)
	}
	if r := tab.Acquire(1, "m", Shared, NoWait, old); r.Outcome != Granted {
		t.Fatalf("a read under the transaction's own range lock: %+v", r)
	}
	if r := tab.Acquire(2, "n", Exclusive, NoWait, young); r.Outcome != Aborted {
		t.Fatalf("a write under another's range lock, no-wait: %+v", r)
	}
	if tab.Len() != 0 || tab.keys.Len() != 0 {
		t.Fatalf("before any release: %d lock entries, %d ordered keys; want 0", tab.Len(), tab.keys.Len())
	}
	tab.Release(1)
	tab.Release(2)
	if tab.Len() != 0 || tab.keys.Len() != 0 {
		t.Fatalf("after every release: %d lock entries, %d ordered keys; want 0", tab.Len(), tab.keys.Len())
	}
}
