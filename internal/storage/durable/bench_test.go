package durable

import (
	"fmt"
	"sync"
	"testing"

	"github.com/meridiandb/meridian/internal/node"
)

// BenchmarkPebbleGroupCommit measures persisted (fsynced) writes per second through the
// Committer with several batches in flight, as a busy node's event loop produces them. Each
// batch is one 128-byte write; syncs/op shows how many batches one fsync carried.
func BenchmarkPebbleGroupCommit(b *testing.B) {
	for _, inflight := range []int{1, 16, 128} {
		b.Run(fmt.Sprintf("inflight=%d", inflight), func(b *testing.B) {
			p, err := OpenPebble(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close()
			c := NewCommitter(p, 0)
			slots := make(chan struct{}, inflight)
			var wg sync.WaitGroup
			val := make([]byte, 128)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				slots <- struct{}{}
				wg.Add(1)
				c.Submit([]node.Write{{Key: []byte(fmt.Sprintf("v%012d", i)), Value: val}}, func(err error) {
					if err != nil {
						b.Error(err)
					}
					<-slots
					wg.Done()
				})
			}
			wg.Wait()
			b.StopTimer()
			c.Close()
			syncs, batches := c.Stats()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "writes/s")
			b.ReportMetric(float64(batches)/float64(max(syncs, 1)), "batches/sync")
		})
	}
}
