package bench

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/meridiandb/meridian/client"
	"github.com/meridiandb/meridian/internal/history"
	"github.com/meridiandb/meridian/internal/workload"
)

// FinalReader is implemented by checked workloads (list-append, rw-register): once every client
// has finished, the driver runs FinalReads' transactions, which read every key once, and records
// them as the history's last transactions. A write lost after it was acknowledged then shows
// whether or not some read during the run happened to come after it, and under any model: the
// checker may order a lost write last under plain serializability, but its value is missing from
// the final read all the same (Durability).
type FinalReader interface {
	FinalReads() []workload.Txn
}

// finalReadProcess is the history process of the final reads: no client's (clients are 1..n,
// and move on by processStride after an unknown outcome).
const finalReadProcess = 0

// maxFinalReadAttempts bounds the retries of one final read that keeps aborting; so does the
// deadline runFinalReads is given.
const maxFinalReadAttempts = 50

// recheckAfter is how long after a final read that missed acknowledged writes they are read
// again: longer than the clock uncertainty of any deployment we run, so that a read the first
// time too stale to see them (clocks outside their bounds) sees them now, and a loss is told
// from a stale read.
const recheckAfter = time.Second

// Durability is what the final read of a checked run's keys found.
type Durability struct {
	Keys         int `json:"keys"`                // keys read
	Acknowledged int `json:"acknowledged_writes"` // appends (or register writes) that committed
	Failed       int `json:"failed_writes"`       // appends (or writes) whose transaction failed for sure
	// Lost lists acknowledged writes the final read did not find ("key 19: 906"): an appended
	// value missing from its key's list, or a register read as never written, and missing again
	// recheckAfter later.
	Lost []string `json:"lost,omitempty"`
	// Stale lists acknowledged writes the final read did not find and a second read
	// recheckAfter later did: the first read was stale, a violation of every model a protocol
	// here promises for a read-write transaction begun after the writes were acknowledged, but
	// not a loss.
	Stale []string `json:"stale,omitempty"`
	// Undone lists values of failed transactions the final read found.
	Undone []string `json:"failed_present,omitempty"`
	// NotRun says why the final read did not run or finish (the check then says nothing).
	NotRun string `json:"not_run,omitempty"`
}

// Holds reports whether the final read found every acknowledged write and no failed one.
func (d *Durability) Holds() bool { return len(d.Lost) == 0 && len(d.Stale) == 0 && len(d.Undone) == 0 }

// Err is the run's failure the final read shows: a write lost, read stale or undone, or a final
// read that could not run or finish.
func (d *Durability) Err() error {
	if d == nil || (d.NotRun == "" && d.Holds()) {
		return nil
	}
	return errors.New(d.String())
}

func (d *Durability) String() string {
	switch {
	case d.NotRun != "":
		return "not checked: " + d.NotRun
	case d.Holds():
		return fmt.Sprintf("the final read of the %d keys found every acknowledged write (%d) and no failed one (%d)", d.Keys, d.Acknowledged, d.Failed)
	}
	var parts []string
	if len(d.Lost) > 0 {
		parts = append(parts, fmt.Sprintf("%d of %d acknowledged writes lost: missing from the final read and from another %v later (%s)",
			len(d.Lost), d.Acknowledged, recheckAfter, firstFew(d.Lost)))
	}
	if len(d.Stale) > 0 {
		parts = append(parts, fmt.Sprintf("%d of %d acknowledged writes missing from the final read, which another %v later found: a stale read (%s)",
			len(d.Stale), d.Acknowledged, recheckAfter, firstFew(d.Stale)))
	}
	if len(d.Undone) > 0 {
		parts = append(parts, fmt.Sprintf("%d of %d failed writes took effect (%s)", len(d.Undone), d.Failed, firstFew(d.Undone)))
	}
	return "VIOLATED: " + strings.Join(parts, "; ")
}

func firstFew(l []string) string {
	const n = 5
	if len(l) <= n {
		return strings.Join(l, ", ")
	}
	return strings.Join(l[:n], ", ") + ", …"
}

// finalCheck runs fr's final reads on db (of region 0), retrying aborts until the time deadline
// (db's clock), and judges what they found. Acknowledged writes they missed are read again
// recheckAfter later, to tell a loss from a stale read. It returns nil if the run recorded no
// history.
func finalCheck(db *client.DB, fr FinalReader, rec *history.Recorder, deadline int64) *Durability {
	if err := runFinalReads(db, fr.FinalReads(), rec, deadline); err != nil {
		return &Durability{NotRun: err.Error()}
	}
	first := durability(rec.Ops())
	if len(first.Lost) == 0 {
		return first
	}
	db.Transport().Sleep(recheckAfter)
	if err := runFinalReads(db, fr.FinalReads(), rec, deadline+int64(recheckAfter)); err != nil {
		return first
	}
	again := durability(rec.Ops()) // the later final reads' values replace the earlier ones'
	for _, w := range first.Lost {
		if !slices.Contains(again.Lost, w) {
			again.Stale = append(again.Stale, w)
		}
	}
	return again
}

// runFinalReads runs txns one after another on db, each until it commits, recording every attempt
// under finalReadProcess. It fails if one fails for good (the cluster stopped answering, say), or
// still aborts after maxFinalReadAttempts attempts or past deadline.
func runFinalReads(db *client.DB, txns []workload.Txn, rec *history.Recorder, deadline int64) error {
	t := db.Transport()
	process := finalReadProcess
	for _, txn := range txns {
		backoff := minBackoff
		for attempt := 1; ; attempt++ {
			err := runAttempt(db, txn, attempt, process, 0, rec)
			if isUnknown(err) {
				process += processStride
			}
			if err == nil {
				break
			}
			if !client.IsRetryable(err) || attempt == maxFinalReadAttempts || t.Now() > deadline {
				return fmt.Errorf("final read: %w", err)
			}
			t.Sleep(jittered(backoff, process, attempt))
			backoff = min(2*backoff, maxBackoff)
		}
	}
	return nil
}

// durability compares the final reads in ops (the committed transactions of finalReadProcess and
// its successors) with every other transaction's writes: each acknowledged append must be in its
// key's final list, each acknowledged register write must have left the key written and not
// with a value written before it in real time, and no value of a failed transaction may be
// there. Transactions with an unknown outcome may have gone either way. Keys no final read
// reached are not judged.
//
// A register's final value written by a transaction that completed before an acknowledged
// writer of the key began means that writer's value is gone: every protocol here orders one
// key's writes in real time (each promises strict serializability or no stale reads). Checked
// only for "the key was written", a register write lost under a later one's earlier value
// passed (review: serial's no-lock mutant lost register writes with every one "found").
func durability(ops []history.Op) *Durability {
	final := map[int64]history.Value{}
	for _, op := range ops {
		if op.Type == history.OK && op.Process%processStride == finalReadProcess {
			for _, m := range op.Value {
				if m.F == history.FRead {
					final[m.Key] = m.Value
				}
			}
		}
	}
	d := &Durability{Keys: len(final)}
	finalDone := finalWriteCompletions(ops, final)
	invoked := map[int]int64{} // each process's running transaction's invocation time
	for _, op := range ops {
		if op.Type == history.Invoke {
			invoked[op.Process] = op.Time
		}
		if op.Process%processStride == finalReadProcess || (op.Type != history.OK && op.Type != history.Fail) {
			continue
		}
		for _, m := range op.Value {
			if m.F != history.FAppend && m.F != history.FWrite {
				continue
			}
			v, read := final[m.Key]
			if !read {
				continue
			}
			present := v.Kind != history.None
			if m.F == history.FAppend {
				present = slices.Contains(v.List, m.Value.Int)
			} else if op.Type == history.Fail {
				present = v.Kind == history.Int && v.Int == m.Value.Int
			} else if done, ok := finalDone[m.Key]; ok && v.Int != m.Value.Int && done < invoked[op.Process] {
				present = false // the final value was written before this write began
			}
			what := fmt.Sprintf("key %d: %d", m.Key, m.Value.Int)
			switch {
			case op.Type == history.OK:
				d.Acknowledged++
				if !present {
					d.Lost = append(d.Lost, what)
				}
			case present:
				d.Failed++
				d.Undone = append(d.Undone, what)
			default:
				d.Failed++
			}
		}
	}
	return d
}

// finalWriteCompletions maps each register key whose final value (in final) an acknowledged
// transaction wrote to that transaction's completion time. Values are unique per key, so the
// value names its writer; one whose outcome is unknown may have taken effect at any time, and
// is left out.
func finalWriteCompletions(ops []history.Op, final map[int64]history.Value) map[int64]int64 {
	done := map[int64]int64{}
	for _, op := range ops {
		if op.Type != history.OK || op.Process%processStride == finalReadProcess {
			continue
		}
		for _, m := range op.Value {
			if v, ok := final[m.Key]; ok && m.F == history.FWrite && v.Kind == history.Int && v.Int == m.Value.Int {
				done[m.Key] = op.Time
			}
		}
	}
	return done
}

// notDrainedFinal is why the final read did not run when clients were still running.
const notDrainedFinal = "some clients were still running when the drain period ended"
