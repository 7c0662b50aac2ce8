package durable

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/meridiandb/meridian/internal/node"
)

func TestCommitterOrderAndFailures(t *testing.T) {
	m := NewMem()
	c := NewCommitter(m, 64) // small byte budget: forces several merged groups
	var mu sync.Mutex
	var order []int
	const n = 200
	for i := 0; i < n; i++ {
		c.Submit([]node.Write{{Key: []byte("k"), Value: []byte(fmt.Sprint(i))}}, func(err error) {
			if err != nil {
				t.Errorf("batch %d: %v", i, err)
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
		})
	}
	// A batch ValidateBatch rejects fails, without failing the batches before it, and fails
	// every batch after it, which is not applied: a later batch may carry what is acknowledged
	// on the strength of the rejected one (review: the batch after a rejected one was written).
	var invalid, after error
	c.Submit([]node.Write{{Key: nil, Value: []byte("x")}}, func(err error) { invalid = err })
	c.Submit([]node.Write{{Key: []byte("after"), Value: []byte("x")}}, func(err error) { after = err })
	c.Close()
	if invalid == nil {
		t.Fatal("a batch with an empty key was not refused")
	}
	if after == nil || after.Error() != invalid.Error() {
		t.Fatalf("the batch after a rejected one: %v, want the rejection (%v)", after, invalid)
	}
	_ = m.Scan([]byte("after"), []byte("after\x00"), func(k, _ []byte) bool {
		if string(k) == "after" {
			t.Fatal("the batch after a rejected one was applied")
		}
		return true
	})
	if len(order) != n {
		t.Fatalf("%d callbacks, want %d", len(order), n)
	}
	for i, v := range order {
		if v != i {
			t.Fatalf("callback %d was batch %d: completions out of order", i, v)
		}
	}
	// Later writes override earlier ones exactly as sequential application would.
	_ = m.Scan(nil, nil, func(k, v []byte) bool {
		if string(v) != fmt.Sprint(n-1) {
			t.Errorf("k = %s, want %d", v, n-1)
		}
		return true
	})
	var closed error
	c.Submit([]node.Write{{Key: []byte("k")}}, func(err error) { closed = err })
	if !errors.Is(closed, ErrClosed) {
		t.Fatalf("submit after close: %v, want ErrClosed", closed)
	}
	if syncs, batches := c.Stats(); batches != n+2 || syncs < 1 || syncs > n+2 {
		t.Fatalf("stats: %d syncs, %d batches", syncs, batches)
	}
}
