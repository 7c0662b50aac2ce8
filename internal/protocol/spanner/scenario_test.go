package spanner

import (
	"fmt"
	"testing"
	"time"

	"github.com/meridiandb/meridian/internal/node"
	"github.com/meridiandb/meridian/internal/node/nodetest"
	"github.com/meridiandb/meridian/internal/protocol"
	"github.com/meridiandb/meridian/internal/storage"
	"github.com/meridiandb/meridian/internal/storage/durable"
	"github.com/meridiandb/meridian/internal/storage/locks"
	"github.com/meridiandb/meridian/internal/storage/mvcc"
	"github.com/meridiandb/meridian/internal/ts"
)

func newScriptParticipant(t *testing.T, policy locks.Policy) (*Participant, *nodetest.ScriptEnv) {
	t.Helper()
	env := &nodetest.ScriptEnv{ID: 1, Clock: int64(time.Second), Epsilon: time.Millisecond}
	c := Config{Policy: policy, CommitWait: true, IdleTimeout: 5 * time.Second, DecisionTimeout: 500 * time.Millisecond}
	return newParticipant(env, c, protocol.NewMetrics(), mvcc.New(mvcc.Options{SingleIntent: true})), env
}

// votes returns the PrepareResps among msgs, by transaction.
func votes(msgs []nodetest.Sent) map[storage.TxnID]*PrepareResp {
	out := map[storage.TxnID]*PrepareResp{}
	for _, s := range msgs {
		if r, ok := s.M.(*PrepareResp); ok {
			out[r.Txn] = r
		}
	}
	return out
}

// TestWoundAfterReadOnlyVote replays the interleaving behind a G2-item cycle found under
// wound-wait (TestStrictSerializable wound-wait/seed1/keys5 before the fix). A young
// transaction Y read key k at this participant and nothing else here; its coordinator's
// PrepareReq carries no writes, so this participant only votes yes. An older transaction O then
// asks for k exclusively and wounds Y. Y's yes vote is already on its way, and its other
// participants may vote too, so Y's coordinator can decide commit before the WoundReq arrives
// (it did in the failing run: vote sent at 1473.5 ms, WoundReq at 1476.2 ms, both arriving after
// the last write participant's vote). If the participant dropped Y's shared lock at the wound,
// O would install a write right after the version Y read while Y commits anyway: Y →rw O with
// Y's other locks still unacquired elsewhere, which closes the cycle. Once a participant has
// voted yes, only the decision may release the transaction's locks.
func TestWoundAfterReadOnlyVote(t *testing.T) {
	for _, decide := range []string{"commit", "abort"} {
		t.Run(decide, func(t *testing.T) {
			p, env := newScriptParticipant(t, locks.WoundWait)
			const key = "k"
			const yCoord, oCoord node.ID = 4, 2
			young := storage.MakeTxnID(int32(yCoord), 1)
			old := storage.MakeTxnID(int32(oCoord), 1)
			youngAge, oldAge := ts.Timestamp{Wall: 200}, ts.Timestamp{Wall: 100}

			p.onRead(yCoord, &ReadReq{Txn: young, Age: youngAge, Key: key})
			p.onPrepare(yCoord, &PrepareReq{Txn: young, Age: youngAge, Seen: 1})
			env.Flush()
			if v := votes(env.Take())[young]; v == nil || !v.OK {
				t.Fatalf("read-only participant did not vote yes: %+v", v)
			}

			env.Clock += int64(time.Millisecond)
			p.onPrepare(oCoord, &PrepareReq{Txn: old, Age: oldAge, Writes: []Write{{Key: key, Value: []byte("o")}}})
			env.Flush()
			sent := env.Take()
			wounded := false
			for _, s := range sent {
				if w, ok := s.M.(*WoundReq); ok && w.Txn == young && s.To == yCoord {
					wounded = true
				}
			}
			if !wounded {
				t.Errorf("the older writer did not wound the younger reader")
			}
			if v := votes(sent)[old]; v != nil {
				t.Fatalf("older writer voted (%+v) while the younger reader that voted yes still depends on its shared lock", v)
			}
			if holders, mode := p.locks.Holders(key); len(holders) != 1 || holders[0] != young || mode != locks.Shared {
				t.Fatalf("holders of %q = %v (%v), want the younger reader's shared lock until its decision", key, holders, mode)
			}

			commitTS := ts.Timestamp{Wall: env.Clock + int64(10*time.Millisecond), Origin: uint32(yCoord)}
			if decide == "commit" {
				p.onDecide(yCoord, &DecideReq{Txn: young, Commit: true, TS: commitTS})
			} else {
				p.onDecide(yCoord, &DecideReq{Txn: young, Commit: false})
			}
			env.Flush()
			v := votes(env.Take())[old]
			if v == nil || !v.OK {
				t.Fatalf("older writer not prepared after the reader's decision: %+v", v)
			}
			if decide == "commit" && !commitTS.Less(v.TS) {
				t.Errorf("writer prepared at %v, not above the reader's commit %v: timestamp order would contradict conflict order", v.TS, commitTS)
			}
			if p.Len() != 1 {
				t.Errorf("participant tracks %d transactions, want only the prepared writer", p.Len())
			}
		})
	}
}

// TestReadVoteSurvivesCrash: a participant that voted yes holding only read locks persists the
// vote before sending it, and after a crash takes the read locks back and asks the coordinator
// for the decision. Otherwise a writer could commit over what the transaction read while its
// coordinator still commits it at a later timestamp (an anti-dependency against timestamp
// order). Without the durable record the restarted participant would grant the writer at once.
func TestReadVoteSurvivesCrash(t *testing.T) {
	disk := durable.NewMem()
	env := &nodetest.ScriptEnv{ID: 1, Clock: int64(time.Second), Epsilon: time.Millisecond, Disk: disk}
	c := Config{Policy: locks.WoundWait, CommitWait: true, IdleTimeout: 5 * time.Second, DecisionTimeout: 500 * time.Millisecond}
	p := newParticipant(env, c, protocol.NewMetrics(), mvcc.New(mvcc.Options{SingleIntent: true}))
	const coord node.ID = 4
	reader := storage.MakeTxnID(int32(coord), 1)
	p.onRead(coord, &ReadReq{Txn: reader, Age: ts.Timestamp{Wall: 100}, Key: "a"})
	p.onRead(coord, &ReadReq{Txn: reader, Age: ts.Timestamp{Wall: 100}, Seq: 1, Seen: 1, Key: "b"})
	p.onPrepare(coord, &PrepareReq{Txn: reader, Age: ts.Timestamp{Wall: 100}, Seen: 2})
	if v := votes(env.Take())[reader]; v != nil {
		t.Fatalf("voted %+v before the vote was durable", v)
	}
	env.Flush()
	if v := votes(env.Take())[reader]; v == nil || !v.OK {
		t.Fatalf("no yes vote after the flush: %+v", v)
	}

	// Crash: the participant's memory (lock table included) is gone; the disk stays.
	env2 := &nodetest.ScriptEnv{ID: 1, Clock: env.Clock + int64(time.Second), Epsilon: time.Millisecond, Disk: disk}
	p2 := newParticipant(env2, c, protocol.NewMetrics(), mvcc.New(mvcc.Options{SingleIntent: true}))
	if err := p2.recover(disk); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"a", "b"} {
		if holders, mode := p2.locks.Holders(k); len(holders) != 1 || holders[0] != reader || mode != locks.Shared {
			t.Fatalf("after restart %q is held by %v (%v), want the voted reader's shared lock", k, holders, mode)
		}
	}
	writer := storage.MakeTxnID(2, 1)
	p2.onPrepare(2, &PrepareReq{Txn: writer, Age: ts.Timestamp{Wall: 50}, Writes: []Write{{Key: "a", Value: []byte("w")}}})
	env2.Flush()
	if v := votes(env2.Take())[writer]; v != nil {
		t.Fatalf("writer prepared over the voted reader's restored lock: %+v", v)
	}
	// The decision releases the locks and removes the record.
	p2.onStatusResp(4, &StatusResp{Txn: reader, Status: statusCommitted, TS: ts.Timestamp{Wall: env2.Clock}})
	env2.Flush()
	if v := votes(env2.Take())[writer]; v == nil || !v.OK {
		t.Fatalf("writer not prepared after the reader's decision: %+v", v)
	}
	n := 0
	if err := disk.Scan(readVotePrefix, readVoteEnd, func(_, _ []byte) bool { n++; return true }); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("%d read-vote records left after the decision", n)
	}
}

// TestCorruptReadVoteRefused: a read-vote record that does not decode stops the restart
// instead of being skipped (which would drop read locks a transaction may commit on).
func TestCorruptReadVoteRefused(t *testing.T) {
	disk := durable.NewMem()
	if err := disk.Apply([]node.Write{{Key: readVoteKey(storage.MakeTxnID(4, 1)), Value: []byte{0xff}}}); err != nil {
		t.Fatal(err)
	}
	p, _ := newScriptParticipant(t, locks.WoundWait)
	if err := p.recover(disk); err == nil {
		t.Fatal("recovered from a corrupt read-vote record")
	}
}

// TestLockTimeoutBreaksDeadlock (lock-policy=timeout): two transactions each read a key the
// other then prepares to write, so each prepare waits for the other's shared lock. Nothing else
// would end the wait; after lock-timeout the first waiter is aborted as a presumed deadlock,
// which frees its lock and lets the other prepare. Without the timer both waits last until the
// idle timeout.
func TestLockTimeoutBreaksDeadlock(t *testing.T) {
	p, env := newTimeoutParticipant(t)
	const coordA, coordB node.ID = 2, 3
	a, b := storage.MakeTxnID(int32(coordA), 1), storage.MakeTxnID(int32(coordB), 1)
	ageA, ageB := ts.Timestamp{Wall: 100}, ts.Timestamp{Wall: 200}
	p.onRead(coordA, &ReadReq{Txn: a, Age: ageA, Key: "k1"})
	p.onRead(coordB, &ReadReq{Txn: b, Age: ageB, Key: "k2"})
	p.onPrepare(coordA, &PrepareReq{Txn: a, Age: ageA, Seen: 1, Writes: []Write{{Key: "k2", Value: []byte("a")}}})
	env.Advance(time.Millisecond)
	p.onPrepare(coordB, &PrepareReq{Txn: b, Age: ageB, Seen: 1, Writes: []Write{{Key: "k1", Value: []byte("b")}}})
	env.Flush()
	if v := votes(env.Take()); len(v) != 0 {
		t.Fatalf("votes before any timeout: %+v", v)
	}

	env.Advance(p.cfg.LockTimeout - 2*time.Millisecond)
	env.Flush()
	if v := votes(env.Take()); len(v) != 0 {
		t.Fatalf("votes before the lock timeout: %+v", v)
	}
	env.Advance(time.Millisecond)
	env.Flush()
	v := votes(env.Take())
	if r := v[a]; r == nil || r.OK || r.Cause != causeLockTimeout {
		t.Fatalf("first waiter's vote after lock-timeout = %+v, want a refusal with cause %q", r, causeLockTimeout)
	}
	if r := v[b]; r == nil || !r.OK {
		t.Fatalf("second waiter's vote once the first was aborted = %+v, want yes", r)
	}
	if got := p.metrics.Counters["lock-timeouts"]; got != 1 {
		t.Errorf("lock-timeouts = %d, want 1", got)
	}
}

// TestLockTimeoutSparesGrantedWait: a wait that ends before lock-timeout is over; the
// transaction is neither aborted nor counted when the wait's deadline passes.
func TestLockTimeoutSparesGrantedWait(t *testing.T) {
	p, env := newTimeoutParticipant(t)
	const coordA, coordB node.ID = 2, 3
	a, b := storage.MakeTxnID(int32(coordA), 1), storage.MakeTxnID(int32(coordB), 1)
	ageA, ageB := ts.Timestamp{Wall: 100}, ts.Timestamp{Wall: 200}
	p.onRead(coordA, &ReadReq{Txn: a, Age: ageA, Key: "k"})
	p.onPrepare(coordB, &PrepareReq{Txn: b, Age: ageB, Writes: []Write{{Key: "k", Value: []byte("b")}}})
	env.Flush()
	env.Take()

	env.Advance(p.cfg.LockTimeout / 2)
	p.onDecide(coordA, &DecideReq{Txn: a, Commit: false})
	env.Flush()
	if r := votes(env.Take())[b]; r == nil || !r.OK {
		t.Fatalf("writer's vote once the reader aborted = %+v, want yes", r)
	}
	env.Advance(2 * p.cfg.LockTimeout)
	env.Flush()
	if r := votes(env.Take())[b]; r != nil {
		t.Fatalf("a second vote after the granted wait's timeout: %+v", r)
	}
	if got := p.metrics.Counters["lock-timeouts"]; got != 0 {
		t.Errorf("lock-timeouts = %d, want 0", got)
	}
	if p.txns[b] == nil || p.txns[b].state != partPrepared {
		t.Errorf("writer is not prepared after its timer's deadline")
	}
}

func newTimeoutParticipant(t *testing.T) (*Participant, *nodetest.ScriptEnv) {
	t.Helper()
	c, err := ParseOptions(map[string]string{"lock-policy": "timeout"})
	if err != nil {
		t.Fatal(err)
	}
	env := &nodetest.ScriptEnv{ID: 1, Clock: int64(time.Second), Epsilon: time.Millisecond}
	return newParticipant(env, c, protocol.NewMetrics(), mvcc.New(mvcc.Options{SingleIntent: true})), env
}

// TestPreparedReadLocksSurviveCrash: a participant where a transaction both read and wrote
// holds its read locks, like a read-only participant, from its yes vote to the decision — a
// crash included. Its intents bring back the exclusive locks after a restart; the read locks
// must come back too, or a writer could prepare over a key the transaction read, below the
// commit timestamp its coordinator is still free to choose (an anti-dependency against
// timestamp order: a snapshot between the two sees the writer but not the transaction).
func TestPreparedReadLocksSurviveCrash(t *testing.T) {
	disk := durable.NewMem()
	env := &nodetest.ScriptEnv{ID: 1, Clock: int64(time.Second), Epsilon: time.Millisecond, Disk: disk}
	c := Config{Policy: locks.WoundWait, CommitWait: true, IdleTimeout: 5 * time.Second, DecisionTimeout: 500 * time.Millisecond}
	p := newParticipant(env, c, protocol.NewMetrics(), mvcc.New(mvcc.Options{SingleIntent: true}))
	const coord node.ID = 4
	rmw := storage.MakeTxnID(int32(coord), 1)
	age := ts.Timestamp{Wall: 100}
	p.onRead(coord, &ReadReq{Txn: rmw, Age: age, Key: "a"})
	p.onPrepare(coord, &PrepareReq{Txn: rmw, Age: age, Seen: 1, Writes: []Write{{Key: "b", Value: []byte("t")}}})
	env.Flush()
	if v := votes(env.Take())[rmw]; v == nil || !v.OK {
		t.Fatalf("no yes vote: %+v", v)
	}

	env2 := &nodetest.ScriptEnv{ID: 1, Clock: env.Clock + int64(time.Second), Epsilon: time.Millisecond, Disk: disk}
	store, err := mvcc.Recover(disk, mvcc.Options{SingleIntent: true})
	if err != nil {
		t.Fatal(err)
	}
	p2 := newParticipant(env2, c, protocol.NewMetrics(), store)
	if err := p2.recover(disk); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]locks.Mode{"a": locks.Shared, "b": locks.Exclusive} {
		if holders, mode := p2.locks.Holders(k); len(holders) != 1 || holders[0] != rmw || mode != want {
			t.Errorf("after restart %q is held by %v (%v), want the prepared transaction's %v lock", k, holders, mode, want)
		}
	}
	writer := storage.MakeTxnID(2, 1)
	p2.onPrepare(2, &PrepareReq{Txn: writer, Age: ts.Timestamp{Wall: 50}, Writes: []Write{{Key: "a", Value: []byte("w")}}})
	env2.Flush()
	if v := votes(env2.Take())[writer]; v != nil {
		t.Fatalf("writer prepared at %v over the read lock of a prepared transaction whose commit may still come later", v.TS)
	}
	commitTS := ts.Timestamp{Wall: env2.Clock + int64(10*time.Millisecond), Origin: uint32(coord)}
	p2.onStatusResp(4, &StatusResp{Txn: rmw, Status: statusCommitted, TS: commitTS})
	env2.Flush()
	v := votes(env2.Take())[writer]
	if v == nil || !v.OK || !commitTS.Less(v.TS) {
		t.Fatalf("writer's vote after the decision = %+v, want yes above the commit at %v", v, commitTS)
	}
	n := 0
	if err := disk.Scan(readVotePrefix, readVoteEnd, func(_, _ []byte) bool { n++; return true }); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("%d read-lock records left after the decision", n)
	}
}

// TestDuplicatePrepareVotesWhenDurable: a PrepareReq the network delivers twice must not draw a
// yes vote before the prepare is durable. The coordinator may commit on the first vote it
// sees; if the participant then crashed before its flush, it would forget the intents (or read
// locks) of a transaction that commits — its writes there lost.
func TestDuplicatePrepareVotesWhenDurable(t *testing.T) {
	for _, kind := range []string{"writer", "read-only"} {
		t.Run(kind, func(t *testing.T) {
			p, env := newScriptParticipant(t, locks.WoundWait)
			const coord node.ID = 4
			id := storage.MakeTxnID(int32(coord), 1)
			age := ts.Timestamp{Wall: 100}
			p.onRead(coord, &ReadReq{Txn: id, Age: age, Key: "a"})
			prep := &PrepareReq{Txn: id, Age: age, Seen: 1}
			if kind == "writer" {
				prep.Writes = []Write{{Key: "b", Value: []byte("t")}}
			}
			env.Take()
			p.onPrepare(coord, prep)
			p.onPrepare(coord, prep)
			if v := votes(env.Take())[id]; v != nil {
				t.Fatalf("voted %+v before the prepare was durable", v)
			}
			env.Flush()
			if v := votes(env.Take())[id]; v == nil || !v.OK {
				t.Fatalf("no yes vote once durable: %+v", v)
			}
			p.onPrepare(coord, prep)
			if v := votes(env.Take())[id]; v == nil || !v.OK {
				t.Fatalf("a duplicate after the flush is not answered with the vote: %+v", v)
			}
		})
	}
}

// TestDuplicateDecideAcksWhenDurable: a commit DecideReq delivered twice must not be
// acknowledged before the commit is durable. The second copy finds nothing left to install,
// but the coordinator forgets its record once every participant acknowledged; a crash before
// the first copy's flush would then bring the intents back with nobody left to say they
// committed, and the participant, told "aborted" (presumed abort), would drop them.
func TestDuplicateDecideAcksWhenDurable(t *testing.T) {
	p, env := newScriptParticipant(t, locks.WoundWait)
	const coord node.ID = 4
	id := storage.MakeTxnID(int32(coord), 1)
	p.onPrepare(coord, &PrepareReq{Txn: id, Age: ts.Timestamp{Wall: 100}, Writes: []Write{{Key: "b", Value: []byte("t")}}})
	env.Flush()
	v := votes(env.Take())[id]
	if v == nil || !v.OK {
		t.Fatalf("no yes vote: %+v", v)
	}
	decide := &DecideReq{Txn: id, Commit: true, TS: ts.Timestamp{Wall: v.TS.Wall + 1}}
	p.onDecide(coord, decide)
	p.onDecide(coord, decide)
	for _, s := range env.Take() {
		if _, ok := s.M.(*DecideAck); ok {
			t.Fatalf("acknowledged the commit before it was durable")
		}
	}
	env.Flush()
	acks := 0
	for _, s := range env.Take() {
		if _, ok := s.M.(*DecideAck); ok {
			acks++
		}
	}
	if acks == 0 {
		t.Fatalf("no acknowledgement once the commit is durable")
	}
}

// TestDuplicateRequestIgnored: a read, eager write, batch or prepare the network delivers twice
// is one request. The second copy used to fail the "one request at a time, Seen locks held"
// check and abort the transaction here (participant-lost-locks) — about one abort in ten under
// 5% duplication — although its coordinator had sent nothing wrong. A copy of a request that
// is waiting for a lock leaves it waiting; a copy of one answered gets no second answer.
func TestDuplicateRequestIgnored(t *testing.T) {
	for _, waits := range []bool{false, true} {
		t.Run(fmt.Sprintf("waiting=%v", waits), func(t *testing.T) {
			p, env := newScriptParticipant(t, locks.WoundWait)
			const coord, other node.ID = 4, 5
			id := storage.MakeTxnID(int32(coord), 1)
			age := ts.Timestamp{Wall: 200}
			blocker := storage.MakeTxnID(int32(other), 1)
			if waits {
				// An older transaction holds "b" exclusively, so the write of "b" waits.
				p.onWrite(other, &WriteReq{Txn: blocker, Age: ts.Timestamp{Wall: 100}, Key: "b", Value: []byte("o")})
			}
			read := &ReadReq{Txn: id, Age: age, Seq: 0, Key: "a"}
			p.onRead(coord, read)
			p.onRead(coord, read)
			ops := &OpsReq{Txn: id, Age: age, Seq: 1, Seen: 1, Ops: []Op{{Key: "c"}, {Key: "b", Write: true, Value: []byte("t")}}}
			p.onOps(coord, ops)
			p.onOps(coord, ops)
			p.onRead(coord, read) // late
			for _, s := range env.Take() {
				switch m := s.M.(type) {
				case *ReadResp:
					if !m.OK {
						t.Fatalf("a copy of a request was refused: %+v", m)
					}
				case *OpsResp:
					if !m.OK {
						t.Fatalf("a copy of a request was refused: %+v", m)
					}
				}
			}
			if waits {
				p.onDecide(other, &DecideReq{Txn: blocker, Commit: false})
			}
			answers := 0
			for _, s := range env.Take() {
				if m, ok := s.M.(*OpsResp); ok && m.Txn == id && m.OK {
					answers++
				}
			}
			if !waits {
				answers = 1 // answered at once, checked above
			}
			if answers != 1 {
				t.Fatalf("the batch was answered %d times once its lock was free, want once", answers)
			}
			prep := &PrepareReq{Txn: id, Age: age, Seen: 3}
			p.onPrepare(coord, prep)
			env.Flush()
			if v := votes(env.Take())[id]; v == nil || !v.OK {
				t.Fatalf("vote after duplicated requests = %+v, want yes", v)
			}
		})
	}
}

// TestDuplicatePrepareWhileWaiting: a copy of a PrepareReq that waits for a lock leaves it
// waiting; it used to abort the transaction as if its coordinator had sent a second request.
func TestDuplicatePrepareWhileWaiting(t *testing.T) {
	p, env := newScriptParticipant(t, locks.WoundWait)
	const coord, other node.ID = 4, 5
	id, blocker := storage.MakeTxnID(int32(coord), 1), storage.MakeTxnID(int32(other), 1)
	p.onRead(other, &ReadReq{Txn: blocker, Age: ts.Timestamp{Wall: 100}, Key: "b"})
	prep := &PrepareReq{Txn: id, Age: ts.Timestamp{Wall: 200}, Writes: []Write{{Key: "b", Value: []byte("t")}}}
	p.onPrepare(coord, prep)
	p.onPrepare(coord, prep)
	env.Flush()
	if v := votes(env.Take())[id]; v != nil {
		t.Fatalf("vote while the lock is held by another: %+v", v)
	}
	p.onDecide(other, &DecideReq{Txn: blocker, Commit: false})
	env.Flush()
	if v := votes(env.Take())[id]; v == nil || !v.OK {
		t.Fatalf("vote once the lock was free = %+v, want yes", v)
	}
}

// TestPolledCommitAcknowledged: a prepared participant that learns of the commit by polling
// (its DecideReq was lost in a crash) acknowledges it once durable, like one told by a
// DecideReq. The coordinator forgets a commit record only when every participant has
// acknowledged, and sends no DecideReq again until it restarts, so without this ack the
// record, and its entry among the unacknowledged, stayed for good.
func TestPolledCommitAcknowledged(t *testing.T) {
	p, env := newScriptParticipant(t, locks.WoundWait)
	const coord node.ID = 4
	id := storage.MakeTxnID(int32(coord), 1)
	p.onPrepare(coord, &PrepareReq{Txn: id, Age: ts.Timestamp{Wall: 100}, Writes: []Write{{Key: "b", Value: []byte("t")}}})
	env.Flush()
	v := votes(env.Take())[id]
	if v == nil || !v.OK {
		t.Fatalf("no yes vote: %+v", v)
	}
	env.Advance(p.cfg.DecisionTimeout)
	polled := false
	for _, s := range env.Take() {
		if m, ok := s.M.(*StatusReq); ok && m.Txn == id && s.To == coord {
			polled = true
		}
	}
	if !polled {
		t.Fatalf("the prepared participant did not poll its coordinator")
	}
	p.onStatusResp(coord, &StatusResp{Txn: id, Status: statusCommitted, TS: ts.Timestamp{Wall: v.TS.Wall + 1}})
	for _, s := range env.Take() {
		if _, ok := s.M.(*DecideAck); ok {
			t.Fatalf("acknowledged before the commit was durable")
		}
	}
	env.Flush()
	acked := false
	for _, s := range env.Take() {
		if m, ok := s.M.(*DecideAck); ok && m.Txn == id && s.To == coord {
			acked = true
		}
	}
	if !acked {
		t.Fatalf("a commit learned by polling was never acknowledged: the coordinator keeps its record for good")
	}
}
