package crdb

import (
	"testing"
)

// TestLateAwaitedAbortCopyWritesNoRecord: a coordinator's proof found a write missing and
// asked the holder to abort (awaited); the holder's recovery had committed the transaction,
// answered EndCommitted, and forgot the record once the coordinator's explicit commit came. A
// copy of the awaited abort delivered late (--duplicate-delay) then wrote an ABORTED record
// for the committed transaction, persisted it and forgot it again: a forgotten committed
// transaction must never be decided anew (gc.go).
func TestLateAwaitedAbortCopyWritesNoRecord(t *testing.T) {
	g := newGCScript(t, false)
	w := g.stageAndRecover()
	abort := &EndTxnReq{Req: 3, Txn: g.txn, Status: EndAbort}
	g.deliver(g.c, abort) // answered EndCommitted (TestAbortAfterRecoveryAnswersCommitted)
	g.deliver(g.c, &EndTxnReq{Txn: g.txn, Status: EndCommit, TS: w.WrittenTS})
	if n := g.n.recordsKept() + len(g.n.recState); n != 0 {
		t.Fatalf("%d records or states once the coordinator's explicit commit came, want none: the scene is not set", n)
	}
	g.n.Handle(g.c, abort) // the late copy
	if r, ok := g.n.recs.Get(g.txn); ok {
		t.Errorf("a late copy of the awaited abort of a committed, forgotten transaction wrote a record for it (durable status %v)", r.Status)
	}
	g.settle()
	if f := g.n.m.Counters["record/forgotten"]; f != 1 {
		t.Errorf("the record was forgotten %d times, want once", f)
	}
}
