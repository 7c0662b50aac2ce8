package txnkit

import (
	"strings"
	"testing"

	"github.com/meridiandb/meridian/internal/wire"
)

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
