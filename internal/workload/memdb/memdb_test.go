package memdb

import (
	"errors"
	"testing"

	"github.com/meridiandb/meridian/client"
)

func TestTransactions(t *testing.T) {
	s := New()
	db := client.Open(s.Transport())

	// Writes are invisible until commit and discarded on abort.
	tx := db.Begin(client.TxnOptions{})
	if err := tx.Put("a", []byte("1")); err != nil {
		t.Fatal(err)
	}
	if v, err := tx.Get("a"); err != nil || string(v) != "1" {
		t.Fatalf("read own write: %q, %v", v, err)
	}
	if _, ok := s.Get("a"); ok {
		t.Fatal("uncommitted write visible in the store")
	}
	if err := tx.Abort(); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Get("a"); ok {
		t.Fatal("aborted write applied")
	}

	err := client.RunTxn(db, client.TxnOptions{}, func(tx *client.Txn) error {
		for _, k := range []string{"b", "c", "d"} {
			if err := tx.Put(k, []byte(k)); err != nil {
				return err
			}
		}
		return tx.Delete("c")
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Keys(); len(got) != 2 || got[0] != "b" || got[1] != "d" {
		t.Fatalf("keys after commit: %q, want [b d]", got)
	}

	// A second client sees committed data; scans merge buffered writes.
	db2 := client.Open(s.Transport())
	err = client.RunTxn(db2, client.TxnOptions{}, func(tx *client.Txn) error {
		if _, err := tx.Get("c"); !errors.Is(err, client.ErrNotFound) {
			t.Errorf("deleted key: err %v, want not found", err)
		}
		if err := tx.Put("c2", []byte("x")); err != nil {
			return err
		}
		if err := tx.Delete("d"); err != nil {
			return err
		}
		rows, err := tx.Scan("a", "z", 0)
		if err != nil {
			return err
		}
		if len(rows) != 2 || rows[0].Key != "b" || rows[1].Key != "c2" {
			t.Errorf("scan: %v, want b, c2", rows)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestInjectedAbortsAreRetried(t *testing.T) {
	s := New()
	s.AbortCommits(0.5, 1)
	db := client.Open(s.Transport())
	for i := 0; i < 50; i++ {
		err := client.RunTxnWith(db, client.TxnOptions{}, client.RetryPolicy{MaxAttempts: 100}, func(tx *client.Txn) error {
			v, err := tx.Get("n")
			if err != nil && !errors.Is(err, client.ErrNotFound) {
				return err
			}
			return tx.Put("n", append(v, 'x'))
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	v, _ := s.Get("n")
	commits, aborts := s.Stats()
	if len(v) != 50 || commits != 50 || aborts == 0 {
		t.Fatalf("value length %d, commits %d, aborts %d; want 50, 50, > 0", len(v), commits, aborts)
	}
}
