package storage_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/meridiandb/meridian/internal/node"
	"github.com/meridiandb/meridian/internal/storage"
	"github.com/meridiandb/meridian/internal/storage/durable"
	"github.com/meridiandb/meridian/internal/storage/mvcc"
	"github.com/meridiandb/meridian/internal/storage/txnrec"
)

// TestCorruptRecordsRefused damages single persisted records and checks recovery refuses them
// with a clear error instead of rebuilding wrong state.
func TestCorruptRecordsRefused(t *testing.T) {
	good := mvcc.New(mvcc.Options{})
	if err := good.PutIntent("key", mvcc.Version{TS: at(10), Txn: txn(1), Value: []byte("value"), Meta: []byte("m")}); err != nil {
		t.Fatal(err)
	}
	w := good.TakeWrites()[0]
	otherKey := mvcc.EncodeVersionKey(nil, "other", at(10), txn(1))
	tests := []struct {
		name string
		k, v []byte
		want string
	}{
		{"flipped value byte", w.Key, flip(w.Value, 5), "checksum mismatch"},
		{"value under another key", otherKey, w.Value, "checksum mismatch"},
		{"truncated value", w.Key, w.Value[:len(w.Value)-3], "checksum mismatch"},
		{"empty value", w.Key, nil, "truncated"},
		{"key without trailer", []byte("vkey"), w.Value, "bad prefix or length"},
		{"unescaped zero in key", append([]byte("vk\x00\x02"), w.Key[len(w.Key)-24:]...), w.Value, "bad escaping"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := durable.NewMem()
			if err := m.Apply([]node.Write{{Key: tt.k, Value: tt.v}}); err != nil {
				t.Fatal(err)
			}
			_, err := mvcc.Recover(m, mvcc.Options{})
			if err == nil || !errors.Is(err, mvcc.ErrCorrupt) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Recover error %v, want ErrCorrupt mentioning %q", err, tt.want)
			}
		})
	}

	t.Run("two intents in single-intent mode", func(t *testing.T) {
		s := mvcc.New(mvcc.Options{})
		for i := uint64(1); i <= 2; i++ {
			if err := s.PutIntent("k", mvcc.Version{TS: at(int64(i)), Txn: txn(i)}); err != nil {
				t.Fatal(err)
			}
		}
		m := durable.NewMem()
		if err := m.Apply(s.TakeWrites()); err != nil {
			t.Fatal(err)
		}
		if _, err := mvcc.Recover(m, mvcc.Options{SingleIntent: true}); !errors.Is(err, mvcc.ErrCorrupt) {
			t.Fatalf("Recover error %v, want ErrCorrupt", err)
		}
	})

	t.Run("transaction record", func(t *testing.T) {
		tab := txnrec.New()
		if _, err := tab.Create(txn(1), []byte("meta")); err != nil {
			t.Fatal(err)
		}
		rw := tab.TakeWrites()[0]
		m := durable.NewMem()
		if err := m.Apply([]node.Write{{Key: rw.Key, Value: flip(rw.Value, 3)}}); err != nil {
			t.Fatal(err)
		}
		if _, err := txnrec.Recover(m); !errors.Is(err, txnrec.ErrCorrupt) {
			t.Fatalf("Recover error %v, want ErrCorrupt", err)
		}
	})
}

func flip(b []byte, i int) []byte {
	c := append([]byte(nil), b...)
	c[i] ^= 0x40
	return c
}

func TestOversizedInputRejected(t *testing.T) {
	s := mvcc.New(mvcc.Options{})
	big := strings.Repeat("x", storage.MaxKeyBytes+1)
	tests := []struct {
		name string
		key  string
		v    mvcc.Version
		want error
	}{
		{"key", big, mvcc.Version{TS: at(1), Txn: txn(1)}, mvcc.ErrKeyTooLarge},
		{"value", "k", mvcc.Version{TS: at(1), Txn: txn(1), Value: make([]byte, storage.MaxValueBytes+1)}, mvcc.ErrValueTooLarge},
		{"meta", "k", mvcc.Version{TS: at(1), Txn: txn(1), Meta: make([]byte, storage.MaxMetaBytes+1)}, mvcc.ErrMetaTooLarge},
		{"no txn", "k", mvcc.Version{TS: at(1)}, mvcc.ErrNoTxn},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := s.PutIntent(tt.key, tt.v); !errors.Is(err, tt.want) {
				t.Fatalf("PutIntent: %v, want %v", err, tt.want)
			}
		})
	}
	if len(s.TakeWrites()) != 0 || s.Len() != 0 {
		t.Fatal("rejected writes left state behind")
	}
	// Limits at the boundary are accepted.
	if err := s.PutIntent(big[:storage.MaxKeyBytes], mvcc.Version{TS: at(1), Txn: txn(1), Value: make([]byte, storage.MaxValueBytes)}); err != nil {
		t.Fatalf("maximum-size key and value refused: %v", err)
	}
	for _, b := range backends() {
		t.Run("backend/"+b.name, func(t *testing.T) {
			be := b.open(t)
			if err := be.Apply(s.TakeWrites()); err != nil {
				t.Fatalf("maximum-size record refused by backend: %v", err)
			}
			if err := be.Apply([]node.Write{{Key: nil, Value: []byte("x")}}); err == nil {
				t.Fatal("empty key accepted")
			}
			if err := be.Apply([]node.Write{{Key: []byte("x"), Value: make([]byte, durable.MaxValueBytes+1)}}); err == nil {
				t.Fatal("oversized value accepted")
			}
		})
	}
}

// TestPebbleRefusesDamagedFiles damages the on-disk files of a Pebble store and checks that
// opening and recovering fails instead of serving partial data.
func TestPebbleRefusesDamagedFiles(t *testing.T) {
	build := func(t *testing.T) string {
		dir := t.TempDir()
		p, err := durable.OpenPebble(dir)
		if err != nil {
			t.Fatal(err)
		}
		s := mvcc.New(mvcc.Options{})
		for i := 0; i < 2000; i++ {
			if err := s.PutCommitted(fmt.Sprintf("key%05d", i), mvcc.Version{TS: at(int64(i + 1)), Txn: txn(1), Value: []byte(strings.Repeat("v", 100))}); err != nil {
				t.Fatal(err)
			}
		}
		if err := p.Apply(s.TakeWrites()); err != nil {
			t.Fatal(err)
		}
		if err := p.Flush(); err != nil {
			t.Fatal(err)
		}
		if err := p.Close(); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	openAndRecover := func(dir string) error {
		p, err := durable.OpenPebble(dir)
		if err != nil {
			return err
		}
		defer p.Close()
		_, err = mvcc.Recover(p, mvcc.Options{})
		return err
	}
	ssts := func(t *testing.T, dir string) []string {
		m, err := filepath.Glob(filepath.Join(dir, "*.sst"))
		if err != nil || len(m) == 0 {
			t.Fatalf("no sstables in %s (%v)", dir, err)
		}
		return m
	}
	tests := []struct {
		name   string
		damage func(t *testing.T, dir string)
	}{
		{"flipped bytes in an sstable", func(t *testing.T, dir string) {
			for _, f := range ssts(t, dir) {
				b, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				for i := len(b) / 4; i < len(b)/2; i += 97 {
					b[i] ^= 0xFF
				}
				if err := os.WriteFile(f, b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}},
		{"truncated sstable", func(t *testing.T, dir string) {
			for _, f := range ssts(t, dir) {
				fi, err := os.Stat(f)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.Truncate(f, fi.Size()/2); err != nil {
					t.Fatal(err)
				}
			}
		}},
		{"missing sstable", func(t *testing.T, dir string) {
			for _, f := range ssts(t, dir) {
				if err := os.Remove(f); err != nil {
					t.Fatal(err)
				}
			}
		}},
		{"damaged manifest", func(t *testing.T, dir string) {
			m, _ := filepath.Glob(filepath.Join(dir, "MANIFEST-*"))
			if len(m) == 0 {
				t.Fatal("no manifest")
			}
			for _, f := range m {
				if err := os.WriteFile(f, []byte("garbage"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := build(t)
			if err := openAndRecover(dir); err != nil {
				t.Fatalf("undamaged store: %v", err)
			}
			tt.damage(t, dir)
			err := openAndRecover(dir)
			if err == nil {
				t.Fatal("damaged store opened and recovered without error")
			}
			t.Logf("refused: %v", err)
		})
	}

	t.Run("foreign directory", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("hello"), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := durable.OpenPebble(dir); err == nil {
			t.Fatal("opened a directory that is not a store")
		}
	})
}
