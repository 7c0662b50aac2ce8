package k2

import (
	"testing"
	"time"

	"github.com/meridiandb/meridian/internal/node/nodetest"
	"github.com/meridiandb/meridian/internal/protocol/prototest"
	"github.com/meridiandb/meridian/internal/storage"
	"github.com/meridiandb/meridian/internal/storage/durable"
	"github.com/meridiandb/meridian/internal/storage/txnrec"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/ts"
)

// A transaction the recorder aborted on its lease and then forgot (its coordinator's AbortReq)
// stays aborted when a PUSHWS makes a placeholder for it and a late copy of its CommitReq
// arrives (sim --duplicate): the copy committed the placeholder, and answered the pusher
// "committed" (review: 8 of 10,000 seeds of a heavy-fault sweep flipped a transaction so).
func TestLateCommitCopyDoesNotCommitAPlaceholder(t *testing.T) {
	n, env := newScriptNode(t, nil)
	tp := env.Topo
	coord, part := tp.DataNodes(1)[0], tp.DataNodes(2)[0]
	k := prototest.KeysOn(t, tp, n.self, "late", 1)
	x := storage.MakeTxnID(int32(coord), 1<<32|7)
	at := ts.Timestamp{Wall: env.Clock, Origin: uint32(coord)}
	n.Handle(coord, &WriteReq{ReqID: 1, Txn: x, TS: at, Key: k[0], Value: []byte("x"), Recorder: n.self, CreateRecord: true, WSeq: 1})
	env.Flush()
	env.Take()
	env.Advance(n.cfg.lease + n.cfg.lease/2) // no heartbeat: the lease runs out
	env.Flush()
	env.Take()
	if r, _ := n.recs.Get(x); r.Status != txnrec.Aborted {
		t.Fatalf("record %v, want aborted on its lease", r.Status)
	}
	commit := &CommitReq{ReqID: 9, Txn: x, TS: at, Participants: []topo.NodeID{coord, part, n.self}}
	n.Handle(coord, commit)
	n.Handle(coord, &AbortReq{Txn: x})
	env.Flush()
	env.Take()
	if _, ok := n.recs.Get(x); ok {
		t.Fatal("the ended, aborted record is still held")
	}
	n.Handle(part, &PushReq{Txn: x}) // a participant still holding X's intent
	env.Flush()
	env.Take()
	late := *commit
	n.Handle(coord, &late)
	env.Flush()
	for _, s := range env.Take() {
		switch m := s.M.(type) {
		case *CommitResp:
			if m.Committed {
				t.Error("the late CommitReq copy was answered committed")
			}
		case *PushResp:
			if m.Committed {
				t.Error("the PUSHWS was answered committed")
			}
		}
	}
	if r, _ := n.recs.Get(x); r.Status == txnrec.Committed {
		t.Error("the recorder holds X committed after aborting it and telling its coordinator so")
	}
}

// The same, end to end at a participant whose abort finalization was lost: a reader there meets
// X's intent, pushes the recorder, and must not read X's write, which X's client was told
// aborted (G1a).
func TestLateCommitCopyLeaksNoAbortedWrite(t *testing.T) {
	r, renv := newScriptNode(t, nil)
	tp := renv.Topo
	coord, pid, reader := tp.DataNodes(1)[0], tp.DataNodes(2)[0], tp.DataNodes(3)[0]
	penv := &nodetest.ScriptEnv{ID: pid, Topo: tp, Clock: renv.Clock, Epsilon: 100 * time.Microsecond}
	c, err := parseConfig(100*time.Microsecond, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	p, err := newNode(penv, durable.NewMem(), c)
	if err != nil {
		t.Fatal(err)
	}
	penv.Flush()
	kr := prototest.KeysOn(t, tp, r.self, "rk", 1)[0]
	kp := prototest.KeysOn(t, tp, pid, "pk", 1)[0]
	x := storage.MakeTxnID(int32(coord), 1<<32|7)
	at := ts.Timestamp{Wall: renv.Clock, Origin: uint32(coord)}
	r.Handle(coord, &WriteReq{ReqID: 1, Txn: x, TS: at, Key: kr, Value: []byte("x"), Recorder: r.self, CreateRecord: true, WSeq: 1})
	p.Handle(coord, &WriteReq{ReqID: 2, Txn: x, TS: at, Key: kp, Value: []byte("x-at-p"), Recorder: r.self, WSeq: 2})
	renv.Flush()
	penv.Flush()
	renv.Take()
	penv.Take()
	renv.Advance(r.cfg.lease + r.cfg.lease/2) // heartbeats cut off: X aborts on its lease
	renv.Flush()
	renv.Take()
	commit := &CommitReq{ReqID: 9, Txn: x, TS: at, Participants: []topo.NodeID{r.self, pid}}
	r.Handle(coord, commit)
	// The coordinator aborts X; its abort finalization reaches the recorder, not P.
	r.Handle(coord, &AbortReq{Txn: x})
	r.Handle(coord, &FinalizeReq{Txn: x, Commit: false, TS: at, Recorder: r.self})
	renv.Flush()
	renv.Take()
	rts := ts.Timestamp{Wall: renv.Clock + int64(time.Millisecond), Origin: uint32(reader)}
	p.Handle(reader, &ReadReq{ReqID: 50, Txn: storage.MakeTxnID(int32(reader), 1<<32|1), TS: rts, Key: kp})
	penv.Flush()
	var push *PushReq
	for _, s := range penv.Take() {
		if m, ok := s.M.(*PushReq); ok {
			push = m
		}
	}
	if push == nil {
		t.Fatal("the reader at P did not push X's recorder")
	}
	r.Handle(pid, push)
	renv.Flush()
	renv.Take()
	late := *commit
	r.Handle(coord, &late)
	renv.Flush()
	for _, s := range renv.Take() {
		if m, ok := s.M.(*PushResp); ok && s.To == pid {
			p.Handle(r.self, m)
		}
	}
	penv.Flush()
	for _, s := range penv.Take() {
		if m, ok := s.M.(*ReadResp); ok && m.Found && string(m.Value) == "x-at-p" {
			t.Error("the reader read the write of X, whose client was told it aborted")
		}
	}
}
