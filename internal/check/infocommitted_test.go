package check

import (
	"strings"
	"testing"

	"github.com/meridiandb/meridian/internal/history"
)

func readHistory(t *testing.T, lines ...string) []history.Op {
	t.Helper()
	ops, err := history.Read(strings.NewReader(strings.Join(lines, "\n")))
	if err != nil {
		t.Fatal(err)
	}
	return ops
}

// An info transaction that a committed read shows committed; its other writes bind like an ok
// transaction's. T2 saw T0's write of key 1 but not its write of key 2, after T0's invocation:
// a fractured read, which every model forbids.
func TestInfoWriterSeenCommittedIsAtomic(t *testing.T) {
	cases := []struct {
		name  string
		lines []string
	}{
		{"list", []string{
			`{"index":0,"type":"invoke","process":1,"time":0,"value":[["append",1,1],["append",2,1]]}`,
			`{"index":1,"type":"info","process":1,"time":10}`,
			`{"index":2,"type":"invoke","process":2,"time":20,"value":[["r",1,null],["r",2,null]]}`,
			`{"index":3,"type":"ok","process":2,"time":30,"value":[["r",1,[1]],["r",2,[]]]}`,
		}},
		{"register", []string{
			`{"index":0,"type":"invoke","process":1,"time":0,"value":[["w",1,1],["w",2,1]]}`,
			`{"index":1,"type":"info","process":1,"time":10}`,
			`{"index":2,"type":"invoke","process":2,"time":20,"value":[["r",1,null],["r",2,null]]}`,
			`{"index":3,"type":"ok","process":2,"time":30,"value":[["r",1,1],["r",2,null]]}`,
		}},
		{"list, never completed", []string{
			`{"index":0,"type":"invoke","process":1,"time":0,"value":[["append",1,1],["append",2,1]]}`,
			`{"index":1,"type":"invoke","process":2,"time":20,"value":[["r",1,null],["r",2,null]]}`,
			`{"index":2,"type":"ok","process":2,"time":30,"value":[["r",1,[1]],["r",2,[]]]}`,
		}},
	}
	for _, tc := range cases {
		ops := readHistory(t, tc.lines...)
		for _, m := range Models() {
			r, err := Check(ops, m)
			if err != nil {
				t.Fatal(err)
			}
			if r.Verdict != Invalid {
				t.Errorf("%s, %s: verdict %s, want invalid\n%s", tc.name, m, r.Verdict, r)
			}
		}
	}
}
