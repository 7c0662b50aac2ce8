package serial

import (
	"testing"

	"github.com/meridiandb/meridian/internal/protocol/prototest"
)

func TestScan(t *testing.T) { prototest.ScanBasics(t, "serial", nil) }

// TestScanNoPhantoms: one transaction at a time leaves no room for a phantom; the no-lock
// mutant, which lets transactions interleave, does.
func TestScanNoPhantoms(t *testing.T) {
	prototest.ScanNoPhantoms(t, "serial", nil, map[string]string{"mutant": "no-lock"})
}

// TestScanTooLarge: a scan answer over wire.MaxScanBytes is refused, one that fits is served.
func TestScanTooLarge(t *testing.T) { prototest.ScanTooLarge(t, "serial", false) }
