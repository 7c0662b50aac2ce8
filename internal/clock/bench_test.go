package clock

import (
	"testing"
)

// BenchmarkK2TB measures timestamps per second per core of the K2-TB client state machine alone
// (the oracle round trip is modelled as free: network cost is measured by the simulator and the
// real runtime). "batched" fetches a new batch only when the current one is exhausted or expired;
// "strawman" must start a request and install its reply for every timestamp.
func BenchmarkK2TB(b *testing.B) {
	for _, tc := range []struct {
		name     string
		batching bool
	}{{"batched", true}, {"strawman", false}} {
		b.Run(tc.name, func(b *testing.B) {
			cfg := K2BatcherConfig(1)
			cfg.Batching = tc.batching
			bt, err := NewBatcher(cfg)
			if err != nil {
				b.Fatal(err)
			}
			// The local clock advances 1 ns per timestamp, so batches end both by exhaustion and,
			// when the clock outruns them, by expiry.
			local := int64(0)
			up := int64(1 << 40)
			b.ReportAllocs()
			for b.Loop() {
				local++
				if _, _, ok := bt.Take(local, local); ok {
					continue
				}
				req := bt.StartRequest(local)
				up += int64(cfg.TTL)
				bt.OnReply(local, &TSBatchReply{ReqID: req.ReqID, Low: up - 2*int64(cfg.Epsilon), Up: up})
				if _, _, ok := bt.Take(local, local); !ok {
					b.Fatal("fresh batch unusable")
				}
			}
			b.ReportMetric(float64(bt.Stats().Taken)/b.Elapsed().Seconds(), "ts/s")
			b.ReportMetric(float64(bt.Stats().Requests)/float64(bt.Stats().Taken), "requests/ts")
		})
	}
}
