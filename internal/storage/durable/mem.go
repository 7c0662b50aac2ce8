// Package durable holds the backends behind a node's persist call: an in-memory store for the
// simulator (it survives a simulated crash because the simulator keeps it outside the node) and an
// on-disk store for real servers.
package durable

import (
	"bytes"

	"github.com/google/btree"
	"github.com/meridiandb/meridian/internal/node"
)

type item struct{ k, v []byte }

func less(a, b item) bool { return bytes.Compare(a.k, b.k) < 0 }

// Mem is an ordered in-memory key-value store. Not safe for concurrent use.
type Mem struct{ t *btree.BTreeG[item] }

// NewMem returns an empty store.
func NewMem() *Mem { return &Mem{t: btree.NewG(16, less)} }

// Apply applies a batch atomically. It fails only on a batch ValidateBatch rejects, and then
// applies nothing.
func (m *Mem) Apply(batch []node.Write) error {
	if err := ValidateBatch(batch); err != nil {
		return err
	}
	for _, w := range batch {
		k := append([]byte(nil), w.Key...)
		if w.Delete {
			m.t.Delete(item{k: k})
			continue
		}
		m.t.ReplaceOrInsert(item{k: k, v: append([]byte(nil), w.Value...)})
	}
	return nil
}

// Scan implements node.Durable.
func (m *Mem) Scan(start, end []byte, fn func(k, v []byte) bool) error {
	m.t.AscendGreaterOrEqual(item{k: start}, func(it item) bool {
		if end != nil && bytes.Compare(it.k, end) >= 0 {
			return false
		}
		return fn(it.k, it.v)
	})
	return nil
}

// Len returns the number of keys.
func (m *Mem) Len() int { return m.t.Len() }

// Close implements Backend; a Mem has nothing to release.
func (m *Mem) Close() error { return nil }
