package check

import (
	"fmt"
	"github.com/meridiandb/meridian/internal/history"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// tsTxn is one transaction of a timestamp-order fixture: its micro-ops as JSON, its invocation
// and completion times, and its commit timestamp's wall part.
type tsTxn struct {
	ops        string
	start, end int64
	ts         int64
}

// tsHistory writes txns as a history, one process each, with the meta line declaring timestamp
// order if declared.
func tsHistory(t *testing.T, declared bool, txns ...tsTxn) []string {
	t.Helper()
	meta := `{"type":"meta","timestamp_order":true}`
	if !declared {
		meta = `{"type":"meta","key_regions":{"1":0}}`
	}
	type event struct {
		at   int64
		line func(idx int) string
	}
	var events []event
	for p, x := range txns {
		events = append(events,
			event{x.start, func(idx int) string {
				return fmt.Sprintf(`{"index":%d,"type":"invoke","process":%d,"time":%d,"value":%s}`, idx, p, x.start, x.ops)
			}},
			event{x.end, func(idx int) string {
				return fmt.Sprintf(`{"index":%d,"type":"ok","process":%d,"time":%d,"value":%s,"commit_ts":{"wall":%d,"logical":0,"origin":%d}}`, idx, p, x.end, x.ops, x.ts, p)
			}})
	}
	// Stable by time: a transaction's invocation stays before its completion at equal times.
	for i := 1; i < len(events); i++ {
		for j := i; j > 0 && events[j].at < events[j-1].at; j-- {
			events[j], events[j-1] = events[j-1], events[j]
		}
	}
	lines := []string{meta}
	for i, e := range events {
		lines = append(lines, e.line(i))
	}
	return lines
}

// TestTimestampOrder: each case is serializable, and strict-serializable, by the model's cycle
// search alone; only the declared timestamps make it invalid. Without the declaration every
// case is valid, and the cases within the rules stay valid with it. Origins differ per
// transaction (one process each), so equal walls are equal timestamps only when origins agree:
// the fixtures give equal walls and compare wall-then-origin as ts.Timestamp does.
func TestTimestampOrder(t *testing.T) {
	const long = 100 // every transaction spans 0..long, so none precedes another in real time
	cases := []struct {
		name string
		txns []tsTxn
		want map[string]string // model → verdict with the declaration
		kind string            // the anomaly expected where invalid
	}{
		{name: "wr to a lower timestamp", kind: "timestamp-order",
			txns: []tsTxn{{`[["append",1,1]]`, 0, long, 20}, {`[["r",1,[1]]]`, 0, long, 10}},
			want: map[string]string{"serializable": Invalid, "strict-serializable": Invalid}},
		{name: "ww to a lower timestamp", kind: "timestamp-order",
			txns: []tsTxn{{`[["append",1,1]]`, 0, long, 20}, {`[["append",1,2]]`, 0, long, 10}, {`[["r",1,[1,2]]]`, 0, long, 30}},
			want: map[string]string{"serializable": Invalid, "strict-serializable": Invalid}},
		{name: "rw to a lower timestamp", kind: "timestamp-order",
			txns: []tsTxn{{`[["r",1,[]]]`, 0, long, 20}, {`[["append",1,1]]`, 0, long, 10}, {`[["r",1,[1]]]`, 0, long, 30}},
			want: map[string]string{"serializable": Invalid, "strict-serializable": Invalid}},
		{name: "writers in real time, timestamps reversed", kind: "timestamp-realtime",
			txns: []tsTxn{{`[["append",1,1]]`, 0, 10, 20}, {`[["append",2,1]]`, 20, 30, 10}, {`[["r",1,[1]],["r",2,[1]]]`, 40, 50, 30}},
			want: map[string]string{"serializable": Valid, "serializable-no-stale-reads": Valid, "strict-serializable": Invalid, "opacity": Invalid}},
		{name: "in order", txns: []tsTxn{{`[["append",1,1]]`, 0, long, 10}, {`[["append",1,2]]`, 0, long, 20}, {`[["r",1,[1,2]]]`, 0, long, 30}, {`[["r",1,[]]]`, 0, long, 5}},
			want: map[string]string{"serializable": Valid, "strict-serializable": Valid}},
		// A read at t sees a version written at t (CockroachDB pushes several transactions to one
		// timestamp); a snapshot read ending before a writer began may hold the higher timestamp.
		{name: "read at the writer's timestamp, read-only before a writer",
			txns: []tsTxn{{`[["append",1,1]]`, 0, long, 10}, {`[["r",1,[1]]]`, 0, long, 10}, {`[["r",2,[]]]`, 200, 210, 50}, {`[["append",3,1]]`, 220, 230, 40}},
			want: map[string]string{"serializable": Valid, "strict-serializable": Valid}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for model, want := range c.want {
				for _, declared := range []bool{false, true} {
					ops := historyLines(t, tsHistory(t, declared, c.txns...)...)
					r, err := Check(ops, model)
					if err != nil {
						t.Fatal(err)
					}
					w := want
					if !declared {
						w = Valid
					}
					if r.Verdict != w {
						t.Errorf("%s, declared %v: verdict %s, want %s\n%s", model, declared, r.Verdict, w, r)
						continue
					}
					if w == Invalid && (len(r.AnomalyTypes) != 1 || r.AnomalyTypes[0] != c.kind) {
						t.Errorf("%s: anomalies %v, want only %s", model, r.AnomalyTypes, c.kind)
					}
				}
			}
		})
	}
}

// A commit timestamp's parts are checked as the history is read: a negative logical part is
// refused with the line it is on.
func TestTimestampPartsChecked(t *testing.T) {
	_, err := history.Read(strings.NewReader(`{"index":1,"type":"ok","process":1,"time":10,"value":[],"commit_ts":{"wall":5,"logical":-1,"origin":1}}`))
	if err == nil || !strings.Contains(err.Error(), "history line 1") {
		t.Fatalf("a negative logical part: %v, want an error naming the line", err)
	}
}

// TestTimestampLifetime: with the history's times declared true time in the timestamps' frame, a
// writer whose timestamp lies past its completion (a skipped commit wait) is invalid under a
// model with real-time order; the same history without the declaration, or under serializable,
// is valid, and a timestamp inside the lifetime passes.
func TestTimestampLifetime(t *testing.T) {
	lines := func(meta string, ts int64) []string {
		return []string{meta,
			`{"index":0,"type":"invoke","process":1,"time":0,"value":[["append",1,1]]}`,
			fmt.Sprintf(`{"index":1,"type":"ok","process":1,"time":10,"value":[["append",1,1]],"commit_ts":{"wall":%d,"logical":0,"origin":1}}`, ts),
			`{"index":2,"type":"invoke","process":2,"time":100,"value":[["r",1,null]]}`,
			`{"index":3,"type":"ok","process":2,"time":110,"value":[["r",1,[1]]],"commit_ts":{"wall":105,"logical":0,"origin":2}}`,
		}
	}
	const both = `{"type":"meta","timestamp_order":true,"true_time":true}`
	for _, c := range []struct {
		meta, model string
		ts          int64
		want        string
	}{
		{both, "strict-serializable", 50, Invalid},
		{both, "strict-serializable", 5, Valid},
		{both, "strict-serializable", 0, Invalid}, // at its invocation: a timestamp from before it began
		{both, "serializable", 50, Valid},
		{`{"type":"meta","timestamp_order":true}`, "strict-serializable", 50, Valid},
	} {
		r, err := Check(historyLines(t, lines(c.meta, c.ts)...), c.model)
		if err != nil {
			t.Fatal(err)
		}
		if r.Verdict != c.want || c.want == Invalid && (len(r.AnomalyTypes) != 1 || r.AnomalyTypes[0] != "timestamp-lifetime") {
			t.Errorf("%s, %s, timestamp %d: verdict %s %v, want %s", c.meta, c.model, c.ts, r.Verdict, r.AnomalyTypes, c.want)
		}
	}
}

// TestTimestampOrderEqualTimestamps: equal timestamps (wall, logical and origin alike; CockroachDB
// pushes several transactions to one): a read may share its writer's, but a writer may share
// neither another writer's of its key nor that of a read of the key that missed its write.
// TestTimestampOrder's fixtures give each transaction its own origin, so they never meet these.
func TestTimestampOrderEqualTimestamps(t *testing.T) {
	const long = 100
	// Every transaction at 10.0@9 but the final reads, at 30.
	for _, c := range []struct {
		name string
		txns []tsTxn
		want string
	}{
		{"read at its writer's very timestamp", []tsTxn{{`[["append",1,1]]`, 0, long, 10}, {`[["r",1,[1]]]`, 0, long, 10}}, Valid},
		{"two writers of a key at one timestamp", []tsTxn{{`[["append",1,1]]`, 0, long, 10}, {`[["append",1,2]]`, 0, long, 10}, {`[["r",1,[1,2]]]`, 0, long, 30}}, Invalid},
		{"a read missing a write at its timestamp", []tsTxn{{`[["r",1,[]]]`, 0, long, 10}, {`[["append",1,1]]`, 0, long, 10}, {`[["r",1,[1]]]`, 0, long, 30}}, Invalid},
	} {
		lines := tsHistory(t, true, c.txns...)
		for i, l := range lines {
			if strings.Contains(l, `"wall":10,`) {
				lines[i] = regexp.MustCompile(`"origin":\d+`).ReplaceAllString(l, `"origin":9`)
			}
		}
		for _, model := range []string{"serializable", "strict-serializable"} {
			r, err := Check(historyLines(t, lines...), model)
			if err != nil {
				t.Fatal(err)
			}
			if r.Verdict != c.want || c.want == Invalid && (len(r.AnomalyTypes) != 1 || r.AnomalyTypes[0] != "timestamp-order") {
				t.Errorf("%s, %s: verdict %s %v, want %s (timestamp-order)\n%s", c.name, model, r.Verdict, r.AnomalyTypes, c.want, r)
			}
		}
	}
}

// TestAnomaliesPastTheCap: past maxAnomalies only a count is kept, and the report still names
// every type found, one met only after the cap included.
func TestAnomaliesPastTheCap(t *testing.T) {
	const pairs = maxAnomalies + 50
	lines := []string{`{"type":"meta","timestamp_order":true,"true_time":true}`}
	idx := 0
	txn := func(p int, ops string, ts int64) {
		lines = append(lines,
			fmt.Sprintf(`{"index":%d,"type":"invoke","process":%d,"time":0,"value":%s}`, idx, p, ops),
			fmt.Sprintf(`{"index":%d,"type":"ok","process":%d,"time":1000,"value":%s,"commit_ts":{"wall":%d,"logical":0,"origin":%d}}`, idx+1, p, ops, ts, p))
		idx += 2
	}
	for i := range pairs {
		txn(2*i, fmt.Sprintf(`[["append",%d,1]]`, i), 500) // a writer...
		txn(2*i+1, fmt.Sprintf(`[["r",%d,[1]]]`, i), 400)  // ...read at a lower timestamp
	}
	txn(2*pairs, `[["append",100000,1]]`, 5000) // past its completion
	r, err := Check(historyLines(t, lines...), "strict-serializable")
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Anomalies) != maxAnomalies || r.Omitted != pairs+1-maxAnomalies {
		t.Errorf("%d anomalies listed and %d omitted, want %d and %d", len(r.Anomalies), r.Omitted, maxAnomalies, pairs+1-maxAnomalies)
	}
	if want := []string{"timestamp-lifetime", "timestamp-order"}; !reflect.DeepEqual(r.AnomalyTypes, want) {
		t.Errorf("types %v, want %v", r.AnomalyTypes, want)
	}
	if want := map[string]int{"timestamp-lifetime": 1, "timestamp-order": pairs}; !reflect.DeepEqual(r.AnomalyCounts, want) {
		t.Errorf("counts %v, want %v", r.AnomalyCounts, want)
	}
	if r.Counts.Timestamped != 2*pairs+1 {
		t.Errorf("%d transactions held to their timestamps, want %d", r.Counts.Timestamped, 2*pairs+1)
	}
	if s := r.String(); !strings.Contains(s, "timestamp-lifetime (1), timestamp-order (250)") {
		t.Errorf("the report counts types by the anomalies listed:\n%s", s[:min(len(s), 400)])
	}
}
