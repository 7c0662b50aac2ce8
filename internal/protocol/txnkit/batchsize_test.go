package txnkit

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/meridiandb/meridian/client"
	"github.com/meridiandb/meridian/internal/wire"
)

// TestValidateBoundsBatchSize: every operation of a batch may be within the limits while the
// batch is not: 20 puts of 1 MiB in one OP_BATCH from a gRPC client were taken, and their
// forwarding to data nodes exceeded what a frame between nodes holds (wire.MaxFrameBytes). A
// batch whose keys and values exceed wire.MaxScanBytes is a bad argument, with a one-line
// error; the largest batch the Go client sends as one request (client.batchPrefix, the same
// measure) passes.
func TestValidateBoundsBatchSize(t *testing.T) {
	puts := func(n, valueBytes int) []wire.BatchOp {
		ops := make([]wire.BatchOp, n)
		for i := range ops {
			ops[i] = wire.BatchOp{Op: wire.OpPut, Key: fmt.Sprintf("k%02d", i), Value: bytes.Repeat([]byte{'v'}, valueBytes)}
		}
		return ops
	}
	rep := Validate(&wire.ClientRequest{Txn: 7, Seq: 2, Op: wire.OpBatch, Batch: puts(20, client.MaxValueBytes)})
	if rep == nil || rep.Code != wire.CodeBadArgument || !strings.Contains(rep.Error, "4 MiB") || strings.Contains(rep.Error, "\n") {
		t.Fatalf("20 puts of 1 MiB: %+v, want a one-line bad-argument refusal naming 4 MiB", rep)
	}
	if rep.Txn != 7 || rep.Seq != 2 {
		t.Errorf("refusal numbered txn %d seq %d, want 7 and 2", rep.Txn, rep.Seq)
	}
	// Four values of 1 MiB less their framing: exactly the bound.
	fit := puts(4, client.MaxValueBytes-3-8)
	if rep := Validate(&wire.ClientRequest{Op: wire.OpBatch, Batch: fit}); rep != nil {
		t.Fatalf("a batch of exactly %d bytes: %+v, want it taken", wire.MaxScanBytes, rep)
	}
	fit[0].Value = append(fit[0].Value, 'x')
	if rep := Validate(&wire.ClientRequest{Op: wire.OpBatch, Batch: fit}); rep == nil {
		t.Fatalf("a batch one byte over %d taken", wire.MaxScanBytes)
	}
}

// TestResultsTooLarge: a batch answer is held to wire.MaxScanBytes of values with their
// framing, as a scan's rows are.
func TestResultsTooLarge(t *testing.T) {
	res := []wire.BatchResult{{Found: true, Value: make([]byte, wire.MaxScanBytes-16)}, {}}
	if ResultsTooLarge(res) {
		t.Fatalf("an answer of exactly %d bytes refused", wire.MaxScanBytes)
	}
	res[1].Value = []byte{1}
	if !ResultsTooLarge(res) {
		t.Fatalf("an answer one byte over %d taken", wire.MaxScanBytes)
	}
}
