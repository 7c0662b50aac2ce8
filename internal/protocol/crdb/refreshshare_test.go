package crdb

import (
	"slices"
	"strings"
	"testing"

	"github.com/meridiandb/meridian/internal/protocol/prototest"
	"github.com/meridiandb/meridian/internal/storage"
	"github.com/meridiandb/meridian/internal/ts"
	"github.com/meridiandb/meridian/internal/wire"
)

// TestRefreshSharesFitAFrame: a transaction that read 5,000 keys of 4 KiB at one leaseholder
// (20 MB, more than a frame) and scanned a few spans refreshes in several RefreshReqs to that
// node, each within a frame once encoded, which together carry every key once and every span
// that reaches the node; another leaseholder gets only its own key and the spans that reach it.
func TestRefreshSharesFitAFrame(t *testing.T) {
	cfg, err := prototest.SimConfig(prototest.Case{Protocol: "crdb", Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	tp := cfg.Topology
	nd, other := tp.DataNodes(0)[0], tp.DataNodes(1)[0]
	var keys []string
	for _, k := range prototest.KeysOn(t, tp, nd, "refresh", 5000) {
		keys = append(keys, k+strings.Repeat("k", 4096-len(k)))
	}
	otherKey := prototest.KeysOn(t, tp, other, "refresh-other", 1)[0]
	keys = append(keys, otherKey)
	spans := []Span{{Start: keys[0], End: keys[0] + "\x00"}, {Start: otherKey, End: otherKey + "\x00"}}
	shares := refreshShares(tp, keys, spans)

	var gotKeys []string
	var gotSpans []Span
	toNd := 0
	for _, sh := range shares {
		m := &RefreshReq{Req: 1, Txn: storage.MakeTxnID(1, 1), Keys: sh.keys, Spans: sh.spans, From: ts.Timestamp{Wall: 1}, To: ts.Timestamp{Wall: 2}}
		b, err := wire.Encode(m)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) > wire.MaxFrameBytes {
			t.Fatalf("a RefreshReq to node %d of %d bytes, more than a frame (%d)", sh.node, len(b), wire.MaxFrameBytes)
		}
		switch sh.node {
		case nd:
			toNd++
			gotKeys = append(gotKeys, sh.keys...)
			gotSpans = append(gotSpans, sh.spans...)
		case other:
			if !slices.Equal(sh.keys, []string{otherKey}) || len(sh.spans) != 1 || sh.spans[0] != spans[1] {
				t.Errorf("node %d's share: keys %d, spans %v; want its one key and the span that reaches it", other, len(sh.keys), sh.spans)
			}
		default:
			t.Errorf("a share for node %d, which holds none of the reads", sh.node)
		}
	}
	if toNd < 2 {
		t.Errorf("20 MB of reads at node %d went in %d RefreshReq(s)", nd, toNd)
	}
	if want := keys[:5000]; !slices.Equal(gotKeys, want) {
		t.Errorf("node %d's shares carry %d keys, want its %d reads once each, in order", nd, len(gotKeys), len(want))
	}
	if !slices.Equal(gotSpans, spans[:1]) {
		t.Errorf("node %d's shares carry spans %v, want %v", nd, gotSpans, spans[:1])
	}
}
