package sim

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/meridiandb/meridian/client"
	"github.com/meridiandb/meridian/internal/node"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/wire"
)

// gatewayProto is a test protocol whose nodes answer every client request themselves, the
// operations in slow after a delay (a commit wait, a lock wait), the rest at once. onRequest,
// if set, sees every request first.
type gatewayProto struct {
	slow      map[wire.Op]time.Duration
	onRequest func(from node.ID, req *wire.ClientRequest)
}

func (gatewayProto) Name() string                     { return "gateway-test" }
func (gatewayProto) Model() string                    { return "" }
func (gatewayProto) Options() map[string]string       { return nil }
func (gatewayProto) Layout(l topo.Layout) topo.Layout { return l }
func (p gatewayProto) NewNode(cfg node.Config) (node.Handler, error) {
	return &gatewayNode{env: cfg.Env, slow: p.slow, onRequest: p.onRequest}, nil
}

type gatewayNode struct {
	env       node.Env
	slow      map[wire.Op]time.Duration
	onRequest func(from node.ID, req *wire.ClientRequest)
}

func (g *gatewayNode) Handle(from node.ID, m wire.Msg) {
	req, ok := m.(*wire.ClientRequest)
	if !ok {
		return
	}
	if g.onRequest != nil {
		g.onRequest(from, req)
	}
	rep := &wire.ClientReply{Txn: req.Txn, Seq: req.Seq, Code: wire.CodeOK}
	if d := g.slow[req.Op]; d > 0 {
		g.env.After(d, func() { g.env.Send(from, rep) })
		return
	}
	g.env.Send(from, rep)
}

func newGateway(t *testing.T, slow map[wire.Op]time.Duration) *Sim {
	t.Helper()
	return newGatewayProto(t, gatewayProto{slow: slow})
}

func newGatewayProto(t *testing.T, p gatewayProto) *Sim {
	t.Helper()
	tp, err := topo.FromPreset("k2-5region", topo.DefaultLayout())
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Topology, cfg.Protocol = tp, p
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestCoordinatorCrashFailsRequestInFlight crashes a client's coordinator while one of its
// requests is in flight and never restarts it: the request fails as client.DB fails a request
// whose connection is reset (a commit's outcome unknown, anything else unavailable), within a
// one-way delay rather than after the client's timeout, and so does every dial after it.
func TestCoordinatorCrashFailsRequestInFlight(t *testing.T) {
	const crashAt = 10 * time.Millisecond
	for _, tc := range []struct {
		name    string
		slow    wire.Op
		unknown bool
	}{{"put", wire.OpPut, false}, {"commit", wire.OpCommit, true}} {
		t.Run(tc.name, func(t *testing.T) {
			s := newGateway(t, map[wire.Op]time.Duration{tc.slow: 50 * time.Millisecond})
			gw := s.Topology().DataNodes(0)[0]
			var first, next error
			var firstAt, nextAt int64
			s.AddClient(0, gw, 0, func(db *client.DB) {
				tx := db.Begin(client.TxnOptions{})
				first = tx.Put("k", []byte("v"))
				if first == nil {
					first = tx.Commit()
				} else {
					_ = tx.Abort()
				}
				firstAt = s.Now()
				tx = db.Begin(client.TxnOptions{})
				next = tx.Put("k", []byte("w"))
				nextAt = s.Now()
			})
			s.At(int64(crashAt), func() { s.Crash(gw) })
			s.RunFor(time.Second)
			s.Stop()

			if limit := int64(crashAt) + int64(time.Millisecond); firstAt == 0 || firstAt > limit {
				t.Fatalf("request in flight at the crash: no answer by %v", time.Duration(limit))
			}
			var u *client.UnknownError
			if got := errors.As(first, &u); got != tc.unknown || (!tc.unknown && !errors.Is(first, client.ErrUnavailable)) {
				t.Fatalf("request in flight at the crash: %v, want unknown outcome %v (else unavailable)", first, tc.unknown)
			}
			if !errors.Is(next, client.ErrUnavailable) {
				t.Fatalf("next transaction with its coordinator down: %v, want unavailable", next)
			}
			if nextAt == 0 || nextAt > firstAt+int64(time.Millisecond) {
				t.Fatalf("dial of a node that is down failed at %v, want within 1ms of %v", time.Duration(nextAt), time.Duration(firstAt))
			}
		})
	}
}

// TestClientsCommitAgainAfterCoordinatorRestart crashes the coordinator of four closed-loop
// clients for 300 ms: each must commit again within a second of the restart, instead of waiting
// out its request timeout (60 s) on a connection that died with the node.
func TestClientsCommitAgainAfterCoordinatorRestart(t *testing.T) {
	s := newGateway(t, map[wire.Op]time.Duration{wire.OpCommit: 2 * time.Millisecond})
	gw := s.Topology().DataNodes(0)[0]
	const (
		crashAt   = time.Second
		restartAt = crashAt + 300*time.Millisecond
		end       = restartAt + time.Second
	)
	commits := make([][]int64, 4)
	var unknown, unavailable int
	for i := range commits {
		s.AddClient(0, gw, int64(i)*300*int64(time.Microsecond), func(db *client.DB) {
			for s.Now() < int64(end) {
				tx := db.Begin(client.TxnOptions{})
				err := tx.Put(fmt.Sprintf("k%d", i), []byte("v"))
				if err == nil {
					err = tx.Commit()
				} else {
					_ = tx.Abort()
				}
				var u *client.UnknownError
				switch {
				case err == nil:
					commits[i] = append(commits[i], s.Now())
				case errors.As(err, &u):
					unknown++
				case errors.Is(err, client.ErrUnavailable):
					unavailable++
					db.Transport().Sleep(time.Millisecond)
				default:
					t.Errorf("client %d: %v", i, err)
					return
				}
			}
		})
	}
	s.At(int64(crashAt), func() { s.Crash(gw) })
	s.At(int64(restartAt), func() {
		if err := s.Restart(gw); err != nil {
			t.Error(err)
		}
	})
	s.RunUntil(int64(end))
	s.Stop()
	for i, c := range commits {
		after := 0
		for _, at := range c {
			if at > int64(crashAt) && at < int64(restartAt) {
				t.Fatalf("client %d committed at %v, while its coordinator was down", i, time.Duration(at))
			}
			if at > int64(restartAt) {
				after++
			}
		}
		if after == 0 {
			t.Errorf("client %d: no commit in the second after its coordinator restarted (%d before the crash)", i, len(c))
		}
	}
	if unknown+unavailable == 0 {
		t.Error("no client saw its connection fail")
	}
	t.Logf("%d commits' outcomes unknown, %d transactions unavailable", unknown, unavailable)
}

// TestReconnectIsNewEndpoint crashes a client's coordinator under a request and restarts it: the
// client's next connection must reach the node's new life as a new endpoint, as
// client.NetTransport's does (the server's welcome names it), since nodes key transactions,
// retry ages and duplicate checks by endpoint. A reply addressed to the old endpoint, even one
// naming the request now in flight, must not reach the new connection.
func TestReconnectIsNewEndpoint(t *testing.T) {
	const (
		crashAt   = 10 * time.Millisecond
		restartAt = 20 * time.Millisecond
	)
	var s *Sim
	var gw topo.NodeID
	var froms []node.ID // the endpoint of every request, in arrival order
	var forged int
	p := gatewayProto{slow: map[wire.Op]time.Duration{wire.OpPut: 50 * time.Millisecond}}
	p.onRequest = func(from node.ID, req *wire.ClientRequest) {
		froms = append(froms, from)
		if first := froms[0]; from != first && req.Op == wire.OpPut {
			// Answer the put on the new connection through the old one, as a node holding a
			// stale endpoint would; the real reply comes 50 ms later.
			s.send(int32(gw), int32(first), &wire.ClientReply{Txn: req.Txn, Seq: req.Seq, Code: wire.CodeAborted, Cause: "stale"}, s.Now())
			forged++
		}
	}
	s = newGatewayProto(t, p)
	gw = s.Topology().DataNodes(0)[0]
	var before, after int32
	var lost, committed error
	c := s.AddClient(0, gw, 0, func(db *client.DB) {
		before = db.Transport().(*Client).ID()
		tx := db.Begin(client.TxnOptions{})
		if lost = tx.Put("k", []byte("v")); lost == nil {
			t.Error("put in flight at the crash succeeded")
		}
		_ = tx.Abort()
		for range 100 {
			tx = db.Begin(client.TxnOptions{})
			committed = tx.Put("k", []byte("w"))
			if errors.Is(committed, client.ErrUnavailable) {
				_ = tx.Abort()
				db.Transport().Sleep(time.Millisecond) // refused until the restart
				continue
			}
			if committed == nil {
				committed = tx.Commit()
			}
			break
		}
		after = db.Transport().(*Client).ID()
	})
	s.At(int64(crashAt), func() { s.Crash(gw) })
	s.At(int64(restartAt), func() {
		if err := s.Restart(gw); err != nil {
			t.Error(err)
		}
	})
	s.RunFor(time.Second)
	s.Stop()

	if !c.Finished() {
		t.Fatal("client did not finish")
	}
	if !errors.Is(lost, client.ErrUnavailable) {
		t.Fatalf("put in flight at the crash: %v, want unavailable", lost)
	}
	if committed != nil {
		t.Fatalf("transaction after the restart: %v, want committed (a reply to the old endpoint reached the new connection?)", committed)
	}
	if len(froms) < 3 || froms[0] != node.ID(before) {
		t.Fatalf("requests came from endpoints %v, want the first from %d and a put and a commit after the restart", froms, before)
	}
	for _, f := range froms[1:] {
		if f == node.ID(before) {
			t.Fatalf("requests came from endpoints %v: the connection after the restart kept endpoint %d", froms, before)
		}
		if f != node.ID(after) {
			t.Fatalf("requests came from endpoints %v after the restart, want all from the client's new endpoint %d", froms, after)
		}
	}
	if forged != 1 {
		t.Fatalf("%d replies sent to the old endpoint, want 1", forged)
	}
}
