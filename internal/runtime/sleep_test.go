package runtime

import (
	"testing"
	"time"
)

// BenchmarkEmulatedHopWait measures how long a link's wait for a 100µs emulated hop (one way
// inside a region at Table 1's 0.2 ms round trip) really takes, on a Go timer and with
// sleepPrecisely: `go test ./internal/runtime -run NONE -bench EmulatedHopWait`. ns/op is the
// wait as taken.
func BenchmarkEmulatedHopWait(b *testing.B) {
	const hop = 100 * time.Microsecond
	b.Run("timer", func(b *testing.B) {
		t := time.NewTimer(time.Hour)
		defer t.Stop()
		for i := 0; i < b.N; i++ {
			t.Reset(hop)
			<-t.C
		}
	})
	b.Run("precise", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			sleepPrecisely(hop)
		}
	})
}
