package durable

import (
	"testing"
	"time"

	"github.com/meridiandb/meridian/internal/node"
)

// TestApplyDelay: each Apply waits the delay before the batch reaches the backend, and then
// lands whole; no delay leaves the backend as it is.
func TestApplyDelay(t *testing.T) {
	m := NewMem()
	if b := WithApplyDelay(m, 0); b != Backend(m) {
		t.Fatal("a zero delay wrapped the backend")
	}
	b := WithApplyDelay(m, 10*time.Millisecond).(*slowDisk)
	var waits []time.Duration
	b.sleep = func(d time.Duration) {
		waits = append(waits, d)
		if m.Len() != 0 {
			t.Error("the batch reached the backend before the delay ended")
		}
	}
	if err := b.Apply([]node.Write{{Key: []byte("k"), Value: []byte("v")}}); err != nil {
		t.Fatal(err)
	}
	if len(waits) != 1 || waits[0] != 10*time.Millisecond {
		t.Fatalf("waits %v, want one of 10ms", waits)
	}
	var got string
	if err := m.Scan(nil, nil, func(k, v []byte) bool { got = string(k) + "=" + string(v); return true }); err != nil || got != "k=v" {
		t.Fatalf("after Apply the backend holds %q (%v), want k=v", got, err)
	}
}
