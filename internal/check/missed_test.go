package check

import (
	"fmt"
	"strings"
	"testing"
)

// txnLines renders one transaction as an invoke and an ok line, its reads' results given in
// done (nil: as invoked).
type txnSpec struct {
	process        int
	invoke, finish int64
	ops, done      string
}

func historyOf(txns ...txnSpec) string {
	var b strings.Builder
	for i, t := range txns {
		done := t.done
		if done == "" {
			done = t.ops
		}
		fmt.Fprintf(&b, `{"index":%d,"type":"invoke","process":%d,"time":%d,"value":%s}`+"\n", 2*i, t.process, t.invoke, t.ops)
		fmt.Fprintf(&b, `{"index":%d,"type":"ok","process":%d,"time":%d,"value":%s}`+"\n", 2*i+1, t.process, t.finish, done)
	}
	return b.String()
}

// Histories a review of the checker found called valid (or, for the first, reported with the
// wrong class) under models that forbid them. Each must now be refused by every model listed.
func TestAnomaliesOnceMissed(t *testing.T) {
	every := Models()
	cases := []struct {
		name   string
		text   string
		models []string
		want   string // the anomaly type reported
	}{
		{
			// A transaction's earlier append missing from a read of its later one.
			name: "earlier append lost",
			text: historyOf(
				txnSpec{0, 0, 10, `[["append",1,1],["append",1,2]]`, ""},
				txnSpec{1, 20, 30, `[["r",1,null]]`, `[["r",1,[2]]]`}),
			models: every, want: "incompatible-order",
		},
		{
			name: "earlier append after the later one",
			text: historyOf(
				txnSpec{0, 0, 10, `[["append",1,1],["append",1,2]]`, ""},
				txnSpec{1, 20, 30, `[["r",1,null]]`, `[["r",1,[2,1]]]`}),
			models: every, want: "incompatible-order",
		},
		{
			// A read showing a value the transaction writes only after it.
			name:   "future read of a list",
			text:   historyOf(txnSpec{0, 0, 10, `[["r",1,null],["append",1,1]]`, `[["r",1,[1]],["append",1,1]]`}),
			models: every, want: "internal",
		},
		{
			name:   "future read of a register",
			text:   historyOf(txnSpec{0, 0, 10, `[["r",1,null],["w",1,1]]`, `[["r",1,1],["w",1,1]]`}),
			models: every, want: "internal",
		},
		{
			// T2 sees T0's append to key 1 (below T1's) but not T0's append to key 2: T0 is in
			// T2's causal past only through the earlier element.
			name: "causal past of an earlier element",
			text: historyOf(
				txnSpec{0, 0, 10, `[["append",2,1],["append",1,1]]`, ""},
				txnSpec{1, 0, 100, `[["append",1,2]]`, ""},
				txnSpec{2, 0, 100, `[["r",1,null],["r",2,null]]`, `[["r",1,[1,2]],["r",2,[]]]`}),
			models: []string{"causal"},
		},
	}
	for _, tc := range cases {
		for _, m := range tc.models {
			r, err := checkText(t, tc.text, m)
			if err != nil {
				t.Fatalf("%s under %s: %v", tc.name, m, err)
			}
			if r.Verdict != Invalid {
				t.Errorf("%s under %s: %s, want invalid", tc.name, m, r.Verdict)
				continue
			}
			if tc.want != "" && !contains(r.AnomalyTypes, tc.want) {
				t.Errorf("%s under %s: anomalies %v, want %s among them", tc.name, m, r.AnomalyTypes, tc.want)
			}
		}
	}
}

func contains(s []string, x string) bool {
	for _, y := range s {
		if y == x {
			return true
		}
	}
	return false
}

// A register key with more blind writers than a nil read's own fan-out: T1 sees T0's key 2 and
// not its key 1 (G-single). Models without real-time order lost the rw edge from T1's read of
// nil to T0 and called it valid. The history-wide budget now covers them, and with the budget
// spent (maxNilEdges 0) a model the cap leaves blind says unknown at best.
func TestCappedNilReadsNotValid(t *testing.T) {
	var txns []txnSpec
	for i := range maxNilSuccessors + 1 {
		txns = append(txns, txnSpec{10 + i, 0, 10, fmt.Sprintf(`[["w",1,%d]]`, 1000+i), ""})
	}
	txns = append(txns,
		txnSpec{0, 0, 10, `[["w",1,1],["w",2,1]]`, ""},
		txnSpec{1, 0, 10, `[["r",1,null],["r",2,null]]`, `[["r",1,null],["r",2,1]]`})
	text := historyOf(txns...)
	for _, budget := range []int{maxNilEdges, 0} {
		saved := maxNilEdges
		maxNilEdges = budget
		for _, m := range Models() {
			r, err := checkText(t, text, m)
			if err != nil {
				t.Fatal(err)
			}
			if budget > 0 && r.Verdict != Invalid || r.Verdict == Valid {
				t.Errorf("%s, nil-edge budget %d: %s, want invalid (or with no budget unknown) (notes %q)", m, budget, r.Verdict, r.Notes)
			}
		}
		maxNilEdges = saved
	}
	// With one blind writer nothing is capped, and every model finds it.
	small := historyOf(txns[maxNilSuccessors:]...)
	for _, m := range Models() {
		if r, err := checkText(t, small, m); err != nil || r.Verdict != Invalid {
			t.Errorf("%s without the cap: %v %v, want invalid", m, r.Verdict, err)
		}
	}
}

// Events out of index order are refused: transactions are ordered by their indexes, and a
// process's read placed before its own earlier append passed read-your-writes.
func TestIndexOrderRequired(t *testing.T) {
	text := `{"index":10,"type":"invoke","process":0,"time":0,"value":[["append",1,1]]}
{"index":11,"type":"ok","process":0,"time":10,"value":[["append",1,1]]}
{"index":2,"type":"invoke","process":0,"time":20,"value":[["r",1,null]]}
{"index":3,"type":"ok","process":0,"time":30,"value":[["r",1,[]]]}
`
	_, err := checkText(t, text, "causal")
	if err == nil || !strings.Contains(err.Error(), "history line 3 (index 2): index below the previous event's (11)") {
		t.Errorf("error %v, want one naming line 3's index below 11", err)
	}
}
