package runtime

import (
	"strings"
	"testing"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	"github.com/meridiandb/meridian/proto/meridianpb"
)

// FuzzLenientCodec: the gRPC codec never panics; where protobuf accepts a Request the codec
// gives the same message; where protobuf refuses one only for its text, the lenient decode
// yields the same fields with the bytes as they came.
func FuzzLenientCodec(f *testing.F) {
	for _, r := range []*meridianpb.Request{
		{Txn: 1<<40 + 3, Seq: 7, Op: meridianpb.Op_OP_BATCH, Key: "k", EndKey: "z", Limit: 5, Value: []byte("v"), ReadOnly: true, Attempt: 2, Label: "new-order",
			Batch: []*meridianpb.BatchOp{{Op: meridianpb.Op_OP_PUT, Key: "a", Value: []byte("1")}, {Op: meridianpb.Op_OP_GET, Key: "b"}}},
		{Txn: 1, Op: meridianpb.Op_OP_GET, Key: "#1/k"},
		{Txn: 2, Seq: 3, Op: meridianpb.Op_OP_COMMIT},
	} {
		b, _ := proto.Marshal(r)
		f.Add(b)
		f.Add(append(b, 0x22, 0x02, 0xff, 0xfe)) // key: not UTF-8
	}
	codec := newLenientCodec()
	f.Fuzz(func(t *testing.T, data []byte) {
		var got meridianpb.Request
		err := codec.Unmarshal(mem.BufferSlice{mem.SliceBuffer(data)}, &got)
		var want meridianpb.Request
		perr := proto.Unmarshal(data, &want)
		switch {
		case perr == nil && err != nil:
			t.Fatalf("protobuf accepts, codec refuses: %v", err)
		case perr == nil:
			want.ProtoReflect().SetUnknown(nil)
			got.ProtoReflect().SetUnknown(nil)
			if !proto.Equal(&got, &want) {
				t.Fatalf("codec %v, protobuf %v", &got, &want)
			}
		case err == nil && !strings.Contains(perr.Error(), "UTF-8"):
			t.Fatalf("codec accepts what protobuf refuses for another reason: %v", perr)
		}
	})
}
