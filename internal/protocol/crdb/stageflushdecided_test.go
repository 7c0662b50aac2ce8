package crdb

import (
	"testing"
	"time"

	"github.com/meridiandb/meridian/internal/node"
	"github.com/meridiandb/meridian/internal/node/nodetest"
	"github.com/meridiandb/meridian/internal/protocol/prototest"
	"github.com/meridiandb/meridian/internal/storage"
	"github.com/meridiandb/meridian/internal/storage/durable"
	"github.com/meridiandb/meridian/internal/storage/txnrec"
	"github.com/meridiandb/meridian/internal/ts"
)

// holdEnv is a ScriptEnv whose persists are held until released one at a time, in issue order.
type holdEnv struct {
	*nodetest.ScriptEnv
	held []func()
}

func (e *holdEnv) Persist(batch []node.Write, done func()) {
	e.held = append(e.held, func() {
		if err := e.Disk.Apply(batch); err != nil {
			panic(err)
		}
		if done != nil {
			done()
		}
	})
}

func (e *holdEnv) releaseOne() { f := e.held[0]; e.held = e.held[1:]; f() }
func (e *holdEnv) releaseAll() {
	for len(e.held) > 0 {
		e.releaseOne()
	}
	e.Advance(0)
}

// startHoldNode starts the test topology's first data node on disk, its persists held until
// released (holdEnv), with its start's persists released and its messages taken. A second
// call on the same disk is the node's next life after a crash that lost whatever was held.
func startHoldNode(t *testing.T, disk *durable.Mem) (*Node, *holdEnv) {
	t.Helper()
	cfg, err := prototest.SimConfig(prototest.Case{Protocol: name, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	tp := cfg.Topology
	env := &holdEnv{ScriptEnv: &nodetest.ScriptEnv{ID: tp.DataNodes(0)[0], Topo: tp, Clock: int64(time.Second), Disk: disk}}
	h, err := proto{}.NewNode(node.Config{Env: env, Durable: disk})
	if err != nil {
		t.Fatal(err)
	}
	env.releaseAll()
	env.Take()
	return h.(*Node), env
}

// TestStageFlushPublishesLaterDecision: a recovery that decides while the STAGING persist is
// still in flight issues a persist of its own for the decision. The staging persist's completion
// published the record's latest state, the decision, as durable: a push was answered
// "committed" while the disk held STAGING, and a crash then brought the record back STAGING, to
// be recovered again, and aborted if a pusher's resolution of a write had since been
// superseded and collected. Only the decision's own persist may publish it.
func TestStageFlushPublishesLaterDecision(t *testing.T) {
	disk := durable.NewMem()
	n, env := startHoldNode(t, disk)
	tp := n.tp
	c, l := tp.DataNodes(1)[0], tp.DataNodes(2)[0]
	kh := prototest.KeysOn(t, tp, n.self, "sf", 1)[0]
	kl := prototest.KeysOn(t, tp, l, "sf", 1)[0]
	txn := storage.MakeTxnID(int32(c), 1)
	at := ts.Timestamp{Wall: env.Clock, Origin: uint32(c)}
	n.Handle(c, &WriteReq{Req: 1, Txn: TxnMeta{ID: txn, Age: at, RecordNode: n.self, Coord: c}, Key: kh, Value: []byte("v"), WriteTS: at, CreateRecord: true})
	env.releaseAll()
	env.Take()

	// The coordinator stages and goes silent; the staging persist is slow.
	n.Handle(c, &EndTxnReq{Req: 2, Txn: txn, Status: EndStage, TS: at, InFlight: []string{kh, kl}})
	staging := len(env.held)
	if staging == 0 {
		t.Fatal("staging issued no persist")
	}
	// A push after the coordinator's silence starts a recovery; both writes are found.
	env.Advance(n.set.expiry + time.Millisecond)
	n.Handle(l, &PushReq{Req: 7, Pushee: txn, Type: PushQuery, PushTo: at.Next()})
	for range 4 {
		for _, s := range env.Take() {
			switch m := s.M.(type) {
			case *QueryIntentReq:
				if s.To == n.self {
					n.Handle(n.self, m)
				} else if s.To == l {
					n.Handle(l, &QueryIntentResp{Req: m.Req, Clock: n.now(), Found: true})
				}
			case *QueryIntentResp:
				if s.To == n.self {
					n.Handle(n.self, m)
				}
			}
		}
	}
	if len(env.held) <= staging {
		t.Fatalf("recovery issued no persist of its decision (%d persists held)", len(env.held))
	}
	for range staging {
		env.releaseOne() // only the staging persist completes
	}
	onDisk, err := txnrec.Recover(disk)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := onDisk.Get(txn)
	if got, _ := n.recs.Get(txn); got.Status.Final() && got.Status != want.Status {
		t.Fatalf("the record reads as durably %v while the disk holds %v", got.Status, want.Status)
	}
	env.Take()
	n.Handle(l, &PushReq{Req: 8, Pushee: txn, Type: PushAbort, PushTo: at.Next()})
	for _, s := range env.Take() {
		if r, ok := s.M.(*PushResp); ok && s.To == l && r.Req == 8 && r.Outcome == PushCommitted {
			t.Fatalf("a push was answered committed while the disk holds %v", want.Status)
		}
	}
}
