package clock

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/meridiandb/meridian/internal/node"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/ts"
	"github.com/meridiandb/meridian/internal/wire"
)

type sent struct {
	to node.ID
	m  wire.Msg
}

// fakeEnv is the smallest node.Env an oracle needs: a settable clock and a record of sends.
type fakeEnv struct {
	now   int64
	sends []sent
}

func (e *fakeEnv) Self() node.ID                            { return 1 }
func (e *fakeEnv) Topology() *topo.Topology                 { return nil }
func (e *fakeEnv) Now() int64                               { return e.now }
func (e *fakeEnv) Elapsed() int64                           { return e.now }
func (e *fakeEnv) TrueTime() ts.Interval                    { return ts.Interval{} }
func (e *fakeEnv) Send(to node.ID, m wire.Msg)              { e.sends = append(e.sends, sent{to, m}) }
func (e *fakeEnv) After(time.Duration, func()) node.TimerID { return 0 }
func (e *fakeEnv) Cancel(node.TimerID)                      {}
func (e *fakeEnv) Persist([]node.Write, func())             {}
func (e *fakeEnv) Rand() *rand.Rand                         { return newRand(1) }
func (e *fakeEnv) Charge(time.Duration)                     {}

func TestOracleHandler(t *testing.T) {
	env := &fakeEnv{now: 1_000_000}
	var h node.Handler = NewOracleHandler(env, Oracle{ID: 7, Epsilon: 100 * time.Microsecond})
	h.Handle(42, &TSBatchRequest{ReqID: 9})
	h.Handle(43, &wire.ClientRequest{})
	h.Handle(44, nil)
	if len(env.sends) != 1 {
		t.Fatalf("oracle sent %d messages, want 1", len(env.sends))
	}
	got := env.sends[0]
	want := &TSBatchReply{ReqID: 9, Low: 900_000, Up: 1_100_000, OracleID: 7}
	if got.to != 42 || *got.m.(*TSBatchReply) != *want {
		t.Fatalf("sent %v to %d, want %+v to 42", got.m, got.to, want)
	}
	oh := h.(*OracleHandler)
	if oh.Served != 1 || oh.Unexpected != 2 {
		t.Fatalf("served %d, unexpected %d", oh.Served, oh.Unexpected)
	}
}

func TestOracleMessagesOnTheWire(t *testing.T) {
	for _, m := range []wire.Msg{
		&TSBatchRequest{ReqID: 1 << 40},
		&TSBatchReply{ReqID: 3, Low: -5, Up: 1 << 60, OracleID: 12},
	} {
		frame, err := wire.Encode(m)
		if err != nil {
			t.Fatal(err)
		}
		back, err := wire.Decode(frame)
		if err != nil {
			t.Fatal(err)
		}
		if back.Kind() != m.Kind() {
			t.Fatalf("kind %d came back as %d", m.Kind(), back.Kind())
		}
		switch v := m.(type) {
		case *TSBatchRequest:
			if *back.(*TSBatchRequest) != *v {
				t.Fatalf("%+v came back as %+v", v, back)
			}
		case *TSBatchReply:
			if *back.(*TSBatchReply) != *v {
				t.Fatalf("%+v came back as %+v", v, back)
			}
		}
	}
	if (&TSBatchRequest{}).Kind() != 500 || (&TSBatchReply{}).Kind() != 501 {
		t.Fatal("oracle kinds moved out of 500/501")
	}
}
