package spanner

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/meridiandb/meridian/internal/node"
	"github.com/meridiandb/meridian/internal/protocol"
	"github.com/meridiandb/meridian/internal/storage"
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
func (e *scriptEnv) Persist(_ []node.Write, done func()) {
	if done != nil {
		e.persists = append(e.persists, done)
	}
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
