package k2

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/meridiandb/meridian/internal/protocol/prototest"
	"github.com/meridiandb/meridian/internal/wire"
)

// A coordinator's busy transactions, kept in order of their first request id and searched,
// find each answer's operation as a map from request id did: checked against such a map under
// random request starts, answers in any order (repeated, stale, off by one, made up),
// transactions ending mid-request, ids minted between requests, and renewed numbers.
func TestFlightsAgainstAMap(t *testing.T) {
	for seed := uint64(1); seed <= 200; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		n := &Node{byReq: map[uint64]*ctxn{}}
		n.reqSeq = 1 << reqSeqBits
		model := map[uint64]*ctxn{} // id -> txn, for flights out
		var minted []uint64
		txns := make([]*ctxn, 1+rng.IntN(40))
		for i := range txns {
			txns[i] = &ctxn{}
		}
		start := func(tx *ctxn) {
			for id, m := range model {
				if m == tx {
					delete(model, id)
				}
			}
			tx.state = stBusy
			n.clearFlights(tx)
			k := 1 + rng.IntN(20)
			tx.flights = make([]flight, 0, k)
			for i := range k {
				id := n.addFlight(tx, flight{i: i})
				model[id] = tx
				minted = append(minted, id)
			}
		}
		for step := 0; step < 3000; step++ {
			tx := txns[rng.IntN(len(txns))]
			switch r := rng.IntN(10); {
			case r < 3:
				start(tx)
			case r < 4:
				n.clearFlights(tx)
				for id, m := range model {
					if m == tx {
						delete(model, id)
					}
				}
			case r < 5:
				n.reqSeq = (n.reqSeq>>reqSeqBits+1)<<reqSeqBits + uint64(rng.IntN(5))
			case r < 6:
				// Other ids minted between requests (commits, probes).
				for range rng.IntN(4) {
					minted = append(minted, n.newReqID())
				}
			default:
				if len(minted) == 0 {
					continue
				}
				id := minted[rng.IntN(len(minted))] + uint64(rng.IntN(3)) - 1
				if rng.IntN(10) == 0 {
					id = rng.Uint64()
				}
				got, _, ok := n.landed(id, opRead)
				want := model[id]
				if ok != (want != nil) || (ok && got != want) {
					t.Fatalf("seed %d step %d: id %#x landed on %p ok %v, model %p", seed, step, id, got, ok, want)
				}
				delete(model, id)
				if ok && got.flightsOut == 0 {
					n.clearFlights(got)
				}
			}
			for i := 1; i < len(n.busy); i++ {
				if n.busy[i-1].firstReq >= n.busy[i].firstReq {
					t.Fatalf("seed %d step %d: busy out of order", seed, step)
				}
			}
			out := 0
			for _, b := range n.busy {
				out += b.flightsOut
			}
			if out != len(model) {
				t.Fatalf("seed %d step %d: %d out, model %d", seed, step, out, len(model))
			}
		}
	}
}

// A transaction's reads out under the old request number while another's go out under the
// renewed one: answers land in any order, each reaches its transaction, and copies, late
// answers and made-up ids are dropped.
func TestBusyAcrossNumberRenewal(t *testing.T) {
	s := newReqIDScript(t)
	keys := prototest.KeysOn(t, s.tp, s.remote, "renew", 3)
	s.txn++
	a := s.txn
	old := s.request(a, 0, keys...)
	s.sent = nil
	s.n.reqSeq = s.n.reqSeq&^reqSeqMask | reqRenewAt
	s.txn++
	b := s.txn
	ids := s.request(b, 0, keys[:2]...)
	s.sent = nil
	if len(old) != 3 || len(ids) != 2 || ids[0]>>reqSeqBits <= old[0]>>reqSeqBits {
		t.Fatalf("old %#x new %#x", old, ids)
	}
	ans := func(id uint64, v string) { s.n.Handle(s.remote, &ReadResp{ReqID: id, Found: true, Value: []byte(v)}) }
	ans(ids[1], "b1")
	ans(old[2], "a2")
	ans(ids[1], "b1-copy")
	ans(old[0], "a0")
	ans(ids[0], "b0")
	ans(old[1], "a1")
	ans(old[1], "a1-late")
	ans(ids[0]+5, "hostile")
	s.settle()
	got := map[uint64][]string{}
	for _, m := range s.sent {
		if r, ok := m.M.(*wire.ClientReply); ok {
			for _, res := range r.Results {
				got[r.Txn] = append(got[r.Txn], string(res.Value))
			}
		}
	}
	if fmt.Sprint(got[a]) != "[a0 a1 a2]" || fmt.Sprint(got[b]) != "[b0 b1]" {
		t.Fatalf("replies %v", got)
	}
	if len(s.n.busy) != 0 {
		t.Fatalf("busy %d after all answered", len(s.n.busy))
	}
}

// Lost-operation probes expire in send order. A probe stamped after now (a wall clock that
// stepped back) counts as due: it kept every later probe for as long as the step.
func TestLossProbesExpireInOrder(t *testing.T) {
	const timeout = int64(time.Second)
	n := &Node{lossProbes: map[uint64]lossProbe{}}
	n.cfg.opTimeout = time.Duration(timeout)
	probe := func(id uint64, at int64) {
		n.lossProbes[id] = lossProbe{sentLocal: at}
		n.lossProbeOrder = append(n.lossProbeOrder, id)
	}
	probe(1, 0)
	probe(2, timeout/2)
	probe(3, timeout)
	delete(n.lossProbes, 2) // answered
	n.expireLossProbes(timeout + timeout/2)
	if _, ok := n.lossProbes[1]; ok || len(n.lossProbes) != 1 || len(n.lossProbeOrder) != 1 {
		t.Fatalf("after 1.5 s: probes %v, order %v; want only probe 3 left", n.lossProbes, n.lossProbeOrder)
	}
	// The clock steps back 60 s; a probe sent before the step must not hold later ones.
	probe(4, -60*timeout)
	probe(5, -60*timeout+timeout/2)
	n.expireLossProbes(-60*timeout + 2*timeout)
	if len(n.lossProbes) != 0 {
		t.Errorf("after a step back: probes %v left, want none (3 counts as due, 4 and 5 expired)", n.lossProbes)
	}
}
