package prototest

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/meridiandb/meridian/client"
	"github.com/meridiandb/meridian/internal/wire"
)

// TxnWriteBound: a transaction's writes are held to wire.MaxTxnWriteBytes (each key once, at
// its latest value, counted by wire.TxnWriteBytes), since commit carries them between nodes and
// a node drops a link that sends it a frame over wire.MaxFrameBytes. A transaction puts values
// of client.MaxValueBytes on keys of one data node, one by one, up to 20 (more than a frame,
// also when two are rewritten small): the put that would pass the bound is refused with a one-line bad argument
// (wire.TxnWritesTooLarge), and so is, whole, a PutMany that would; the transaction goes on,
// takes a rewrite that shrinks a value and a small put, and commits. What it wrote before and
// after the refusal is then read back, the refused writes are nowhere, a later writer of the
// keys gets through, and no message between nodes exceeded a frame.
func TxnWriteBound(t *testing.T, protocol string, opts map[string]string) {
	t.Helper()
	const n = 20
	s, watch := newWatchedSim(t, Case{Protocol: protocol, Options: opts, Seed: 1})
	tp := s.Topology()
	keys := KeysOn(t, tp, tp.DataNodes(1)[0], "txnw", n)
	// The first put the bound refuses.
	refusedAt, total := 0, 0
	for total+wire.TxnWriteBytes(keys[refusedAt], bigValue(keys[refusedAt])) <= wire.MaxTxnWriteBytes {
		total += wire.TxnWriteBytes(keys[refusedAt], bigValue(keys[refusedAt]))
		refusedAt++
	}
	k := refusedAt
	var failures []string
	fail := func(format string, args ...any) { failures = append(failures, fmt.Sprintf(format, args...)) }
	refusal := func(what string, err error) {
		if !errors.Is(err, client.ErrBadArgument) || !strings.Contains(err.Error(), wire.TxnWritesTooLarge) || strings.Contains(err.Error(), "\n") {
			fail("%s: %v, want a one-line bad argument %q", what, err, wire.TxnWritesTooLarge)
		}
	}
	runClient(t, s, 60*time.Second, func(db *client.DB) {
		tx := db.Begin(client.TxnOptions{})
		taken := 0
		for taken < n {
			err := tx.Put(keys[taken], bigValue(keys[taken]))
			if err != nil {
				refusal(fmt.Sprintf("put %d of 1 MiB", taken+1), err)
				break
			}
			taken++
		}
		if taken != k {
			fail("%d puts of 1 MiB taken, want %d (the bound is %d bytes)", taken, k, wire.MaxTxnWriteBytes)
		}
		// A batch that would pass the bound is refused whole.
		err := tx.PutMany([]wire.KV{{Key: keys[k], Value: []byte("batched")}, {Key: keys[k+1], Value: bigValue(keys[k+1])}})
		refusal("PutMany past the bound", err)
		// Still usable: a rewrite that shrinks a value, then a small new write.
		if err := tx.Put(keys[0], []byte("rewritten")); err != nil {
			fail("rewrite after the refusal: %v", err)
		}
		if err := tx.Put(keys[k], []byte("after")); err != nil {
			fail("small put after the refusal: %v", err)
		}
		if err := tx.Commit(); err != nil {
			fail("commit after the refusal: %v", err)
			return
		}

		// A refused transaction may abort too.
		tx = db.Begin(client.TxnOptions{})
		for i := range k {
			if err := tx.Put(keys[n-1-i], bigValue(keys[0])); err != nil {
				fail("second transaction, put %d: %v", i+1, err)
			}
		}
		refusal("second transaction, a put past the bound", tx.Put(keys[n-1-k], bigValue(keys[0])))
		if err := tx.Abort(); err != nil {
			fail("abort after the refusal: %v", err)
		}

		err = client.RunTxn(db, client.TxnOptions{}, func(tx *client.Txn) error {
			for i, key := range keys {
				v, err := tx.Get(key)
				var want []byte
				switch {
				case i == 0:
					want = []byte("rewritten")
				case i < k:
					want = bigValue(key)
				case i == k:
					want = []byte("after")
				}
				switch {
				case want == nil && !errors.Is(err, client.ErrNotFound):
					fail("%s (refused or aborted): %d bytes, %v; want not found", key, len(v), err)
				case want != nil && (err != nil || !bytes.Equal(v, want)):
					fail("%s: %d bytes, %v; want its %d committed bytes", key, len(v), err, len(want))
				}
			}
			return tx.PutMany([]wire.KV{{Key: keys[1], Value: []byte("later")}, {Key: keys[k+1], Value: []byte("later")}})
		})
		if err != nil {
			fail("a later reader and writer of the keys: %v", err)
		}
	})
	for _, f := range failures {
		t.Error(f)
	}
	watch.check(t)
}
