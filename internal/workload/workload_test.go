package workload_test

import (
	"errors"
	"strconv"
	"testing"

	"github.com/meridiandb/meridian/client"
	"github.com/meridiandb/meridian/internal/workload"
	"github.com/meridiandb/meridian/internal/workload/memdb"
)

func TestLoadRows(t *testing.T) {
	rows := func(n int) workload.RowSource {
		return func(emit func(string, []byte) error) error {
			for i := 0; i < n; i++ {
				if err := emit("k"+strconv.Itoa(i), []byte{byte(i)}); err != nil {
					return err
				}
			}
			return nil
		}
	}
	for _, c := range []struct{ rows, batch, commits int }{{0, 10, 0}, {25, 10, 3}, {30, 10, 3}, {7, 0, 1}} {
		s := memdb.New()
		s.AbortCommits(0.3, 1) // retries must not duplicate or lose rows
		if err := workload.LoadRows(client.Open(s.Transport()), rows(c.rows), c.batch); err != nil {
			t.Fatal(err)
		}
		commits, _ := s.Stats()
		if s.Len() != c.rows || commits != c.commits {
			t.Errorf("%d rows in batches of %d: %d keys in %d commits, want %d in %d", c.rows, c.batch, s.Len(), commits, c.rows, c.commits)
		}
	}
	stop := errors.New("source failed")
	err := workload.LoadRows(client.Open(memdb.New().Transport()), func(emit func(string, []byte) error) error { return stop }, 10)
	if !errors.Is(err, stop) {
		t.Errorf("source error: got %v", err)
	}
	err = workload.LoadRows(client.Open(memdb.New().Transport()), func(emit func(string, []byte) error) error { return emit("", nil) }, 1)
	if !errors.Is(err, client.ErrBadArgument) {
		t.Errorf("empty key: got %v, want a bad-argument error", err)
	}
}

// TestLoadRowsRepeatedKey: a row emitted twice within one batch goes out in the next
// transaction, so the batch names each key once and the later value wins.
func TestLoadRowsRepeatedKey(t *testing.T) {
	s := memdb.New()
	err := workload.LoadRows(client.Open(s.Transport()), func(emit func(string, []byte) error) error {
		for _, kv := range [][2]string{{"a", "1"}, {"b", "1"}, {"a", "2"}, {"c", "1"}} {
			if err := emit(kv[0], []byte(kv[1])); err != nil {
				return err
			}
		}
		return nil
	}, 10)
	if err != nil {
		t.Fatal(err)
	}
	commits, _ := s.Stats()
	if v, _ := s.Get("a"); string(v) != "2" || s.Len() != 3 || commits != 2 {
		t.Fatalf("a=%q, %d keys in %d commits; want a=2, 3 keys in 2 commits", v, s.Len(), commits)
	}
}
