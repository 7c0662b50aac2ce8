package k2

import "testing"

// BenchmarkFlights is a coordinator's bookkeeping of operations out, at paper scale: 320
// transactions (1,600 clients a region over five nodes) each with a batch of 16 operations out;
// every round one of them has its answers land and sends its next batch.
func BenchmarkFlights(b *testing.B) {
	const txns, ops = 320, 16
	n := &Node{byReq: map[uint64]*ctxn{}}
	n.reqSeq = 1 << reqSeqBits
	send := func(t *ctxn) {
		t.state = stBusy
		n.clearFlights(t)
		t.flights = make([]flight, 0, ops)
		for i := range ops {
			n.addFlight(t, flight{i: i})
		}
	}
	all := make([]*ctxn, txns)
	for i := range all {
		all[i] = &ctxn{}
		send(all[i])
	}
	for i := 0; b.Loop(); i++ {
		t := all[i%txns]
		first := t.firstReq
		for j := range uint64(ops) {
			if _, _, ok := n.landed(first+j, opRead); !ok {
				b.Fatal("an answer found no flight")
			}
		}
		if _, _, ok := n.landed(first, opRead); ok {
			b.Fatal("a second answer landed")
		}
		send(t)
	}
}
