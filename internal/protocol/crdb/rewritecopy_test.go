package crdb

import "testing"

// TestRewriteCopyWaitsForDurability: a write that replaces the transaction's own intent is
// answered only once durable (TestRewriteLostInCrashNotCommitted), and so must a copy of it be,
// a network duplicate or the coordinator's retransmission after its timeout: answered at once,
// the copy let a crash keep the earlier intent, which the commit's proof accepted (review:
// --flush-latency 400ms outlasts the retransmission timeout).
func TestRewriteCopyWaitsForDurability(t *testing.T) {
	g := newGCScript(t, false)
	meta := TxnMeta{ID: g.txn, Age: g.at, RecordNode: g.n.self, Coord: g.c}
	g.writeAnswer(&WriteReq{Req: 1, Txn: meta, Key: g.kh, Value: []byte("v1"), WriteTS: g.at, CreateRecord: true})
	w2 := &WriteReq{Req: 2, Txn: meta, Key: g.kh, Value: []byte("v2"), WriteTS: g.at}
	acked := func(tag string) {
		for _, s := range g.env.Take() {
			if r, ok := s.M.(*WriteResp); ok && r.Req == 2 {
				t.Errorf("%s: v2 acknowledged before its intent is durable: %+v", tag, r)
			}
		}
	}
	g.n.Handle(g.c, w2) // not settled: v2's flush still under way
	acked("original")
	g.n.Handle(g.c, w2) // a network copy (or a retransmission) of v2's write
	acked("copy")
	g.settle()
	answers := 0
	for _, s := range g.env.Take() {
		if r, ok := s.M.(*WriteResp); ok && r.Req == 2 {
			answers++
		}
	}
	if answers == 0 {
		t.Error("v2 never acknowledged once durable")
	}
}
