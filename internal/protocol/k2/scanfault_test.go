package k2

import (
	"testing"

	"github.com/meridiandb/meridian/internal/protocol/prototest"
)

// TestScanNoPhantomsUnderFaults: no committed scan disagrees with the counter under loss,
// duplicates and crashes, for several option sets; the no-scan-watermark mutant does.
func TestScanNoPhantomsUnderFaults(t *testing.T) {
	prototest.ScanNoPhantomsUnderFaults(t, "k2", []map[string]string{nil, {"mv-reads": "off"}, {"write-pipelining": "off"}, {"mv-writes": "off"}},
		map[string]string{"mutant": "no-scan-watermark"})
}
