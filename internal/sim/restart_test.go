package sim

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/meridiandb/meridian/internal/node"
	"github.com/meridiandb/meridian/internal/storage/durable"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/wire"
)

// unrecoverable is a test protocol whose node cannot be rebuilt from a disk holding "boom".
type unrecoverable struct{ built *[]*countingNode }

type countingNode struct{ handled int }

func (unrecoverable) Name() string                     { return "unrecoverable-test" }
func (unrecoverable) Model() string                    { return "" }
func (unrecoverable) Options() map[string]string       { return nil }
func (unrecoverable) Layout(l topo.Layout) topo.Layout { return l }
func (p unrecoverable) NewNode(cfg node.Config) (node.Handler, error) {
	bad := false
	_ = cfg.Durable.Scan([]byte("boom"), []byte("boon"), func(_, _ []byte) bool { bad = true; return false })
	if bad {
		return nil, errors.New("cannot recover")
	}
	n := &countingNode{}
	*p.built = append(*p.built, n)
	return n, nil
}
func (n *countingNode) Handle(node.ID, wire.Msg) { n.handled++ }

// A restart that cannot rebuild a node's handler leaves the node down. It brought the node up
// with its crashed life's handler, which went on handling messages from the memory the crash
// had wiped, and a second Restart was refused as of a node that was not down.
func TestFailedRestartLeavesNodeDown(t *testing.T) {
	s, built := unrecoverableSim(t)
	crashed := (*built)[0]
	s.nodes[0].Persist([]node.Write{{Key: []byte("boom"), Value: []byte("x")}}, nil)
	s.RunFor(10 * time.Millisecond)
	s.Crash(0)
	if err := s.Restart(0); err == nil || !strings.Contains(err.Error(), "cannot recover") {
		t.Fatalf("restart from an unrecoverable disk: %v, want its error", err)
	}
	s.send(1, 0, &ping{}, s.Now())
	s.RunFor(time.Second)
	if crashed.handled != 0 {
		t.Errorf("the crashed life's handler handled %d messages after the failed restart", crashed.handled)
	}
	if err := s.Restart(0); err == nil || !strings.Contains(err.Error(), "cannot recover") {
		t.Errorf("second restart: %v, want the recovery error again", err)
	}
}

// A batch the store refuses stops the node for good, as it stops a real one: the batch's
// callback never runs (nothing that depends on it is answered), the node is down, a restart is
// refused, and DiskError says why. The simulator dropped the store's error and ran the callback,
// acknowledging a write nothing held (review: a spanner read vote over the store's value bound).
func TestRefusedWriteStopsNode(t *testing.T) {
	s, _ := unrecoverableSim(t)
	acked := false
	s.nodes[0].Persist([]node.Write{{Key: []byte("big"), Value: make([]byte, durable.MaxValueBytes+1)}}, func() { acked = true })
	s.RunFor(100 * time.Millisecond)
	if acked {
		t.Error("a refused write's callback ran")
	}
	if !s.nodes[0].down {
		t.Error("the node is still up after its store refused a write")
	}
	if err := s.DiskError(); err == nil || !strings.Contains(err.Error(), "node 0 stopped: its store refused a write") {
		t.Errorf("DiskError %v, want node 0's refusal", err)
	}
	if err := s.Restart(0); err == nil || !strings.Contains(err.Error(), "store refused a write") {
		t.Errorf("restart after the refusal: %v, want it refused", err)
	}
}

// unrecoverableSim is a k2-5region simulation of the unrecoverable test protocol, with the
// handlers it builds.
func unrecoverableSim(t *testing.T) (*Sim, *[]*countingNode) {
	t.Helper()
	tp, _ := topo.FromPreset("k2-5region", topo.DefaultLayout())
	built := &[]*countingNode{}
	cfg := DefaultConfig()
	cfg.Topology, cfg.Protocol, cfg.Seed = tp, unrecoverable{built}, 1
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s, built
}
