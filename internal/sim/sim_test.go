package sim

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/meridiandb/meridian/client"
	"github.com/meridiandb/meridian/internal/node"
	"github.com/meridiandb/meridian/internal/protocol"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/wire"

	_ "github.com/meridiandb/meridian/internal/protocol/serial"
)

// echo is a test protocol: a node answers every ping with a pong, and records pong arrivals.
type ping struct{ Sent int64 }
type pong struct{ Sent int64 }

func (*ping) Kind() wire.Kind { return 90 }
func (*pong) Kind() wire.Kind { return 91 }

type echoProto struct{}

type arrival struct{ sent, at int64 }

func (echoProto) Name() string                     { return "echo-test" }
func (echoProto) Model() string                    { return "" }
func (echoProto) Options() map[string]string       { return nil }
func (echoProto) Layout(l topo.Layout) topo.Layout { return l }
func (echoProto) NewNode(cfg node.Config) (node.Handler, error) {
	return &echoNode{env: cfg.Env}, nil
}

type echoNode struct {
	env   node.Env
	rtts  []int64
	pings []arrival // every ping delivered, in order of arrival
	sim   *Sim
}

func (e *echoNode) Handle(from node.ID, m wire.Msg) {
	switch m := m.(type) {
	case *ping:
		e.pings = append(e.pings, arrival{sent: m.Sent, at: e.sim.Now()})
		e.env.Send(from, &pong{Sent: m.Sent})
	case *pong:
		e.rtts = append(e.rtts, e.sim.Now()-m.Sent)
	}
}

func newEcho(t *testing.T, jitter time.Duration) *Sim {
	t.Helper()
	return newEchoWith(t, func(cfg *Config) { cfg.Jitter = jitter })
}

// newEchoWith builds an echo deployment with free CPU, its configuration changed by edit.
func newEchoWith(t *testing.T, edit func(*Config)) *Sim {
	t.Helper()
	tp, err := topo.FromPreset("k2-5region", topo.DefaultLayout())
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Topology, cfg.Protocol, cfg.ServiceTime = tp, echoProto{}, 0
	edit(&cfg)
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range s.nodes {
		n.h.(*echoNode).sim = s
	}
	return s
}

func TestRoundTripSHtoSG(t *testing.T) {
	const jitter = 20 * time.Microsecond
	s := newEcho(t, jitter)
	tp := s.Topology()
	sh, _ := tp.RegionByName("SH")
	sg, _ := tp.RegionByName("SG")
	a, b := tp.DataNodes(sh)[0], tp.DataNodes(sg)[0]
	for i := 0; i < 50; i++ {
		at := int64(i) * int64(time.Second)
		s.At(at, func() { s.send(int32(a), int32(b), &ping{Sent: s.Now()}, s.Now()) })
	}
	s.RunFor(60 * time.Second)
	rtts := s.nodes[a].h.(*echoNode).rtts
	if len(rtts) != 50 {
		t.Fatalf("got %d round trips, want 50", len(rtts))
	}
	want := int64(69300 * time.Microsecond)
	for _, r := range rtts {
		if r < want || r > want+2*int64(jitter) {
			t.Fatalf("SH↔SG round trip %v, want 69.3ms + [0, %v]", time.Duration(r), 2*jitter)
		}
	}
}

func TestPartitionStopsAndHealResumes(t *testing.T) {
	s := newEcho(t, 0)
	tp := s.Topology()
	a, b := tp.DataNodes(0)[0], tp.DataNodes(4)[0]
	pingAt := func(at time.Duration) {
		s.At(int64(at), func() { s.send(int32(a), int32(b), &ping{Sent: s.Now()}, s.Now()) })
	}
	pingAt(0)
	s.At(int64(time.Second), func() { s.PartitionRegions(0, 4) })
	pingAt(2 * time.Second)
	s.At(int64(3*time.Second), func() { s.Heal() })
	pingAt(4 * time.Second)
	s.RunFor(3500 * time.Millisecond)
	if got := len(s.nodes[a].h.(*echoNode).rtts); got != 1 {
		t.Fatalf("during the partition: %d round trips, want 1 (only the one before it)", got)
	}
	s.RunFor(5 * time.Second)
	if got := len(s.nodes[a].h.(*echoNode).rtts); got != 2 {
		t.Fatalf("after healing: %d round trips, want 2", got)
	}
	// Node-level partition too.
	s.PartitionNodes(a, b)
	pingAt(time.Duration(s.Now()))
	s.RunFor(time.Second)
	if got := len(s.nodes[a].h.(*echoNode).rtts); got != 2 {
		t.Fatalf("node partition: %d round trips, want 2", got)
	}
}

// counterRun runs clients incrementing counters under the serial protocol and returns the sim.
func counterRun(t testing.TB, seed uint64, clients int, d time.Duration) (*Sim, *int) {
	return counterRunWith(t, seed, clients, d, func(*Config) {})
}

// counterRunWith is counterRun with the configuration changed by tweak.
func counterRunWith(t testing.TB, seed uint64, clients int, d time.Duration, tweak func(*Config)) (*Sim, *int) {
	tp, err := topo.FromPreset("k2-5region", topo.DefaultLayout())
	if err != nil {
		t.Fatal(err)
	}
	p, err := protocol.Lookup("serial")
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Topology, cfg.Protocol, cfg.Seed = tp, p, seed
	tweak(&cfg)
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	committed := 0
	end := int64(d)
	for i := 0; i < clients; i++ {
		r := topo.RegionID(i % len(tp.Regions))
		key := fmt.Sprintf("k%d", s.Rand().IntN(4))
		s.AddClient(r, tp.DataNodes(r)[0], int64(i)*1000, func(db *client.DB) {
			for db.Transport().Now() < end {
				err := client.RunTxn(db, client.TxnOptions{}, func(tx *client.Txn) error {
					v, err := tx.Get(key)
					if err != nil && !errors.Is(err, client.ErrNotFound) {
						return err
					}
					return tx.Put(key, append(v, 'x'))
				})
				if err == nil {
					committed++
				}
			}
		})
	}
	s.RunUntil(end)
	s.Stop()
	return s, &committed
}

func TestSameSeedSameDigest(t *testing.T) {
	a, ca := counterRun(t, 7, 20, 2*time.Second)
	b, cb := counterRun(t, 7, 20, 2*time.Second)
	c, _ := counterRun(t, 8, 20, 2*time.Second)
	if a.Digest() != b.Digest() || *ca != *cb {
		t.Fatalf("same seed, different traces: %x/%d vs %x/%d", a.Digest(), *ca, b.Digest(), *cb)
	}
	if a.Digest() == c.Digest() {
		t.Fatalf("different seeds gave the same digest %x", a.Digest())
	}
	if *ca == 0 {
		t.Fatal("no transaction committed")
	}
}

// A run that discards what nodes persist runs exactly as one that keeps it (same trace, same
// commits), keeps nothing on any node's disk, and refuses to restart a node with a clear error
// rather than bring it back empty.
func TestDiscardPersistedKeepsTheTrace(t *testing.T) {
	kept, keptCommits := counterRun(t, 3, 20, time.Second)
	gone, goneCommits := counterRunWith(t, 3, 20, time.Second, func(c *Config) { c.DiscardPersisted = true })
	if kept.Digest() != gone.Digest() || *keptCommits != *goneCommits {
		t.Fatalf("discarding persisted writes changed the run: digest %x, %d commits; kept: %x, %d", gone.Digest(), *goneCommits, kept.Digest(), *keptCommits)
	}
	if kept.Stats().PersistedKeys == 0 || gone.Stats().PersistedKeys != kept.Stats().PersistedKeys {
		t.Fatalf("persisted keys: %d discarding, %d keeping; want the same, above 0", gone.Stats().PersistedKeys, kept.Stats().PersistedKeys)
	}
	server := kept.Topology().DataNodes(0)[0]
	if kept.Durable(server).Len() == 0 {
		t.Fatal("the run that keeps persisted writes has none on the serial node's disk")
	}
	for _, n := range gone.Topology().Nodes {
		if l := gone.Durable(n.ID).Len(); l != 0 {
			t.Errorf("node %d keeps %d keys on disk though the run discards them", n.ID, l)
		}
	}
	gone.Crash(server)
	if err := gone.Restart(server); err == nil || !strings.Contains(err.Error(), "cannot restart") {
		t.Errorf("restart without durable state: %v, want a refusal", err)
	}
}

// A local disk group-commits: a persist issued while a flush is under way waits for it and goes
// in the next. A shared one (ParallelFlushes) starts each persist's flush at once. Either way
// completions come in issue order, and a crash loses every flush under way.
func TestFlushModes(t *testing.T) {
	const ms = int64(time.Millisecond)
	for _, c := range []struct {
		parallel bool
		want     []int64 // completion times of persists issued at 0, 0.1 ms and 0.2 ms
		flushes  uint64
	}{
		{false, []int64{ms / 2, ms, ms}, 2},
		{true, []int64{ms / 2, 6 * ms / 10, 7 * ms / 10}, 3},
	} {
		s := newEchoWith(t, func(cfg *Config) { cfg.ParallelFlushes = c.parallel })
		n := s.nodes[0]
		var got []int64
		for i := range 3 {
			s.At(int64(i)*ms/10, func() {
				n.Persist([]node.Write{{Key: []byte(fmt.Sprint(i)), Value: []byte("v")}}, func() { got = append(got, s.Now()) })
			})
		}
		s.RunFor(2 * time.Millisecond)
		if fmt.Sprint(got) != fmt.Sprint(c.want) || s.Stats().Flushes != c.flushes {
			t.Errorf("parallel %v: completions at %v in %d flushes, want %v in %d", c.parallel, got, s.Stats().Flushes, c.want, c.flushes)
		}
		if n.disk.Len() != 3 {
			t.Errorf("parallel %v: %d keys durable, want 3", c.parallel, n.disk.Len())
		}
		// Two persists under way at a crash are both lost, and a late completion runs nothing.
		got = nil
		n.Persist([]node.Write{{Key: []byte("a"), Value: []byte("v")}}, func() { got = append(got, s.Now()) })
		s.RunFor(time.Millisecond / 10)
		n.Persist([]node.Write{{Key: []byte("b"), Value: []byte("v")}}, func() { got = append(got, s.Now()) })
		s.Crash(n.id)
		s.RunFor(2 * time.Millisecond)
		if len(got) != 0 || n.disk.Len() != 3 {
			t.Errorf("parallel %v: after a crash, completions %v and %d keys durable, want none and 3", c.parallel, got, n.disk.Len())
		}
	}
}

// TestCrashMidRunRestoresExactlyWhatWasPersisted crashes the serial node while clients are
// writing (with flushes in flight), restarts it, and checks that its state is exactly the durable
// state at the moment of the crash: nothing acknowledged lost, nothing unflushed resurrected.
// Both disks (serial holds its lock until the commit is durable, so even a shared disk has one
// flush under way at the crash; TestFlushModes loses several at once).
func TestCrashMidRunRestoresExactlyWhatWasPersisted(t *testing.T) {
	for _, run := range []struct {
		seed     uint64
		parallel bool
	}{{1, false}, {2, false}, {3, false}, {1, true}, {2, true}, {3, true}} {
		seed := run.seed
		tp, _ := topo.FromPreset("k2-5region", topo.DefaultLayout())
		p, _ := protocol.Lookup("serial")
		cfg := DefaultConfig()
		cfg.Topology, cfg.Protocol, cfg.Seed, cfg.ParallelFlushes = tp, p, seed, run.parallel
		cfg.FlushLatency = 5 * time.Millisecond // long flushes: the crash lands with writes in flight
		s, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		server := tp.DataNodes(0)[0]
		acked := map[string]string{} // last acknowledged value per key
		for i := 0; i < 10; i++ {
			key := fmt.Sprintf("k%d", i)
			s.AddClient(0, server, int64(i)*1000, func(db *client.DB) {
				for n := 0; ; n++ {
					val := fmt.Sprintf("%s-%d", key, n)
					tx := db.Begin(client.TxnOptions{})
					if tx.Put(key, []byte(val)) != nil || tx.Commit() != nil {
						return
					}
					acked[key] = val
				}
			})
		}
		s.RunFor(200*time.Millisecond + time.Duration(seed)*1700*time.Microsecond)
		s.Crash(server)
		persisted := map[string]string{}
		// The serial node's data keys ("d/"): it also persists the number of its life.
		s.Durable(server).Scan([]byte("d/"), []byte("d0"), func(k, v []byte) bool { persisted[string(k)] = string(v); return true })
		if len(persisted) == 0 {
			t.Fatal("nothing was persisted before the crash")
		}
		for k, v := range acked {
			if persisted["d/"+k] != v {
				t.Fatalf("seed %d: acknowledged %s=%s, durable state has %q", seed, k, v, persisted["d/"+k])
			}
		}
		s.RunFor(time.Second) // in-flight flushes of the dead incarnation must not land
		if err := s.Restart(server); err != nil {
			t.Fatal(err)
		}
		type inspect interface {
			Len() int
			Value(string) ([]byte, bool)
		}
		h := s.Handler(server).(inspect)
		if h.Len() != len(persisted) {
			t.Fatalf("seed %d: restarted node holds %d keys, durable state at the crash had %d", seed, h.Len(), len(persisted))
		}
		for k, v := range persisted {
			if got, ok := h.Value(k[len("d/"):]); !ok || string(got) != v {
				t.Fatalf("seed %d: restarted node has %s=%q, persisted %q", seed, k, got, v)
			}
		}
		s.Stop()
	}
}

func BenchmarkSimEvents(b *testing.B) {
	var events uint64
	start := time.Now()
	for i := 0; i < b.N; i++ {
		s, _ := counterRun(b, uint64(i), 200, 5*time.Second)
		events += s.Stats().Events
	}
	b.ReportMetric(float64(events)/time.Since(start).Seconds(), "events/s")
}

// BenchmarkSimDiscardPersisted runs BenchmarkSimEvents' counters, whose every commit persists,
// keeping the persisted writes (as a run that may restart a node must) and discarding them.
func BenchmarkSimDiscardPersisted(b *testing.B) {
	for _, discard := range []bool{false, true} {
		b.Run(fmt.Sprint("discard=", discard), func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				counterRunWith(b, uint64(i), 200, 5*time.Second, func(c *Config) { c.DiscardPersisted = discard })
			}
		})
	}
}

// BenchmarkSimPingStorm measures the simulator core: 25 nodes (5 regions × 5) keep 40 pings
// each in flight to random peers, with the CPU model on.
func BenchmarkSimPingStorm(b *testing.B) {
	l := topo.DefaultLayout()
	l.NodesPerRegion = 5
	tp, err := topo.FromPreset("k2-5region", l)
	if err != nil {
		b.Fatal(err)
	}
	var events uint64
	start := time.Now()
	for i := 0; i < b.N; i++ {
		cfg := DefaultConfig()
		cfg.Topology, cfg.Protocol, cfg.Seed = tp, stormProto{}, uint64(i)
		s, err := New(cfg)
		if err != nil {
			b.Fatal(err)
		}
		for _, n := range s.nodes {
			n := n
			s.At(0, func() {
				for j := 0; j < 40; j++ {
					n.Send(topo.NodeID(n.rng.IntN(25)), &ping{})
				}
			})
		}
		s.RunFor(2 * time.Second)
		events += s.Stats().Events
	}
	b.ReportMetric(float64(events)/time.Since(start).Seconds(), "events/s")
}

type stormProto struct{ echoProto }

func (stormProto) NewNode(cfg node.Config) (node.Handler, error) {
	return &stormNode{env: cfg.Env}, nil
}

type stormNode struct{ env node.Env }

func (s *stormNode) Handle(from node.ID, m wire.Msg) {
	switch m.(type) {
	case *ping:
		s.env.Send(from, &pong{})
	case *pong:
		s.env.Send(topo.NodeID(s.env.Rand().IntN(25)), &ping{})
	}
}
