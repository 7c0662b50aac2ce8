package spanner

import (
	"testing"

	"github.com/meridiandb/meridian/internal/node"
	"github.com/meridiandb/meridian/internal/storage"
	"github.com/meridiandb/meridian/internal/storage/locks"
	"github.com/meridiandb/meridian/internal/ts"
)

// TestOlderReaderNotPassedByYoungerUpgrade plays at a participant the schedule in which the
// lock table let a younger transaction's upgrade go ahead of an older waiter with no wound
// (locks' TestPolicyModel, wound-wait with lazy aborts): Y holds a read lock on k, a younger Z's
// prepare waits to write k, and an older O's read queues behind Z. Here the schedule stops
// short: O wounds Z, the participant aborts Z in the same step, and O's read is granted beside
// Y's before Y's prepare asks to upgrade, so Y waits for O, younger for older, as wound-wait
// wants. This is why Spanner never met the table's defect; the table now refuses such an
// upgrade itself, for protocols that deal wounds later.
func TestOlderReaderNotPassedByYoungerUpgrade(t *testing.T) {
	p, env := newScriptParticipant(t, locks.WoundWait)
	const key = "k"
	const oCoord, yCoord, zCoord node.ID = 2, 4, 5
	old, young, younger := storage.MakeTxnID(int32(oCoord), 1), storage.MakeTxnID(int32(yCoord), 1), storage.MakeTxnID(int32(zCoord), 1)
	oAge, yAge, zAge := ts.Timestamp{Wall: 100}, ts.Timestamp{Wall: 200}, ts.Timestamp{Wall: 300}

	p.onRead(yCoord, &ReadReq{Txn: young, Age: yAge, Key: key})
	p.onPrepare(zCoord, &PrepareReq{Txn: younger, Age: zAge, Writes: []Write{{Key: key, Value: []byte("z")}}})
	if w := p.locks.Waiters(key); len(w) != 1 || w[0] != younger {
		t.Fatalf("waiters of %q = %v, want Z's prepare", key, w)
	}
	env.Take()

	p.onRead(oCoord, &ReadReq{Txn: old, Age: oAge, Key: key})
	sent := env.Take()
	if to, ok := wounds(sent)[younger]; !ok || to != zCoord {
		t.Fatalf("O did not wound Z: %v", sent)
	}
	if v := votes(sent)[younger]; v == nil || v.OK || v.Cause != causeWoundWait {
		t.Fatalf("Z's prepare answered %+v, want refused with cause %s", v, causeWoundWait)
	}
	granted := false
	for _, s := range sent {
		if r, ok := s.M.(*ReadResp); ok && r.Txn == old && r.OK {
			granted = true
		}
	}
	if !granted {
		t.Fatalf("O's read not granted once the wounded Z left: %v", sent)
	}

	p.onPrepare(yCoord, &PrepareReq{Txn: young, Age: yAge, Seen: 1, Writes: []Write{{Key: key, Value: []byte("y")}}})
	env.Flush()
	sent = env.Take()
	if len(wounds(sent)) > 0 || votes(sent)[young] != nil {
		t.Fatalf("Y's upgrade past O's read lock: %v, want it to wait without wounding", sent)
	}
	if w := p.locks.Waiters(key); len(w) != 1 || w[0] != young {
		t.Fatalf("waiters of %q = %v, want Y's upgrade", key, w)
	}

	p.onDecide(oCoord, &DecideReq{Txn: old, Commit: false})
	env.Flush()
	if v := votes(env.Take())[young]; v == nil || !v.OK {
		t.Fatalf("Y's prepare after O left: %+v, want a yes vote", v)
	}
}
