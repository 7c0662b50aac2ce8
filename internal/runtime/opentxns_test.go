package runtime

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/meridiandb/meridian/client"
	"github.com/meridiandb/meridian/internal/runtime/frame"
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
// Likewise for aborts.
func TestOpenTxnsCommitAnswers(t *testing.T) {
	o := newOpenTxns(time.Hour)
	var posted []*wire.ClientRequest
	// Hang-ups wait this long for commits out to be answered.
	s := &Server{inbox: make(chan event, 2048), cfg: &Config{ClientTimeout: 10 * time.Millisecond}}
	pending := func() []uint64 {
		t.Helper()
		posted = posted[:0]
		s.abortOpen(7, o, s.cfg.ClientTimeout)
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
		t.Fatalf("aborted at hang-up: transactions %v, want 1 (at seq 2)", got)
	}
	if len(o.next) != 1 || len(o.ending) != 0 {
		t.Fatalf("left tracked: %d open, %d ending; want 1 and 0", len(o.next), len(o.ending))
	}
	// Aborts are answered like commits: one refused (its label not UTF-8, say) leaves the
	// transaction open, to be aborted at the hang-up (it used to be forgotten as soon as it went
	// by, and held its intents until the idle timeout); one taken ends it. An abort refused
	// while the commit before it is out does not keep a transaction the commit ends.
	o.saw(&wire.ClientRequest{Txn: 4, Seq: 0, Op: wire.OpPut, Key: "k"})
	o.saw(&wire.ClientRequest{Txn: 4, Seq: 1, Op: wire.OpAbort, Label: "\xff"})
	o.saw(&wire.ClientRequest{Txn: 5, Seq: 0, Op: wire.OpPut, Key: "k"})
	o.saw(&wire.ClientRequest{Txn: 5, Seq: 1, Op: wire.OpAbort})
	o.saw(&wire.ClientRequest{Txn: 6, Seq: 0, Op: wire.OpPut, Key: "k"})
	o.saw(&wire.ClientRequest{Txn: 6, Seq: 1, Op: wire.OpCommit})
	o.saw(&wire.ClientRequest{Txn: 6, Seq: 2, Op: wire.OpAbort})
	reply(4, 1, wire.CodeBadArgument)
	reply(5, 1, wire.CodeOK)
	reply(6, 2, wire.CodeBadArgument)
	reply(6, 1, wire.CodeOK)
	if got := pending(); !slices.Equal(got, []uint64{1, 4}) || posted[1].Seq != 2 {
		t.Fatalf("aborted at hang-up: transactions %v, want 1 and 4 (4 at seq 2)", got)
	}
	// A transaction the protocol aborted on an operation is over: the client sends nothing
	// more for it. Kept, every aborted attempt of a long-lived connection stayed tracked, and
	// was aborted again at its hang-up.
	for txn := uint64(10); txn < 1010; txn++ {
		o.saw(&wire.ClientRequest{Txn: txn, Seq: 0, Op: wire.OpPut, Key: "k"})
		reply(txn, 0, wire.CodeAborted)
	}
	if got := pending(); !slices.Equal(got, []uint64{1, 4}) {
		t.Fatalf("aborted at hang-up: %d transactions (first %v), want transactions 1 and 4 alone (the others were aborted by the protocol)", len(got), got[:min(len(got), 3)])
	}
}

// TestHangUpRightAfterPipelinedCommit: over TCP, a client sends a batch of puts and its commit
// and closes the connection at once. The commit is refused (the batch is in flight) only after
// the connection's end is seen; the hang-up must still abort the transaction, so it waits for
// the commit's answer before deciding (it used to skip the transaction as committing, and the
// batch's intents stayed until the idle timeout).
func TestHangUpRightAfterPipelinedCommit(t *testing.T) {
	cfg := testConfig(t, func(text string) string {
		text = strings.Replace(text, "scale = 0.02", "scale = 1.0", 1)
		return strings.Replace(text, `ttl = "5ms"`, "ttl = \"5ms\"\nidle-timeout = \"10m\"", 1)
	})
	startCluster(t, cfg)
	c, _, welcome := rawClient(t, cfg.Nodes[0].Addr, cfg.Name)
	var ops []wire.BatchOp
	var keys []string
	for i := range 12 { // some on primaries in other regions
		k := fmt.Sprintf("tcp-refused-commit-%d", i)
		keys = append(keys, k)
		ops = append(ops, wire.BatchOp{Op: wire.OpPut, Key: k, Value: []byte("v")})
	}
	for _, req := range []*wire.ClientRequest{{Txn: 1, Op: wire.OpBatch, Batch: ops}, {Txn: 1, Seq: 1, Op: wire.OpCommit}} {
		if err := frame.WriteMsg(c, welcome.Node, req); err != nil {
			t.Fatal(err)
		}
	}
	c.Close()
	readsFindNothing(t, dial(t, cfg, 1), keys)
}

// readsFindNothing reads keys, written by a transaction that must have been aborted, and fails
// the test unless none is found within a minute (a hang, not a slow read).
func readsFindNothing(t *testing.T, db *client.DB, keys []string) {
	t.Helper()
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
	case <-time.After(60 * time.Second):
		t.Fatal("the reads still wait for the transaction of a client that hung up")
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
	readsFindNothing(t, dial(t, cfg, 1), keys)
}

// BenchmarkAnsweredLargeReply: every reply to a client passes answered on its way; a 4 MiB
// batch answer is read for its ids only.
func BenchmarkAnsweredLargeReply(b *testing.B) {
	o := newOpenTxns(time.Hour)
	o.saw(&wire.ClientRequest{Txn: 1, Seq: 0, Op: wire.OpBatch})
	o.saw(&wire.ClientRequest{Txn: 2, Seq: 1, Op: wire.OpCommit})
	res := make([]wire.BatchResult, 64)
	for i := range res {
		res[i] = wire.BatchResult{Found: true, Value: make([]byte, 64<<10)}
	}
	payload, err := wire.Encode(&wire.ClientReply{Txn: 1, Seq: 0, Code: wire.CodeOK, Results: res})
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	for b.Loop() {
		o.answered(payload)
	}
}

// TestHangUpAbortsBeforeWaitingForCommits: one connection, two transactions on spanner
// (wound-wait, buffered writes). B read k and holds its shared lock; A, younger, put k and sent
// its commit, whose prepare waits for B's lock. The client hangs up. B, with no commit out, is
// aborted at once, which lets A's commit go on; waiting for A's answer first held B's lock a
// client timeout, and a third client's put of k timed out after 5 s.
func TestHangUpAbortsBeforeWaitingForCommits(t *testing.T) {
	cfg := testConfig(t, func(text string) string {
		text = strings.Replace(text, `protocol = "k2"`, `protocol = "spanner"`, 1)
		return strings.Replace(text, `[options.k2]`, "[options.spanner]\nidle-timeout = \"10m\"\n[options.k2]", 1)
	})
	startCluster(t, cfg)
	if err := put(dial(t, cfg, 0), "sibling", "v0"); err != nil {
		t.Fatal(err)
	}
	tr, err := client.Dial(cfg.Nodes[0].Addr, append(cfg.DialOptions(), client.WithRequestTimeout(30*time.Second))...)
	if err != nil {
		t.Fatal(err)
	}
	db := client.Open(tr)
	txB := db.Begin(client.TxnOptions{})
	if _, err := txB.Get("sibling"); err != nil {
		t.Fatal(err)
	}
	txA := db.Begin(client.TxnOptions{})
	if err := txA.Put("sibling", []byte("a")); err != nil {
		t.Fatal(err)
	}
	go func() { _ = txA.Commit() }()
	time.Sleep(500 * time.Millisecond) // A's prepare waits for B's shared lock
	tr.Close()
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- put(dial(t, cfg, 1), "sibling", "c") }()
	select {
	case err := <-done:
		if d := time.Since(start); err != nil || d > 3*time.Second {
			t.Fatalf("a third client's put took %v (%v): B's lock was held after its client hung up", d, err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("a third client's put still waits after 20 s")
	}
}

// TestOpenTxnsForgetsWhatEnded: entries go once nothing of them can be open at the coordinator.
// A transaction its client abandoned, silent past every idle timeout, is dropped when the table
// has doubled (it stayed for the connection's life); one with a commit out is kept. An aborted
// answer ends a transaction whose commit is out (the commit, then refused, kept it for ever). A
// commit repeating a number already used is the copy the coordinator drops, not an end to wait
// for (the first request's answer was taken for it, and the open transaction forgotten). A
// request numbered 2^32-1 is not tracked: no abort could follow it.
func TestOpenTxnsForgetsWhatEnded(t *testing.T) {
	reply := func(o *openTxns, txn uint64, seq uint32, code wire.Code) {
		t.Helper()
		payload, err := wire.Encode(&wire.ClientReply{Txn: txn, Seq: seq, Code: code})
		if err != nil {
			t.Fatal(err)
		}
		o.answered(payload)
	}
	o := newOpenTxns(time.Millisecond)
	o.saw(&wire.ClientRequest{Txn: 1, Seq: 0, Op: wire.OpPut, Key: "k"})
	o.saw(&wire.ClientRequest{Txn: 1, Seq: 1, Op: wire.OpCommit})
	for txn := uint64(2); txn < 60; txn++ {
		o.saw(&wire.ClientRequest{Txn: txn, Seq: 0, Op: wire.OpGet, Key: "k"}) // then abandoned
	}
	time.Sleep(20 * time.Millisecond)
	for txn := uint64(60); txn < 70; txn++ {
		o.saw(&wire.ClientRequest{Txn: txn, Seq: 0, Op: wire.OpGet, Key: "k"})
	}
	if len(o.next) >= 60 {
		t.Errorf("%d transactions tracked after the abandoned ones fell silent, want the 58 of them dropped", len(o.next))
	}
	if _, kept := o.next[1]; !kept {
		t.Error("a transaction with its commit out was dropped")
	}

	o = newOpenTxns(time.Hour)
	o.saw(&wire.ClientRequest{Txn: 1, Seq: 0, Op: wire.OpPut, Key: "k"})
	o.saw(&wire.ClientRequest{Txn: 1, Seq: 1, Op: wire.OpCommit})
	reply(o, 1, 0, wire.CodeAborted)
	reply(o, 1, 1, wire.CodeBadArgument)
	o.saw(&wire.ClientRequest{Txn: 2, Seq: 0, Op: wire.OpPut, Key: "k"})
	o.saw(&wire.ClientRequest{Txn: 2, Seq: 0, Op: wire.OpCommit}) // reuses 0: dropped by the coordinator
	reply(o, 2, 0, wire.CodeOK)                                   // the put's answer
	o.saw(&wire.ClientRequest{Txn: 3, Seq: math.MaxUint32, Op: wire.OpCommit})
	if _, open := o.next[1]; open {
		t.Error("a transaction answered aborted stayed tracked")
	}
	if _, open := o.next[2]; !open {
		t.Error("a transaction whose put was answered was forgotten: a commit copying the put's number was taken for its end")
	}
	if len(o.ending) != 0 || o.next[3] != 0 {
		t.Errorf("ends out %v, transaction 3 at %d: want none, and the request numbered 2^32-1 untracked", o.ending, o.next[3])
	}
}
