package spanner

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/meridiandb/meridian/client"
	"github.com/meridiandb/meridian/internal/protocol/prototest"
	"github.com/meridiandb/meridian/internal/topo"
)

// TestReadLocksBounded: a read-write transaction reads 600 keys of 4,000 bytes on one node and
// writes one. Its yes vote stores the keys it read-locked there as one value, 2.4 MB, which the
// store refuses, and a real node stops on it (review); the simulator, which dropped the store's
// error, acknowledged it (NewSim now fails a test whose run had a write refused). The reads past
// maxTxnReadLockBytes are refused instead, with the transaction going on to commit.
func TestReadLocksBounded(t *testing.T) {
	s := prototest.NewSim(t, prototest.Case{Protocol: Name, Seed: 1})
	tp := s.Topology()
	part := tp.DataNodes(1)[0]
	pre := topo.RoutingPrefix(prototest.KeysOn(t, tp, part, "rv", 1)[0])
	pad := strings.Repeat("x", 4000)
	var read, refused int
	var commitErr error
	done := false
	s.AddClient(0, tp.DataNodes(0)[0], int64(100*time.Millisecond), func(db *client.DB) {
		defer func() { done = true }()
		tx := db.Begin(client.TxnOptions{})
		for i := range 600 {
			_, err := tx.Get(fmt.Sprintf("%s/%04d/%s", pre, i, pad))
			switch {
			case err == nil || errors.Is(err, client.ErrNotFound):
				read++
			case strings.Contains(err.Error(), txnReadLocksTooLarge):
				refused++
			default:
				commitErr = fmt.Errorf("read %d: %w", i, err)
				return
			}
		}
		if err := tx.Put(pre+"/w", []byte("v")); err != nil {
			commitErr = err
			return
		}
		commitErr = tx.Commit()
	})
	s.RunUntil(int64(120 * time.Second))
	s.Stop()
	if !done || commitErr != nil {
		t.Fatalf("client done %v, commit: %v", done, commitErr)
	}
	if refused == 0 || read == 0 {
		t.Errorf("%d reads done and %d refused; want the ones past the bound refused", read, refused)
	}
	if want := maxTxnReadLockBytes / (4000 + 10 + readLockOverheadBytes); read < want*9/10 || read > want+1 {
		t.Errorf("%d reads done, want about %d (the bound over each key's share)", read, want)
	}
}
