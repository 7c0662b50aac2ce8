package runtime

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/meridiandb/meridian/client"
	"github.com/meridiandb/meridian/proto/meridianpb"
)

// TestHangUpAbortsOpenTransactions: a client that hangs up in the middle of a transaction (a
// TCP connection closed, a gRPC stream cancelled) has it aborted at once. Left to the
// coordinator's idle timeout (ten minutes here), its intent held the key: a reader of it waited
// on the intent's undecided transaction and timed out (after 20 s).
func TestHangUpAbortsOpenTransactions(t *testing.T) {
	cfg := testConfig(t, func(text string) string {
		return strings.Replace(text, `ttl = "5ms"`, "ttl = \"5ms\"\nidle-timeout = \"10m\"", 1)
	})
	startCluster(t, cfg)
	tr, err := client.Dial(cfg.Nodes[0].Addr, append(cfg.DialOptions(), client.WithRequestTimeout(5*time.Second))...)
	if err != nil {
		t.Fatal(err)
	}
	tx := client.Open(tr).Begin(client.TxnOptions{})
	if err := tx.Put("hangup-tcp", []byte("v")); err != nil {
		t.Fatal(err)
	}
	tr.Close() // no commit, no abort: the client is gone
	stream, answers := grpcStream(t, cfg.Nodes[0].GRPCAddr, nil)
	sendAll(t, stream, &meridianpb.Request{Txn: 1, Op: meridianpb.Op_OP_PUT, Key: "hangup-grpc", Value: []byte("v")})
	if rep, err := next(answers, "put"); err != nil || rep.Code != meridianpb.Code_CODE_OK {
		t.Fatalf("put over gRPC: %v, %v", rep, err)
	}
	if err := stream.CloseSend(); err != nil { // the stream ends with nothing owed
		t.Fatal(err)
	}
	db := dial(t, cfg, 1)
	for _, key := range []string{"hangup-tcp", "hangup-grpc"} {
		done := make(chan error, 1)
		go func() {
			_, err := get(db, key)
			done <- err
		}()
		select {
		case err := <-done:
			if !errors.Is(err, client.ErrNotFound) {
				t.Fatalf("read of %s, written by a client that hung up: %v, want not found (its transaction aborted)", key, err)
			}
		case <-time.After(60 * time.Second): // a hang, not a slow read: the read needs a few round trips
			t.Fatalf("the read of %s still waits for the transaction of a client that hung up", key)
		}
	}
}
