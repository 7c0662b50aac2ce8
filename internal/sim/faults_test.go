package sim

import (
	"cmp"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/meridiandb/meridian/client"
	"github.com/meridiandb/meridian/internal/node"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/wire"
)

// dupPings sends n pings one millisecond apart from SH's node to SG's, every message duplicated
// with copies up to bound late, and returns the pings SG's node received in order of arrival.
func dupPings(t *testing.T, seed uint64, n int, bound time.Duration) ([]arrival, *Sim) {
	t.Helper()
	tp, err := topo.FromPreset("k2-5region", topo.DefaultLayout())
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Topology, cfg.Protocol, cfg.Seed, cfg.ServiceTime = tp, echoProto{}, seed, 0
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, sn := range s.nodes {
		sn.h.(*echoNode).sim = s
	}
	s.SetDuplication(1)
	s.SetDuplicateDelay(bound)
	a, b := tp.DataNodes(0)[0], tp.DataNodes(4)[0]
	for i := range n {
		s.At(int64(i)*int64(time.Millisecond), func() { s.send(int32(a), int32(b), &ping{Sent: s.Now()}, s.Now()) })
	}
	s.RunFor(time.Second)
	return s.nodes[b].h.(*echoNode).pings, s
}

// A duplicated message's copy arrives up to the bound after its original, at a delay drawn from
// the seeded source, out of the link's order (after messages sent later), and without holding
// the link's later originals back behind it. Before, every copy arrived 1 ns after its original,
// so it never reached a node after what followed it (a transaction's end).
func TestDuplicateArrivesLate(t *testing.T) {
	const n, bound = 200, 50 * time.Millisecond
	got, s := dupPings(t, 1, n, bound)
	if len(got) != 2*n {
		t.Fatalf("%d pings delivered, want %d (each twice)", len(got), 2*n)
	}
	tp := s.Topology()
	oneWay, jitter := int64(tp.OneWay(0, 4)), int64(s.Config().Jitter)
	bySent := map[int64][]int64{} // each ping's arrival times, first the original's
	outOfOrder := 0
	var lastOriginal int64
	for _, a := range got {
		bySent[a.sent] = append(bySent[a.sent], a.at)
		if len(bySent[a.sent]) == 1 {
			lastOriginal = max(lastOriginal, a.sent)
		} else if a.sent < lastOriginal {
			outOfOrder++ // a copy delivered after the original of a later ping
		}
	}
	var maxExtra int64
	for sent, ats := range bySent {
		if len(ats) != 2 {
			t.Fatalf("ping sent at %v delivered %d times, want 2", sent, len(ats))
		}
		if d := ats[0] - sent; d < oneWay || d >= oneWay+jitter {
			t.Fatalf("ping sent at %v took %v, want %v + [0, %v): a copy held the link's order back", sent,
				time.Duration(d), time.Duration(oneWay), time.Duration(jitter))
		}
		extra := ats[1] - ats[0]
		if extra > int64(bound) {
			t.Fatalf("copy of the ping sent at %v arrived %v after it, want at most %v", sent, time.Duration(extra), bound)
		}
		maxExtra = max(maxExtra, extra)
	}
	// 200 copies uniform over 50 ms: the latest is over 40 ms late unless the draw is broken.
	if maxExtra < int64(40*time.Millisecond) {
		t.Errorf("latest copy %v after its original, want copies spread up to %v", time.Duration(maxExtra), bound)
	}
	if outOfOrder < n/2 {
		t.Errorf("%d of %d copies arrived after a later ping's original, want most (pings are 1 ms apart)", outOfOrder, n)
	}
	again, _ := dupPings(t, 1, n, bound)
	if !reflect.DeepEqual(got, again) {
		t.Error("same seed, different arrivals")
	}
	if other, _ := dupPings(t, 2, n, bound); reflect.DeepEqual(got, other) {
		t.Error("another seed, the same arrivals")
	}
	if right, _ := dupPings(t, 1, n, 0); !slices.IsSortedFunc(right, func(a, b arrival) int { return cmp.Compare(a.sent, b.sent) }) {
		t.Error("with no extra delay a copy still arrived after a later ping")
	}
}

// With client links reliable, loss and duplication spare the messages between clients and their
// coordinator, as TCP does, and still hit messages between nodes.
func TestClientLinksReliable(t *testing.T) {
	for _, reliable := range []bool{true, false} {
		seen := map[[2]uint64]int{} // requests received, by transaction and sequence number
		s := newGatewayProto(t, gatewayProto{onRequest: func(_ node.ID, req *wire.ClientRequest) {
			seen[[2]uint64{req.Txn, uint64(req.Seq)}]++
		}})
		s.SetDuplication(1)
		s.SetClientLinksReliable(reliable)
		committed := 0
		s.AddClient(0, s.Topology().DataNodes(0)[0], 0, func(db *client.DB) {
			for range 10 {
				tx := db.Begin(client.TxnOptions{})
				if tx.Put("k", []byte("v")) == nil && tx.Commit() == nil {
					committed++
				}
			}
		})
		s.RunFor(time.Second)
		s.Stop()
		if committed != 10 {
			t.Fatalf("reliable %v: %d of 10 transactions committed", reliable, committed)
		}
		twice := 0
		for _, n := range seen {
			if n > 1 {
				twice++
			}
		}
		if want := map[bool]int{true: 0, false: len(seen)}[reliable]; len(seen) != 20 || twice != want {
			t.Errorf("reliable %v: %d requests, %d of them received twice; want 20 and %d", reliable, len(seen), twice, want)
		}
	}

	// Node-to-node messages are still lost.
	s := newEcho(t, 0)
	s.SetClientLinksReliable(true)
	s.SetLoss(1)
	a, b := s.Topology().DataNodes(0)[0], s.Topology().DataNodes(1)[0]
	s.At(0, func() { s.send(int32(a), int32(b), &ping{Sent: s.Now()}, s.Now()) })
	s.RunFor(time.Second)
	if got := len(s.nodes[b].h.(*echoNode).pings); got != 0 {
		t.Errorf("a node's ping got through loss 1 with client links reliable (%d delivered)", got)
	}
}

// HealRegions ends one partition and leaves the others.
func TestHealRegionsHealsOnePair(t *testing.T) {
	s := newEcho(t, 0)
	tp := s.Topology()
	sh, bj, sg := tp.DataNodes(0)[0], tp.DataNodes(1)[0], tp.DataNodes(4)[0]
	s.PartitionRegions(0, 1)
	s.PartitionRegions(4, 0)
	s.HealRegions(0, 4)
	s.send(int32(sh), int32(bj), &ping{}, 0)
	s.send(int32(sh), int32(sg), &ping{}, 0)
	s.send(int32(sg), int32(sh), &ping{}, 0)
	s.RunFor(time.Second)
	got := []int{len(s.nodes[bj].h.(*echoNode).pings), len(s.nodes[sg].h.(*echoNode).pings), len(s.nodes[sh].h.(*echoNode).pings)}
	if !slices.Equal(got, []int{0, 1, 1}) {
		t.Errorf("pings SH→BJ, SH→SG, SG→SH delivered %v, want [0 1 1]: SH|BJ still cut, SH|SG healed both ways", got)
	}
}

// SlowRegions delays the messages sent between two regions while it lasts, both ways and no
// others, and keeps each link FIFO: a message sent just after the slowdown ends arrives behind
// the slowed ones, not before them.
func TestSlowRegions(t *testing.T) {
	s := newEcho(t, 0)
	tp := s.Topology()
	sh, bj, sg := tp.DataNodes(0)[0], tp.DataNodes(1)[0], tp.DataNodes(4)[0]
	ms := int64(time.Millisecond)
	oneWay := int64(tp.OneWay(0, 1))
	send := func(at int64, from, to topo.NodeID) {
		s.At(at, func() { s.send(int32(from), int32(to), &ping{Sent: s.Now()}, s.Now()) })
	}
	s.At(0, func() { s.SlowRegions(0, 1, 500*time.Millisecond) })
	send(10*ms, sh, bj) // slowed
	send(10*ms, bj, sh) // slowed, the other way
	send(10*ms, sh, sg) // another pair: not slowed
	s.At(100*ms, func() { s.SlowRegions(0, 1, 0) })
	send(100*ms, sh, bj) // after the slowdown: held behind the slowed one only
	send(900*ms, sh, bj) // long after: at its usual delay
	s.RunFor(2 * time.Second)
	var toBJ, toSH, toSG []int64
	for _, a := range s.nodes[bj].h.(*echoNode).pings {
		toBJ = append(toBJ, a.at-a.sent)
	}
	for _, a := range s.nodes[sh].h.(*echoNode).pings {
		toSH = append(toSH, a.at-a.sent)
	}
	for _, a := range s.nodes[sg].h.(*echoNode).pings {
		toSG = append(toSG, a.at-a.sent)
	}
	slowed := oneWay + 500*ms
	if want := []int64{slowed, slowed - 90*ms, oneWay}; !slices.Equal(toBJ, want) {
		t.Errorf("SH→BJ took %v, want %v: slowed, then held behind it (FIFO), then as usual", toBJ, want)
	}
	if !slices.Equal(toSH, []int64{slowed}) {
		t.Errorf("BJ→SH took %v, want [%d]: a slowdown slows both ways", toSH, slowed)
	}
	if !slices.Equal(toSG, []int64{int64(tp.OneWay(0, 4))}) {
		t.Errorf("SH→SG took %v, want its usual %v: only the slowed pair is slowed", toSG, tp.OneWay(0, 4))
	}
}
