package runtime

import (
	"fmt"
	"slices"
	"strings"

	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/meridiandb/meridian/internal/wire"
	"github.com/meridiandb/meridian/proto/meridianpb"
)

// lenientCodec is gRPC's protobuf codec, except that a Request whose text fields (key, end_key,
// label, a batch operation's key) are not valid UTF-8 is still decoded. Protobuf refuses such a
// message before any of our code runs, and gRPC then ends the whole stream, losing the answers
// owed to the stream's other transactions (a commit's among them). Decoded, the request reaches
// the coordinator, whose validation answers it with a bad-argument error naming the field, as it
// answers a TCP client's.
type lenientCodec struct{ encoding.CodecV2 }

func newLenientCodec() lenientCodec {
	return lenientCodec{encoding.GetCodecV2(grpcproto.Name)}
}

func (c lenientCodec) Unmarshal(data mem.BufferSlice, v any) error {
	req, ok := v.(*meridianpb.Request)
	// A batch holds at most wire.MaxBatchOps operations, but protobuf decodes as many as the
	// message carries: 16 MiB of empty ones took about 1.1 GB and 8 million allocations. They
	// are counted on the wire first (an empty one is 2 bytes, so only a message that long can
	// hold that many), and a request of far more than a batch may hold is refused undecoded,
	// ending the stream; one a little over is decoded, and validation answers it.
	if ok && data.Len() > 2*maxDecodedBatchOps {
		if n := countBatchOps(data.Materialize()); n > maxDecodedBatchOps {
			return fmt.Errorf("a request of %d batch operations, more than %d: refused undecoded", n, maxDecodedBatchOps)
		}
	}
	err := c.CodecV2.Unmarshal(data, v)
	if err == nil || !ok || !strings.Contains(err.Error(), "invalid UTF-8") {
		return err
	}
	proto.Reset(req)
	if decodeRequestLeniently(data.Materialize(), req) != nil {
		return err // malformed beyond its text: protobuf's own error says how
	}
	return nil
}

// decodeRequestLeniently decodes a Request as protobuf would, taking text fields as bytes.
func decodeRequestLeniently(b []byte, r *meridianpb.Request) error {
	return walkFields(b, func(num protowire.Number, typ protowire.Type, b []byte) (int, error) {
		switch {
		case typ == protowire.VarintType && (num == 1 || num == 2 || num == 3 || num == 6 || num == 8 || num == 9):
			v, n := protowire.ConsumeVarint(b)
			if n < 0 {
				return n, nil
			}
			switch num {
			case 1:
				r.Txn = v
			case 2:
				r.Seq = uint32(v)
			case 3:
				r.Op = meridianpb.Op(int32(v))
			case 6:
				r.Limit = int32(v)
			case 8:
				r.ReadOnly = v != 0
			case 9:
				r.Attempt = uint32(v)
			}
			return n, nil
		case typ == protowire.BytesType && (num == 4 || num == 5 || num == 7 || num == 10 || num == 11):
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return n, nil
			}
			switch num {
			case 4:
				r.Key = string(v)
			case 5:
				r.EndKey = string(v)
			case 7:
				r.Value = slices.Clone(v)
			case 10:
				r.Label = string(v)
			case 11:
				op := &meridianpb.BatchOp{}
				if err := decodeBatchOpLeniently(v, op); err != nil {
					return 0, err
				}
				r.Batch = append(r.Batch, op)
			}
			return n, nil
		}
		// Unknown, or known with another wire type: skipped, as protobuf skips both.
		return protowire.ConsumeFieldValue(num, typ, b), nil
	})
}

func decodeBatchOpLeniently(b []byte, op *meridianpb.BatchOp) error {
	return walkFields(b, func(num protowire.Number, typ protowire.Type, b []byte) (int, error) {
		switch {
		case num == 1 && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(b)
			op.Op = meridianpb.Op(int32(v))
			return n, nil
		case (num == 2 || num == 3) && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(b)
			if num == 2 {
				op.Key = string(v)
			} else {
				op.Value = slices.Clone(v)
			}
			return n, nil
		}
		return protowire.ConsumeFieldValue(num, typ, b), nil
	})
}

// maxDecodedBatchOps is the most batch operations a request may carry to be decoded at all.
const maxDecodedBatchOps = 16 * wire.MaxBatchOps

// countBatchOps counts a Request's batch operations on the wire without decoding them (0 if the
// message is malformed: protobuf then says how).
func countBatchOps(b []byte) int {
	n := 0
	if walkFields(b, func(num protowire.Number, typ protowire.Type, b []byte) (int, error) {
		if num == 11 && typ == protowire.BytesType {
			n++
		}
		return protowire.ConsumeFieldValue(num, typ, b), nil
	}) != nil {
		return 0
	}
	return n
}

// walkFields calls field for each field of a message's wire form; field returns how many bytes
// of b its value took (negative: a protowire parse error).
func walkFields(b []byte, field func(num protowire.Number, typ protowire.Type, b []byte) (int, error)) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		if num > protowire.MaxValidNumber {
			return fmt.Errorf("field number %d out of range", num) // protobuf refuses it too
		}
		b = b[n:]
		n, err := field(num, typ, b)
		if err != nil {
			return err
		}
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
	}
	return nil
}
