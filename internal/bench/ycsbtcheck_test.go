package bench

import (
	"strings"
	"testing"
	"time"

	"github.com/meridiandb/meridian/client"
	"github.com/meridiandb/meridian/internal/history"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/wire"
	"github.com/meridiandb/meridian/internal/workload"
)

// scriptedCommits answers everything OK except commits, which take the codes of script in turn
// (OK once it runs out); its clock moves one microsecond per reading.
type scriptedCommits struct {
	script []wire.Code
	now    int64
}

func (f *scriptedCommits) RoundTrip(req *wire.ClientRequest) (*wire.ClientReply, error) {
	rep := &wire.ClientReply{Txn: req.Txn, Seq: req.Seq, Code: wire.CodeOK}
	if req.Op == wire.OpCommit && len(f.script) > 0 {
		rep.Code, f.script = f.script[0], f.script[1:]
		if rep.Code == wire.CodeAborted {
			rep.Cause = "wound"
		}
	}
	return rep, nil
}
func (f *scriptedCommits) Sleep(d time.Duration) { f.now += int64(d) }
func (f *scriptedCommits) Now() int64            { f.now += 1000; return f.now }

// doneGen yields unchecked one-write transactions that report each attempt's outcome, under the
// transaction's number.
type doneGen struct {
	n   int
	got [][]workload.Outcome // per transaction, its attempts' outcomes
}

func (g *doneGen) Next() workload.Txn {
	i := g.n
	g.n++
	g.got = append(g.got, nil)
	return workload.Txn{Type: "ycsbt", Run: func(tx *client.Txn) error { return tx.Put("k", []byte("12345678")) },
		Done: func(o workload.Outcome) { g.got[i] = append(g.got[i], o) }}
}

// The driver tells a transaction how each of its attempts ended, once per attempt: retries after
// retryable aborts are attempts of the same transaction, a commit with an unknown outcome ends it
// (never retried), and so does a commit.
func TestDoneReportsEachAttempt(t *testing.T) {
	f := &scriptedCommits{script: []wire.Code{wire.CodeAborted, wire.CodeAborted, wire.CodeOK, wire.CodeUnknown, wire.CodeAborted, wire.CodeUnknown}}
	g := &doneGen{}
	ClientLoop(client.Open(f), g, 1, 0, Window{End: 500_000_000}, NewMetrics(), nil)
	want := [][]workload.Outcome{
		{workload.Aborted, workload.Aborted, workload.Committed},
		{workload.Unknown},
		{workload.Aborted, workload.Unknown},
		{workload.Committed},
	}
	if len(g.got) < len(want) {
		t.Fatalf("%d transactions ran, want at least %d", len(g.got), len(want))
	}
	for i, w := range want {
		if len(g.got[i]) != len(w) {
			t.Fatalf("transaction %d: outcomes %v, want %v", i, g.got[i], w)
		}
		for j := range w {
			if g.got[i][j] != w[j] {
				t.Fatalf("transaction %d: outcomes %v, want %v", i, g.got[i], w)
			}
		}
	}
	for i, o := range g.got[:len(g.got)-1] { // the last may have been cut by the window's end
		if len(o) == 0 || o[len(o)-1] == workload.Aborted {
			t.Fatalf("transaction %d ended with outcomes %v", i, o)
		}
	}
}

// runAttempt reports an attempt whose body failed (and was aborted) as aborted, and one recorded
// in a history the same way the history does.
func TestRunAttemptReportsOutcome(t *testing.T) {
	for _, c := range []struct {
		code wire.Code
		want workload.Outcome
	}{{wire.CodeOK, workload.Committed}, {wire.CodeAborted, workload.Aborted}, {wire.CodeUnknown, workload.Unknown}, {wire.CodeUnavailable, workload.Aborted}} {
		var got []workload.Outcome
		txn := workload.Txn{Type: "t", Run: func(tx *client.Txn) error { return tx.Put("k", []byte("v")) },
			Done: func(o workload.Outcome) { got = append(got, o) }}
		db := client.Open(&scriptedCommits{script: []wire.Code{c.code}})
		_ = runAttempt(db, txn, 1, 1, 0, history.NewRecorder())
		if len(got) != 1 || got[0] != c.want {
			t.Errorf("commit answered %v: outcomes %v, want [%v]", c.code, got, c.want)
		}
	}
	var got []workload.Outcome
	txn := workload.Txn{Type: "t", Run: func(*client.Txn) error { return workload.ErrUserAbort },
		Done: func(o workload.Outcome) { got = append(got, o) }}
	_ = runAttempt(client.Open(&scriptedCommits{}), txn, 1, 1, 0, nil)
	if len(got) != 1 || got[0] != workload.Aborted {
		t.Errorf("a rolled-back attempt: outcomes %v, want [aborted]", got)
	}
}

// YCSB-T is verified with read-modify-writes only, with or without scans (which load it), and a
// read-modify-write run that skips the load keeps its keys under the run's namespace.
func TestYCSBTVerifiedWithRMWOnly(t *testing.T) {
	tp, err := topo.FromPreset("k2-5region", topo.DefaultLayout())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		rmw, scans bool
		verified   bool
	}{{false, false, false}, {true, false, true}, {false, true, false}, {true, true, true}} {
		p := DefaultWorkloadParams("ycsbt")
		p.Keys, p.RMW, p.Namespace = 1000, c.rmw, "ns1"
		if c.scans {
			p.ScanRatio = 0.5
		}
		w, err := BuildWorkload(tp, p)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := verifierOf(w); ok != c.verified {
			t.Errorf("rmw %v, scans %v: verified %v, want %v", c.rmw, c.scans, ok, c.verified)
		}
		if _, ok := w.(Verifier); !ok {
			t.Errorf("rmw %v, scans %v: not a Verifier", c.rmw, c.scans)
		}
		if nl, ok := w.(ycsbtNoLoad); ok {
			if k, under := nl.w.KeyName(5), strings.HasSuffix(nl.w.KeyName(5), "/uns1/5"); under != c.rmw {
				t.Errorf("rmw %v, no load: key 5 is %q, under the namespace %v", c.rmw, k, under)
			}
		} else if !c.scans {
			t.Errorf("rmw %v without scans: workload %T, want one that skips the load", c.rmw, w)
		}
	}
}
