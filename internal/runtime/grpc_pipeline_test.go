package runtime

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/meridiandb/meridian/configs"
	"github.com/meridiandb/meridian/proto/meridianpb"
)

// builtinTestConfig is the built-in configuration name on free ports, as testConfig is the
// default.
func builtinTestConfig(t *testing.T, name string) *Config {
	t.Helper()
	text, _, ok := configs.Builtin(name)
	if !ok {
		t.Fatalf("no built-in configuration %s", name)
	}
	text, err := WithFreePorts(text)
	if err != nil {
		t.Fatal(err)
	}
	text = strings.Replace(text, "scale = 1.0", "scale = 0.02", 1)
	dir := t.TempDir()
	cfg, err := Parse(filepath.Join(dir, "cluster.toml"), text, dir)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// A gRPC client may send a transaction's requests without waiting for each answer; each is
// answered, if only with a refusal. k2 and crdb dropped a request that came while another was
// out, unanswered: the client waited for it for good, or committed without it (commit OK).
func TestGRPCPipelinedRequestsAnswered(t *testing.T) {
	for _, name := range []string{"k2-3region", "crdb-3region", "spanner-3region"} {
		t.Run(name, func(t *testing.T) {
			cfg := builtinTestConfig(t, name)
			startCluster(t, cfg)
			s, answers := grpcStream(t, cfg.Nodes[0].GRPCAddr, nil)
			sendAll(t, s, &meridianpb.Request{Txn: 1, Op: meridianpb.Op_OP_GET, Key: "p0"})
			if rep, err := next(answers, "get"); err != nil || rep.Code != meridianpb.Code_CODE_OK {
				t.Fatalf("get: %v, %v", rep, err)
			}
			keys := []string{"pa", "pb", "pc", "pd", "pe", "pf", "pg", "ph"}
			for i, k := range keys {
				sendAll(t, s, &meridianpb.Request{Txn: 1, Seq: uint32(1 + i), Op: meridianpb.Op_OP_PUT, Key: k, Value: []byte(k)})
			}
			for range keys {
				rep, err := next(answers, "pipelined puts")
				if err != nil {
					t.Fatal(err)
				}
				if c := rep.Code; c != meridianpb.Code_CODE_OK && c != meridianpb.Code_CODE_BAD_ARGUMENT {
					t.Errorf("put %d: %v", rep.Seq, rep)
				}
			}
		})
	}
}
