package k2

import (
	"slices"
	"testing"
	"time"

	"github.com/meridiandb/meridian/client"
	"github.com/meridiandb/meridian/internal/bench"
	"github.com/meridiandb/meridian/internal/protocol"
	"github.com/meridiandb/meridian/internal/sim"
	"github.com/meridiandb/meridian/internal/wire"
)

// TestScanReplicatedLayout: on a layout with shard replicas (wren-3dc replicates every shard in
// every region, and k2 keeps the caller's layout), the preload puts a shard's rows on every
// replica, as bench's preload does. K2 reads and writes primaries only, so a replica's copy is
// the preload image, never updated: a scan must answer each key once, from its primary.
func TestScanReplicatedLayout(t *testing.T) {
	base := sim.DefaultConfig()
	cfg, err := bench.SimConfig(bench.Deployment{Protocol: "k2", Topology: "wren-3dc",
		NodesPerRegion: 1, ShardsPerNode: 4, Seed: 1, Base: &base, IntraRTT: 200 * time.Microsecond})
	if err != nil {
		t.Fatal(err)
	}
	tp := cfg.Topology
	s, err := sim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	keys := []string{"p-a", "p-b", "p-c", "p-d"}
	for _, k := range keys {
		for _, r := range tp.Shards[tp.ShardOf(k)].Replicas {
			if err := s.Handler(r).(protocol.Preloader).Preload([]wire.KV{{Key: k, Value: []byte("old")}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(tp.Shards[tp.ShardOf("p-a")].Replicas) < 2 {
		t.Fatal("layout has no replicas")
	}
	var got []string
	var scanErr error
	done := false
	s.AddClient(0, tp.DataNodes(0)[0], int64(100*time.Millisecond), func(db *client.DB) {
		defer func() { done = true }()
		scanErr = client.RunTxn(db, client.TxnOptions{}, func(tx *client.Txn) error {
			return tx.Put("p-a", []byte("new"))
		})
		if scanErr != nil {
			return
		}
		scanErr = client.RunTxn(db, client.TxnOptions{ReadOnly: true}, func(tx *client.Txn) error {
			rows, err := tx.Scan("p-", "p.", 0)
			got = scanRowKeys(rows)
			return err
		})
	})
	s.RunUntil(int64(20 * time.Second))
	s.Stop()
	if !done || scanErr != nil {
		t.Fatalf("done %v, err %v", done, scanErr)
	}
	if want := []string{"p-a=new", "p-b=old", "p-c=old", "p-d=old"}; !slices.Equal(got, want) {
		t.Errorf("scan: %v, want %v", got, want)
	}
}

func scanRowKeys(rows []wire.KV) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.Key + "=" + string(r.Value)
	}
	return out
}
