package spanner

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/meridiandb/meridian/internal/node"
	"github.com/meridiandb/meridian/internal/protocol"
	"github.com/meridiandb/meridian/internal/storage"
	"github.com/meridiandb/meridian/internal/storage/durable"
	"github.com/meridiandb/meridian/internal/storage/locks"
	"github.com/meridiandb/meridian/internal/storage/mvcc"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/ts"
	"github.com/meridiandb/meridian/internal/wire"
)

// scriptEnv is a node.Env under a test's control: the clock moves only when the test says so,
// sends are recorded, timers never fire and persists complete when the test flushes them, so
// a test can replay one exact interleaving of messages at a participant.
type scriptEnv struct {
	now      int64
	sent     []sentMsg
	persists []func()
	timers   node.TimerID
	disk     *durable.Mem // if set, persisted batches land here when the test flushes
}

type sentMsg struct {
	to node.ID
	m  wire.Msg
}

func (e *scriptEnv) Self() node.ID            { return 1 }
func (e *scriptEnv) Topology() *topo.Topology { return nil }
func (e *scriptEnv) Now() int64               { return e.now }
func (e *scriptEnv) TrueTime() ts.Interval {
	return ts.Interval{Earliest: e.now - int64(time.Millisecond), Latest: e.now + int64(time.Millisecond)}
}
func (e *scriptEnv) Send(to node.ID, m wire.Msg) { e.sent = append(e.sent, sentMsg{to, m}) }
func (e *scriptEnv) After(time.Duration, func()) node.TimerID {
	e.timers++
	return e.timers
}
func (e *scriptEnv) Cancel(node.TimerID) {}
func (e *scriptEnv) Persist(batch []node.Write, done func()) {
	e.persists = append(e.persists, func() {
		if e.disk != nil {
			if err := e.disk.Apply(batch); err != nil {
				panic(err)
			}
		}
		if done != nil {
			done()
		}
	})
}
func (e *scriptEnv) Rand() *rand.Rand     { return rand.New(rand.NewPCG(1, 2)) }
func (e *scriptEnv) Charge(time.Duration) {}
func (e *scriptEnv) flush() {
	for len(e.persists) > 0 {
		f := e.persists[0]
		e.persists = e.persists[1:]
		f()
	}
}

// take returns and forgets what was sent since the last call.
func (e *scriptEnv) take() []sentMsg {
	s := e.sent
	e.sent = nil
	return s
}

func newScriptParticipant(t *testing.T, policy locks.Policy) (*Participant, *scriptEnv) {
	t.Helper()
	env := &scriptEnv{now: int64(time.Second)}
	c := Config{Policy: policy, CommitWait: true, IdleTimeout: 5 * time.Second, DecisionTimeout: 500 * time.Millisecond}
	return newParticipant(env, c, protocol.NewMetrics(), mvcc.New(mvcc.Options{SingleIntent: true})), env
}

// votes returns the PrepareResps among msgs, by transaction.
func votes(msgs []sentMsg) map[storage.TxnID]*PrepareResp {
	out := map[storage.TxnID]*PrepareResp{}
	for _, s := range msgs {
		if r, ok := s.m.(*PrepareResp); ok {
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
			env.flush()
			if v := votes(env.take())[young]; v == nil || !v.OK {
				t.Fatalf("read-only participant did not vote yes: %+v", v)
			}

			env.now += int64(time.Millisecond)
			p.onPrepare(oCoord, &PrepareReq{Txn: old, Age: oldAge, Writes: []Write{{Key: key, Value: []byte("o")}}})
			env.flush()
			sent := env.take()
			wounded := false
			for _, s := range sent {
				if w, ok := s.m.(*WoundReq); ok && w.Txn == young && s.to == yCoord {
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

			commitTS := ts.Timestamp{Wall: env.now + int64(10*time.Millisecond), Origin: uint32(yCoord)}
			if decide == "commit" {
				p.onDecide(yCoord, &DecideReq{Txn: young, Commit: true, TS: commitTS})
			} else {
				p.onDecide(yCoord, &DecideReq{Txn: young, Commit: false})
			}
			env.flush()
			v := votes(env.take())[old]
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
	env := &scriptEnv{now: int64(time.Second), disk: disk}
	c := Config{Policy: locks.WoundWait, CommitWait: true, IdleTimeout: 5 * time.Second, DecisionTimeout: 500 * time.Millisecond}
	p := newParticipant(env, c, protocol.NewMetrics(), mvcc.New(mvcc.Options{SingleIntent: true}))
	const coord node.ID = 4
	reader := storage.MakeTxnID(int32(coord), 1)
	p.onRead(coord, &ReadReq{Txn: reader, Age: ts.Timestamp{Wall: 100}, Key: "a"})
	p.onRead(coord, &ReadReq{Txn: reader, Age: ts.Timestamp{Wall: 100}, Seen: 1, Key: "b"})
	p.onPrepare(coord, &PrepareReq{Txn: reader, Age: ts.Timestamp{Wall: 100}, Seen: 2})
	if v := votes(env.take())[reader]; v != nil {
		t.Fatalf("voted %+v before the vote was durable", v)
	}
	env.flush()
	if v := votes(env.take())[reader]; v == nil || !v.OK {
		t.Fatalf("no yes vote after the flush: %+v", v)
	}

	// Crash: the participant's memory (lock table included) is gone; the disk stays.
	env2 := &scriptEnv{now: env.now + int64(time.Second), disk: disk}
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
	env2.flush()
	if v := votes(env2.take())[writer]; v != nil {
		t.Fatalf("writer prepared over the voted reader's restored lock: %+v", v)
	}
	// The decision releases the locks and removes the record.
	p2.onStatusResp(&StatusResp{Txn: reader, Status: statusCommitted, TS: ts.Timestamp{Wall: env2.now}})
	env2.flush()
	if v := votes(env2.take())[writer]; v == nil || !v.OK {
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
