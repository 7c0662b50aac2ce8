package txnkit

import (
	"encoding/binary"
	"strings"
	"testing"

	"github.com/meridiandb/meridian/internal/node"
	"github.com/meridiandb/meridian/internal/storage"
	"github.com/meridiandb/meridian/internal/storage/durable"
)

// Lives are numbered from what the previous one persisted, under the protocol's own key (the
// stores k2, spanner and crdb wrote before this helper must still recover), and no two lives
// hand out the same id; a node refuses to start once the id space is used up, and a record it
// cannot read is an error, not a first life (which would hand out the first life's ids again).
func TestIncarnation(t *testing.T) {
	key := []byte("x/incarnation")
	disk := durable.NewMem()
	seen := map[storage.TxnID]uint64{}
	for life := uint64(1); life <= 3; life++ {
		inc, err := StartIncarnation(disk, key)
		if err != nil {
			t.Fatal(err)
		}
		if inc.N != life {
			t.Fatalf("life %d started as incarnation %d", life, inc.N)
		}
		for range 3 {
			id := inc.NextTxnID(7)
			if prev, ok := seen[id]; ok {
				t.Fatalf("id %v handed out by lives %d and %d", id, prev, life)
			}
			seen[id] = life
			if id.Coordinator() != 7 || id.Seq()>>32 != life {
				t.Fatalf("id %v: want coordinator 7, incarnation %d", id, life)
			}
		}
		if err := disk.Apply([]node.Write{inc.Write()}); err != nil {
			t.Fatal(err)
		}
	}
	if got := binary.BigEndian.Uint64(mustGet(t, disk, key)); got != 3 {
		t.Fatalf("persisted incarnation %d, want 3 (big-endian uint64 under the protocol's key)", got)
	}

	if inc, err := StartIncarnation(nil, key); err != nil || inc.N != 1 {
		t.Fatalf("without a disk: incarnation %d, %v; want 1", inc.N, err)
	}

	for _, c := range []struct {
		name string
		val  []byte
		want string
	}{
		{"last life", binary.BigEndian.AppendUint64(nil, MaxIncarnation-2), ""},
		{"exhausted", binary.BigEndian.AppendUint64(nil, MaxIncarnation-1), "restarted 65535 times: transaction id space exhausted"},
		{"wraps", binary.BigEndian.AppendUint64(nil, 1<<64-1), "transaction id space exhausted"},
		{"short", []byte{1, 2, 3}, "bad incarnation record"},
	} {
		d := durable.NewMem()
		if err := d.Apply([]node.Write{{Key: key, Value: c.val}}); err != nil {
			t.Fatal(err)
		}
		_, err := StartIncarnation(d, key)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n")):
			t.Errorf("%s: error %v, want one line with %q", c.name, err, c.want)
		}
	}
}

func mustGet(t *testing.T, d *durable.Mem, key []byte) []byte {
	t.Helper()
	var val []byte
	if err := d.Scan(key, append(append([]byte(nil), key...), 0), func(_, v []byte) bool {
		val = v
		return false
	}); err != nil || val == nil {
		t.Fatalf("%q not on disk (%v)", key, err)
	}
	return val
}

// A life whose counter is spent takes the next number for its ids (Renew) instead of counting
// on into its first ids again; its own number, which peers compare to tell a restart, stays,
// and the next life starts above the number the renewal persisted. Past the last number Renew
// refuses, and an id asked for anyway is a panic, never a repeat.
func TestIncarnationRenewsWhenSpent(t *testing.T) {
	key := []byte("x/incarnation")
	disk := durable.NewMem()
	inc, err := StartIncarnation(disk, key)
	if err != nil {
		t.Fatal(err)
	}
	first := inc.NextTxnID(7)
	inc.SpendForTest(2)
	last := inc.NextTxnID(7)
	inc.NextTxnID(7)
	if !inc.Spent() {
		t.Fatal("not spent after the counter's last id")
	}
	if err := inc.Renew(); err != nil {
		t.Fatal(err)
	}
	if inc.Spent() || inc.N != 1 {
		t.Fatalf("after Renew: spent %v, life %d (want 1: the life goes on)", inc.Spent(), inc.N)
	}
	next := inc.NextTxnID(7)
	if next == first || next <= last || next.Seq()>>32 != 2 {
		t.Fatalf("renewed id %v after %v (first %v): want a new one under incarnation 2", next, last, first)
	}
	if err := disk.Apply([]node.Write{inc.Write()}); err != nil {
		t.Fatal(err)
	}
	if again, err := StartIncarnation(disk, key); err != nil || again.N != 3 {
		t.Fatalf("the life after a renewal to 2 starts as %d, %v; want 3", again.N, err)
	}

	end := Incarnation{key: key, N: MaxIncarnation - 1, ids: MaxIncarnation - 1}
	end.SpendForTest(0)
	if err := end.Renew(); err == nil || !strings.Contains(err.Error(), "exhausted") {
		t.Fatalf("Renew past the last incarnation: %v", err)
	}
	defer func() {
		if recover() == nil {
			t.Fatal("an id handed out once spent")
		}
	}()
	end.NextTxnID(7)
}

// The test hook only ever moves the counter forward: asking for more ids left than remain would
// otherwise hand out ids again.
func TestSpendForTestNeverRewinds(t *testing.T) {
	inc, err := StartIncarnation(durable.NewMem(), []byte("x/incarnation"))
	if err != nil {
		t.Fatal(err)
	}
	inc.SpendForTest(2)
	first := inc.NextTxnID(1)
	inc.SpendForTest(5)
	if next := inc.NextTxnID(1); next <= first {
		t.Fatalf("id %v after %v: the hook moved the counter back", next, first)
	}
}
