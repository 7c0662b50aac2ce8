package durable

import (
	"fmt"

	"github.com/meridiandb/meridian/internal/node"
	"github.com/meridiandb/meridian/internal/storage"
)

// Backend is a durable key-value store behind a node's persist call. Apply is atomic (a batch is
// applied entirely or not at all, also across a crash) and, once it returns nil, durable. Scan is
// node.Durable, handed to a (re)starting node.
type Backend interface {
	node.Durable
	Apply(batch []node.Write) error
	Close() error
}

var (
	_ Backend = (*Mem)(nil)
	_ Backend = (*Pebble)(nil)
)

// ValidateBatch rejects writes no backend should store: empty keys (every engine encoding has a
// prefix byte, so an empty key is a bug) and keys or values beyond the engine's bounds.
func ValidateBatch(batch []node.Write) error {
	for i, w := range batch {
		switch {
		case len(w.Key) == 0:
			return fmt.Errorf("durable: write %d of %d: empty key", i, len(batch))
		case len(w.Key) > MaxKeyBytes:
			return fmt.Errorf("durable: write %d of %d: key of %d bytes exceeds %d", i, len(batch), len(w.Key), MaxKeyBytes)
		case len(w.Value) > MaxValueBytes:
			return fmt.Errorf("durable: write %d of %d: value of %d bytes exceeds %d", i, len(batch), len(w.Value), MaxValueBytes)
		}
	}
	return nil
}

// Bounds on one durable record: the engine's limits (storage.MaxKeyBytes and friends) plus room
// for the encodings' prefixes, timestamps, metadata and checksums. A key's encoding escapes each
// zero byte with a second byte (mvcc's version keys), so it may take twice the key's length.
const (
	MaxKeyBytes   = 2*storage.MaxKeyBytes + 1<<10
	MaxValueBytes = 2 << 20
)
