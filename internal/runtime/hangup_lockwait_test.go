package runtime

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/meridiandb/meridian/client"
	"github.com/meridiandb/meridian/proto/meridianpb"
)

// TestHangUpWhileWaitingForLockSerial: under serial, client B's first request waits for the
// lock A holds; B hangs up. Once A commits, the lock must go to the next live client, not to
// B's abandoned transaction until the idle timeout (ten minutes here).
func TestHangUpWhileWaitingForLockSerial(t *testing.T) {
	cfg := testConfig(t, func(text string) string {
		text = strings.Replace(text, `protocol = "k2"`, `protocol = "serial"`, 1)
		text = strings.Replace(text, `[options.k2]`, "[options.serial]\nidle-timeout = \"10m\"\n[options.k2]", 1)
		return text
	})
	startCluster(t, cfg)
	a := dial(t, cfg, 0)
	txA := a.Begin(client.TxnOptions{})
	if err := txA.Put("lock-a", []byte("a")); err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(cfg.Nodes[1].GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cut := context.WithCancel(context.Background())
	defer cut()
	s, err := meridianpb.NewMeridianClient(conn).Session(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Send(&meridianpb.Request{Txn: 1, Op: meridianpb.Op_OP_PUT, Key: "lock-b", Value: []byte("b")}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // B's put is queued behind A
	cut()                              // B is gone
	time.Sleep(300 * time.Millisecond) // B's hang-up abort is in
	if err := txA.Commit(); err != nil {
		t.Fatal(err)
	}
	c := dial(t, cfg, 2)
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- put(c, "lock-c", "c") }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("put of C: %v", err)
		}
		t.Logf("C's transaction took %v", time.Since(start))
	case <-time.After(30 * time.Second):
		t.Fatalf("C still waits after 30 s: the lock went to the transaction of a client that hung up")
	}
	if _, err := get(c, "lock-b"); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("read of lock-b: %v, want not found", err)
	}
}
