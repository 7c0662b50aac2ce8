package crdb

import (
	"slices"

	"github.com/meridiandb/meridian/internal/protocol/txnkit"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/wire"
)

// refreshShare is what one RefreshReq re-validates at one leaseholder.
type refreshShare struct {
	node  topo.NodeID
	keys  []string
	spans []Span
}

// refreshSpanOverheadBytes is what a key or span counts towards a share besides its own bytes:
// its CBOR framing, with room to spare.
const refreshSpanOverheadBytes = 16

// refreshShares cuts a transaction's reads into RefreshReqs: each leaseholder gets its point
// reads and the spans that reach it, in messages of at most wire.MaxScanBytes of keys. A
// transaction's reads are not bounded as its writes are (a thousand batch reads of 4 KiB keys
// make 4 MiB), and one message per leaseholder holding all of them, every span of the
// transaction besides, could outgrow a frame: a node reading a frame over wire.MaxFrameBytes
// drops the link, so that transaction could never refresh, and waited out the call's timeout at
// every push. Leaseholders are in node order, so the messages sent are the same every run.
func refreshShares(tp *topo.Topology, keys []string, spans []Span) []refreshShare {
	nodes, byNode := groupByNode(tp, keys)
	spansOf := map[topo.NodeID][]Span{}
	for _, sp := range spans {
		for _, nd := range txnkit.ScanNodes(tp, sp.Start, sp.End) {
			if !slices.Contains(nodes, nd) {
				nodes = append(nodes, nd)
			}
			spansOf[nd] = append(spansOf[nd], sp)
		}
	}
	sortNodes(nodes)
	var out []refreshShare
	for _, nd := range nodes {
		sh, size := refreshShare{node: nd}, 0
		cut := func(add int) {
			if size+add > wire.MaxScanBytes && size > 0 {
				out = append(out, sh)
				sh, size = refreshShare{node: nd}, 0
			}
			size += add
		}
		for _, k := range byNode[nd] {
			cut(len(k) + refreshSpanOverheadBytes)
			sh.keys = append(sh.keys, k)
		}
		for _, sp := range spansOf[nd] {
			cut(len(sp.Start) + len(sp.End) + refreshSpanOverheadBytes)
			sh.spans = append(sh.spans, sp)
		}
		out = append(out, sh)
	}
	return out
}
