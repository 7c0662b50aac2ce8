package k2

import (
	"testing"
	"time"

	"github.com/meridiandb/meridian/internal/clock"
	"github.com/meridiandb/meridian/internal/protocol/prototest"
	"github.com/meridiandb/meridian/internal/storage/durable"
	"github.com/meridiandb/meridian/internal/ts"
	"github.com/meridiandb/meridian/internal/wire"
)

// TestTimestampsUniqueAcrossRestart: a coordinator hands a transaction a timestamp, crashes, and
// its next life's oracle answers with the same reading (a failover to an oracle whose clock is
// behind, within ε, can do this). One life's Batcher never repeats itself, but the new life's
// Batcher starts afresh; without the life in the timestamp's issuer id the two transactions got
// the very same timestamp, and each would see the other's writes.
func TestTimestampsUniqueAcrossRestart(t *testing.T) {
	tp, c := scriptDeployment(t, nil)
	disk := durable.NewMem()
	self := tp.DataNodes(0)[0]
	client := tp.DataNodes(1)[0] // any sender: the node takes it for a client
	key := prototest.KeysOn(t, tp, tp.DataNodes(2)[0], "uniq", 1)[0]
	const up = int64(5 * time.Second)

	// life starts the node on disk, begins a transaction with a read, answers the oracle
	// request with reading up, and returns the transaction's timestamp.
	life := func() ts.Timestamp {
		t.Helper()
		n, env := nodeOnDisk(t, tp, self, c, disk, up)
		env.Flush()
		n.Handle(client, &wire.ClientRequest{Txn: 1, Op: wire.OpGet, Key: key})
		for _, s := range env.Take() {
			if r, ok := s.M.(*clock.TSBatchRequest); ok && r.ReqID&recoverReqID == 0 {
				n.Handle(s.To, &clock.TSBatchReply{ReqID: r.ReqID, Low: up - 2*int64(c.epsilon), Up: up})
			}
		}
		if len(n.txns) != 1 {
			t.Fatalf("coordinating %d transactions, want 1", len(n.txns))
		}
		for _, txn := range n.txns {
			if txn.ts == ts.Zero {
				t.Fatal("the transaction got no timestamp from the oracle's reading")
			}
			return txn.ts
		}
		panic("unreachable")
	}
	first, second := life(), life()
	if first == second {
		t.Fatalf("the restarted coordinator handed out %v again", second)
	}
}
