package k2

import (
	"testing"

	"github.com/meridiandb/meridian/internal/protocol/prototest"
	"github.com/meridiandb/meridian/internal/storage"
	"github.com/meridiandb/meridian/internal/ts"
)

// TestReadMarkAtValue: a read waiting by PUSHWS on an older writer W has taken no value, so by
// default (read-mark=value) a write X between W and the read still lands; once W is decided the
// read looks at the key afresh, waits on X too and reads X's value, and only then does the key's
// watermark hold a later write below the read off. With read-mark=arrival X is refused.
func TestReadMarkAtValue(t *testing.T) {
	for _, mode := range []string{"value", "arrival"} {
		t.Run(mode, func(t *testing.T) {
			n, env := newScriptNode(t, map[string]string{"read-mark": mode})
			tp := env.Topo
			rec, coord := tp.DataNodes(1)[0], tp.DataNodes(2)[0]
			key := prototest.KeysOn(t, tp, n.self, "mark", 1)[0]
			at := func(d int64, seq uint64) (storage.TxnID, ts.Timestamp) {
				return storage.MakeTxnID(int32(coord), seq), ts.Timestamp{Wall: env.Clock + d, Origin: uint32(seq)}
			}
			wTxn, wTS := at(0, 1)
			xTxn, xTS := at(10, 2)
			rTxn, rTS := at(20, 3)
			yTxn, yTS := at(15, 4)
			write := func(id uint64, txn storage.TxnID, at ts.Timestamp, v string) *WriteResp {
				t.Helper()
				n.Handle(coord, &WriteReq{ReqID: id, Txn: txn, TS: at, Key: key, Value: []byte(v), Recorder: rec, WSeq: 1})
				env.Flush()
				for _, s := range env.Take() {
					if m, ok := s.M.(*WriteResp); ok && m.ReqID == id {
						return m
					}
				}
				t.Fatalf("write %d not answered", id)
				return nil
			}
			// sent returns the read's answer, if any, and the transactions PUSHWS went out for.
			sent := func() (*ReadResp, []storage.TxnID) {
				var read *ReadResp
				var pushed []storage.TxnID
				for _, s := range env.Take() {
					switch m := s.M.(type) {
					case *ReadResp:
						read = m
					case *PushReq:
						pushed = append(pushed, m.Txn)
					}
				}
				return read, pushed
			}

			if w := write(1, wTxn, wTS, "w"); w.Aborted {
				t.Fatalf("W refused: %+v", w)
			}
			n.Handle(coord, &ReadReq{ReqID: 2, Txn: rTxn, TS: rTS, Key: key})
			if read, pushed := sent(); read != nil || len(pushed) != 1 || pushed[0] != wTxn {
				t.Fatalf("the read should wait on W by PUSHWS: answer %+v, PUSHWS for %v", read, pushed)
			}
			x := write(3, xTxn, xTS, "x")
			if mode == "arrival" {
				if !x.Aborted || x.Cause != "read-watermark" {
					t.Fatalf("read-mark=arrival: X below the waiting read should be refused, got %+v", x)
				}
				return
			}
			if x.Aborted {
				t.Fatalf("X below a read that has taken no value was refused: %+v", x)
			}
			n.Handle(rec, &PushResp{Txn: wTxn, Committed: true, TS: wTS})
			if read, pushed := sent(); read != nil || len(pushed) != 1 || pushed[0] != xTxn {
				t.Fatalf("once W is decided the read should wait on X, the newest write below it: answer %+v, PUSHWS for %v", read, pushed)
			}
			n.Handle(rec, &PushResp{Txn: xTxn, Committed: true, TS: xTS})
			read, _ := sent()
			if read == nil || read.Aborted || !read.Found || string(read.Value) != "x" {
				t.Fatalf("the read should take X's value, got %+v", read)
			}
			if y := write(5, yTxn, yTS, "y"); !y.Aborted || y.Cause != "read-watermark" {
				t.Fatalf("a write below a read that took its value should be refused, got %+v", y)
			}
		})
	}
}
