package check

import (
	"slices"
	"strings"
	"testing"

	"github.com/meridiandb/meridian/internal/history"
)

// checkText reads text as meridian check does and judges it under model.
func checkText(t *testing.T, text, model string) (*Report, error) {
	t.Helper()
	ops, err := history.Read(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	return Check(ops, model)
}

// A missing time was read as 0. Some operations with a time and some without made up real-time
// order ("T2 completed at 0, before T0 was invoked at 100"); it is an error naming the first line
// that differs from the first operation.
func TestCheckMixedTimes(t *testing.T) {
	cases := []struct{ name, text, want string }{
		{"time then none", `{"index":0,"type":"invoke","process":0,"time":100,"value":[["append",1,1]]}` + "\n" +
			`{"index":1,"type":"ok","process":0,"time":200,"value":[["append",1,1]]}` + "\n" +
			`{"index":2,"type":"invoke","process":1,"value":[["r",1,null]]}` + "\n" +
			`{"index":3,"type":"ok","process":1,"value":[["r",1,[1]]]}`,
			`history line 3 (index 2): no "time", though line 1 (index 0) has one; either every operation carries a time or none does`},
		{"none then time", `{"type":"meta","time":0,"key_regions":{"1":0}}` + "\n" +
			`{"index":0,"type":"invoke","process":0,"value":[["append",1,1]]}` + "\n" +
			`{"index":1,"type":"ok","process":0,"time":0,"value":[["append",1,1]]}`,
			`history line 3 (index 1): a "time", though line 2 (index 0) has none`},
	}
	for _, tc := range cases {
		for _, m := range Models() {
			_, err := checkText(t, tc.text, m)
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("%s, %s: error %v, want one line mentioning %q", tc.name, m, err, tc.want)
			}
		}
	}
}

// A history with no times has no real-time order. A model that needs it must not call the history
// valid for want of real-time edges (a stale read passed as strict-serializable); it still finds
// every anomaly that needs no real time (read skew: all but read-atomic forbid it), and models
// that need none judge the history as before.
func TestCheckNoTimes(t *testing.T) {
	stale := `{"index":0,"type":"invoke","process":0,"value":[["append",1,1]]}` + "\n" +
		`{"index":1,"type":"ok","process":0,"value":[["append",1,1]]}` + "\n" +
		`{"index":2,"type":"invoke","process":1,"value":[["r",1,null]]}` + "\n" +
		`{"index":3,"type":"ok","process":1,"value":[["r",1,[]]]}` + "\n" +
		`{"index":4,"type":"invoke","process":2,"value":[["r",1,null]]}` + "\n" +
		`{"index":5,"type":"ok","process":2,"value":[["r",1,[1]]]}`
	readSkew := `{"index":0,"type":"invoke","process":1,"value":[["append",1,1]]}` + "\n" +
		`{"index":1,"type":"invoke","process":2,"value":[["r",1,null],["append",2,1]]}` + "\n" +
		`{"index":2,"type":"invoke","process":3,"value":[["r",1,null],["r",2,null]]}` + "\n" +
		`{"index":3,"type":"ok","process":1,"value":[["append",1,1]]}` + "\n" +
		`{"index":4,"type":"ok","process":2,"value":[["r",1,[1]],["append",2,1]]}` + "\n" +
		`{"index":5,"type":"ok","process":3,"value":[["r",1,[]],["r",2,[1]]]}`
	for _, m := range Models() {
		needsRT := modelByName[m].kinds&kRT != 0
		r, err := checkText(t, stale, m)
		if err != nil {
			t.Fatal(err)
		}
		noted := slices.ContainsFunc(r.Notes, func(n string) bool { return strings.Contains(n, "no times") })
		switch {
		case needsRT && (r.Verdict != Unknown || !noted):
			t.Errorf("%s, stale read without times: verdict %s, want unknown with a note that real-time order was not checked\n%s", m, r.Verdict, r)
		case !needsRT && (r.Verdict != Valid || noted):
			t.Errorf("%s, stale read without times: verdict %s, want valid with no note about times\n%s", m, r.Verdict, r)
		}
		r, err = checkText(t, readSkew, m)
		if err != nil {
			t.Fatal(err)
		}
		if want := m != "read-atomic"; (r.Verdict == Invalid) != want {
			t.Errorf("%s, read skew without times: verdict %s, want invalid %v\n%s", m, r.Verdict, want, r)
		}
		for _, a := range r.Anomalies {
			if strings.Contains(a.Type, "realtime") || strings.Contains(a.Explanation, "invoked at") {
				t.Errorf("%s: an anomaly of a history without times speaks of real time:\n%s", m, a.Explanation)
			}
		}
	}
	// The same stale read with times is found.
	timed := strings.NewReplacer(`"process":0,`, `"process":0,"time":5,`, `"process":1,`, `"process":1,"time":15,`, `"process":2,`, `"process":2,"time":25,`).Replace(stale)
	r, err := checkText(t, timed, "strict-serializable")
	if err != nil {
		t.Fatal(err)
	}
	if r.Verdict != Invalid {
		t.Errorf("stale read with times: verdict %s, want invalid\n%s", r.Verdict, r)
	}
}
