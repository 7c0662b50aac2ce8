package client

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/meridiandb/meridian/internal/wire"
)

// holdingTransport holds the first request until released; a request that arrives while
// another is held is answered at once and noted.
type holdingTransport struct {
	inFlight   atomic.Int32
	overlapped atomic.Bool
	arrived    chan struct{}
	release    chan struct{}
}

func (h *holdingTransport) RoundTrip(req *wire.ClientRequest) (*wire.ClientReply, error) {
	defer h.inFlight.Add(-1)
	if h.inFlight.Add(1) > 1 {
		h.overlapped.Store(true)
		return &wire.ClientReply{Txn: req.Txn, Seq: req.Seq, Code: wire.CodeOK}, nil
	}
	h.arrived <- struct{}{}
	<-h.release
	return &wire.ClientReply{Txn: req.Txn, Seq: req.Seq, Code: wire.CodeOK}, nil
}

func (*holdingTransport) Sleep(time.Duration) {}
func (*holdingTransport) Now() int64          { return 0 }

// TestConcurrentUseRefused: a DB and its transactions serve one goroutine. A second goroutine
// that used the same Txn sent a request with the same (Txn, Seq) as the one in flight (the
// coordinator drops or refuses it, and NetTransport handed the one reply to whichever waiter
// registered last: a read got another key's value); one that began its own Txn on the same DB
// could take the same transaction id. Either must fail at once with a clear error, before
// anything is sent.
func TestConcurrentUseRefused(t *testing.T) {
	for _, tc := range []struct {
		name   string
		second func(db *DB, tx *Txn) error
	}{
		{"same txn get", func(_ *DB, tx *Txn) error { _, err := tx.Get("b"); return err }},
		{"same txn commit", func(_ *DB, tx *Txn) error { return tx.Commit() }},
		{"same txn abort", func(_ *DB, tx *Txn) error { return tx.Abort() }},
		{"same txn batch", func(_ *DB, tx *Txn) error { _, err := tx.GetMany([]string{"b", "c"}); return err }},
		{"other txn of the db", func(db *DB, _ *Txn) error { return db.Begin(TxnOptions{}).Put("c", nil) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := &holdingTransport{arrived: make(chan struct{}, 8), release: make(chan struct{})}
			db := Open(h)
			tx := db.Begin(TxnOptions{})
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _ = tx.Get("a")
			}()
			<-h.arrived
			err := tc.second(db, tx)
			close(h.release)
			wg.Wait()
			if h.overlapped.Load() {
				t.Fatalf("a second request was sent while the first was in flight (second call returned %v)", err)
			}
			if !errors.Is(err, ErrBadArgument) {
				t.Fatalf("second call: %v, want ErrBadArgument about concurrent use", err)
			}
			// The DB is usable again once the first call returned.
			if _, err := tx.Get("d"); err != nil && !errors.Is(err, ErrNotFound) {
				t.Fatalf("after the first call returned: %v", err)
			}
		})
	}
}
