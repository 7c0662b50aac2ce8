// Package durable holds the backends behind a node's persist call: an in-memory store for the
// simulator (it survives a simulated crash because the simulator keeps it outside the node) and an
// on-disk store for real servers.
package durable

import (
	"sort"

	"github.com/meridiandb/meridian/internal/node"
)

// Mem is an in-memory key-value store. Not safe for concurrent use.
//
// It is a hash map rather than an ordered tree: the simulator applies every persisted write to
// it (millions per paper-scale run) but scans it only when a node restarts, so ordering is paid
// for at Scan time instead of on every write.
type Mem struct{ m map[string][]byte }

// NewMem returns an empty store.
func NewMem() *Mem { return &Mem{m: map[string][]byte{}} }

// Apply applies a batch atomically. It fails only on a batch ValidateBatch rejects, and then
// applies nothing.
func (m *Mem) Apply(batch []node.Write) error {
	if err := ValidateBatch(batch); err != nil {
		return err
	}
	for _, w := range batch {
		if w.Delete {
			delete(m.m, string(w.Key))
			continue
		}
		m.m[string(w.Key)] = append([]byte(nil), w.Value...)
	}
	return nil
}

// Scan implements node.Durable: keys in [start, end) in ascending byte order.
func (m *Mem) Scan(start, end []byte, fn func(k, v []byte) bool) error {
	keys := make([]string, 0, len(m.m))
	for k := range m.m {
		if k >= string(start) && (end == nil || k < string(end)) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !fn([]byte(k), m.m[k]) {
			break
		}
	}
	return nil
}

// Len returns the number of keys.
func (m *Mem) Len() int { return len(m.m) }

// Close implements Backend; a Mem has nothing to release.
func (m *Mem) Close() error { return nil }
