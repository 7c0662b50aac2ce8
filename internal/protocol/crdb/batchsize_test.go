package crdb

import (
	"testing"

	"github.com/meridiandb/meridian/internal/protocol/prototest"
)

// TestBatchTooLarge: a batch request or answer over wire.MaxScanBytes is refused as a bad
// argument (an answer that large would not fit a frame), the transaction goes on, and the Go
// client's GetMany falls back to reading the keys one at a time (prototest.BatchTooLarge).
func TestBatchTooLarge(t *testing.T) { prototest.BatchTooLarge(t, "crdb", nil) }
