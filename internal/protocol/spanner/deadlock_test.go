package spanner

import (
	"slices"
	"testing"
	"time"

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

func wait(waiter storage.TxnID, age int64, blockers ...storage.TxnID) Wait {
	return Wait{Waiter: waiter, Age: ts.Timestamp{Wall: age}, Blockers: blockers}
}

type rep struct {
	from     node.ID
	inc, seq uint64
	waits    []Wait
}

func TestDetector(t *testing.T) {
	a, b, c, d := txnAt(0, 1), txnAt(1, 2), txnAt(2, 3), txnAt(3, 4)
	// Ages: a oldest … d youngest.
	cases := []struct {
		name    string
		reports []rep
		want    []storage.TxnID
		left    int // waiting transactions in the graph at the end
	}{
		{"chain, no cycle", []rep{{1, 1, 1, []Wait{wait(a, 1, b)}}, {2, 1, 1, []Wait{wait(b, 2, c)}}}, nil, 2},
		{"two-cycle across nodes: youngest dies", []rep{{1, 1, 1, []Wait{wait(a, 1, b)}}, {2, 1, 1, []Wait{wait(b, 2, a)}}}, []storage.TxnID{b}, 2},
		{"three-cycle", []rep{{1, 1, 1, []Wait{wait(c, 3, a)}}, {2, 1, 1, []Wait{wait(a, 1, b)}}, {3, 1, 1, []Wait{wait(b, 2, c)}}}, []storage.TxnID{c}, 3},
		{"a newer report without the wait breaks the cycle", []rep{{1, 1, 1, []Wait{wait(a, 1, b)}}, {1, 1, 2, nil}, {2, 1, 1, []Wait{wait(b, 2, a)}}}, nil, 1},
		{"an older report arriving late is ignored", []rep{{1, 1, 2, nil}, {1, 1, 1, []Wait{wait(a, 1, b)}}, {2, 1, 1, []Wait{wait(b, 2, a)}}}, nil, 1},
		{"a restarted participant's report replaces the old one", []rep{{1, 1, 9, []Wait{wait(a, 1, b)}}, {1, 2, 1, nil}, {2, 1, 1, []Wait{wait(b, 2, a)}}}, nil, 1},
		// d closes two cycles at once (d→a→d and d→b→d): its death breaks both.
		{"two cycles through one waiter", []rep{{1, 1, 1, []Wait{wait(a, 1, d), wait(b, 2, d)}}, {3, 1, 1, []Wait{wait(d, 4, a, b)}}}, []storage.TxnID{d}, 3},
		// The oldest waits for two younger ones that each wait for it: two cycles, two victims.
		{"one wait closes two cycles", []rep{{1, 1, 1, []Wait{wait(b, 2, a), wait(c, 3, a)}}, {2, 1, 1, []Wait{wait(a, 1, b, c)}}}, []storage.TxnID{b, c}, 3},
		// a's report closes a→c→a (c dies); b's closes b→a→d→b (d dies).
		{"each cycle gets its victim", []rep{{1, 1, 1, []Wait{wait(c, 3, a), wait(d, 4, b)}}, {2, 1, 1, []Wait{wait(a, 1, c, d)}}, {3, 1, 1, []Wait{wait(b, 2, a)}}},
			[]storage.TxnID{c, d}, 4},
		// A victim still listed as waiting (its abort has not arrived yet, or a parallel prepare
		// waits elsewhere) is not chosen again and does not get others killed.
		{"a victim's later waits kill nobody", []rep{{1, 1, 1, []Wait{wait(a, 1, b)}}, {2, 1, 1, []Wait{wait(b, 2, a)}}, {3, 1, 1, []Wait{wait(b, 2, c), wait(c, 3, b)}}},
			[]storage.TxnID{b}, 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := &victims{}
			det := newDetector(v.send, func() int64 { return 0 }, time.Second, protocol.NewMetrics())
			for _, r := range tc.reports {
				det.onWaitGraph(r.from, &WaitGraph{Inc: r.inc, Seq: r.seq, Waits: r.waits})
			}
			if !slices.Equal(v.got, tc.want) {
				t.Errorf("victims %v, want %v", v.got, tc.want)
			}
			if det.Len() != tc.left {
				t.Errorf("%d waiting transactions tracked, want %d", det.Len(), tc.left)
			}
		})
	}
}

// TestDetectorForgetsVictims: once no report lists a victim as waiting, it is an ordinary
// transaction id again (the set does not grow without bound).
func TestDetectorForgetsVictims(t *testing.T) {
	a, b := txnAt(0, 1), txnAt(1, 2)
	v := &victims{}
	det := newDetector(v.send, func() int64 { return 0 }, time.Second, protocol.NewMetrics())
	det.onWaitGraph(1, &WaitGraph{Inc: 1, Seq: 1, Waits: []Wait{wait(a, 1, b)}})
	det.onWaitGraph(2, &WaitGraph{Inc: 1, Seq: 1, Waits: []Wait{wait(b, 2, a)}})
	if len(det.victims) != 1 {
		t.Fatalf("victims %v, want b", det.victims)
	}
	det.onWaitGraph(2, &WaitGraph{Inc: 1, Seq: 2})
	if len(det.victims) != 0 || det.Len() != 1 {
		t.Fatalf("after b's wait ended: victims %v, %d waiting, want none and 1", det.victims, det.Len())
	}
}

// TestDetectorWoundsAgain: a victim some report still lists as waiting a keep-alive period
// after its wound went is wounded again, since the WoundReq may have been lost: the detector
// ignores a victim's edges, so the deadlock would stay unbroken for good (with 2% of messages
// lost, every list-append client under lock-policy=detect was still waiting 30 s after the
// window). A report within the period, which may simply precede the abort, sends nothing.
func TestDetectorWoundsAgain(t *testing.T) {
	const rewound = time.Second
	a, b := txnAt(0, 1), txnAt(1, 2)
	v := &victims{}
	var now int64
	det := newDetector(v.send, func() int64 { return now }, rewound, protocol.NewMetrics())
	det.onWaitGraph(1, &WaitGraph{Inc: 1, Seq: 1, Waits: []Wait{wait(a, 1, b)}})
	det.onWaitGraph(2, &WaitGraph{Inc: 1, Seq: 1, Waits: []Wait{wait(b, 2, a)}})
	for _, step := range []struct {
		after time.Duration
		want  []storage.TxnID
	}{
		{0, []storage.TxnID{b}},
		{rewound - 1, []storage.TxnID{b}},
		{rewound, []storage.TxnID{b, b}},
		{rewound / 2, []storage.TxnID{b, b}},
		{rewound, []storage.TxnID{b, b, b}},
	} {
		now += int64(step.after)
		det.onWaitGraph(2, &WaitGraph{Inc: 1, Seq: uint64(now) + 2, Waits: []Wait{wait(b, 2, a)}})
		if !slices.Equal(v.got, step.want) {
			t.Fatalf("at %v: wounds %v, want %v", time.Duration(now), v.got, step.want)
		}
	}
	det.onWaitGraph(2, &WaitGraph{Inc: 1, Seq: uint64(now) + 3})
	now += int64(2 * rewound)
	det.onWaitGraph(1, &WaitGraph{Inc: 1, Seq: 2, Waits: []Wait{wait(a, 1, b)}})
	if len(v.got) != 3 || len(det.victims) != 0 {
		t.Fatalf("after b's wait ended: wounds %v, victims %v, want no more and none", v.got, det.victims)
	}
}
