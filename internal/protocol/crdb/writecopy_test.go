package crdb

import (
	"fmt"
	"testing"

	"github.com/meridiandb/meridian/internal/storage"
	"github.com/meridiandb/meridian/internal/storage/mvcc"
	"github.com/meridiandb/meridian/internal/ts"
	"github.com/meridiandb/meridian/internal/wire"
)

// writeAnswer delivers a write from the script's coordinator and returns its answer, if the
// leaseholder gave one.
func (g *gcScript) writeAnswer(w *WriteReq) *WriteResp {
	g.t.Helper()
	for _, s := range g.deliver(g.c, w) {
		if r, ok := s.M.(*WriteResp); ok && s.To == g.c && r.Req == w.Req {
			return r
		}
	}
	return nil
}

// versionsOf describes txn's versions of key at the script's holder: its intent's value, if any,
// and its committed versions' values.
func (g *gcScript) versionsOf(key string) (intent string, hasIntent bool, committed []string) {
	for _, v := range g.n.store.Versions(key) {
		if v.Txn != g.txn {
			continue
		}
		switch v.State {
		case mvcc.Intent:
			intent, hasIntent = string(v.Value), true
		case mvcc.Committed:
			committed = append(committed, string(v.Value))
		}
	}
	return intent, hasIntent, committed
}

// TestWriteCopies: the network may deliver a write twice, the copy late (after later messages of
// the same coordinator), and a coordinator sends a request again when its answer is overdue. A
// transaction writes key k twice (1, then 2). A copy of the first write arriving after the second
// must not put 1 back: the transaction would commit 1, a value its client overwrote. A copy
// arriving once the transaction has committed and its intent is resolved must not lay a new
// intent, which no resolution would ever come for: every request on k would wait on it until a
// push found the transaction decided, and committing it again clashes with the committed
// version, so the push never cleared it. A copy of a write whose intent is in place must not
// move it either, and is answered with where it stands.
func TestWriteCopies(t *testing.T) {
	g := newGCScript(t, false)
	meta := TxnMeta{ID: g.txn, Age: g.at, RecordNode: g.n.self, Coord: g.c}
	first := &WriteReq{Req: 1, Txn: meta, Key: g.kh, Value: []byte("1"), WriteTS: g.at, CreateRecord: true}
	second := &WriteReq{Req: 2, Txn: meta, Key: g.kh, Value: []byte("2"), WriteTS: g.at}
	r := g.writeAnswer(first)
	if r == nil || r.Aborted {
		t.Fatalf("first write answered %+v", r)
	}
	at := r.WrittenTS
	g.writeAnswer(second)
	r = g.writeAnswer(first) // the late copy
	if v, _, _ := g.versionsOf(g.kh); v != "2" {
		t.Fatalf("after a late copy of the first write the intent holds %q, want 2 (the second write's)", v)
	}
	if r == nil || r.WrittenTS != at {
		t.Errorf("a copy of a write whose intent is in place answered %+v, want written at %v", r, at)
	}
	// A reader pushes the intent up; a copy of the second write must leave it there.
	pushed := at.Next().Next()
	g.n.moveIntent(g.kh, g.txn, pushed)
	if r := g.writeAnswer(second); r == nil || r.WrittenTS != pushed {
		t.Errorf("a copy of the write after its intent was pushed answered %+v, want written at the pushed %v", r, pushed)
	}

	commitTS := ts.Timestamp{Wall: pushed.Wall + 10, Origin: pushed.Origin}
	g.deliver(g.c, &ResolveReq{Txn: g.txn, Keys: []string{g.kh}, Commit: true, TS: commitTS, Record: g.n.self})
	g.writeAnswer(second)
	g.writeAnswer(first)
	if v, has, committed := g.versionsOf(g.kh); has || len(committed) != 1 || committed[0] != "2" {
		t.Fatalf("copies after the commit: intent %v (%q), committed %q; want no intent and 2 committed", has, v, committed)
	}
	if keys := g.n.store.IntentKeys(g.txn); len(keys) != 0 {
		t.Fatalf("the committed transaction holds intents again, on %q", keys)
	}
}

// TestLateCopiesReopenNoRecord: a transaction's record is forgotten once it committed and every
// leaseholder acknowledged, or once its coordinator rolled it back. A copy of one of its
// heartbeats the network delivers late, or of the rollback's EndAbort, must not bring the record
// back: the heartbeat created it PENDING, persisted it, and the holder then asked the coordinator
// about it an expiry later and aborted it (a committed transaction's record saying aborted); the
// EndAbort decided it aborted again, with a write and a delete on disk, and forgot it again.
func TestLateCopiesReopenNoRecord(t *testing.T) {
	for _, committed := range []bool{true, false} {
		t.Run(fmt.Sprintf("committed=%v", committed), func(t *testing.T) {
			g := newGCScript(t, false)
			meta := TxnMeta{ID: g.txn, Age: g.at, RecordNode: g.n.self, Coord: g.c}
			var late []wire.Msg
			if committed {
				g.commit()
				g.deliver(g.l, &Resolved{Txns: []storage.TxnID{g.txn}})
			} else {
				g.writeAnswer(&WriteReq{Req: 1, Txn: meta, Key: g.kh, Value: []byte("v"), WriteTS: g.at, CreateRecord: true})
				abort := &EndTxnReq{Txn: g.txn, Status: EndAbort}
				g.deliver(g.c, abort)
				g.deliver(g.c, &ResolveReq{Txn: g.txn, Keys: []string{g.kh}, Record: g.n.self})
				late = append(late, abort)
			}
			if n, d := g.n.recordsKept()+len(g.n.recState), g.onDisk(); n != 0 || d != 0 {
				t.Fatalf("ended: %d records or states, %d on disk; want none", n, d)
			}
			late = append(late, &HeartbeatReq{Txn: g.txn, Key: g.kh})
			forgotten := g.n.m.Counters["record/forgotten"]
			for _, m := range late {
				g.deliver(g.c, m)
				if n, d := g.n.recordsKept()+len(g.n.recState), g.onDisk(); n != 0 || d != 0 {
					t.Fatalf("after a late %T: %d records or states, %d on disk; want none", m, n, d)
				}
				if f := g.n.m.Counters["record/forgotten"]; f != forgotten {
					t.Fatalf("after a late %T the record was forgotten again (%d times in all): it was re-opened", m, f)
				}
			}
		})
	}
}
