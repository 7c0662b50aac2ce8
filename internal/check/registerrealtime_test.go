package check

import (
	"fmt"
	"strings"
	"testing"

	"github.com/meridiandb/meridian/internal/history"
)

func historyLines(t *testing.T, lines ...string) []history.Op {
	t.Helper()
	ops, err := history.Read(strings.NewReader(strings.Join(lines, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	return ops
}

// Under the models with real-time order, a writer that completed before another writer of the same
// register was invoked wrote the earlier version, even when neither read the key: a later read of
// the earlier version is stale.
func TestRegisterStaleReadOfBlindWrites(t *testing.T) {
	ops := historyLines(t,
		`{"type":"meta","key_regions":{"1":0}}`,
		`{"index":0,"type":"invoke","process":1,"time":0,"value":[["w",1,1]]}`,
		`{"index":1,"type":"ok","process":1,"time":10,"value":[["w",1,1]]}`,
		`{"index":2,"type":"invoke","process":2,"time":20,"value":[["w",1,2]]}`,
		`{"index":3,"type":"ok","process":2,"time":30,"value":[["w",1,2]]}`,
		`{"index":4,"type":"invoke","process":3,"time":40,"value":[["r",1,null]]}`,
		`{"index":5,"type":"ok","process":3,"time":50,"value":[["r",1,1]]}`,
	)
	want := map[string]string{"serializable": Valid, "strict-serializable": Invalid, "rls": Invalid, "serializable-no-stale-reads": Invalid, "snapshot-isolation": Valid,
		"psi": Valid, "causal": Valid, "opacity": Invalid, "read-atomic": Valid}
	for _, m := range Models() {
		r, err := Check(ops, m)
		if err != nil {
			t.Fatal(err)
		}
		if r.Verdict != want[m] {
			t.Errorf("%s: verdict %s, want %s\n%s", m, r.Verdict, want[m], r)
		}
	}
}

// A read of a register's initial version after every writer completed is stale however many
// writers the key had.
func TestRegisterStaleNilReadManyWriters(t *testing.T) {
	lines := []string{`{"type":"meta","key_regions":{"1":0}}`}
	idx := 0
	for i := 0; i < 2*maxNilSuccessors; i++ {
		lines = append(lines,
			fmt.Sprintf(`{"index":%d,"type":"invoke","process":%d,"time":%d,"value":[["w",1,%d]]}`, idx, i, 10*i, i+1),
			fmt.Sprintf(`{"index":%d,"type":"ok","process":%d,"time":%d,"value":[["w",1,%d]]}`, idx+1, i, 10*i+5, i+1))
		idx += 2
	}
	lines = append(lines,
		fmt.Sprintf(`{"index":%d,"type":"invoke","process":%d,"time":%d,"value":[["r",1,null]]}`, idx, 10000, 100000),
		fmt.Sprintf(`{"index":%d,"type":"ok","process":%d,"time":%d,"value":[["r",1,null]]}`, idx+1, 10000, 100010))
	ops := historyLines(t, lines...)
	for _, m := range []string{"strict-serializable", "rls", "opacity"} {
		r, err := Check(ops, m)
		if err != nil {
			t.Fatal(err)
		}
		if r.Verdict != Invalid {
			t.Errorf("%s: verdict %s, want invalid\n%s", m, r.Verdict, r)
		}
	}
}

// A real-time edge between two appends is no stale read, and its explanation does not call it
// one (review: "a stale read: T2 should see T0's write" of a transaction that only appended).
func TestRealtimeWriteOrderNotCalledStaleRead(t *testing.T) {
	ops := historyLines(t,
		`{"type":"meta","key_regions":{"1":0}}`,
		`{"index":0,"type":"invoke","process":1,"time":0,"value":[["append",1,1]]}`,
		`{"index":1,"type":"ok","process":1,"time":10,"value":[["append",1,1]]}`,
		`{"index":2,"type":"invoke","process":2,"time":20,"value":[["append",1,2]]}`,
		`{"index":3,"type":"ok","process":2,"time":30,"value":[["append",1,2]]}`,
		`{"index":4,"type":"invoke","process":3,"time":40,"value":[["r",1,null]]}`,
		`{"index":5,"type":"ok","process":3,"time":50,"value":[["r",1,[2,1]]]}`,
	)
	r, err := Check(ops, "serializable-no-stale-reads")
	if err != nil {
		t.Fatal(err)
	}
	if r.Verdict != Invalid || !strings.Contains(r.String(), "both touch key 1") || strings.Contains(r.String(), "stale read") {
		t.Errorf("appends in an order against real time: verdict %s, want invalid, explained without a stale read:\n%s", r.Verdict, r)
	}
}
