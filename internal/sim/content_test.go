package sim

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/meridiandb/meridian/internal/node"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/wire"
)

// bag is a test protocol whose answers carry what a node finds by ranging over a map: the
// nondeterminism the content digest exists to catch. A node answers each bagAsk with a bagList
// of the keys of an 8-entry map, in map order unless sorted, and with a bagMap holding the map
// itself (a map field, which the wire encoding must write in one order).
type bagAsk struct{ N int }
type bagList struct {
	N    int
	Keys []string
}
type bagMap struct {
	N int
	M map[string]int
}
type bagFunc struct{ F func() }

func (*bagAsk) Kind() wire.Kind  { return 92 }
func (*bagList) Kind() wire.Kind { return 93 }
func (*bagMap) Kind() wire.Kind  { return 94 }
func (*bagFunc) Kind() wire.Kind { return 95 }

type bagProto struct{ sorted, unencodable bool }

func (bagProto) Name() string                     { return "bag-test" }
func (bagProto) Model() string                    { return "" }
func (bagProto) Options() map[string]string       { return nil }
func (bagProto) Layout(l topo.Layout) topo.Layout { return l }
func (p bagProto) NewNode(cfg node.Config) (node.Handler, error) {
	return &bagNode{env: cfg.Env, p: p}, nil
}

type bagNode struct {
	env node.Env
	p   bagProto
}

// bagKeys are the map's keys: 8 fill one group of Go's map, whose every range starts at a
// random one of its 8 slots.
var bagKeys = []string{"a", "b", "c", "d", "e", "f", "g", "h"}

func (b *bagNode) Handle(from node.ID, m wire.Msg) {
	ask, ok := m.(*bagAsk)
	if !ok {
		return
	}
	set := map[string]int{}
	for i, k := range bagKeys {
		set[k] = i
	}
	var keys []string
	for k := range set {
		keys = append(keys, k)
	}
	if b.p.sorted {
		slices.Sort(keys)
	}
	b.env.Send(from, &bagList{N: ask.N, Keys: keys})
	b.env.Send(from, &bagMap{N: ask.N, M: set})
	if b.p.unencodable {
		b.env.Send(from, &bagFunc{F: func() {}})
	}
}

// bagAsks is how many bagAsks a bagRun sends, each answered by a list in a fresh map order.
const bagAsks = 64

// bagRun sends bagAsks asks from one node to another, one every millisecond, runs them out
// and returns the simulation.
func bagRun(t *testing.T, p bagProto, contents bool) *Sim {
	t.Helper()
	tp, err := topo.FromPreset("k2-5region", topo.DefaultLayout())
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Topology, cfg.Protocol, cfg.Seed, cfg.DigestContents = tp, p, 5, contents
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	a, b := tp.DataNodes(0)[0], tp.DataNodes(3)[0]
	for i := range bagAsks {
		s.At(int64(i)*int64(time.Millisecond), func() { s.send(int32(a), int32(b), &bagAsk{N: i}, s.Now()) })
	}
	s.RunFor(time.Second)
	if got := s.Stats().Messages; got < 3*bagAsks {
		t.Fatalf("%d messages sent, want at least %d", got, 3*bagAsks)
	}
	return s
}

func contentDigest(t *testing.T, s *Sim) uint64 {
	t.Helper()
	d, err := s.ContentDigest()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// A run whose answers list keys in map order keeps its trace, run after run, but not its
// content digest; the same run with the keys sorted keeps both. The bagMap answers' map field
// is in both: the wire encoding writes a map's keys sorted, so it does not move the content
// digest.
//
// The failing variant is not flaky. Each run sends bagAsks = 64 lists, each the 8 keys of an
// 8-entry map in the order one range over it took. Go starts every range over a map at a random
// place (today, one of the 8 rotations of a one-group map, uniformly, each range drawing
// afresh), so two ranges give one order with probability 1/8, and two runs send the same 64
// lists with probability 8^-64 = 2^-192; with bagRuns = 3 runs, all three agree with
// probability 2^-384. Even a runtime that only halved the chance of a repeated order would
// leave 2^-128. (A collision of the 64-bit digest, about 2^-64, is as negligible.)
func TestContentDigestCatchesMapOrder(t *testing.T) {
	const bagRuns = 3
	for _, sorted := range []bool{false, true} {
		t.Run(fmt.Sprintf("sorted=%v", sorted), func(t *testing.T) {
			var traces, contents []uint64
			for range bagRuns {
				s := bagRun(t, bagProto{sorted: sorted}, true)
				traces = append(traces, s.Digest())
				contents = append(contents, contentDigest(t, s))
			}
			t.Logf("trace digests %016x, content digests %016x", traces, contents)
			for i := range traces {
				if traces[i] != traces[0] {
					t.Fatalf("trace digests differ (%016x): map order moved the timing, which this test needs it not to", traces)
				}
			}
			distinct := len(slices.Compact(slices.Sorted(slices.Values(contents))))
			switch {
			case !sorted && distinct == 1:
				t.Fatalf("keys in map order, yet %d runs had one content digest %016x: the content digest missed it", bagRuns, contents[0])
			case sorted && distinct != 1:
				t.Fatalf("sorted keys and map fields, yet content digests differ: %016x", contents)
			}
		})
	}
}

// The content digest is off by default, and asking for it then fails rather than return a
// value two runs would always agree on. On, it leaves the trace digest as it was.
func TestContentDigestOptIn(t *testing.T) {
	off := bagRun(t, bagProto{sorted: true}, false)
	if _, err := off.ContentDigest(); !errors.Is(err, ErrNoContentDigest) {
		t.Fatalf("content digest of a run without it: %v, want ErrNoContentDigest", err)
	}
	on := bagRun(t, bagProto{sorted: true}, true)
	if off.Digest() != on.Digest() || off.Stats() != on.Stats() {
		t.Fatalf("digesting contents changed the run: trace %016x, stats %+v; without: %016x, %+v", on.Digest(), on.Stats(), off.Digest(), off.Stats())
	}
	if c := contentDigest(t, on); c == fnvOffset || c == on.Digest() {
		t.Fatalf("content digest %016x: nothing was folded into it", c)
	}

	// A protocol run (serial, clients, persists): the same trace with the switch on or off, and
	// one content digest per seed.
	plain, plainCommits := counterRun(t, 4, 20, time.Second)
	if *plainCommits == 0 {
		t.Fatal("no transaction committed")
	}
	a, aCommits := counterRunWith(t, 4, 20, time.Second, func(c *Config) { c.DigestContents = true })
	b, _ := counterRunWith(t, 4, 20, time.Second, func(c *Config) { c.DigestContents = true })
	other, _ := counterRunWith(t, 5, 20, time.Second, func(c *Config) { c.DigestContents = true })
	if plain.Digest() != a.Digest() || *plainCommits != *aCommits {
		t.Fatalf("digesting contents changed the trace: %016x/%d commits, without %016x/%d", a.Digest(), *aCommits, plain.Digest(), *plainCommits)
	}
	if contentDigest(t, a) != contentDigest(t, b) {
		t.Fatalf("same seed, content digests %016x vs %016x", contentDigest(t, a), contentDigest(t, b))
	}
	if contentDigest(t, a) == contentDigest(t, other) {
		t.Fatalf("seeds 4 and 5 gave one content digest %016x", contentDigest(t, a))
	}
}

// A message the wire encoding cannot write (it could not travel between real servers either)
// makes ContentDigest fail, naming it, instead of leaving it out of the digest.
func TestContentDigestUnencodable(t *testing.T) {
	s := bagRun(t, bagProto{sorted: true, unencodable: true}, true)
	_, err := s.ContentDigest()
	if err == nil {
		t.Fatal("a message with a func field was digested without complaint")
	}
	t.Log(err)
}
