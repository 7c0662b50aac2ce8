package mvcc

import (
	"fmt"
	"slices"
	"testing"
	"unsafe"

	"github.com/meridiandb/meridian/internal/node"
	"github.com/meridiandb/meridian/internal/storage"
	"github.com/meridiandb/meridian/internal/ts"
)

// A store holds an entry per key, millions in a paper-scale run: it must fit the 80-byte size
// class, not the 96-byte one it took with an int count between the two flags.
func TestEntrySize(t *testing.T) {
	if n := unsafe.Sizeof(entry{}); n > 80 {
		t.Fatalf("entry is %d bytes, want at most 80", n)
	}
}

// Recording a version for persistence allocates its durable key and its value, once each (the
// key was grown from nil four times, and the checksum encoded it again on the heap).
func TestRecordPutAllocations(t *testing.T) {
	s := New(Options{})
	v := Version{TS: ts.New(42), Txn: storage.TxnID(7), State: Intent, Value: []byte("value"), Meta: []byte("meta")}
	s.writes = make([]node.Write, 0, 1)
	allocs := testing.AllocsPerRun(100, func() {
		s.recordPut("warehouse/3/district/7", &v)
		s.writes = s.writes[:0]
	})
	if allocs > 2 {
		t.Fatalf("recordPut allocates %.1f times, want at most 2 (key, value)", allocs)
	}
	// The record is the one EncodeVersionKey and EncodeVersionValue describe, and decodes back.
	s.recordPut("warehouse/3/district/7", &v)
	w := s.writes[0]
	if got := EncodeVersionKey(nil, "warehouse/3/district/7", v.TS, v.Txn); string(w.Key) != string(got) {
		t.Fatalf("key %x, want %x", w.Key, got)
	}
	if got := EncodeVersionValue("warehouse/3/district/7", &v); string(w.Value) != string(got) {
		t.Fatalf("value %x, want %x", w.Value, got)
	}
	if _, dv, err := DecodeVersion(w.Key, w.Value); err != nil || string(dv.Value) != "value" || string(dv.Meta) != "meta" {
		t.Fatalf("decoded %+v, %v", dv, err)
	}
}

// Queueing a key for garbage collection allocates nothing once the queue has room
// (container/heap boxed every item).
func TestGCQueuePushAllocations(t *testing.T) {
	q := make(gcQueue, 0, 200)
	n := 0
	allocs := testing.AllocsPerRun(100, func() {
		n++
		q.push(gcItem{ts.New(int64(n * 7919 % 101)), "k"})
	})
	if allocs != 0 {
		t.Fatalf("push allocates %.1f times, want 0", allocs)
	}
	last := ts.Zero
	for len(q) > 0 {
		it := q.pop()
		if it.ts.Less(last) {
			t.Fatalf("popped %v after %v", it.ts, last)
		}
		last = it.ts
	}
}

// Preloaded rows take their entries from shared blocks: a row costs one allocation of its own
// (its version) instead of two, and the collector marks a block instead of each entry.
func TestPreloadAllocations(t *testing.T) {
	keys := make([]string, 4*preloadBlock)
	for i := range keys {
		keys[i] = fmt.Sprintf("row%05d", i)
	}
	s := New(Options{})
	s.Reserve(len(keys))
	val := []byte("value")
	i := 0
	allocs := testing.AllocsPerRun(len(keys)-1, func() {
		if err := s.Preload(keys[i], val); err != nil {
			t.Fatal(err)
		}
		i++
	})
	if allocs > 1.01 {
		t.Fatalf("Preload allocates %.2f times a row, want 1 and a block's share", allocs)
	}
	// Rows in one block are independent keys: rewriting one leaves its neighbours as they were.
	if err := s.PutCommitted(keys[1], Version{TS: ts.New(5), Txn: 9, Value: []byte("new")}); err != nil {
		t.Fatal(err)
	}
	for j, want := range []string{"value", "new", "value"} {
		if v, ok := s.Get(keys[j], ts.New(10)); !ok || string(v.Value) != want {
			t.Fatalf("%s reads %q, %v; want %q", keys[j], v.Value, ok, want)
		}
	}
}

// Keys are not queued for the key-ordered index until something first walks it; the first walk
// builds it from every key, and later keys are queued and found by the walks after.
func TestKeyOrderBuiltOnFirstWalk(t *testing.T) {
	s := New(Options{})
	s.Reserve(1000)
	put := func(from, to int) {
		for i := from; i < to; i++ {
			k := fmt.Sprintf("k%04d", i*7919%to)
			if err := s.Preload(k, []byte("v")); err != nil {
				t.Fatal(err)
			}
		}
	}
	walk := func() []string {
		var keys []string
		s.Scan("", "", ts.Max, 0, func(key string, _ Version) bool { keys = append(keys, key); return true })
		return keys
	}
	put(0, 1000)
	if cap(s.pending) != 0 {
		t.Fatalf("%d keys queued for an index nothing walked yet", len(s.pending))
	}
	keys := walk()
	if len(keys) != 1000 || !slices.IsSorted(keys) {
		t.Fatalf("first walk: %d keys, sorted %v", len(keys), slices.IsSorted(keys))
	}
	if err := s.PutCommitted("a-new", Version{TS: ts.New(5), Txn: 9, Value: []byte("w")}); err != nil {
		t.Fatal(err)
	}
	keys = walk()
	if len(keys) != 1001 || keys[0] != "a-new" || !slices.IsSorted(keys) {
		t.Fatalf("second walk: %d keys from %q, sorted %v", len(keys), keys[0], slices.IsSorted(keys))
	}
}
