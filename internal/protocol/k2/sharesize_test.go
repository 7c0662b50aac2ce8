package k2

import (
	"testing"

	"github.com/meridiandb/meridian/internal/protocol/prototest"
)

// TestShareOverFrame: a GetMany of 17 values of 1 MiB on one data node: every message between
// nodes fits a frame and the client reads every value (prototest.ShareOverFrame).
func TestShareOverFrame(t *testing.T) { prototest.ShareOverFrame(t, "k2", nil) }
