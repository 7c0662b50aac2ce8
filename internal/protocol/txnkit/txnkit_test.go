package txnkit

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/meridiandb/meridian/client"
	"github.com/meridiandb/meridian/internal/node/nodetest"
	"github.com/meridiandb/meridian/internal/protocol"
	"github.com/meridiandb/meridian/internal/wire"
)

// Duration options are bounded above: ttl=2000000h overflowed K2's commit wait, 2×(ttl+ε), and
// K2's histories were no longer strictly serializable. The bound is here so that every protocol
// and every caller (the CLI, repro, tests, library users) gets it.
func TestDurationBounded(t *testing.T) {
	for _, tc := range []struct {
		v    string
		want time.Duration
		ok   bool
	}{
		{"0s", 0, true},
		{"10ms", 10 * time.Millisecond, true},
		{"1000h", 1000 * time.Hour, true},
		{"1000h0m0.000000001s", 0, false},
		{"2000000h", 0, false},
		{"-1ms", 0, false},
		{"soon", 0, false},
	} {
		o := Options{Protocol: "p", M: map[string]string{"ttl": tc.v}}
		got := o.Duration("ttl", 7)
		if !tc.ok {
			var oe *protocol.OptionError
			if !errors.As(o.Err, &oe) || oe.Key != "ttl" || oe.Value != tc.v || !strings.Contains(oe.Want, "0 to 1000h") {
				t.Errorf("ttl=%s: err %v, want an option error naming 0 to 1000h", tc.v, o.Err)
			}
			if got != 7 {
				t.Errorf("ttl=%s: got %v, want the default", tc.v, got)
			}
			continue
		}
		if o.Err != nil || got != tc.want {
			t.Errorf("ttl=%s: got %v, %v; want %v", tc.v, got, o.Err, tc.want)
		}
	}
	want := "protocol p: option ttl=2000000h: want a duration from 0 to 1000h such as 10ms"
	o := Options{Protocol: "p", M: map[string]string{"ttl": "2000000h"}}
	o.Duration("ttl", 0)
	if o.Err == nil || o.Err.Error() != want {
		t.Fatalf("error %q, want %q", o.Err, want)
	}
}

// Keys and labels that are not UTF-8 are refused: the wire carries them as text, so a node
// cannot decode a message holding one, and a protocol that took one in (from an in-process
// client) would lose every message it sent about it.
func TestValidateRefusesNonUTF8(t *testing.T) {
	for _, tc := range []struct {
		name string
		req  wire.ClientRequest
	}{
		{"get", wire.ClientRequest{Op: wire.OpGet, Key: "k\xff"}},
		{"put", wire.ClientRequest{Op: wire.OpPut, Key: "\xfek", Value: []byte("v")}},
		{"scan end", wire.ClientRequest{Op: wire.OpScan, Key: "a", EndKey: "z\xff"}},
		{"batch", wire.ClientRequest{Op: wire.OpBatch, Batch: []wire.BatchOp{{Op: wire.OpGet, Key: "a"}, {Op: wire.OpGet, Key: "b\xc3"}}}},
		{"label", wire.ClientRequest{Op: wire.OpGet, Key: "a", Label: "x\xff"}},
	} {
		tc.req.Txn, tc.req.Seq = 3, 1
		rep := Validate(&tc.req)
		if rep == nil || rep.Code != wire.CodeBadArgument || rep.Txn != 3 || rep.Seq != 1 || !strings.Contains(rep.Error, "UTF-8") {
			t.Errorf("%s: got %+v, want a bad-argument reply about UTF-8", tc.name, rep)
		}
	}
	if rep := Validate(&wire.ClientRequest{Op: wire.OpPut, Key: "clé", Label: "café", Value: []byte{0xff}}); rep != nil {
		t.Fatalf("valid UTF-8 key refused: %+v", rep)
	}
}

// TestValidateBoundsLabel: a label over client.MaxLabelBytes is refused (protocols keep metrics
// per label), one at the bound is taken.
func TestValidateBoundsLabel(t *testing.T) {
	long := strings.Repeat("l", client.MaxLabelBytes+1)
	if rep := Validate(&wire.ClientRequest{Op: wire.OpGet, Key: "a", Label: long}); rep == nil || rep.Code != wire.CodeBadArgument || !strings.Contains(rep.Error, "label longer") {
		t.Errorf("a %d-byte label: %+v, want a bad-argument reply", len(long), rep)
	}
	if rep := Validate(&wire.ClientRequest{Op: wire.OpGet, Key: "a", Label: long[1:]}); rep != nil {
		t.Errorf("a label at the bound refused: %+v", rep)
	}
}

// TestValidateRefusesNegativeScanLimit: a negative scan limit is refused, not taken as none.
func TestValidateRefusesNegativeScanLimit(t *testing.T) {
	if rep := Validate(&wire.ClientRequest{Op: wire.OpScan, Key: "a", Limit: -1}); rep == nil || rep.Code != wire.CodeBadArgument {
		t.Errorf("scan limit -1: %+v, want a bad-argument reply", rep)
	}
	if rep := Validate(&wire.ClientRequest{Op: wire.OpScan, Key: "a"}); rep != nil {
		t.Errorf("scan with no limit refused: %+v", rep)
	}
}

// A request of a transaction its coordinator does not hold begins one only if it is the first
// (Seq 0) and neither commits nor aborts; a first commit or abort did nothing and is answered
// OK; any later request is refused, retryably, since the transaction it belongs to is gone.
func TestAnswerUnheld(t *testing.T) {
	for _, tc := range []struct {
		op                wire.Op
		seq               uint32
		answered, refused bool
		code              wire.Code
	}{
		{op: wire.OpPut, seq: 0},
		{op: wire.OpGet, seq: 0},
		{op: wire.OpBatch, seq: 0},
		{op: wire.OpCommit, seq: 0, answered: true, code: wire.CodeOK},
		{op: wire.OpAbort, seq: 0, answered: true, code: wire.CodeOK},
		{op: wire.OpPut, seq: 1, answered: true, refused: true, code: wire.CodeAborted},
		{op: wire.OpGet, seq: 3, answered: true, refused: true, code: wire.CodeAborted},
		{op: wire.OpCommit, seq: 2, answered: true, refused: true, code: wire.CodeAborted},
		{op: wire.OpAbort, seq: 2, answered: true, refused: true, code: wire.CodeAborted},
	} {
		env := &nodetest.ScriptEnv{}
		req := &wire.ClientRequest{Txn: 7, Seq: tc.seq, Op: tc.op, Key: "k"}
		answered, refused := AnswerUnheld(env, 9, req)
		sent := env.Take()
		if answered != tc.answered || refused != tc.refused {
			t.Errorf("%v seq %d: answered %v, refused %v; want %v, %v", tc.op, tc.seq, answered, refused, tc.answered, tc.refused)
			continue
		}
		if !tc.answered {
			if len(sent) != 0 {
				t.Errorf("%v seq %d begins a transaction but sent %+v", tc.op, tc.seq, sent)
			}
			continue
		}
		if len(sent) != 1 {
			t.Fatalf("%v seq %d: %d sent, want one answer", tc.op, tc.seq, len(sent))
		}
		r := sent[0].M.(*wire.ClientReply)
		wantCause := ""
		if tc.refused {
			wantCause = CauseUnknownTxn
		}
		if sent[0].To != 9 || r.Txn != 7 || r.Seq != tc.seq || r.Code != tc.code || r.Cause != wantCause {
			t.Errorf("%v seq %d: sent %+v to %d, want code %v cause %q", tc.op, tc.seq, r, sent[0].To, tc.code, wantCause)
		}
	}
}
