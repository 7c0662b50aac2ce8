package wire

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/fxamacker/cbor/v2"
)

// batchOfEmptyOps frames a ClientRequest whose Batch holds n empty operations, each one byte of
// CBOR, as a client bent on making a node allocate would write it.
func batchOfEmptyOps(n int) []byte {
	f := []byte{Version, 0, 0}
	binary.BigEndian.PutUint16(f[1:], uint16((*ClientRequest)(nil).Kind()))
	f = append(f, 0xa1, 0x65, 'B', 'a', 't', 'c', 'h', 0x9a) // {"Batch": array(32-bit count)
	f = binary.BigEndian.AppendUint32(f, uint32(n))
	for range n {
		f = append(f, 0xa0) // {}
	}
	return f
}

// TestClientRequestBatchBoundedBeforeDecoding: a request of far more batch operations than a
// batch may hold is refused before they are decoded (a 1 MiB frame of a million empty ones took
// 48 MB under the codec's general bound); one a little over MaxBatchOps still decodes, so that
// the coordinator's validation answers it.
func TestClientRequestBatchBoundedBeforeDecoding(t *testing.T) {
	m, err := Decode(batchOfEmptyOps(MaxBatchOps + 1))
	if r, ok := m.(*ClientRequest); err != nil || !ok || len(r.Batch) != MaxBatchOps+1 {
		t.Fatalf("a batch of %d: %v, %#v", MaxBatchOps+1, err, m)
	}
	huge := batchOfEmptyOps(1 << 20)
	allocated := testing.AllocsPerRun(1, func() { _, err = Decode(huge) })
	var tooMany *cbor.MaxArrayElementsError
	if !errors.As(err, &tooMany) {
		t.Fatalf("a batch of 2^20 empty operations: %v, want refused for its length", err)
	}
	if allocated > 20 {
		t.Errorf("refusing it took %v allocations: the operations were decoded", allocated)
	}
}
