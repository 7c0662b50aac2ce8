package storage_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/meridiandb/meridian/internal/node"
	"github.com/meridiandb/meridian/internal/storage"
	"github.com/meridiandb/meridian/internal/storage/durable"
	"github.com/meridiandb/meridian/internal/storage/mvcc"
	"github.com/meridiandb/meridian/internal/storage/txnrec"
	"github.com/meridiandb/meridian/internal/ts"
)

// backend is one durable backend under test. restart simulates a crash of the node: the
// in-memory state is dropped and the backend is reopened from what it holds.
type backend struct {
	name    string
	open    func(t *testing.T) durable.Backend
	restart func(t *testing.T, b durable.Backend) durable.Backend
}

func backends() []backend {
	return []backend{
		{
			name: "mem",
			open: func(*testing.T) durable.Backend { return durable.NewMem() },
			// The simulator keeps the Mem outside the node, so it survives the crash as is.
			restart: func(_ *testing.T, b durable.Backend) durable.Backend { return b },
		},
		{
			name: "pebble",
			open: func(t *testing.T) durable.Backend {
				p, err := durable.OpenPebble(t.TempDir())
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = p.Close() })
				return p
			},
			restart: func(t *testing.T, b durable.Backend) durable.Backend {
				p := b.(*durable.Pebble)
				if err := p.Close(); err != nil {
					t.Fatal(err)
				}
				q, err := durable.OpenPebble(p.Dir())
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = q.Close() })
				return q
			},
		},
	}
}

func persist(t *testing.T, b durable.Backend, ws []node.Write) {
	t.Helper()
	if len(ws) == 0 {
		return
	}
	if err := b.Apply(ws); err != nil {
		t.Fatalf("apply: %v", err)
	}
}

// dump renders every version of a store canonically, for equality checks.
func dump(s *mvcc.Store) string {
	var sb strings.Builder
	s.Ascend("", "", func(key string, vs []mvcc.Version) bool {
		for _, v := range vs {
			fmt.Fprintf(&sb, "%q %v %v %v tomb=%v val=%q meta=%q\n", key, v.TS, v.Txn, v.State, v.Tombstone, v.Value, v.Meta)
		}
		return true
	})
	for _, txn := range s.PendingTxns() {
		fmt.Fprintf(&sb, "pending %v %q\n", txn, s.IntentKeys(txn))
	}
	return sb.String()
}

func dumpRecords(tab *txnrec.Table) string {
	var sb strings.Builder
	tab.Records(func(r txnrec.Record) bool {
		fmt.Fprintf(&sb, "%v %v %v %d %q\n", r.Txn, r.Status, r.CommitTS, r.Epoch, r.Meta)
		return true
	})
	return sb.String()
}

func at(wall int64) ts.Timestamp { return ts.New(wall) }

func txn(n uint64) storage.TxnID { return storage.MakeTxnID(1, n) }
