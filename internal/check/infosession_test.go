package check

import (
	"strings"
	"testing"

	"github.com/meridiandb/meridian/internal/history"
)

// TestInfoNotSessionOrdered: a process that invokes again after a transaction of unknown outcome
// is not ordered after it, since that transaction may still be running. T0 (info) appends 1 to
// key 1 and is seen by T2, so it committed; T1 on the same process read key 1 before the append.
// Ordering T0 before T1 closes a false cycle with T1's read.
func TestInfoNotSessionOrdered(t *testing.T) {
	text := strings.Join([]string{
		`{"index":0,"type":"invoke","process":1,"time":0,"value":[["append",1,1]]}`,
		`{"index":1,"type":"info","process":1,"time":10,"value":[["append",1,1]]}`,
		`{"index":2,"type":"invoke","process":1,"time":20,"value":[["r",1,null]]}`,
		`{"index":3,"type":"ok","process":1,"time":30,"value":[["r",1,[]]]}`,
		`{"index":4,"type":"invoke","process":2,"time":40,"value":[["r",1,null]]}`,
		`{"index":5,"type":"ok","process":2,"time":50,"value":[["r",1,[1]]]}`,
	}, "\n")
	for _, model := range []string{"snapshot-isolation", "psi", "causal"} {
		ops, err := history.Read(strings.NewReader(text))
		if err != nil {
			t.Fatal(err)
		}
		r, err := Check(ops, model)
		if err != nil {
			t.Fatal(err)
		}
		if r.Verdict != Valid {
			t.Errorf("%s: %s (%v), want valid", model, r.Verdict, r.Anomalies)
		}
	}
}
