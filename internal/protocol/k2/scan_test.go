package k2

import (
	"fmt"
	"testing"

	"github.com/meridiandb/meridian/internal/protocol/prototest"
	"github.com/meridiandb/meridian/internal/protocol/txnkit"
	"github.com/meridiandb/meridian/internal/ts"
)

func TestScan(t *testing.T) { prototest.ScanBasics(t, "k2", nil) }

// TestScanReplicatedLayout: each key once, from its primary, on a layout with replicas.
func TestScanReplicatedLayout(t *testing.T) { prototest.ScanReplicatedLayout(t, "k2") }

// TestScanNoPhantoms: with the range watermark no committed scan misses a row whose counter
// increment it saw; without it (mutant no-scan-watermark) the same runs find phantoms.
func TestScanNoPhantoms(t *testing.T) {
	prototest.ScanNoPhantoms(t, "k2", nil, map[string]string{"mutant": "no-scan-watermark"})
}

// TestScanMarksBounded: past txnkit.MaxRangeMarks a node folds its range watermarks into its read floor,
// and every range scanned is still covered at least as high as its scan's timestamp.
func TestScanMarksBounded(t *testing.T) {
	n, _ := newScriptNode(t, nil)
	type scanned struct {
		key string
		at  ts.Timestamp
	}
	var all []scanned
	for i := range 3 * txnkit.MaxRangeMarks {
		start := fmt.Sprintf("r%04d", i)
		at := ts.Timestamp{Wall: int64(1_000_000 + (i*7919)%5000)}
		n.markScan(start, start+"~", at)
		all = append(all, scanned{start + "x", at})
	}
	if n.scanMarks.Len() > txnkit.MaxRangeMarks {
		t.Errorf("%d range watermarks kept, want at most %d", n.scanMarks.Len(), txnkit.MaxRangeMarks)
	}
	if n.store.ReadFloor().IsZero() {
		t.Error("read floor not raised: nothing was folded")
	}
	for _, s := range all {
		if wm := n.readWatermark(s.key); wm.Less(s.at) {
			t.Fatalf("%s: watermark %v below its scan's %v", s.key, wm, s.at)
		}
	}
}

// TestScanTooLarge: a scan answer over wire.MaxScanBytes is refused, one that fits is served.
func TestScanTooLarge(t *testing.T) { prototest.ScanTooLarge(t, "k2", false) }

// TestScanOneShardIsLocal: a scan within one routing prefix goes to its shard alone.
func TestScanOneShardIsLocal(t *testing.T) { prototest.ScanOneShardIsLocal(t, "k2", false) }

// TestScanLimitNoPhantoms: a scan that stops at its row limit keeps phantoms out of what it read.
func TestScanLimitNoPhantoms(t *testing.T) {
	prototest.ScanLimitNoPhantoms(t, "k2", nil, map[string]string{"mutant": "no-scan-watermark"}, false)
}

// TestScanLimitStackUnderFaults: limited scans that step over deleted rows at the front of the
// range keep phantoms out under loss, duplicates and crashes.
func TestScanLimitStackUnderFaults(t *testing.T) {
	prototest.ScanLimitStackUnderFaults(t, "k2", map[string]string{"mutant": "no-scan-watermark"})
}
