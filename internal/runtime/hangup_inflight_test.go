package runtime

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/meridiandb/meridian/internal/protocol"
	"github.com/meridiandb/meridian/proto/meridianpb"
)

// rawStream opens a gRPC session the test can cut at once (the client process gone).
func rawStream(t *testing.T, addr string) (meridianpb.Meridian_SessionClient, func()) {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s, err := meridianpb.NewMeridianClient(conn).Session(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cut := func() { cancel(); conn.Close() }
	t.Cleanup(cut)
	return s, cut
}

// TestHangUpWhileRequestInFlightK2: a client hangs up while a put of its transaction is out at
// the data nodes (real latencies, so the put takes a round trip across regions). The hang-up's
// abort reaches k2's coordinator while the put is in flight; a reader of the keys must not wait
// for the coordinator's idle timeout (ten minutes here).
func TestHangUpWhileRequestInFlightK2(t *testing.T) {
	cfg := testConfig(t, func(text string) string {
		text = strings.Replace(text, "scale = 0.02", "scale = 1.0", 1)
		return strings.Replace(text, `ttl = "5ms"`, "ttl = \"5ms\"\nidle-timeout = \"10m\"", 1)
	})
	servers := startCluster(t, cfg)
	s, cut := rawStream(t, cfg.Nodes[0].GRPCAddr)
	var ops []*meridianpb.BatchOp
	var keys []string
	for i := range 12 {
		k := fmt.Sprintf("inflight-%d", i)
		keys = append(keys, k)
		ops = append(ops, &meridianpb.BatchOp{Op: meridianpb.Op_OP_PUT, Key: k, Value: []byte("v")})
	}
	if err := s.Send(&meridianpb.Request{Txn: 1, Op: meridianpb.Op_OP_BATCH, Batch: ops}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Millisecond) // the put is taken on, far from answered (round trips of 30-70 ms)
	cut()
	time.Sleep(time.Second) // the put done meanwhile: its intents are laid, nothing reads them first
	start := time.Now()
	readsFindNothing(t, dial(t, cfg, 1), keys)
	t.Logf("reads done in %v", time.Since(start))
	CloseAll(servers)
	t.Logf("sh-1 counters: %v", servers[0].Handler().(protocol.MetricsSource).Metrics().Counters)
}
