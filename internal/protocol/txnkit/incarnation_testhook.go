package txnkit

import "testing"

// SpendForTest leaves the counter left ids short of Spent, so that the tests of the protocols
// can reach a Renew without handing out 2^32 ids. It is exported only because those tests live
// in other packages; outside a test binary it panics. It never moves the counter back, which
// would hand out ids again.
func (i *Incarnation) SpendForTest(left uint64) {
	if !testing.Testing() {
		panic("txnkit: SpendForTest outside a test")
	}
	i.seq = max(i.seq, maxTxnCounter-min(left, maxTxnCounter))
}
