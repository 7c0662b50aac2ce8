package runtime

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/meridiandb/meridian/client"
	"github.com/meridiandb/meridian/internal/wire"
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

// TestOpenTxnsCommitAnswers: a transaction whose commit is out is not aborted at a hang-up; one
// whose commit was refused is again (with the number after the commit's), one whose commit was
// answered otherwise is forgotten, and an answer to another request of it changes nothing.
func TestOpenTxnsCommitAnswers(t *testing.T) {
	o := newOpenTxns()
	var posted []*wire.ClientRequest
	s := &Server{inbox: make(chan event, 16)}
	pending := func() []uint64 {
		t.Helper()
		posted = posted[:0]
		s.abortOpen(7, o)
		for len(s.inbox) > 0 {
			posted = append(posted, (<-s.inbox).msg.(*wire.ClientRequest))
		}
		var txns []uint64
		for _, m := range posted {
			txns = append(txns, m.Txn)
		}
		return txns
	}
	reply := func(txn uint64, seq uint32, code wire.Code) {
		t.Helper()
		payload, err := wire.Encode(&wire.ClientReply{Txn: txn, Seq: seq, Code: code})
		if err != nil {
			t.Fatal(err)
		}
		o.answered(payload)
	}
	for txn := uint64(1); txn <= 3; txn++ {
		o.saw(&wire.ClientRequest{Txn: txn, Seq: 0, Op: wire.OpPut, Key: "k"})
		o.saw(&wire.ClientRequest{Txn: txn, Seq: 1, Op: wire.OpCommit})
	}
	if got := pending(); len(got) != 0 {
		t.Fatalf("transactions with their commits out were aborted: %v", got)
	}
	reply(1, 0, wire.CodeBadArgument) // the put's answer, not the commit's
	reply(1, 1, wire.CodeBadArgument) // the commit refused: sent before the put's answer
	reply(2, 1, wire.CodeOK)
	reply(3, 1, wire.CodeUnknown)
	if got := pending(); !slices.Equal(got, []uint64{1}) || posted[0].Seq != 2 {
		t.Fatalf("aborted at hang-up: %+v, want transaction 1 at seq 2", posted)
	}
	if len(o.next) != 1 || len(o.committing) != 0 {
		t.Fatalf("left tracked: %d open, %d committing; want 1 and 0", len(o.next), len(o.committing))
	}
}

// TestHangUpAfterRefusedCommit: a gRPC client pipelines a batch of puts and its commit; the
// commit is refused (the batch is in flight, a WAN round trip away) and the client ends the
// stream. The transaction is open at the coordinator with the batch's intents, and must be
// aborted at the hang-up like any other open one: counted as ended because its commit went by,
// it held its intents until the coordinator's idle timeout (ten minutes here), and a reader
// of its keys timed out.
func TestHangUpAfterRefusedCommit(t *testing.T) {
	cfg := testConfig(t, func(text string) string {
		text = strings.Replace(text, "scale = 0.02", "scale = 1.0", 1)
		return strings.Replace(text, `ttl = "5ms"`, "ttl = \"5ms\"\nidle-timeout = \"10m\"", 1)
	})
	startCluster(t, cfg)
	stream, answers := grpcStream(t, cfg.Nodes[0].GRPCAddr, nil)
	var ops []*meridianpb.BatchOp
	var keys []string
	for i := range 12 { // some on primaries in other regions
		k := fmt.Sprintf("refused-commit-%d", i)
		keys = append(keys, k)
		ops = append(ops, &meridianpb.BatchOp{Op: meridianpb.Op_OP_PUT, Key: k, Value: []byte("v")})
	}
	sendAll(t, stream, &meridianpb.Request{Txn: 1, Op: meridianpb.Op_OP_BATCH, Batch: ops},
		&meridianpb.Request{Txn: 1, Seq: 1, Op: meridianpb.Op_OP_COMMIT})
	for range 2 {
		rep, err := next(answers, "answer")
		if err != nil {
			t.Fatal(err)
		}
		if rep.Seq == 1 && rep.Code != meridianpb.Code_CODE_BAD_ARGUMENT {
			t.Fatalf("the pipelined commit was answered %v (%s), want a refusal", rep.Code, rep.Error)
		}
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := next(answers, "end"); err == nil {
		t.Fatal("the stream did not end")
	}
	db := dial(t, cfg, 1)
	done := make(chan error, 1)
	go func() {
		for _, k := range keys {
			if _, err := get(db, k); !errors.Is(err, client.ErrNotFound) {
				done <- fmt.Errorf("read of %s: %v, want not found (its transaction aborted)", k, err)
				return
			}
		}
		done <- nil
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(60 * time.Second): // a hang, not a slow read
		t.Fatal("the reads still wait for the transaction of a client that hung up after a refused commit")
	}
}
