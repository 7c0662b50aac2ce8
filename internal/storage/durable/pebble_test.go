package durable

import (
	"path/filepath"
	"testing"

	"github.com/meridiandb/meridian/internal/node"
)

// TestOpenPebbleCreatesMissingDirs: a store under directories that do not exist yet is created
// whole (by Pebble, which syncs each directory it creates, so the store's entry survives a power
// loss) and opens again with what was written.
func TestOpenPebbleCreatesMissingDirs(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cluster", "node-1", "data")
	p, err := OpenPebble(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Apply([]node.Write{{Key: []byte("k"), Value: []byte("v")}}); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	q, err := OpenPebble(dir)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer q.Close()
	var got string
	if err := q.Scan([]byte("k"), []byte("l"), func(k, v []byte) bool { got = string(v); return true }); err != nil {
		t.Fatal(err)
	}
	if got != "v" {
		t.Fatalf("after reopening, k = %q, want v", got)
	}
}
