package check

import (
	"math/rand/v2"
	"testing"
)

// BenchmarkStrictSerializable100k checks a 100,000-transaction list-append history (serial
// execution, 20 processes, concurrency in real time, failures and unknown outcomes) for strict
// serializability. The bar is under 10 s per check on the 2-core machine.
func BenchmarkStrictSerializable100k(b *testing.B) {
	ops, _ := generate(rand.New(rand.NewPCG(42, 42)), genConfig{txns: 100_000, procs: 20, keys: 64, opsPerTxn: 6, regions: 3, failPct: 5, infoPct: 1})
	b.ResetTimer()
	for b.Loop() {
		r, err := Check(ops, "strict-serializable")
		if err != nil || r.Verdict != Valid {
			b.Fatalf("verdict %v, err %v", r, err)
		}
	}
}

// BenchmarkModels100k runs every model on the same 100,000-transaction history.
func BenchmarkModels100k(b *testing.B) {
	ops, _ := generate(rand.New(rand.NewPCG(42, 42)), genConfig{txns: 100_000, procs: 20, keys: 64, opsPerTxn: 6, regions: 3, failPct: 5, infoPct: 1})
	for _, m := range Models() {
		b.Run(m, func(b *testing.B) {
			for b.Loop() {
				r, err := Check(ops, m)
				if err != nil || r.Verdict != Valid {
					b.Fatalf("verdict %v, err %v", r, err)
				}
			}
		})
	}
}
