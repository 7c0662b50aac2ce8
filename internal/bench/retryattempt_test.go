package bench

import (
	"testing"
	"time"

	"github.com/meridiandb/meridian/client"
	"github.com/meridiandb/meridian/internal/history"
	"github.com/meridiandb/meridian/internal/wire"
	"github.com/meridiandb/meridian/internal/workload"
	"github.com/meridiandb/meridian/internal/workload/listappend"
)

// abortFirstCommits answers everything OK except the first `aborts` commits, which abort; its
// clock moves one microsecond per reading.
type abortFirstCommits struct {
	aborts int
	now    int64
	sent   []wire.ClientRequest
}

func (f *abortFirstCommits) RoundTrip(req *wire.ClientRequest) (*wire.ClientReply, error) {
	f.sent = append(f.sent, *req)
	rep := &wire.ClientReply{Txn: req.Txn, Seq: req.Seq, Code: wire.CodeOK}
	if req.Op == wire.OpCommit && f.aborts > 0 {
		f.aborts--
		rep.Code, rep.Cause = wire.CodeAborted, "wound"
	}
	return rep, nil
}
func (f *abortFirstCommits) Sleep(d time.Duration) { f.now += int64(d) }
func (f *abortFirstCommits) Now() int64            { f.now += 1000; return f.now }

// oneWriteGen yields checked (Invoke set) single-append transactions, as list-append does.
type oneWriteGen struct{ next int64 }

func (g *oneWriteGen) Next() workload.Txn {
	g.next++
	ops := []history.MicroOp{{F: history.FAppend, Key: 1, Value: history.IntValue(g.next)}}
	return workload.Txn{Type: "list-append", Invoke: ops, Result: func() []history.MicroOp { return ops },
		Run: func(tx *client.Txn) error { return tx.Put("k", listappend.EncodeList([]int64{g.next})) }}
}

// TestCheckedRetryIsARetry: a checked transaction that aborts is retried as the generator's next
// transaction (new values, its own history entry), but it is still the retry, and must say so:
// coordinators keep an aborted transaction's age (its wound-wait / wait-die priority, crdb's
// victim choice) only for a request with Attempt > 0 (txnkit.RetryAges), so a retry sent as
// Attempt 0 started young again each time and could starve; and a commit after retries is not
// a first-try commit.
func TestCheckedRetryIsARetry(t *testing.T) {
	f := &abortFirstCommits{aborts: 2}
	m := NewMetrics()
	db := client.Open(f)
	ClientLoop(db, &oneWriteGen{}, 1, 0, Window{Start: 0, MeasureFrom: 0, End: 10_000_000}, m, history.NewRecorder())
	var attempts []uint32
	for _, r := range f.sent {
		if r.Seq == 0 {
			attempts = append(attempts, r.Attempt)
		}
	}
	if len(attempts) < 3 || attempts[0] != 0 || attempts[1] != 1 || attempts[2] != 2 {
		t.Fatalf("first requests carried attempts %v…, want 0, 1, 2 (two aborts, then the retry that commits)", attempts[:min(len(attempts), 4)])
	}
	s := m.Summarize(1)
	if s.Committed == 0 || s.FirstTry != s.Committed-1 {
		t.Fatalf("committed %d, of them %d on the first try; want all but the retried one", s.Committed, s.FirstTry)
	}
	// Retries counted only unchecked transactions' re-runs: 0 here, beside two aborts.
	if s.Retries != 2 || s.Aborted != 2 {
		t.Fatalf("%d retries after %d aborts, want 2 and 2", s.Retries, s.Aborted)
	}
}

// A retry counts when it runs inside the window: an abort just before the window's end whose
// backoff crosses it leaves no retry (it was counted, and never run).
func TestRetryAfterWindowNotCounted(t *testing.T) {
	f := &abortFirstCommits{aborts: 1}
	m := NewMetrics()
	// The fake clock moves 1 µs a reading: the first attempt aborts well inside 50 µs, and the
	// backoff before its retry (at least minBackoff) ends past the window.
	ClientLoop(client.Open(f), &oneWriteGen{}, 1, 0, Window{Start: 0, MeasureFrom: 0, End: 50_000}, m, history.NewRecorder())
	if s := m.Summarize(1); s.Aborted != 1 || s.Retries != 0 {
		t.Fatalf("%d aborts, %d retries; want 1 abort and no retry inside the window", s.Aborted, s.Retries)
	}
}

// The timeline has an entry for every second of the window, the seconds without a commit too:
// a run that stalled at its end read as a shorter run (review).
func TestTimelineCoversTheWindow(t *testing.T) {
	m := NewMetrics()
	m.Commit("t", 1000, 1, 0)
	m.Commit("t", 1000, 1, 2)
	if got := m.Summarize(8).Timeline; len(got) != 8 || got[0] != 1 || got[2] != 1 || got[7] != 0 {
		t.Errorf("timeline %v for commits in seconds 0 and 2 of an 8 s window; want 8 entries", got)
	}
	if got := NewMetrics().Summarize(3).Timeline; len(got) != 3 {
		t.Errorf("timeline %v of a window with no commit; want 3 zeros", got)
	}
}
