package bench_test

import (
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/meridiandb/meridian/client"
	"github.com/meridiandb/meridian/internal/bench"
	"github.com/meridiandb/meridian/internal/history"
	"github.com/meridiandb/meridian/internal/node"
	"github.com/meridiandb/meridian/internal/protocol"
	"github.com/meridiandb/meridian/internal/sim"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/wire"
	"github.com/meridiandb/meridian/internal/workload"
)

// slowCommit is a test protocol whose nodes answer their clients themselves, commits only
// after 20 ms (a commit wait): a crash of a node finds its clients' commits in flight.
type slowCommit struct{}

func (slowCommit) Name() string                     { return "slow-commit-test" }
func (slowCommit) Model() string                    { return "" }
func (slowCommit) Options() map[string]string       { return nil }
func (slowCommit) Layout(l topo.Layout) topo.Layout { return l }
func (slowCommit) NewNode(cfg node.Config) (node.Handler, error) {
	return &slowCommitNode{env: cfg.Env}, nil
}

type slowCommitNode struct{ env node.Env }

func (n *slowCommitNode) Handle(from node.ID, m wire.Msg) {
	req, ok := m.(*wire.ClientRequest)
	if !ok {
		return
	}
	rep := &wire.ClientReply{Txn: req.Txn, Seq: req.Seq, Code: wire.CodeOK}
	if req.Op == wire.OpCommit {
		n.env.After(20*time.Millisecond, func() { n.env.Send(from, rep) })
		return
	}
	n.env.Send(from, rep)
}

// appends is a checkable workload of one-append transactions, each appending a value unique to
// its client to the client's own key.
type appends struct{}

func (appends) Name() string          { return "appends-test" }
func (appends) Load(*client.DB) error { return nil }
func (appends) NewClient(id int, _ topo.RegionID, _ *rand.Rand) workload.Client {
	return &appendClient{id: id}
}

type appendClient struct{ id, n int }

func (c *appendClient) Next() workload.Txn {
	c.n++
	key, val := int64(c.id), int64(c.id)<<32|int64(c.n)
	op := []history.MicroOp{{F: history.FAppend, Key: key, Value: history.IntValue(val)}}
	return workload.Txn{Type: "append", Invoke: op, Result: func() []history.MicroOp { return op },
		Run: func(tx *client.Txn) error {
			return tx.Put(strconv.FormatInt(key, 10), []byte(strconv.FormatInt(val, 10)))
		}}
}

// A commit in flight when its coordinator crashes may have applied: the history records it as
// indeterminate (info), never as failed (a transaction whose dial was refused, having sent
// nothing, is failed), and its client commits again once the node is back,
// having backed off rather than spun while the node was down.
func TestCommitInFlightAtCrashRecordedUnknown(t *testing.T) {
	l := topo.DefaultLayout()
	l.NodesPerRegion = 1 // every client of region 0 is attached to the node that crashes
	tp, err := topo.FromPreset("k2-5region", l)
	if err != nil {
		t.Fatal(err)
	}
	cfg := sim.DefaultConfig()
	cfg.Topology, cfg.Protocol, cfg.Seed = tp, slowCommit{}, 1
	gw := tp.DataNodes(0)[0]
	const (
		warmup  = 100 * time.Millisecond
		crashAt = 300 * time.Millisecond // into the window
		down    = 300 * time.Millisecond
	)
	res, err := bench.SimRun(cfg, bench.Spec{Workload: appends{}, ClientsPerRegion: 4, Warmup: warmup,
		Duration: time.Second, Record: true, Faults: func(s *sim.Sim, w bench.Window) {
			s.At(w.MeasureFrom+int64(crashAt), func() { s.Crash(gw) })
			s.At(w.MeasureFrom+int64(crashAt+down), func() {
				if err := s.Restart(gw); err != nil {
					t.Error(err)
				}
			})
		}})
	if err != nil {
		t.Fatal(err)
	}
	restart := int64(warmup + crashAt + down) // clients start at 0: no load phase
	unknown, okAfter, refused := 0, 0, 0
	for _, op := range res.History {
		switch {
		case op.Type == history.Fail && strings.Contains(op.Error, "refused"):
			refused++ // nothing was sent: it took no effect
		case op.Type == history.Fail:
			t.Errorf("failed completion %+v: nothing else in this run can fail for sure", op)
		case op.Type == history.Info && strings.Contains(op.Error, "outcome unknown") && strings.Contains(op.Error, "lost"):
			if op.Region != 0 {
				t.Errorf("region %d's transaction lost its connection; only region 0's coordinator crashed", op.Region)
			}
			unknown++
		case op.Type == history.Info && strings.Contains(op.Error, "refused"):
			t.Errorf("refused dial recorded unknown: %+v; nothing was sent, so it failed", op)
		case op.Type == history.OK && op.Region == 0 && op.Time > restart:
			okAfter++
		}
	}
	if unknown == 0 {
		t.Error("no commit of the crashed coordinator's clients was recorded with an unknown outcome")
	}
	if okAfter == 0 {
		t.Error("the crashed coordinator's clients committed nothing after it restarted")
	}
	// Backing off up to 50 ms, a client tries about a dozen times in 300 ms; without backing
	// off, a refused dial costs one round trip in a region (0.2 ms) and it would try 1,500.
	if limit := 4 * 20; refused > limit {
		t.Errorf("%d dials refused while the node was down, want at most %d: clients spin", refused, limit)
	}
	t.Logf("%d commits recorded unknown, %d commits in region 0 after the restart, %d dials refused", unknown, okAfter, refused)
}

// countingCommit is slowCommit whose nodes count the commits they answer, as protocols count
// theirs in protocol.Metrics.
type countingCommit struct{ slowCommit }

func (countingCommit) NewNode(cfg node.Config) (node.Handler, error) {
	return &countingCommitNode{slowCommitNode: slowCommitNode{env: cfg.Env}, m: protocol.NewMetrics()}, nil
}

type countingCommitNode struct {
	slowCommitNode
	m *protocol.Metrics
}

func (n *countingCommitNode) Metrics() *protocol.Metrics { return n.m }

func (n *countingCommitNode) Handle(from node.ID, m wire.Msg) {
	if req, ok := m.(*wire.ClientRequest); ok && req.Op == wire.OpCommit {
		n.env.After(20*time.Millisecond, func() { n.m.Add("commit", 1) })
	}
	n.slowCommitNode.Handle(from, m)
}

// A node that crashes inside the window and restarts before it ends still counts in the run's
// protocol metrics for what its crashed life did in the window: the restart replaces its
// handler, and the window's end read only the handlers then in place, so a crash late in the
// window left out nearly all of that node's counts (k2, ycsbt seed 1, sh-1@2.9s/1ms: 275
// commits counted for 351 the clients saw).
func TestCrashedLifeCountsInProtocolMetrics(t *testing.T) {
	l := topo.DefaultLayout()
	l.NodesPerRegion = 1
	tp, err := topo.FromPreset("k2-5region", l)
	if err != nil {
		t.Fatal(err)
	}
	cfg := sim.DefaultConfig()
	cfg.Topology, cfg.Protocol, cfg.Seed = tp, countingCommit{}, 1
	for _, crashes := range [][]bench.Crash{
		nil,
		// Late in the window; down until its end; before the window and back inside it; twice.
		{{Node: 0, At: 900 * time.Millisecond, For: 100 * time.Millisecond}},
		{{Node: 1, At: 1000 * time.Millisecond, For: 100 * time.Millisecond}},
		{{Node: 2, At: 50 * time.Millisecond, For: 100 * time.Millisecond}},
		{{Node: 3, At: 300 * time.Millisecond, For: 100 * time.Millisecond}, {Node: 3, At: 700 * time.Millisecond, For: 100 * time.Millisecond}},
	} {
		res, err := bench.SimRun(cfg, bench.Spec{Workload: appends{}, ClientsPerRegion: 4, Warmup: 100 * time.Millisecond,
			Duration: time.Second, Crashes: crashes})
		if err != nil {
			t.Fatal(err)
		}
		// Nodes count a commit as they answer it and clients as the answer arrives, 0.1 ms
		// later: the two tallies differ at most by the commits answered across an edge of the
		// window, a few per client.
		counted := res.ProtocolMetrics.Counters["commit"]
		if d := counted - res.Committed; d < -20 || d > 20 {
			t.Errorf("crashes %v: nodes counted %d commits in the window, clients %d", crashes, counted, res.Committed)
			continue
		}
		t.Logf("crashes %v: nodes counted %d commits in the window, clients %d", crashes, counted, res.Committed)
	}
}
