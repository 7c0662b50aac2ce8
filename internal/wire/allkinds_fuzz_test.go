package wire_test

import (
	"reflect"
	"testing"

	_ "github.com/meridiandb/meridian/internal/protocol/crdb"
	_ "github.com/meridiandb/meridian/internal/protocol/k2"
	_ "github.com/meridiandb/meridian/internal/protocol/serial"
	_ "github.com/meridiandb/meridian/internal/protocol/spanner"
	"github.com/meridiandb/meridian/internal/wire"
)

// FuzzDecodeAllKinds is FuzzDecode with every protocol's message kinds registered (peers send
// them, and this package's own tests register only the client's): Decode never panics, and what
// it accepts survives a round trip unchanged. Seeds: each kind's empty message.
func FuzzDecodeAllKinds(f *testing.F) {
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
