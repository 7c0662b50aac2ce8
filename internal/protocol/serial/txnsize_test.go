package serial

import (
	"testing"

	"github.com/meridiandb/meridian/internal/protocol/prototest"
)

// TestTxnWriteBound: a put that would take a transaction's writes past wire.MaxTxnWriteBytes is
// refused in one line, the transaction commits what it has, and no message exceeds a frame
// (prototest.TxnWriteBound).
func TestTxnWriteBound(t *testing.T) { prototest.TxnWriteBound(t, "serial", nil) }
