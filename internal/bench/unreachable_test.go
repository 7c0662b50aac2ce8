package bench

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/meridiandb/meridian/client"
	"github.com/meridiandb/meridian/internal/history"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/wire"
	"github.com/meridiandb/meridian/internal/workload/listappend"
)

// wallNode answers every request on wall-clock time: OK while up, and as a refused connection
// once down (every request after the first `upFor`). It does not answer batches: runs against it
// send one operation at a time.
type wallNode struct {
	upFor int
	n     int
}

func (w *wallNode) RoundTrip(req *wire.ClientRequest) (*wire.ClientReply, error) {
	if w.n++; w.n > w.upFor {
		return nil, client.ErrUnavailable
	}
	return &wire.ClientReply{Txn: req.Txn, Seq: req.Seq, Code: wire.CodeOK}, nil
}
func (w *wallNode) Sleep(d time.Duration) { time.Sleep(d) }
func (w *wallNode) Now() int64            { return time.Now().UnixNano() }

// fakeCluster is the topology and list-append workload of the wallNode tests.
func fakeCluster(t *testing.T) (*topo.Topology, *listappend.Workload) {
	t.Helper()
	tp, err := topo.FromPreset("k2-3region", topo.DefaultLayout())
	if err != nil {
		t.Fatal(err)
	}
	wl, err := listappend.New(tp, listappend.Config{Keys: 4})
	if err != nil {
		t.Fatal(err)
	}
	return tp, wl
}

// A run against a cluster part of which stops answering names the nodes still unreachable at
// its end (bench then exits 1): its history may check valid, as transactions that never reached a
// node took no effect, and it read as a healthy run with a few failures.
func TestRealRunNamesNodesUnreachableAtEnd(t *testing.T) {
	tp, wl := fakeCluster(t)
	// The second region's node answers nothing (a node that stops mid-run ends the same way,
	// but how far its clients get first depends on the machine's speed); the others answer all.
	// Its clients connect before the run; after it, a connection to it is refused.
	down, dials := tp.DataNodes(1)[0], 0
	res, err := RealRun(RealConfig{Topology: tp, Protocol: "fake", Seed: 1,
		Dial: func(coord topo.NodeID) (client.Transport, error) {
			switch {
			case coord != down:
				return &wallNode{upFor: 1 << 30}, nil
			case dials < 2:
				dials++
				return &wallNode{upFor: 0}, nil
			}
			return nil, errors.New("connection refused")
		}}, Spec{Workload: wl, ClientsPerRegion: 2, Duration: 50 * time.Millisecond, OneOpAtATime: true, Record: true})
	if err != nil {
		t.Fatal(err)
	}
	if want := NodeName(tp, down); len(res.UnreachableAtEnd) != 1 || res.UnreachableAtEnd[0] != want {
		t.Fatalf("unreachable at end %v, want [%s]; %+v", res.UnreachableAtEnd, want, res.Summary)
	}
	if res.Unavailable == 0 {
		t.Fatalf("no transaction counted unavailable: %+v", res.Summary)
	}
	// The final read would find that node's keys unreachable: it is not run, and says why.
	if d := res.Durability; d == nil || !strings.Contains(d.NotRun, "bj-1 unreachable") {
		t.Fatalf("durability %v, want not run for bj-1 unreachable", d)
	}
}

// A node whose clients last found it unreachable but that accepts a connection by the end of the
// run (it came back just after their last try) is not named.
func TestNodeBackByTheEndNotNamed(t *testing.T) {
	tp, wl := fakeCluster(t)
	down := tp.DataNodes(1)[0]
	res, err := RealRun(RealConfig{Topology: tp, Protocol: "fake", Seed: 1,
		Dial: func(coord topo.NodeID) (client.Transport, error) {
			if coord == down {
				return &wallNode{upFor: 0}, nil
			}
			return &wallNode{upFor: 1 << 30}, nil
		}}, Spec{Workload: wl, ClientsPerRegion: 2, Duration: 50 * time.Millisecond, OneOpAtATime: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.UnreachableAtEnd) != 0 || res.Unavailable == 0 {
		t.Fatalf("unreachable at end %v after %d unavailable; want none named", res.UnreachableAtEnd, res.Unavailable)
	}
}

// loseFirstPut loses (as a broken connection does) the first put's request; every other
// request is answered OK. Its clock moves one microsecond per reading.
type loseFirstPut struct {
	lost bool
	now  int64
}

func (f *loseFirstPut) RoundTrip(req *wire.ClientRequest) (*wire.ClientReply, error) {
	if req.Op == wire.OpPut && !f.lost {
		f.lost = true
		return nil, errors.New("connection reset")
	}
	return &wire.ClientReply{Txn: req.Txn, Seq: req.Seq, Code: wire.CodeOK}, nil
}
func (f *loseFirstPut) Sleep(d time.Duration) { f.now += int64(d) }
func (f *loseFirstPut) Now() int64            { f.now += 1000; return f.now }

// A transaction that found its coordinator unreachable before its commit never sent the commit,
// so it took no effect: it is recorded failed, not unknown, and a read of its append would be
// an aborted read the checker reports. Recorded unknown, a protocol that applied it anyway
// passed.
func TestUnreachableBeforeCommitRecordedFailed(t *testing.T) {
	rec := history.NewRecorder()
	ClientLoop(client.Open(&loseFirstPut{}), &oneWriteGen{}, 1, 0, Window{Start: 0, MeasureFrom: 0, End: 50_000_000}, NewMetrics(), rec)
	var outcomes []string
	processes := map[int]bool{}
	for _, op := range rec.Ops() {
		if op.Type != history.Invoke {
			outcomes = append(outcomes, op.Type)
		}
		processes[op.Process] = true
	}
	if len(outcomes) < 2 || outcomes[0] != history.Fail || outcomes[1] != history.OK {
		t.Fatalf("outcomes %v, want the lost transaction failed, then commits", outcomes[:min(len(outcomes), 3)])
	}
	// Only an unknown outcome moves the client to a new process.
	if len(processes) != 1 {
		t.Fatalf("the client used %d processes, want 1", len(processes))
	}
}

// A client whose node refuses it as the run starts (down for a moment: a crash review's kill)
// dials it again rather than failing the bench: a bench beside cluster chaos failed after its
// load with "client 7: ... the node closed the connection before welcoming it".
func TestRealRunClientRedialsANodeDownAtItsStart(t *testing.T) {
	tp, wl := fakeCluster(t)
	down, refused := tp.DataNodes(1)[0], 0
	res, err := RealRun(RealConfig{Topology: tp, Protocol: "fake", Seed: 1,
		Dial: func(coord topo.NodeID) (client.Transport, error) {
			if coord == down && refused < 3 {
				refused++
				return nil, errors.New("connection refused")
			}
			return &wallNode{upFor: 1 << 30}, nil
		}}, Spec{Workload: wl, ClientsPerRegion: 2, Duration: 50 * time.Millisecond, OneOpAtATime: true})
	if err != nil {
		t.Fatal(err)
	}
	if refused != 3 || res.Committed == 0 || res.Unavailable != 0 {
		t.Fatalf("after %d refusals: %d committed, %d unavailable; want commits and none unavailable", refused, res.Committed, res.Unavailable)
	}
}
