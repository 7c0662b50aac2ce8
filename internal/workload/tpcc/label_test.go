package tpcc

import (
	"math/rand/v2"
	"testing"
)

// TestNewOrderLabels: a New-Order is labelled by where its stock is (K2's Table 2 rows). With no
// remote lines every one is local; with exactly one remote line, the supplying warehouse is one
// of the nine others, of which two share the home region (ten warehouses over three regions:
// region 1 homes warehouses 2, 5 and 8), so 7/9 of them are remote.
func TestNewOrderLabels(t *testing.T) {
	for _, tc := range []struct {
		name       string
		oneRemote  bool
		remoteFrac float64
	}{{"no remote lines", false, 0}, {"one remote line", true, 7.0 / 9}} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Small(10)
			cfg.RemoteItemRatio, cfg.OneRemoteLine = 0, tc.oneRemote
			w, err := New(testTopo(t), cfg)
			if err != nil {
				t.Fatal(err)
			}
			g := w.NewClient(4, 1, rand.New(rand.NewPCG(3, 3))).(*terminal)
			labels := map[string]int{}
			n := 0
			for n < 20_000 {
				if tx := g.Next(); tx.Type == NewOrder {
					labels[tx.Label]++
					n++
				}
			}
			if len(labels) > 2 || labels[NewOrder+"/local-stock"]+labels[NewOrder+"/remote-stock"] != n {
				t.Fatalf("labels %v", labels)
			}
			within(t, "remote-stock share", float64(labels[NewOrder+"/remote-stock"])/float64(n), tc.remoteFrac, 0.01)
		})
	}
}
