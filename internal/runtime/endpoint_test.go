package runtime

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/meridiandb/meridian/client"
	"github.com/meridiandb/meridian/internal/node"
	"github.com/meridiandb/meridian/internal/runtime/frame"
	"github.com/meridiandb/meridian/internal/storage/durable"
	"github.com/meridiandb/meridian/internal/topo"
)

// endpointsOfLife starts node 0 of cfg on its data dir, opens n client connections to it one
// after another, and returns the endpoint ids they were given. Nothing is persisted when the
// node closes, so a crash would leave the same state behind.
func endpointsOfLife(t *testing.T, cfg *Config, n int) []topo.NodeID {
	t.Helper()
	s, err := Start(cfg, 0, Options{NoGRPC: true, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var ids []topo.NodeID
	for range n {
		tr, err := client.Dial(cfg.Nodes[0].Addr, cfg.DialOptions()...)
		if err != nil {
			t.Fatal(err)
		}
		id := topo.NodeID(tr.Endpoint())
		tr.Close()
		if host, ok := frame.HostOf(id); !ok || host != 0 {
			t.Fatalf("endpoint %#x: host %d, %v; want a client of node 0", id, host, ok)
		}
		ids = append(ids, id)
	}
	return ids
}

// A node restarted on its data dir gives its clients ids none of its earlier lives gave:
// another node may still hold a reply or a transaction for an earlier client, and a new one
// with its id would be handed it (a counter in memory started again at 1 with every life). The
// first life hands out more than one block, so the next must start above the block reserved
// mid-life, not only above the first.
func TestClientEndpointsNotReusedAcrossRestarts(t *testing.T) {
	cfg := testConfig(t, nil)
	seen := map[topo.NodeID]int{}
	for life, n := range []int{endpointBlock + 2, 3, 3} {
		for _, id := range endpointsOfLife(t, cfg, n) {
			if prev, ok := seen[id]; ok {
				t.Fatalf("life %d gave endpoint %#x again (life %d gave it first)", life, id, prev)
			}
			seen[id] = life
		}
	}
}

type nopSink struct{}

func (nopSink) enqueue(topo.NodeID, []byte) {}
func (nopSink) close()                      {}

// Within a life the sequence wraps modulo frame.ClientCounters: an id that an open connection
// still holds is skipped, or the new connection would take over the old one's replies.
func TestClientEndpointSkipsOpenConnections(t *testing.T) {
	store := durable.NewMem()
	s := &Server{id: 3, clients: map[topo.NodeID]clientSink{}, store: store, committer: durable.NewCommitter(store, 0)}
	defer s.committer.Close()
	s.me.Name = "n3"
	last := uint32(frame.ClientCounters - 1)
	s.endpoints.next = 5*frame.ClientCounters + uint64(last)
	s.endpoints.limit = s.endpoints.next
	s.clients[frame.ClientID(3, last)] = nopSink{}
	s.clients[frame.ClientID(3, 0)] = nopSink{}
	id, err := s.newClientID()
	if err != nil {
		t.Fatal(err)
	}
	if want := frame.ClientID(3, 1); id != want {
		t.Fatalf("got endpoint %#x, want %#x (the first not held)", id, want)
	}
	// The block was reserved before the id was handed out.
	got, err := loadEndpointSeq(store)
	if err != nil {
		t.Fatal(err)
	}
	if want := 5*frame.ClientCounters + uint64(last) + endpointBlock; got != want {
		t.Fatalf("persisted sequence %d, want %d", got, want)
	}
}

// A damaged sequence record stops the node with an error naming it, rather than numbering
// clients from a guess.
func TestBadEndpointRecordRefused(t *testing.T) {
	cfg := testConfig(t, nil)
	for _, val := range [][]byte{{1, 2, 3}, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}} {
		st, err := durable.OpenPebble(cfg.Nodes[0].DataDir)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Apply([]node.Write{{Key: endpointKey, Value: val}}); err != nil {
			t.Fatal(err)
		}
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
		s, err := Start(cfg, 0, Options{NoGRPC: true, Logger: slog.New(slog.DiscardHandler)})
		if err == nil {
			s.Close()
			t.Fatalf("record %x accepted", val)
		}
		if !strings.Contains(err.Error(), "bad client endpoint sequence record") {
			t.Fatalf("record %x: %v", val, err)
		}
	}
}
