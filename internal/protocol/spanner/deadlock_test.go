package spanner

import (
	"slices"
	"testing"

	"github.com/meridiandb/meridian/internal/node"
	"github.com/meridiandb/meridian/internal/protocol"
	"github.com/meridiandb/meridian/internal/storage"
	"github.com/meridiandb/meridian/internal/ts"
	"github.com/meridiandb/meridian/internal/wire"
)

// txnAt makes a transaction id coordinated by node coord.
func txnAt(coord uint16, seq uint32) storage.TxnID {
	return storage.TxnID(uint64(coord)<<48 | uint64(seq))
}

type victims struct{ got []storage.TxnID }

func (v *victims) send(to node.ID, m wire.Msg) {
	w := m.(*WoundReq)
	if w.Cause != causeDeadlock || node.ID(w.Txn.Coordinator()) != to {
		panic("detector must send a deadlock WoundReq to the victim's coordinator")
	}
	v.got = append(v.got, w.Txn)
}

func waitsFor(waiter storage.TxnID, age int64, wait uint64, blockers ...storage.TxnID) *WaitsFor {
	return &WaitsFor{Waiter: waiter, Age: ts.Timestamp{Wall: age}, Wait: wait, Blockers: blockers}
}

func TestDetector(t *testing.T) {
	a, b, c, d := txnAt(0, 1), txnAt(1, 2), txnAt(2, 3), txnAt(3, 4)
	// Ages: a oldest … d youngest.
	type msg struct {
		from  node.ID
		wf    *WaitsFor
		ended *WaitEnded
	}
	cases := []struct {
		name string
		msgs []msg
		want []storage.TxnID
		left int // waits still tracked
	}{
		{"chain, no cycle", []msg{{1, waitsFor(a, 1, 1, b), nil}, {2, waitsFor(b, 2, 1, c), nil}}, nil, 2},
		{"two-cycle: youngest dies", []msg{{1, waitsFor(a, 1, 1, b), nil}, {2, waitsFor(b, 2, 1, a), nil}}, []storage.TxnID{b}, 2},
		{"three-cycle across nodes", []msg{{1, waitsFor(c, 3, 1, a), nil}, {2, waitsFor(a, 1, 1, b), nil}, {3, waitsFor(b, 2, 1, c), nil}}, []storage.TxnID{c}, 3},
		{"ended wait breaks the cycle", []msg{{1, waitsFor(a, 1, 1, b), nil}, {1, nil, &WaitEnded{Waiter: a, Wait: 1}}, {2, waitsFor(b, 2, 1, a), nil}}, nil, 1},
		{"end overtakes its report", []msg{{1, nil, &WaitEnded{Waiter: a, Wait: 1}}, {1, waitsFor(a, 1, 1, b), nil}, {2, waitsFor(b, 2, 1, a), nil}}, nil, 1},
		// d closes two cycles at once (d→a→d and d→b→d): both must be broken.
		{"two cycles through one waiter", []msg{{1, waitsFor(a, 1, 1, d), nil}, {2, waitsFor(b, 2, 1, d), nil}, {3, waitsFor(d, 4, 1, a, b), nil}}, []storage.TxnID{d}, 3},
		// a's wait closes a→c→a (c dies); b's wait then closes b→a→d→b (d dies).
		{"each cycle gets its victim", []msg{{1, waitsFor(c, 3, 1, a), nil}, {2, waitsFor(d, 4, 1, b), nil}, {3, waitsFor(a, 1, 1, c, d), nil}, {4, waitsFor(b, 2, 1, a), nil}},
			[]storage.TxnID{c, d}, 4},
		// An upgrade that jumped a's queued request adds b to a's wait 1: the added edge closes b→a→b.
		{"added blocker closes a cycle", []msg{{1, waitsFor(b, 2, 1, a), nil}, {2, waitsFor(a, 1, 1, c), nil}, {2, waitsFor(a, 1, 1, b), nil}}, []storage.TxnID{b}, 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := &victims{}
			det := newDetector(v.send, protocol.NewMetrics())
			for _, m := range tc.msgs {
				if m.wf != nil {
					det.onWaitsFor(m.from, m.wf)
				} else {
					det.onWaitEnded(m.from, m.ended)
				}
			}
			if !slices.Equal(v.got, tc.want) {
				t.Errorf("victims %v, want %v", v.got, tc.want)
			}
			if det.Len() != tc.left {
				t.Errorf("%d waits tracked, want %d", det.Len(), tc.left)
			}
		})
	}
}
