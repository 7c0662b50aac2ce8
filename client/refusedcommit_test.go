package client

import (
	"bufio"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meridiandb/meridian/internal/runtime/frame"
	"github.com/meridiandb/meridian/internal/wire"
)

// scriptedNode is a fake node that answers each client request with answer's reply, counting
// the commits and aborts it was sent.
func scriptedNode(t *testing.T, commits, aborts *atomic.Int32, answer func(*wire.ClientRequest) *wire.ClientReply) string {
	return fakeNode(t, func(c net.Conn, r *bufio.Reader) {
		for {
			_, p, err := frame.Read(r)
			if err != nil {
				return
			}
			m, err := wire.Decode(p)
			if err != nil {
				return
			}
			req := m.(*wire.ClientRequest)
			switch req.Op {
			case wire.OpCommit:
				commits.Add(1)
			case wire.OpAbort:
				aborts.Add(1)
			}
			_ = frame.WriteMsg(c, 0, answer(req))
		}
	})
}

// A commit the coordinator refuses (bad argument, unavailable) leaves the transaction open
// there, so RunTxn's abort must go out: the refusal marked it ended and the abort was never
// sent, and the transaction kept its locks until the coordinator's idle timeout (review).
func TestRefusedCommitIsAborted(t *testing.T) {
	for _, code := range []wire.Code{wire.CodeBadArgument, wire.CodeUnavailable} {
		var commits, aborts atomic.Int32
		addr := scriptedNode(t, &commits, &aborts, func(req *wire.ClientRequest) *wire.ClientReply {
			rep := &wire.ClientReply{Txn: req.Txn, Seq: req.Seq, Code: wire.CodeOK}
			if req.Op == wire.OpCommit {
				rep.Code, rep.Error = code, "refused"
			}
			return rep
		})
		tr, err := Dial(addr, WithRequestTimeout(5*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		err = RunTxn(Open(tr), TxnOptions{}, func(tx *Txn) error { return tx.Put("k", []byte("v")) })
		tr.Close()
		if err == nil || commits.Load() != 1 || aborts.Load() != 1 {
			t.Errorf("commit refused with code %d: RunTxn %v, %d commits and %d aborts sent; want an error, 1 and 1", code, err, commits.Load(), aborts.Load())
		}
	}
}

// RunTxn says when it gave up because every attempt aborted, and the abort stays readable.
func TestRunTxnSaysItGaveUp(t *testing.T) {
	var commits, aborts atomic.Int32
	addr := scriptedNode(t, &commits, &aborts, func(req *wire.ClientRequest) *wire.ClientReply {
		rep := &wire.ClientReply{Txn: req.Txn, Seq: req.Seq, Code: wire.CodeOK}
		if req.Op == wire.OpCommit {
			rep.Code, rep.Cause = wire.CodeAborted, "test"
		}
		return rep
	})
	tr, err := Dial(addr, WithRequestTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	err = RunTxnWith(Open(tr), TxnOptions{}, RetryPolicy{MaxAttempts: 3, BaseBackoff: time.Microsecond}, func(tx *Txn) error {
		return tx.Put("k", []byte("v"))
	})
	var abort *AbortError
	if err == nil || !strings.Contains(err.Error(), "gave up after 3 attempts") || !errors.As(err, &abort) || commits.Load() != 3 {
		t.Errorf("RunTxn: %v after %d commits; want \"gave up after 3 attempts\" wrapping the abort, after 3", err, commits.Load())
	}
}
