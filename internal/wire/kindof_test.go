package wire

import "testing"

// KindOf reads the kind Encode wrote, and refuses what is no frame.
func TestKindOf(t *testing.T) {
	b, err := Encode(&ClientRequest{Txn: 1, Op: OpGet, Key: "k"})
	if err != nil {
		t.Fatal(err)
	}
	if k, ok := KindOf(b); !ok || k != (&ClientRequest{}).Kind() {
		t.Errorf("KindOf = %d, %v; want the client request's kind", k, ok)
	}
	for _, bad := range [][]byte{nil, {Version}, {Version + 1, 0, 1}} {
		if _, ok := KindOf(bad); ok {
			t.Errorf("KindOf(%x) accepted", bad)
		}
	}
}
