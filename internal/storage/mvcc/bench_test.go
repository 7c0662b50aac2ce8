package mvcc

import (
	"fmt"
	"math"
	"testing"

	"github.com/meridiandb/meridian/internal/storage"
	"github.com/meridiandb/meridian/internal/ts"
)

const benchKeys = 1 << 18

func benchKeyNames() []string {
	keys := make([]string, benchKeys)
	for i := range keys {
		keys[i] = fmt.Sprintf("user%010d", i*7919%benchKeys)
	}
	return keys
}

// BenchmarkPointRead reads the latest visible version of pseudo-random keys, each with three
// committed versions, at a timestamp between them: a cache-resident hot set and a 256k-key
// working set (the latter is bounded by memory latency, like a bare map lookup would be).
func BenchmarkPointRead(b *testing.B) {
	all := benchKeyNames()
	for _, n := range []int{1 << 12, benchKeys} {
		b.Run(fmt.Sprintf("keys=%d", n), func(b *testing.B) {
			keys := all[:n]
			s := New(Options{Volatile: true})
			val := make([]byte, 100)
			for i, k := range keys {
				for v := int64(1); v <= 3; v++ {
					if err := s.PutCommitted(k, Version{TS: ts.New(v * 10), Txn: storage.TxnID(i + 1), Value: val}); err != nil {
						b.Fatal(err)
					}
				}
			}
			at := ts.New(25)
			b.ReportAllocs()
			b.ResetTimer()
			found := 0
			for i := 0; i < b.N; i++ {
				if _, ok := s.Get(keys[(i*31)&(n-1)], at); ok {
					found++
				}
			}
			if found != b.N {
				b.Fatalf("found %d of %d", found, b.N)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "reads/s")
		})
	}
}

// BenchmarkVisibleAtWithIntents is K2's read rule on keys that also carry two intents.
func BenchmarkVisibleAtWithIntents(b *testing.B) {
	keys := benchKeyNames()[:1<<16]
	s := New(Options{Volatile: true})
	for i, k := range keys {
		_ = s.PutCommitted(k, Version{TS: ts.New(10), Txn: storage.TxnID(i + 1), Value: []byte("v")})
		_ = s.PutIntent(k, Version{TS: ts.New(20), Txn: storage.TxnID(1<<40 + i), Value: []byte("w")})
		_ = s.PutIntent(k, Version{TS: ts.New(40), Txn: storage.TxnID(1<<41 + i), Value: []byte("x")})
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s.VisibleAt(keys[i&(len(keys)-1)], ts.New(30), 0)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "reads/s")
}

// BenchmarkIntentWrite lays down and commits intents, recording the persist writes as a protocol
// would (drained every 64 operations, as a batch).
func BenchmarkIntentWrite(b *testing.B) {
	for _, single := range []bool{false, true} {
		b.Run(fmt.Sprintf("single=%v", single), func(b *testing.B) {
			keys := benchKeyNames()[:1<<16]
			s := New(Options{SingleIntent: single})
			val := make([]byte, 100)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				id := storage.TxnID(i + 1)
				k := keys[i&(len(keys)-1)]
				if err := s.PutIntent(k, Version{TS: ts.New(int64(i + 1)), Txn: id, Value: val}); err != nil {
					b.Fatal(err)
				}
				if err := s.Commit(k, id, ts.New(int64(i+1))); err != nil {
					b.Fatal(err)
				}
				if i&63 == 63 {
					s.TakeWrites()
				}
				if i&(1<<18-1) == 1<<18-1 {
					s.CollectGarbage(ts.New(int64(i)), math.MaxInt)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "intents/s")
		})
	}
}

// BenchmarkPreload installs a workload's initial rows as a runtime does before a simulation, a
// fresh store every 256k rows.
func BenchmarkPreload(b *testing.B) {
	keys := benchKeyNames()
	val := make([]byte, 100)
	var s *Store
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if i%len(keys) == 0 {
			s = New(Options{})
			s.Reserve(len(keys))
		}
		if err := s.Preload(keys[i%len(keys)], val); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBatchRead serves batches of 16 reads over a 256k-key store, as a data node serves a
// client's batch: between two reads it builds and sends the answer, a few thousand instructions
// the CPU cannot look past to the next read's cache misses. With prefetch the batch's keys are
// looked up first (Prefetch), so that their misses overlap.
func BenchmarkBatchRead(b *testing.B) {
	keys := benchKeyNames()
	s := New(Options{Volatile: true})
	val := make([]byte, 100)
	for i, k := range keys {
		if err := s.PutCommitted(k, Version{TS: ts.New(10), Txn: storage.TxnID(i + 1), Value: val}); err != nil {
			b.Fatal(err)
		}
	}
	const batch = 16
	for _, prefetch := range []bool{false, true} {
		b.Run(fmt.Sprintf("prefetch=%v", prefetch), func(b *testing.B) {
			next, at, work := 0, ts.New(20), uint64(0)
			ks := make([]string, batch)
			for b.Loop() {
				for j := range ks {
					ks[j] = keys[next]
					next = (next + 7919) % len(keys)
				}
				if prefetch {
					for _, k := range ks {
						s.Prefetch(k)
					}
				}
				for _, k := range ks {
					if !s.VisibleAt(k, at, 0).Found {
						b.Fatal("not found")
					}
					for i := range uint64(1000) {
						work = work*31 + i
					}
				}
			}
			if work == 1 {
				b.Log(work) // keeps the work from being optimized away
			}
			b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "reads/s")
		})
	}
}
