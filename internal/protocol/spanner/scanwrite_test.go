package spanner

import (
	"testing"

	"github.com/meridiandb/meridian/internal/storage"
	"github.com/meridiandb/meridian/internal/storage/locks"
	"github.com/meridiandb/meridian/internal/ts"
)

// TestScanThenWriteNoSelfDeadlock: a transaction that scanned a range and then writes a key
// in it is not held up, or aborted, by a writer of that key queued behind its own range lock,
// as it is not by one queued behind its point read (its prepare upgrades the sole shared lock at
// once, and the writer waits on). Before, the scanner's prepare queued behind the writer, which
// waited for the scanner's range lock: under wait-die the younger scanner died, under wound-wait
// the older scanner wounded the writer, and under detect or timeout the two deadlocked until
// the detector or the timeout aborted one of them.
func TestScanThenWriteNoSelfDeadlock(t *testing.T) {
	for _, tc := range []struct {
		pol                   locks.Policy
		scannerAge, writerAge int64 // the writer waits for the scanner under the policy
	}{
		{locks.WoundWait, 100, 200},
		{locks.WaitDie, 200, 100},
		{locks.Wait, 100, 200},
	} {
		for _, how := range []string{"scan", "read"} {
			t.Run(tc.pol.String()+"/"+how, func(t *testing.T) {
				s := newScanScript(t, tc.pol, "a", "b", "c")
				scanner, writer := storage.MakeTxnID(int32(scanCoord), 1), storage.MakeTxnID(2, 1)
				if how == "scan" {
					if r := s.scan(scanner, tc.scannerAge, 0); r == nil || !r.OK {
						t.Fatalf("scan: %+v", r)
					}
				} else {
					s.p.onRead(scanCoord, &ReadReq{Txn: scanner, Age: ts.Timestamp{Wall: tc.scannerAge}, Seq: 1, Key: s.key("r-b")})
					s.env.Take()
				}
				if v := s.write(writer, tc.writerAge, "r-b", "w"); v != nil {
					t.Fatalf("the writer was answered under the scanner's lock: %+v", v)
				}
				s.p.onPrepare(scanCoord, &PrepareReq{Txn: scanner, Age: ts.Timestamp{Wall: tc.scannerAge}, Seen: 1,
					Writes: []Write{{Key: s.key("r-b"), Value: []byte("s")}}})
				s.env.Flush()
				sent := s.env.Take()
				if _, ok := wounds(sent)[writer]; ok {
					t.Errorf("the scanner's prepare wounded the writer queued behind its own lock")
				}
				if v := votes(sent)[writer]; v != nil {
					t.Errorf("the writer was answered: %+v", v)
				}
				if v := votes(sent)[scanner]; v == nil || !v.OK {
					t.Fatalf("the scanner's prepare: %+v, want a yes vote at once", v)
				}
				s.commit(scanner)
				if v := votes(s.env.Take())[writer]; v == nil || !v.OK {
					t.Fatalf("the writer once the scanner committed: %+v, want a yes vote", v)
				}
			})
		}
	}
}
