package spanner

import (
	"testing"

	"github.com/meridiandb/meridian/internal/protocol/prototest"
)

// TestScan: snapshot scans of committed rows in read-only transactions; a scan in a read-write
// transaction is refused.
func TestScan(t *testing.T) { prototest.ScanBasicsReadOnly(t, Name, nil) }

// TestScanReplicatedLayout: each key once, from its leader, on a layout with replicas.
func TestScanReplicatedLayout(t *testing.T) { prototest.ScanReplicatedLayout(t, Name) }

// TestScanNoPhantoms: a read-only scan and counter read agree at their snapshot; a scan that
// reads past prepared intents (mutant scan-no-wait) misses rows that commit under it.
func TestScanNoPhantoms(t *testing.T) {
	prototest.ScanNoPhantomsReadOnly(t, Name, nil, map[string]string{"mutant": MutantScanNoWait})
}

// TestScanNoPhantomsUnderFaults: read-only scans agree with the counter under loss, duplicates
// and crashes, under both write-lock modes; the scan-no-wait mutant does not.
func TestScanNoPhantomsUnderFaults(t *testing.T) {
	prototest.ScanNoPhantomsUnderFaultsReadOnly(t, Name, []map[string]string{nil, {"write-locks": "eager"}},
		map[string]string{"mutant": MutantScanNoWait})
}

// TestScanTooLarge: a scan answer over wire.MaxScanBytes is refused, one that fits is served.
func TestScanTooLarge(t *testing.T) { prototest.ScanTooLarge(t, Name, true) }

// TestScanOneShardIsLocal: a scan within one routing prefix goes to its shard alone.
func TestScanOneShardIsLocal(t *testing.T) { prototest.ScanOneShardIsLocal(t, "spanner", true) }
