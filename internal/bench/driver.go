package bench

import (
	"errors"
	"time"

	"github.com/meridiandb/meridian/client"
	"github.com/meridiandb/meridian/internal/history"
	"github.com/meridiandb/meridian/internal/protocol"
	"github.com/meridiandb/meridian/internal/workload"
)

// Window is a run's timeline in the runtime's clock (virtual ns in the simulator): clients start
// at Start, measurements count from MeasureFrom, and clients stop starting transactions at End.
type Window struct {
	Start, MeasureFrom, End int64
}

// Seconds is the measurement window's length.
func (w Window) Seconds() float64 { return float64(w.End-w.MeasureFrom) / 1e9 }

// Backoff bounds between retries of an aborted transaction.
const (
	minBackoff = 500 * time.Microsecond
	maxBackoff = 50 * time.Millisecond
)

// ClientLoop runs one closed-loop client: it takes transactions from gen and runs each until it
// commits, fails for good, or the window ends, retrying retryable aborts with exponential backoff
// (each retry is a fresh transaction, hence a fresh timestamp). Every attempt of a transaction
// that carries micro-ops is recorded in rec (if not nil) as an invoke and a completion.
//
// After a transaction whose outcome is unknown the client continues under a new process id, as
// Jepsen clients do: the unknown transaction may still take effect later, so it must not be
// ordered before the client's next transaction by session order.
//
// A client whose coordinator is unreachable (ErrUnavailable: its connection lost, or a dial
// refused while the node is down) backs off before its next transaction as it does between
// retries, so that while its node is down it neither spins (a refused dial costs one round trip
// inside a region) nor waits past the node's restart by more than the longest backoff.
//
// It reports whether its coordinator was still unreachable when the window ended: a run against a
// cluster that stopped answering must not pass for a slow one.
func ClientLoop(db *client.DB, gen workload.Client, process, region int, w Window, m *Metrics, rec *history.Recorder) (unreachableAtEnd bool) {
	t := db.Transport()
	histProcess := process
	unavailable := 0 // transactions in a row that found the coordinator unreachable
	// A checked transaction's retry is the generator's next transaction; it continues the
	// aborted one's attempt count and backoff, so that coordinators keep its age (Attempt > 0)
	// and its commit does not count as a first try.
	retryAttempt, retryBackoff := 1, minBackoff
	for t.Now() < w.End {
		txn := gen.Next()
		start := t.Now()
		backoff, first := retryBackoff, retryAttempt
		retryAttempt, retryBackoff = 1, minBackoff
		for attempt := first; ; attempt++ {
			// A retry counts when it runs inside the window: one whose backoff crossed the
			// window's end was counted and never run.
			if now := t.Now(); attempt > 1 && now >= w.MeasureFrom && now <= w.End {
				m.Retry()
			}
			err := runAttempt(db, txn, attempt, histProcess, region, rec)
			if isUnknown(err) {
				histProcess += processStride
			}
			// An outcome counts when it happens inside the window, whenever its transaction
			// started: throughput divides by the window's length, so excluding transactions that
			// straddle an edge would undercount slow protocols more than fast ones.
			now := t.Now()
			measured := now >= w.MeasureFrom && now <= w.End
			switch {
			case err == nil:
				if measured {
					m.Commit(txn.Type, t.Now()-start, attempt, (t.Now()-w.MeasureFrom)/1e9)
				}
			case errors.Is(err, workload.ErrUserAbort):
				if measured {
					m.RolledBack(txn.Type)
				}
			case client.IsRetryable(err):
				if measured {
					m.Abort(txn.Type, client.AbortCause(err))
				}
				if t.Now() >= w.End {
					break
				}
				if txn.Invoke != nil {
					// A checked transaction is not re-run with the same values: every attempt
					// is its own history entry, and appended values must be unique per key
					// across attempts for reads to name their writer. The next transaction
					// from the generator is the retry.
					t.Sleep(jittered(backoff, process, attempt))
					retryAttempt, retryBackoff = attempt+1, min(2*backoff, maxBackoff)
					break
				}
				t.Sleep(jittered(backoff, process, attempt))
				if backoff *= 2; backoff > maxBackoff {
					backoff = maxBackoff
				}
				continue
			default:
				if measured {
					var u *client.UnknownError
					m.Failed(txn.Type, errors.As(err, &u), errors.Is(err, client.ErrUnavailable))
				}
			}
			if errors.Is(err, client.ErrUnavailable) {
				unavailable++
			} else {
				unavailable = 0
			}
			break
		}
		if unavailable > 0 {
			t.Sleep(jittered(unavailableBackoff(unavailable), process, unavailable))
		}
	}
	return unavailable > 0
}

// unavailableBackoff is the pause after n transactions in a row found the coordinator
// unreachable: minBackoff doubling up to maxBackoff.
func unavailableBackoff(n int) time.Duration {
	d := minBackoff
	for i := 1; i < n && d < maxBackoff; i++ {
		d *= 2
	}
	return min(d, maxBackoff)
}

// processStride separates the history process ids a client takes after unknown outcomes from
// every other client's ids.
const processStride = 1 << 20

// isUnknown reports whether a transaction that ended with err may have committed. Only a commit
// can: ErrUnavailable comes from a request before the commit (its loss leaves the transaction
// able only to abort) or from a commit refused unprocessed, so that transaction took no effect
// and is recorded as failed, which lets the checker catch a protocol that applied it anyway.
func isUnknown(err error) bool {
	var u *client.UnknownError
	return errors.As(err, &u)
}

// jittered spreads retries of clients that aborted together, deterministically.
func jittered(d time.Duration, process, attempt int) time.Duration {
	h := uint64(process)*0x9e3779b97f4a7c15 ^ uint64(attempt)*0xbf58476d1ce4e5b9
	h ^= h >> 31
	return d/2 + time.Duration(h%uint64(d/2+1))
}

func runAttempt(db *client.DB, txn workload.Txn, attempt, process, region int, rec *history.Recorder) error {
	t := db.Transport()
	recording := rec != nil && txn.Invoke != nil
	if recording {
		rec.Invoke(process, region, t.Now(), txn.Invoke)
	}
	label := txn.Label
	if label == "" {
		label = txn.Type
	}
	tx := db.Begin(client.TxnOptions{ReadOnly: txn.ReadOnly, Attempt: uint32(attempt - 1), Label: label})
	err := txn.Run(tx)
	if err == nil {
		err = tx.Commit()
	} else {
		_ = tx.Abort()
	}
	if txn.Done != nil {
		switch {
		case err == nil:
			txn.Done(workload.Committed)
		case isUnknown(err):
			txn.Done(workload.Unknown)
		default:
			txn.Done(workload.Aborted)
		}
	}
	if recording {
		var res []history.MicroOp
		if txn.Result != nil {
			res = txn.Result()
		}
		switch {
		case err == nil && tx.CommitTS != (client.Timestamp{}):
			c := tx.CommitTS
			rec.CompleteCommitted(process, region, t.Now(), res, c.Wall, c.Logical, c.Origin)
		case err == nil:
			rec.Complete(history.OK, process, region, t.Now(), res, "")
		case isUnknown(err):
			rec.Complete(history.Info, process, region, t.Now(), txn.Invoke, err.Error())
		default:
			rec.Complete(history.Fail, process, region, t.Now(), res, err.Error())
		}
	}
	return err
}

// newRecorder returns the history recorder a run of protocol p needs (nil if it records
// nothing), told each key's region when the workload knows it (region-aware models), and that
// commit timestamps order the transactions when p says so.
func newRecorder(spec Spec, p protocol.Protocol) *history.Recorder {
	if !spec.Record {
		return nil
	}
	rec := history.NewRecorder()
	if _, ok := p.(protocol.TimestampOrdered); ok {
		rec.DeclareTimestampOrder()
	}
	noteKeyRegions(rec, spec)
	return rec
}

// noteKeyRegions tells rec the region of each key the workload has drawn, when it knows them:
// at the start, and again at the end for keys drawn since (list-append's replacement keys).
func noteKeyRegions(rec *history.Recorder, spec Spec) {
	if kr, ok := spec.Workload.(interface{ KeyRegions() map[int64]int }); ok {
		for k, r := range kr.KeyRegions() {
			rec.SetKeyRegion(k, r)
		}
	}
}
