package runtime

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/meridiandb/meridian/proto/meridianpb"
)

// The gRPC API runs the same transactions as the Go client, on the same data.
func TestGRPCSession(t *testing.T) {
	cfg := testConfig(t, nil)
	startCluster(t, cfg)
	if err := put(dial(t, cfg, 0), "shared", "from-go"); err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient(cfg.Nodes[1].GRPCAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := meridianpb.NewMeridianClient(conn).Session(ctx)
	if err != nil {
		t.Fatal(err)
	}
	call := func(r *meridianpb.Request) *meridianpb.Reply {
		t.Helper()
		if err := s.Send(r); err != nil {
			t.Fatal(err)
		}
		rep, err := s.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if rep.Txn != r.Txn || rep.Seq != r.Seq {
			t.Fatalf("reply to %d/%d answers %d/%d", r.Txn, r.Seq, rep.Txn, rep.Seq)
		}
		return rep
	}
	if rep := call(&meridianpb.Request{Txn: 1, Seq: 0, Op: meridianpb.Op_OP_GET, Key: "shared"}); rep.Code != meridianpb.Code_CODE_OK || !rep.Found || string(rep.Value) != "from-go" {
		t.Fatalf("get over gRPC: %v", rep)
	}
	call(&meridianpb.Request{Txn: 1, Seq: 1, Op: meridianpb.Op_OP_PUT, Key: "shared", Value: []byte("from-grpc")})
	if rep := call(&meridianpb.Request{Txn: 1, Seq: 2, Op: meridianpb.Op_OP_COMMIT}); rep.Code != meridianpb.Code_CODE_OK {
		t.Fatalf("commit over gRPC: %v", rep)
	}
	if got, err := get(dial(t, cfg, 2), "shared"); err != nil || got != "from-grpc" {
		t.Fatalf("Go client reads %q, %v after the gRPC commit", got, err)
	}
	if err := s.Send(&meridianpb.Request{Txn: 2, Op: meridianpb.Op(99)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(); err == nil {
		t.Fatal("an unknown op was accepted")
	}
}
