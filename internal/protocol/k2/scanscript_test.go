package k2

import (
	"slices"
	"testing"

	"github.com/meridiandb/meridian/internal/node/nodetest"
	"github.com/meridiandb/meridian/internal/protocol/prototest"
	"github.com/meridiandb/meridian/internal/storage"
	"github.com/meridiandb/meridian/internal/storage/mvcc"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/ts"
	"github.com/meridiandb/meridian/internal/wire"
)

// TestScanShareScript walks one data node through a scan share: parked on PUSHWS (an OpsProbe
// hears it held), writes below its timestamp into the range refused while it waits (a key it
// enumerated and a key it did not), its own write and a younger one allowed, answered with the
// limit once the push is answered, then no longer held; a late copy is answered again the
// same way.
func TestScanShareScript(t *testing.T) {
	n, env := newScriptNode(t, nil)
	tp := env.Topo
	coord, rec := tp.DataNodes(1)[0], tp.DataNodes(2)[0]
	k := prototest.KeysOn(t, tp, n.self, "row", 4)
	slices.Sort(k)
	at := func(w int64, o topo.NodeID) ts.Timestamp { return ts.Timestamp{Wall: env.Clock + w, Origin: uint32(o)} }
	w := storage.MakeTxnID(int32(rec), 1<<32|1)
	x := storage.MakeTxnID(int32(rec), 1<<32|2)
	y := storage.MakeTxnID(int32(rec), 1<<32|3)
	s := storage.MakeTxnID(int32(coord), 1<<32|1)
	take := func() []nodetest.Sent { env.Flush(); return env.Take() }
	writeOK := func(id uint64, txn storage.TxnID, stamp ts.Timestamp, key string) bool {
		n.Handle(rec, &WriteReq{ReqID: id, Txn: txn, TS: stamp, Key: key, Value: []byte("v"), Recorder: rec, WSeq: 1})
		for _, m := range take() {
			if r, ok := m.M.(*WriteResp); ok && r.ReqID == id {
				return !r.Aborted
			}
		}
		t.Fatalf("write %d not answered", id)
		return false
	}
	// W (ts +100) has an intent on k[0]; k[1] holds a committed version.
	if !writeOK(1, w, at(100, rec), k[0]) {
		t.Fatal("W's write refused")
	}
	old := storage.MakeTxnID(int32(rec), 1<<32|4)
	if err := n.store.PutCommitted(k[1], mvcc.Version{TS: at(50, rec), Txn: old, Value: []byte("old")}); err != nil {
		t.Fatal(err)
	}
	scan := &ScanReq{ReqID: 7, Txn: s, TS: at(200, coord), Start: "#", End: "$"}
	n.Handle(coord, scan)
	sent := take()
	var pushed bool
	for _, m := range sent {
		switch m.M.(type) {
		case *ScanResp:
			t.Fatal("scan answered while W is undecided")
		case *PushReq:
			pushed = true
		}
	}
	if !pushed {
		t.Fatal("no PUSHWS for W's intent below the scan")
	}
	n.Handle(coord, &OpsProbe{ReqID: 8, Ops: []uint64{7}})
	for _, m := range take() {
		if p, ok := m.M.(*OpsProbeResp); ok && len(p.Missing) != 0 {
			t.Errorf("probe while the scan waits: missing %v", p.Missing)
		}
	}
	if writeOK(2, x, at(150, rec), k[2]) {
		t.Error("a write below the scan into a key it did not see was accepted (phantom)")
	}
	if writeOK(3, x, at(150, rec), k[1]) {
		t.Error("a write below the scan into a key it read was accepted")
	}
	if !writeOK(4, y, at(250, rec), k[3]) {
		t.Error("a write above the scan was refused")
	}
	n.Handle(rec, &PushResp{Txn: w, Committed: true, TS: at(100, rec)})
	var rows []string
	for _, m := range take() {
		if r, ok := m.M.(*ScanResp); ok {
			if r.Aborted {
				t.Fatalf("scan refused: %s", r.Cause)
			}
			rows = scriptRowKeys(r.Rows)
		}
	}
	if want := []string{k[0] + "=v", k[1] + "=old"}; !slices.Equal(rows, want) {
		t.Errorf("scan rows %v, want %v", rows, want)
	}
	n.Handle(coord, &OpsProbe{ReqID: 9, Ops: []uint64{7}})
	for _, m := range take() {
		if p, ok := m.M.(*OpsProbeResp); ok && !slices.Equal(p.Missing, []uint64{7}) {
			t.Errorf("probe after the answer: missing %v, want [7]", p.Missing)
		}
	}
	n.Handle(coord, scan)
	rows = nil
	for _, m := range take() {
		if r, ok := m.M.(*ScanResp); ok {
			rows = scriptRowKeys(r.Rows)
		}
	}
	if want := []string{k[0] + "=v", k[1] + "=old"}; !slices.Equal(rows, want) {
		t.Errorf("late copy: rows %v, want %v", rows, want)
	}

	// A scan limited to one row reads only as far as its first row: Y's undecided intent on
	// k[3], below this scan, is past it, so the scan neither waits for it nor keeps writes below
	// it out of there; a key before its row is covered as an unlimited scan's would be.
	n.Handle(coord, &ScanReq{ReqID: 10, Txn: s, TS: at(300, coord), Start: "#", End: "$", Limit: 1})
	rows = nil
	for _, m := range take() {
		if r, ok := m.M.(*ScanResp); ok {
			rows = scriptRowKeys(r.Rows)
		}
	}
	if want := []string{k[0] + "=v"}; !slices.Equal(rows, want) {
		t.Errorf("limited scan: rows %v, want %v at once", rows, want)
	}
	z := storage.MakeTxnID(int32(rec), 1<<32|5)
	if !writeOK(11, z, at(280, rec), k[2]) {
		t.Error("a write below a limited scan, past its last row, was refused")
	}
	if before := topo.RoutingPrefix(k[0]) + "/a"; before >= k[0] || writeOK(12, z, at(280, rec), before) {
		t.Errorf("a write below a limited scan, before its last row (%q), was accepted (phantom)", before)
	}
}

// TestScanHeldBeforeReady: a scan share that arrives before the node may serve is held, an
// OpsProbe hears it held, and it is answered once the node is ready.
func TestScanHeldBeforeReady(t *testing.T) {
	n, env := newStartingScriptNode(t, nil)
	coord := env.Topo.DataNodes(1)[0]
	s := storage.MakeTxnID(int32(coord), 1<<32|1)
	n.Handle(coord, &ScanReq{ReqID: 5, Txn: s, TS: ts.Timestamp{Wall: env.Clock, Origin: uint32(coord)}, Start: "#"})
	n.Handle(coord, &OpsProbe{ReqID: 6, Ops: []uint64{5}})
	answered := false
	for _, m := range env.Take() {
		switch m := m.M.(type) {
		case *OpsProbeResp:
			if len(m.Missing) != 0 {
				t.Errorf("held scan reported missing: %v", m.Missing)
			}
		case *ScanResp:
			answered = true
		}
	}
	if answered {
		t.Fatal("scan served before the incarnation was durable")
	}
	env.Flush()
	for _, m := range env.Take() {
		if _, ok := m.M.(*ScanResp); ok {
			answered = true
		}
	}
	if !answered {
		t.Error("held scan never answered")
	}
}

func scriptRowKeys(rows []wire.KV) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.Key + "=" + string(r.Value)
	}
	return out
}

// TestScanShareTooLarge: a node whose share of a scan (cut to the limit) exceeds
// wire.MaxScanBytes answers TooLarge with no rows, so no answer can outgrow a frame between
// real nodes; with a limit that fits it answers the rows.
func TestScanShareTooLarge(t *testing.T) {
	n, env := newScriptNode(t, nil)
	tp := env.Topo
	coord := tp.DataNodes(1)[0]
	keys := prototest.KeysOn(t, tp, n.self, "big", 5)
	old := storage.MakeTxnID(int32(coord), 1<<32|9)
	big := make([]byte, 1<<20)
	for _, k := range keys {
		if err := n.store.PutCommitted(k, mvcc.Version{TS: ts.Timestamp{Wall: env.Clock - 1000}, Txn: old, Value: big}); err != nil {
			t.Fatal(err)
		}
	}
	s := storage.MakeTxnID(int32(coord), 1<<32|1)
	for _, tc := range []struct {
		limit    int32
		tooLarge bool
		rows     int
	}{{0, true, 0}, {3, false, 3}} {
		n.Handle(coord, &ScanReq{ReqID: uint64(10 + tc.limit), Txn: s, TS: ts.Timestamp{Wall: env.Clock + 100, Origin: uint32(coord)}, Start: "#", End: "$", Limit: tc.limit})
		env.Flush()
		var got *ScanResp
		for _, m := range env.Take() {
			if r, ok := m.M.(*ScanResp); ok {
				got = r
			}
		}
		if got == nil {
			t.Fatalf("limit %d: no answer", tc.limit)
		}
		if got.TooLarge != tc.tooLarge || len(got.Rows) != tc.rows || got.Aborted {
			t.Errorf("limit %d: TooLarge %v, %d rows, aborted %v; want TooLarge %v with %d rows",
				tc.limit, got.TooLarge, len(got.Rows), got.Aborted, tc.tooLarge, tc.rows)
		}
	}
}
