package runtime

import (
	"bytes"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	"github.com/meridiandb/meridian/internal/wire"
	"github.com/meridiandb/meridian/proto/meridianpb"
)

// TestLenientDecodeMatchesProtobuf: on a valid Request with every field set (and a field this
// version does not know), the lenient decoder gives what protobuf gives; on one whose keys are
// not UTF-8, it gives those bytes where protobuf refuses the message.
func TestLenientDecodeMatchesProtobuf(t *testing.T) {
	full := &meridianpb.Request{Txn: 1<<40 + 3, Seq: 7, Op: meridianpb.Op_OP_BATCH, Key: "k", EndKey: "z", Limit: 5,
		Value: []byte("v"), ReadOnly: true, Attempt: 2, Label: "new-order",
		Batch: []*meridianpb.BatchOp{{Op: meridianpb.Op_OP_PUT, Key: "a", Value: []byte("1")}, {Op: meridianpb.Op_OP_GET, Key: "b"}}}
	b, err := proto.Marshal(full)
	if err != nil {
		t.Fatal(err)
	}
	b = append(b, 0xa0, 0x06, 0x01) // field 100, a varint: unknown to this version
	var got meridianpb.Request
	if err := decodeRequestLeniently(b, &got); err != nil {
		t.Fatal(err)
	}
	var want meridianpb.Request
	if err := proto.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	want.ProtoReflect().SetUnknown(nil)
	if !proto.Equal(&got, &want) {
		t.Fatalf("lenient decode %v, protobuf %v", &got, &want)
	}

	bad := withInvalidUTF8(t, &meridianpb.Request{Txn: 1, Op: meridianpb.Op_OP_BATCH,
		Batch: []*meridianpb.BatchOp{{Op: meridianpb.Op_OP_PUT, Key: "XY", Value: []byte("v")}}})
	if proto.Unmarshal(bad, &meridianpb.Request{}) == nil {
		t.Fatal("protobuf took a key that is not UTF-8: the fallback is not needed")
	}
	got = meridianpb.Request{}
	if err := decodeRequestLeniently(bad, &got); err != nil || got.Batch[0].Key != "\xff\xfe" {
		t.Fatalf("lenient decode: %v, batch key %q", err, got.Batch[0].GetKey())
	}
	if decodeRequestLeniently([]byte{0x0a, 0x05, 'a'}, &meridianpb.Request{}) == nil {
		t.Error("a truncated field was taken")
	}

	// A known field with another wire type is skipped, as protobuf skips it (attempt, field 9,
	// sent as bytes): refused, the stream ended over it.
	odd := append(withInvalidUTF8(t, &meridianpb.Request{Txn: 1, Op: meridianpb.Op_OP_PUT, Key: "XY"}), 0x4a, 0x01, 'a')
	got = meridianpb.Request{}
	if err := decodeRequestLeniently(odd, &got); err != nil || got.Key != "\xff\xfe" || got.Attempt != 0 {
		t.Errorf("a known field of another wire type: %v, %v", err, &got)
	}
	// Protobuf refuses a field number past 2^29-1, and so does the lenient decoder; the codec
	// falls back only on protobuf's UTF-8 error.
	huge := append(withInvalidUTF8(t, &meridianpb.Request{Txn: 1, Key: "XY"}), 0x80, 0x80, 0x80, 0x80, 0x10, 0x01)
	if decodeRequestLeniently(huge, &meridianpb.Request{}) == nil {
		t.Error("field number 2^29 was taken")
	}
	valid := append(mustMarshal(t, &meridianpb.Request{Txn: 1, Key: "k"}), 0x80, 0x80, 0x80, 0x80, 0x10, 0x01)
	if err := newLenientCodec().Unmarshal(mem.BufferSlice{mem.SliceBuffer(valid)}, &meridianpb.Request{}); err == nil {
		t.Error("the codec took a message protobuf refuses for another reason than UTF-8")
	}
}

func mustMarshal(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// withInvalidUTF8 marshals r with its text "XY" replaced by the bytes ff fe.
func withInvalidUTF8(t *testing.T, r *meridianpb.Request) []byte {
	t.Helper()
	b, err := proto.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Count(b, []byte("XY")) != 1 {
		t.Fatal("the marker text must appear once")
	}
	return bytes.Replace(b, []byte("XY"), []byte{0xff, 0xfe}, 1)
}

// rawCodec lets a test client send bytes protobuf would refuse to marshal.
type rawCodec struct{ encoding.CodecV2 }

type rawRequest []byte

func (c rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	if raw, ok := v.(rawRequest); ok {
		return mem.BufferSlice{mem.SliceBuffer(raw)}, nil
	}
	return c.CodecV2.Marshal(v)
}

// TestGRPCInvalidUTF8KeyAnswered: a request whose key is not UTF-8 is answered with a
// bad-argument error, and the stream goes on: a transaction after it on the same stream
// commits. Protobuf refused the message before our code saw it, and the stream ended.
func TestGRPCInvalidUTF8KeyAnswered(t *testing.T) {
	cfg := testConfig(t, nil)
	startCluster(t, cfg)
	s, answers := grpcStream(t, cfg.Nodes[0].GRPCAddr, nil,
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(rawCodec{encoding.GetCodecV2(grpcproto.Name)})))
	bad := withInvalidUTF8(t, &meridianpb.Request{Txn: 1, Op: meridianpb.Op_OP_PUT, Key: "XY", Value: []byte("v")})
	if err := s.SendMsg(rawRequest(bad)); err != nil {
		t.Fatal(err)
	}
	rep, err := next(answers, "the bad request's answer")
	if err != nil {
		t.Fatalf("the stream ended instead of answering: %v", err)
	}
	if rep.Code != meridianpb.Code_CODE_BAD_ARGUMENT || !strings.Contains(rep.Error, "not valid UTF-8") {
		t.Fatalf("answer %v %q, want a bad argument naming the key", rep.Code, rep.Error)
	}
	sendAll(t, s, &meridianpb.Request{Txn: 2, Op: meridianpb.Op_OP_PUT, Key: "after-utf8", Value: []byte("v")})
	if rep, err := next(answers, "put"); err != nil || rep.Code != meridianpb.Code_CODE_OK {
		t.Fatalf("put after the bad request: %v %v", rep, err)
	}
	sendAll(t, s, &meridianpb.Request{Txn: 2, Seq: 1, Op: meridianpb.Op_OP_COMMIT})
	if rep, err := next(answers, "commit"); err != nil || rep.Code != meridianpb.Code_CODE_OK {
		t.Fatalf("commit after the bad request: %v %v", rep, err)
	}
}

// TestCodecRefusesOversizedBatchUndecoded: a request of far more batch operations than a batch
// may hold is refused before protobuf decodes it (16 MiB of empty operations cost ~1.1 GB to
// decode); one a little over the limit decodes, for validation to answer.
func TestCodecRefusesOversizedBatchUndecoded(t *testing.T) {
	codec := newLenientCodec()
	request := func(ops int) []byte {
		r := &meridianpb.Request{Txn: 1, Op: meridianpb.Op_OP_BATCH}
		for range ops {
			r.Batch = append(r.Batch, &meridianpb.BatchOp{})
		}
		return mustMarshal(t, r)
	}
	var got meridianpb.Request
	if err := codec.Unmarshal(mem.BufferSlice{mem.SliceBuffer(request(wire.MaxBatchOps + 1))}, &got); err != nil || len(got.Batch) != wire.MaxBatchOps+1 {
		t.Fatalf("a batch of %d: %v, %d operations decoded", wire.MaxBatchOps+1, err, len(got.Batch))
	}
	huge := bytes.Repeat([]byte{0x5a, 0x00}, 4<<20) // 4M empty batch operations, 8 MiB
	var err error
	allocs := testing.AllocsPerRun(1, func() {
		err = codec.Unmarshal(mem.BufferSlice{mem.SliceBuffer(huge)}, &meridianpb.Request{})
	})
	if err == nil || !strings.Contains(err.Error(), "batch operations") {
		t.Fatalf("8 MiB of empty batch operations: %v, want refused", err)
	}
	if allocs > 20 {
		t.Errorf("refusing them took %v allocations: they were decoded", allocs)
	}
}
