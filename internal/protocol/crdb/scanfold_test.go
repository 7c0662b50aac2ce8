package crdb

import (
	"testing"
	"time"

	"github.com/meridiandb/meridian/internal/node"
	"github.com/meridiandb/meridian/internal/node/nodetest"
	"github.com/meridiandb/meridian/internal/protocol/prototest"
	"github.com/meridiandb/meridian/internal/protocol/txnkit"
	"github.com/meridiandb/meridian/internal/storage"
	"github.com/meridiandb/meridian/internal/storage/durable"
	"github.com/meridiandb/meridian/internal/ts"
)

// TestScanMarkFoldKeepsOtherReaders: T reads k at m, U scans a span holding k at m.
// T's later write of k must land above m: U read k at m and saw nothing of T's. With U's span
// mark in spanMarks it does; once the marks fold into the read floor at exactly m (the median
// of the marks), keyWriteFloor takes the floor (= m) for T's own read (lastReader {m, T}) and
// lets T write at m, under U's completed scan.
func TestScanMarkFoldKeepsOtherReaders(t *testing.T) {
	for _, fold := range []bool{false, true} {
		cfg, err := prototest.SimConfig(prototest.Case{Protocol: name, Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		tp := cfg.Topology
		// The clock has reached the reads' timestamp m: a leaseholder holds a read further
		// ahead than 2×max-offset until it has (Handle).
		env := &nodetest.ScriptEnv{ID: tp.DataNodes(0)[0], Topo: tp, Clock: 5 * int64(time.Second), Disk: durable.NewMem()}
		h, err := proto{}.NewNode(node.Config{Env: env, Durable: env.Disk, Options: map[string]string{"max-offset": "20ms"}})
		if err != nil {
			t.Fatal(err)
		}
		n := h.(*Node)
		settle := func() {
			for range 3 {
				env.Flush()
				env.Advance(0)
			}
			env.Flush()
		}
		settle()
		env.Take()
		c := tp.DataNodes(1)[0]
		k := prototest.KeysOn(t, tp, n.self, "fold", 1)[0]
		m := ts.Timestamp{Wall: 5 * int64(time.Second)}
		if !n.store.ReadFloor().Less(m) {
			t.Fatalf("floor %v not below m", n.store.ReadFloor())
		}
		T := storage.MakeTxnID(int32(c), 1)
		U := storage.MakeTxnID(int32(c), 2)
		seq := uint64(0)
		seq++
		n.Handle(c, &ReadReq{Req: seq, Txn: TxnMeta{ID: T, Age: m, RecordNode: c, Coord: c}, Key: k, ReadTS: m, Limit: m})
		seq++
		n.Handle(c, &ScanReq{Req: seq, Txn: TxnMeta{ID: U, Age: m, RecordNode: -1, Coord: c}, Span: Span{Start: k, End: k + "\x00"}, ReadTS: m, Limit: m})
		if fold {
			for i := range txnkit.MaxRangeMarks {
				seq++
				other := storage.MakeTxnID(int32(c), uint64(100+i))
				n.Handle(c, &ScanReq{Req: seq, Txn: TxnMeta{ID: other, Age: m, RecordNode: -1, Coord: c}, Span: Span{Start: "zz", End: "zz\x00"}, ReadTS: m, Limit: m})
			}
		}
		settle()
		env.Take()
		seq++
		n.Handle(c, &WriteReq{Req: seq, Txn: TxnMeta{ID: T, Age: m, RecordNode: c, Coord: c}, Key: k, Value: []byte("t"), WriteTS: m})
		settle()
		var resp *WriteResp
		for _, s := range env.Take() {
			if r, ok := s.M.(*WriteResp); ok && r.Req == seq {
				resp = r
			}
		}
		if resp == nil {
			t.Fatalf("fold=%v: no write answer", fold)
		}
		if !m.Less(resp.WrittenTS) {
			t.Errorf("fold=%v: T's write of k landed at %v, at or below U's completed scan of k at %v", fold, resp.WrittenTS, m)
		}
	}
}
