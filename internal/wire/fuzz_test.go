package wire_test

import (
	"bytes"
	"reflect"
	"testing"

	// Every protocol's kinds, which peers send, decode here too.
	_ "github.com/meridiandb/meridian/internal/protocol/crdb"
	_ "github.com/meridiandb/meridian/internal/protocol/k2"
	_ "github.com/meridiandb/meridian/internal/protocol/serial"
	_ "github.com/meridiandb/meridian/internal/protocol/spanner"
	"github.com/meridiandb/meridian/internal/runtime/frame"
	"github.com/meridiandb/meridian/internal/ts"
	"github.com/meridiandb/meridian/internal/wire"
)

// fuzzSeeds are valid frames of the client messages; the committed corpus in
// testdata/fuzz/FuzzDecode adds malformed ones.
func fuzzSeeds(f *testing.F) {
	for _, m := range []wire.Msg{
		&wire.ClientRequest{Txn: 1, Seq: 0, Op: wire.OpPut, Key: "#3/la/3", Value: []byte{14, 2}, Attempt: 2},
		&wire.ClientRequest{Txn: 9, Seq: 4, Op: wire.OpScan, Key: "a", EndKey: "b", Limit: 10, ReadOnly: true},
		&wire.ClientReply{Txn: 1, Seq: 3, Code: wire.CodeOK, Found: true, Value: []byte("v"),
			Rows: []wire.KV{{Key: "k", Value: []byte("x")}}, CommitTS: ts.Timestamp{Wall: 5, Logical: 1, Origin: 2}},
		&wire.ClientReply{Code: wire.CodeAborted, Cause: "wound-wait", Error: "e"},
		&frame.Hello{From: 3, Cluster: "c"},
		&frame.Welcome{Endpoint: frame.ClientID(2, 7), Node: 2},
	} {
		b, err := wire.Encode(m)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}

// FuzzDecode: Decode never panics, and whatever it accepts re-encodes to a frame that decodes to
// the same message (the codec is a fixed point after one round). Seeds add every registered
// kind's empty message, protocols' included.
func FuzzDecode(f *testing.F) {
	fuzzSeeds(f)
	for _, k := range wire.Kinds() {
		f.Add([]byte{wire.Version, byte(k >> 8), byte(k), 0xa0}) // an empty CBOR map
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := wire.Decode(data)
		if err != nil {
			return
		}
		b, err := wire.Encode(m)
		if err != nil {
			t.Fatalf("decoded %T does not re-encode: %v", m, err)
		}
		m2, err := wire.Decode(b)
		if err != nil {
			t.Fatalf("re-encoded %T does not decode: %v", m, err)
		}
		if !reflect.DeepEqual(m, m2) {
			t.Fatalf("round trip changed the message:\n%#v\n%#v", m, m2)
		}
	})
}

// FuzzFrameStream: reading a stream of length-prefixed frames never panics nor allocates beyond
// the frame limit, and every frame read back decodes or fails cleanly.
func FuzzFrameStream(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		var stream bytes.Buffer
		_ = frame.Write(&stream, 7, data)
		stream.Write(data) // raw bytes after a good frame: a corrupt tail
		r := bytes.NewReader(stream.Bytes())
		dest, payload, err := frame.Read(r)
		if err != nil || dest != 7 || !bytes.Equal(payload, data) {
			t.Fatalf("first frame: dest %d, %d bytes, %v", dest, len(payload), err)
		}
		for i := 0; i < 100; i++ {
			_, p, err := frame.Read(r)
			if err != nil {
				return
			}
			if len(p) > frame.MaxFrameBytes {
				t.Fatalf("frame of %d bytes read past the limit", len(p))
			}
			_, _ = wire.Decode(p)
		}
	})
}
