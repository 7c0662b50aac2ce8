package k2

import (
	"fmt"
	"testing"

	"github.com/meridiandb/meridian/internal/protocol/txnkit"
	"github.com/meridiandb/meridian/internal/storage"
	"github.com/meridiandb/meridian/internal/storage/mvcc"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/ts"
)

// TestScanLimitStepsOneMark: a limited scan that steps over many keys with no row (deleted rows
// at the front of a queue) covers what it read with one range watermark, not one per step. One
// per step filled the node's bound (txnkit.MaxRangeMarks) and folded the scan's own timestamp
// into the read floor, so an older write to any key of the node was refused. A write below
// the scan into what it stepped over is still refused.
func TestScanLimitStepsOneMark(t *testing.T) {
	n, env := newScriptNode(t, nil)
	tp := env.Topo
	coord, rec := tp.DataNodes(1)[0], tp.DataNodes(2)[0]
	at := func(w int64, o topo.NodeID) ts.Timestamp { return ts.Timestamp{Wall: env.Clock + w, Origin: uint32(o)} }
	queue := topo.ShardID(-1)
	for sh := range tp.Shards {
		if tp.Shards[sh].Primary() == n.self {
			queue = topo.ShardID(sh)
			break
		}
	}
	if queue < 0 {
		t.Fatalf("node %d leads no shard", n.self)
	}
	row := func(i int) string { return topo.PinnedKey(queue, fmt.Sprintf("q/%05d", i)) }
	old := storage.MakeTxnID(int32(rec), 1<<32|9)
	dead := 2 * txnkit.MaxRangeMarks
	for i := range dead + 1 {
		if err := n.store.PutCommitted(row(i), mvcc.Version{TS: at(-1000, rec), Txn: old, Value: []byte("v"), Tombstone: i < dead}); err != nil {
			t.Fatal(err)
		}
	}
	s := storage.MakeTxnID(int32(coord), 1<<32|1)
	prefix := topo.PinnedKey(queue, "q/")
	n.Handle(coord, &ScanReq{ReqID: 7, Txn: s, TS: at(200, coord), Start: prefix, End: topo.PrefixEnd(prefix), Limit: 1})
	env.Flush()
	rows := -1
	for _, m := range env.Take() {
		if r, ok := m.M.(*ScanResp); ok {
			rows = len(r.Rows)
		}
	}
	if rows != 1 {
		t.Fatalf("scan answered %d rows, want 1", rows)
	}
	if got := n.scanMarks.Len(); got != 1 || !n.store.ReadFloor().IsZero() {
		t.Errorf("one limited scan left %d range watermarks and read floor %v; want 1 and none", got, n.store.ReadFloor())
	}
	w := storage.MakeTxnID(int32(rec), 1<<32|1)
	refused := func(id uint64, key string) string {
		n.Handle(rec, &WriteReq{ReqID: id, Txn: w, TS: at(100, rec), Key: key, Value: []byte("w"), Recorder: rec, WSeq: uint32(id)})
		env.Flush()
		for _, m := range env.Take() {
			if r, ok := m.M.(*WriteResp); ok && r.ReqID == id {
				return r.Cause
			}
		}
		t.Fatalf("write %d to %s not answered", id, key)
		return ""
	}
	if elsewhere := topo.PinnedKey(queue, "other"); refused(8, elsewhere) != "" {
		t.Errorf("a write below the scan to %s, a key it never read, was refused", elsewhere)
	}
	if refused(9, row(3)) == "" {
		t.Errorf("a write below the scan to %s, a deleted row it stepped over, was accepted (phantom)", row(3))
	}
}
