package runtime

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meridiandb/meridian/client"
	"github.com/meridiandb/meridian/configs"
	_ "github.com/meridiandb/meridian/internal/protocol/serial"
)

// testConfig is the shipped default on free ports, with latencies scaled down and data in a
// temporary directory.
func testConfig(t testing.TB, edit func(string) string) *Config {
	t.Helper()
	text, err := WithFreePorts(configs.Default)
	if err != nil {
		t.Fatal(err)
	}
	text = strings.Replace(text, "scale = 1.0", "scale = 0.02", 1)
	if edit != nil {
		text = edit(text)
	}
	dir := t.TempDir()
	cfg, err := Parse(filepath.Join(dir, "cluster.toml"), text, dir)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func startCluster(t testing.TB, cfg *Config) []*Server {
	t.Helper()
	servers, err := StartAll(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { CloseAll(servers) })
	return servers
}

func dial(t testing.TB, cfg *Config, node int) *client.DB {
	t.Helper()
	tr, err := client.Dial(cfg.Nodes[node].Addr, client.WithCluster(cfg.Name), client.WithRequestTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return client.Open(tr)
}

func put(db *client.DB, k, v string) error {
	return client.RunTxn(db, client.TxnOptions{}, func(tx *client.Txn) error { return tx.Put(k, []byte(v)) })
}

func get(db *client.DB, k string) (string, error) {
	var out string
	err := client.RunTxn(db, client.TxnOptions{ReadOnly: true}, func(tx *client.Txn) error {
		v, err := tx.Get(k)
		out = string(v)
		return err
	})
	return out, err
}

func TestTransactionsAcrossRegions(t *testing.T) {
	cfg := testConfig(t, nil)
	startCluster(t, cfg)
	dbs := []*client.DB{dial(t, cfg, 0), dial(t, cfg, 1), dial(t, cfg, 2)}
	for i, db := range dbs {
		if err := put(db, fmt.Sprintf("k%d", i), fmt.Sprintf("v%d", i)); err != nil {
			t.Fatalf("put through node %d: %v", i, err)
		}
	}
	for i, db := range dbs {
		for j := range dbs {
			got, err := get(db, fmt.Sprintf("k%d", j))
			if err != nil || got != fmt.Sprintf("v%d", j) {
				t.Fatalf("node %d reads k%d = %q, %v; want v%d", i, j, got, err, j)
			}
		}
	}
	if _, err := get(dbs[1], "absent"); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("absent key: got %v, want ErrNotFound", err)
	}
}

func TestCommitsSurviveRestart(t *testing.T) {
	cfg := testConfig(t, nil)
	servers, err := StartAll(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	db := dial(t, cfg, 1)
	for i := 0; i < 20; i++ {
		if err := put(db, fmt.Sprintf("d%d", i), fmt.Sprint(i)); err != nil {
			t.Fatal(err)
		}
	}
	CloseAll(servers)
	startCluster(t, cfg)
	db = dial(t, cfg, 2)
	for i := 0; i < 20; i++ {
		if got, err := get(db, fmt.Sprintf("d%d", i)); err != nil || got != fmt.Sprint(i) {
			t.Fatalf("after restart d%d = %q, %v; want %d", i, got, err, i)
		}
	}
}
