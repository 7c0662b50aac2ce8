package txnrec

import (
	"bytes"
	"testing"

	"github.com/meridiandb/meridian/internal/storage"
	"github.com/meridiandb/meridian/internal/storage/durable"
	"github.com/meridiandb/meridian/internal/ts"
)

// persist applies the table's pending writes to d, as a protocol's persist would.
func persist(t *testing.T, tb *Table, d *durable.Mem) {
	t.Helper()
	if err := d.Apply(tb.TakeWrites()); err != nil {
		t.Fatal(err)
	}
}

func recovered(t *testing.T, d *durable.Mem) *Table {
	t.Helper()
	tb, err := Recover(d)
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

// TestDecideWithKeepsMetaWithDecision: the metadata a holder needs after a restart (K2's
// participants) is persisted in the decision's own write, a repeated decision changes nothing,
// and a decision the other way is still refused.
func TestDecideWithKeepsMetaWithDecision(t *testing.T) {
	d := durable.NewMem()
	tb := New()
	txn := storage.MakeTxnID(3, 7)
	if _, err := tb.Create(txn, nil); err != nil {
		t.Fatal(err)
	}
	at := ts.Timestamp{Wall: 42}
	if err := tb.DecideWith(txn, Committed, at, 0, []byte("parts")); err != nil {
		t.Fatal(err)
	}
	if err := tb.DecideWith(txn, Committed, at, 0, []byte("other")); err != nil {
		t.Fatalf("deciding the same way again: %v", err)
	}
	if err := tb.DecideWith(txn, Aborted, ts.Zero, 0, nil); err == nil {
		t.Fatal("a committed transaction was decided aborted")
	}
	if err := tb.DecideWith(txn, Committed, at, 0, make([]byte, storage.MaxMetaBytes+1)); err != ErrMetaTooBig {
		t.Fatalf("oversized metadata: %v", err)
	}
	persist(t, tb, d)
	tb.Decided(txn, tb.Version(txn))
	r, ok := recovered(t, d).Get(txn)
	if !ok || r.Status != Committed || r.CommitTS != at || !bytes.Equal(r.Meta, []byte("parts")) {
		t.Fatalf("recovered %+v (found %v), want committed at %v with meta %q", r, ok, at, "parts")
	}
}

// TestForgetPersistsDeletion: a record can be forgotten only once its decision is durable and
// nobody waits on it; its deletion then reaches the disk, so a restart does not bring it back.
func TestForgetPersistsDeletion(t *testing.T) {
	d := durable.NewMem()
	tb := New()
	txn := storage.MakeTxnID(1, 1)
	if _, err := tb.Create(txn, nil); err != nil {
		t.Fatal(err)
	}
	if err := tb.Forget(txn); err == nil {
		t.Fatal("an undecided record was forgotten")
	}
	woken := 0
	if _, decided := tb.Wait(txn, func(Record) { woken++ }); decided {
		t.Fatal("an undecided record answered a waiter")
	}
	if err := tb.Decide(txn, Aborted, ts.Zero, 0); err != nil {
		t.Fatal(err)
	}
	if err := tb.Forget(txn); err == nil {
		t.Fatal("a record was forgotten before its decision was durable")
	}
	persist(t, tb, d)
	if tb.Decided(txn, tb.Version(txn)) != 1 || woken != 1 {
		t.Fatalf("%d waiters woken, want 1", woken)
	}
	if err := tb.Forget(txn); err != nil {
		t.Fatalf("forgetting a durable decision with no waiter: %v", err)
	}
	if tb.Len() != 0 {
		t.Fatalf("%d records after Forget", tb.Len())
	}
	if recovered(t, d).Len() != 1 {
		t.Fatal("the decision was not on disk before the deletion")
	}
	persist(t, tb, d)
	if n := recovered(t, d).Len(); n != 0 {
		t.Fatalf("%d records recovered after the deletion was persisted, want none", n)
	}
}

// TestCreateAdoptsPlaceholder: a waiter that overtakes a transaction's first write gets a
// placeholder, which nothing persists; the first write's Create then writes the record, so a
// crash after that write's batch is durable keeps the record (a recorder that lost it would
// refuse the transaction's commit).
func TestCreateAdoptsPlaceholder(t *testing.T) {
	d := durable.NewMem()
	tb := New()
	txn := storage.MakeTxnID(2, 5)
	if _, decided := tb.Wait(txn, func(Record) {}); decided {
		t.Fatal("a placeholder answered as decided")
	}
	persist(t, tb, d)
	if n := recovered(t, d).Len(); n != 0 {
		t.Fatalf("a placeholder reached the disk: %d records", n)
	}
	if _, err := tb.Create(txn, nil); err != nil {
		t.Fatal(err)
	}
	persist(t, tb, d)
	if r, ok := recovered(t, d).Get(txn); !ok || r.Status != InProgress {
		t.Fatalf("after Create adopted the placeholder, the disk holds %+v (found %v), want it in progress", r, ok)
	}
	if _, err := tb.Create(txn, nil); err != nil || len(tb.TakeWrites()) != 0 {
		t.Fatalf("creating an existing record again wrote something (err %v)", err)
	}
}

// TestDecidedPublishesTheStateItsPersistCarried: a decision recorded while the persist of an
// earlier state (CRDB's STAGING) is in flight is not published when that persist completes,
// only when its own does; waiters hear it then, and a persist of a forgotten record's state
// publishes nothing of the record made again since.
func TestDecidedPublishesTheStateItsPersistCarried(t *testing.T) {
	d := durable.NewMem()
	tb := New()
	txn := storage.MakeTxnID(4, 2)
	if _, err := tb.Create(txn, nil); err != nil {
		t.Fatal(err)
	}
	persist(t, tb, d)
	at := ts.Timestamp{Wall: 9}
	if err := tb.Stage(txn, at, []byte("in-flight")); err != nil {
		t.Fatal(err)
	}
	staged := tb.Version(txn)
	persist(t, tb, d) // issued: carries STAGING
	var woken []Record
	if _, decided := tb.Wait(txn, func(r Record) { woken = append(woken, r) }); decided {
		t.Fatal("a staging record answered a waiter")
	}
	if err := tb.Decide(txn, Committed, at, 0); err != nil {
		t.Fatal(err)
	}
	committed := tb.Version(txn)
	if tb.Decided(txn, staged) != 0 || len(woken) != 0 {
		t.Fatalf("the STAGING persist woke %d waiters with %+v", len(woken), woken)
	}
	if r, _ := tb.Get(txn); r.Status != Staging || r.CommitTS != at {
		t.Fatalf("after the STAGING persist the record reads %+v, want staging at %v", r, at)
	}
	persist(t, tb, d) // carries the commit
	if tb.Decided(txn, committed) != 1 || len(woken) != 1 || woken[0].Status != Committed {
		t.Fatalf("the commit's persist woke %+v, want one waiter told committed", woken)
	}
	if tb.Decided(txn, staged) != 0 {
		t.Fatal("a late completion of an older persist woke waiters")
	}
	if r, _ := tb.Get(txn); r.Status != Committed {
		t.Fatalf("an older persist's completion moved the record back to %v", r.Status)
	}

	if err := tb.Forget(txn); err != nil {
		t.Fatal(err)
	}
	if err := tb.Decide(txn, Aborted, ts.Zero, 0); err != nil { // the record made again
		t.Fatal(err)
	}
	tb.Decided(txn, committed)
	if r, _ := tb.Get(txn); r.Status != InProgress {
		t.Fatalf("the forgotten record's persist published the new record's %v", r.Status)
	}
}
