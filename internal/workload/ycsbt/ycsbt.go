// Package ycsbt generates YCSB-T transactions: N operations per transaction, each a read, a
// blind write or a read-modify-write, over a key space drawn with YCSB's distributions
// (scrambled Zipfian by default), with the knobs the papers' experiments turn: write ratio,
// read-only share, cross-region share with region-local key choice (RLS), partitions per
// transaction (Wren). Presets reproduce each paper's default (see Preset).
//
// Placement: key i is stored at topo.PinnedKey(i mod S, "u<i>") for S shards, so it lives on
// shard i mod S. Region-local choice maps a local index j arithmetically onto the keys of the
// region's shards, (j / m)·S + local[j mod m] for the region's m shards, so a million keys cost
// no memory; it covers the first ⌊n/S⌋·S keys (the last, partial row is never chosen locally).
//
// Cross-region transactions follow the RLS artifact (retwisClient.cc): one key from a random
// other region, one from the client's region, the rest from anywhere. Keys inside a transaction
// are distinct (redrawn up to 16 times).
//
// Scans (ScanRatio, YCSB workload E's operation): a read may instead scan up to ScanLength rows
// (uniform in 1..ScanLength) from its key onward in key order within the key's shard: keys are
// named "#<shard>/u<i>", so the range is [key, end of the shard's keys) and a scan stays on one
// shard, as YCSB's range of a hashed key space stays in one table. A scan sees only rows that
// exist, so a workload that scans must be loaded (or preloaded) first.
//
// Values are ValueBytes long: an 8-byte little-endian counter, which a read-modify-write
// increments, then filler. A missing key reads as counter 0, so Load may be skipped.
//
// Check: with read-modify-writes (RMW), the workload tallies, per key, the increments of the
// attempts the driver reports committed (acknowledged, A) and of those whose outcome it reports
// unknown (U), through each transaction's Done; aborted attempts count nothing. After the run
// Check reads every key some attempt wrote, in read-write transactions of checkKeysPerTxn keys,
// and requires A ≤ counter ≤ A + U: a counter below A lost an acknowledged update (two
// read-modify-writes that read the same value both committed), one above A + U took in a write
// of an aborted attempt. Blind writes (no RMW) write counter 0, so a run without RMW has no check
// (Verifies). The tally is exact only if the run's database started with every counter 0 (empty,
// or freshly loaded): a run against a long-lived cluster keeps its keys under a Namespace.
package ycsbt

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/meridiandb/meridian/client"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/wire"
	"github.com/meridiandb/meridian/internal/workload"
	"github.com/meridiandb/meridian/internal/workload/zipf"
)

// Config shapes a YCSB-T workload.
type Config struct {
	Keys          int     // total keys
	OpsPerTxn     int     // operations per transaction
	WriteRatio    float64 // probability an operation writes (per operation, or exactly if FixedMix)
	FixedMix      bool    // exactly round(OpsPerTxn·WriteRatio) writes per transaction, in random positions
	ReadsFirst    bool    // all reads before all writes (Wren reads in one round, then writes)
	RMW           bool    // writes read the key first and write a value derived from it
	ReadOnlyRatio float64 // share of transactions that only read (FW-KV)
	Distribution  string  // "scrambled" (default), "zipfian", "uniform" or "latest"
	Theta         float64 // Zipf skew for zipfian, scrambled and latest, in [0, 1)
	// RegionLocal makes transactions pick their keys in the client's region, except a share
	// CrossRegionRatio of cross-region transactions. Without it keys come from the whole space.
	RegionLocal      bool
	CrossRegionRatio float64
	// PartitionsPerTxn > 0 spreads a transaction's operations round-robin over that many
	// consecutive shards from a random one, each key drawn within its shard (Wren's benchmark).
	PartitionsPerTxn int
	ValueBytes       int // value size; at least 8
	// ScanRatio is the share of reads that are range scans instead (not the reads of a
	// read-modify-write); ScanLength bounds a scan's rows (0: DefaultScanLength).
	ScanRatio  float64
	ScanLength int
	// Namespace, if set, keeps the keys under it ("u<namespace>/<i>" instead of "u<i>"), so that
	// a run against a long-lived cluster starts from keys no earlier run wrote, as Check needs.
	// Not with scans, whose range would take in other namespaces' keys.
	Namespace string
}

// DefaultScanLength is YCSB workload E's maximum scan length.
const DefaultScanLength = 100

// Preset returns the default YCSB-T of a paper: "k2" (3 ops, 50% blind writes, scrambled Zipf
// 0.8, 1 KB values), "rls" (10 ops = 5 reads + 5 read-modify-writes, 10% cross-region,
// Zipf 0.75, 3M keys), "wren" (19 reads then 1 write, 4 partitions per transaction, Zipf 0.99
// within a partition, 8-byte values) and "fwkv" (2 keys read and written, 20% read-only,
// uniform, 12-byte values).
func Preset(name string) (Config, error) {
	switch name {
	case "k2":
		return Config{Keys: 1_000_000, OpsPerTxn: 3, WriteRatio: 0.5, Distribution: "scrambled", Theta: 0.8, ValueBytes: 1000}, nil
	case "rls":
		return Config{Keys: 3_000_000, OpsPerTxn: 10, WriteRatio: 0.5, FixedMix: true, RMW: true, Distribution: "scrambled",
			Theta: 0.75, RegionLocal: true, CrossRegionRatio: 0.1, ValueBytes: 64}, nil
	case "wren":
		return Config{Keys: 1_000_000, OpsPerTxn: 20, WriteRatio: 0.05, FixedMix: true, ReadsFirst: true, Distribution: "zipfian",
			Theta: 0.99, PartitionsPerTxn: 4, ValueBytes: 8}, nil
	case "fwkv":
		return Config{Keys: 50_000, OpsPerTxn: 2, WriteRatio: 1, RMW: true, ReadOnlyRatio: 0.2, Distribution: "uniform", ValueBytes: 12}, nil
	}
	return Config{}, fmt.Errorf("unknown YCSB-T preset %q (want k2, rls, wren or fwkv)", name)
}

// Workload is a YCSB-T workload over one topology.
type Workload struct {
	cfg     Config
	t       *topo.Topology
	nShards int
	global  zipf.Generator   // over all keys
	rows    zipf.Generator   // over the rows of one shard (PartitionsPerTxn)
	local   []zipf.Generator // per region, over its local keys
	localOf [][]topo.ShardID // shards homed in each region

	mu    sync.Mutex           // guards tally: a real run's clients report from their goroutines
	tally map[uint64]*keyTally // RMW: per key some attempt wrote, what committed or may have
}

// keyTally is one key's increments: of attempts that committed, and of attempts whose outcome is
// unknown.
type keyTally struct{ acked, unknown uint64 }

// New validates cfg and builds the workload. Building a Zipfian generator over n keys costs
// O(n) once per (n, θ).
func New(t *topo.Topology, cfg Config) (*Workload, error) {
	if t == nil || len(t.Shards) == 0 {
		return nil, errors.New("ycsbt: topology has no shards")
	}
	if cfg.ValueBytes == 0 {
		cfg.ValueBytes = 8
	}
	switch {
	case cfg.Keys < 2 || cfg.Keys > zipf.MaxItems:
		return nil, fmt.Errorf("ycsbt: key count must be 2..%d, got %d", zipf.MaxItems, cfg.Keys)
	case cfg.Keys > zipf.MaxZipfianItems && cfg.Distribution != "uniform":
		return nil, fmt.Errorf("ycsbt: key count must be 2..%d with the %s distribution (its set-up costs O(keys)), got %d",
			zipf.MaxZipfianItems, distName(cfg.Distribution), cfg.Keys)
	case cfg.OpsPerTxn < 1 || cfg.OpsPerTxn > 1000:
		return nil, fmt.Errorf("ycsbt: operations per transaction must be 1..1000, got %d", cfg.OpsPerTxn)
	case cfg.OpsPerTxn > cfg.Keys:
		return nil, fmt.Errorf("ycsbt: %d distinct keys per transaction but only %d keys", cfg.OpsPerTxn, cfg.Keys)
	case !inUnit(cfg.WriteRatio) || !inUnit(cfg.ReadOnlyRatio) || !inUnit(cfg.CrossRegionRatio) || !inUnit(cfg.ScanRatio):
		return nil, fmt.Errorf("ycsbt: write, read-only, cross-region and scan ratios must be in [0, 1]")
	case cfg.ValueBytes < 8 || cfg.ValueBytes > client.MaxValueBytes:
		return nil, fmt.Errorf("ycsbt: value size must be 8..%d bytes, got %d", client.MaxValueBytes, cfg.ValueBytes)
	case cfg.PartitionsPerTxn < 0 || cfg.PartitionsPerTxn > len(t.Shards):
		return nil, fmt.Errorf("ycsbt: %d partitions per transaction with %d shards", cfg.PartitionsPerTxn, len(t.Shards))
	case cfg.PartitionsPerTxn > 0 && cfg.RegionLocal:
		return nil, errors.New("ycsbt: partitions per transaction and region-local choice exclude each other")
	case cfg.ScanLength < 0:
		return nil, fmt.Errorf("ycsbt: scan length must not be negative (0: %d), got %d", DefaultScanLength, cfg.ScanLength)
	case cfg.Namespace != "" && cfg.ScanRatio > 0:
		return nil, errors.New("ycsbt: a namespace and scans exclude each other (a scan's range would cross namespaces)")
	}
	if cfg.ScanLength == 0 {
		cfg.ScanLength = DefaultScanLength
	}
	// A scan's answer must fit wire.MaxScanBytes, or every long scan is refused.
	if rowBytes := cfg.ValueBytes + len(topo.PinnedKey(topo.ShardID(len(t.Shards)), "u"+strconv.Itoa(cfg.Keys))) + 8; cfg.ScanRatio > 0 &&
		cfg.ScanLength > wire.MaxScanBytes/rowBytes {
		return nil, fmt.Errorf("ycsbt: %d rows of %d bytes per scan exceed the %d-byte scan answer limit: at most %d rows", cfg.ScanLength, rowBytes, wire.MaxScanBytes, wire.MaxScanBytes/rowBytes)
	}
	w := &Workload{cfg: cfg, t: t, nShards: len(t.Shards)}
	if cfg.RMW {
		w.tally = map[uint64]*keyTally{}
	}
	var err error
	if w.global, err = newGen(cfg, uint64(cfg.Keys)); err != nil {
		return nil, err
	}
	rowCount := cfg.Keys / w.nShards
	if cfg.PartitionsPerTxn > 0 {
		if rowCount < 1 {
			return nil, fmt.Errorf("ycsbt: %d keys do not fill one row of %d shards", cfg.Keys, w.nShards)
		}
		if w.rows, err = newGen(cfg, uint64(rowCount)); err != nil {
			return nil, err
		}
	}
	if cfg.RegionLocal {
		for r := range t.Regions {
			shards := t.ShardsHomedIn(topo.RegionID(r))
			w.localOf = append(w.localOf, shards)
			n := rowCount * len(shards)
			if n < cfg.OpsPerTxn {
				return nil, fmt.Errorf("ycsbt: region %s has %d local keys, fewer than %d per transaction", t.Regions[r].Name, n, cfg.OpsPerTxn)
			}
			g, err := newGen(cfg, uint64(n))
			if err != nil {
				return nil, err
			}
			w.local = append(w.local, g)
		}
	}
	return w, nil
}

func inUnit(x float64) bool { return x >= 0 && x <= 1 }

// distName is the distribution's name for messages ("" means scrambled).
func distName(d string) string {
	if d == "" {
		return "scrambled"
	}
	return d
}

func newGen(cfg Config, n uint64) (zipf.Generator, error) {
	if n == 1 {
		return zipf.NewUniform(1)
	}
	g, err := zipf.New(cfg.Distribution, n, cfg.Theta)
	if err != nil {
		return nil, fmt.Errorf("ycsbt: %w", err)
	}
	return g, nil
}

// Name is "ycsbt".
func (w *Workload) Name() string { return "ycsbt" }

// Config returns the configuration in use.
func (w *Workload) Config() Config { return w.cfg }

// KeyName is the storage key of key i.
func (w *Workload) KeyName(i uint64) string {
	if w.cfg.Namespace != "" {
		return topo.PinnedKey(topo.ShardID(i%uint64(w.nShards)), "u"+w.cfg.Namespace+"/"+strconv.FormatUint(i, 10))
	}
	return topo.PinnedKey(topo.ShardID(i%uint64(w.nShards)), "u"+strconv.FormatUint(i, 10))
}

// Rows enumerates the initial database: every key with counter 0.
func (w *Workload) Rows(emit func(key string, value []byte) error) error {
	for i := 0; i < w.cfg.Keys; i++ {
		if err := emit(w.KeyName(uint64(i)), w.value(0)); err != nil {
			return err
		}
	}
	return nil
}

// Load writes every key. It may be skipped: missing keys read as counter 0.
func (w *Workload) Load(db *client.DB) error {
	return workload.LoadRows(db, w.Rows, 100)
}

func (w *Workload) value(counter uint64) []byte {
	v := make([]byte, w.cfg.ValueBytes)
	binary.LittleEndian.PutUint64(v, counter)
	for i := 8; i < len(v); i++ {
		v[i] = 'a' + byte(i%26)
	}
	return v
}

// localKey maps region r's local index j to a key.
func (w *Workload) localKey(r int, j uint64) uint64 {
	shards := w.localOf[r]
	m := uint64(len(shards))
	return (j/m)*uint64(w.nShards) + uint64(shards[j%m])
}

// NewClient returns client id's generator. A region outside the topology counts as region 0.
func (w *Workload) NewClient(id int, region topo.RegionID, rng *rand.Rand) workload.Client {
	r := int(region)
	if r < 0 || r >= len(w.t.Regions) {
		r = 0
	}
	return &gen{w: w, region: r, rng: rng}
}

type gen struct {
	w      *Workload
	region int
	rng    *rand.Rand
}

type op struct {
	key   string
	idx   uint64 // key's index
	write bool
	scan  int // rows to scan from key onward (0: a point operation)
}

// Next draws a transaction.
func (g *gen) Next() workload.Txn {
	w, cfg, rng := g.w, g.w.cfg, g.rng
	n := cfg.OpsPerTxn
	readOnly := cfg.ReadOnlyRatio > 0 && rng.Float64() < cfg.ReadOnlyRatio
	writes := make([]bool, n)
	if !readOnly {
		if cfg.FixedMix {
			k := int(math.Round(float64(n) * cfg.WriteRatio))
			for _, i := range rng.Perm(n)[:k] {
				writes[i] = true
			}
		} else {
			for i := range writes {
				writes[i] = rng.Float64() < cfg.WriteRatio
			}
		}
	}
	keys := g.keys(n)
	ops := make([]op, n)
	anyWrite := false
	for i := range ops {
		ops[i] = op{key: w.KeyName(keys[i]), idx: keys[i], write: writes[i]}
		anyWrite = anyWrite || writes[i]
		if !writes[i] && cfg.ScanRatio > 0 && rng.Float64() < cfg.ScanRatio {
			ops[i].scan = 1 + rng.IntN(cfg.ScanLength)
		}
	}
	if cfg.ReadsFirst {
		sort.SliceStable(ops, func(a, b int) bool { return !ops[a].write && ops[b].write })
	}
	typ := "ycsbt"
	if !anyWrite {
		typ = "ycsbt-ro"
	}
	for _, o := range ops {
		if o.scan > 0 {
			typ += "-scan" // latencies of transactions that scan apart from the rest
			break
		}
	}
	if !cfg.RMW || !anyWrite {
		return workload.Txn{Type: typ, ReadOnly: !anyWrite, Run: func(tx *client.Txn) error { return g.w.run(tx, ops, nil) }}
	}
	// The increments of the attempt that ran last: Run starts each attempt afresh, and Done
	// tallies them by the attempt's outcome.
	var incs []uint64
	return workload.Txn{Type: typ, Run: func(tx *client.Txn) error {
		incs = incs[:0]
		return g.w.run(tx, ops, &incs)
	}, Done: func(o workload.Outcome) { g.w.record(incs, o) }}
}

// record tallies an attempt's increments (one per read-modify-write it sent, by key index) by
// its outcome. An aborted attempt's keys are tallied with nothing, so Check reads them too.
func (w *Workload) record(incs []uint64, o workload.Outcome) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, k := range incs {
		t := w.tally[k]
		if t == nil {
			t = &keyTally{}
			w.tally[k] = t
		}
		switch o {
		case workload.Committed:
			t.acked++
		case workload.Unknown:
			t.unknown++
		}
	}
}

// keys draws n distinct keys by the configured placement.
func (g *gen) keys(n int) []uint64 {
	w, cfg, rng := g.w, g.w.cfg, g.rng
	out := make([]uint64, 0, n)
	seen := make(map[uint64]bool, n)
	var startShard int
	if cfg.PartitionsPerTxn > 0 {
		startShard = rng.IntN(w.nShards)
	}
	cross := cfg.RegionLocal && len(w.t.Regions) > 1 && rng.Float64() < cfg.CrossRegionRatio
	for i := 0; i < n; i++ {
		var k uint64
		for try := 0; try < 16; try++ {
			switch {
			case cfg.PartitionsPerTxn > 0:
				shard := (startShard + i%cfg.PartitionsPerTxn) % w.nShards
				k = w.rows.Next(rng)*uint64(w.nShards) + uint64(shard)
			case cfg.RegionLocal && cross && i == 0:
				other := rng.IntN(len(w.t.Regions) - 1)
				if other >= g.region {
					other++
				}
				k = w.localKey(other, w.local[other].Next(rng))
			case cfg.RegionLocal && (!cross || i == 1):
				k = w.localKey(g.region, w.local[g.region].Next(rng))
			default:
				k = w.global.Next(rng)
			}
			if !seen[k] {
				break
			}
		}
		seen[k] = true
		out = append(out, k)
	}
	return out
}

// run runs ops in tx. incs, if not nil, gets the index of each key a read-modify-write is
// about to write, before its Put: a Put whose answer is lost may still have been applied.
func (w *Workload) run(tx *client.Txn, ops []op, incs *[]uint64) error {
	for _, o := range ops {
		if o.scan > 0 {
			// The key's shard holds the keys "#<shard>/…", which end where "#<shard>0" begins.
			rows, err := tx.Scan(o.key, topo.PrefixEnd(topo.RoutingPrefix(o.key)+"/"), o.scan)
			if err != nil {
				return err
			}
			for _, r := range rows {
				if len(r.Value) < 8 {
					return fmt.Errorf("ycsbt: key %q holds %d bytes, want at least 8", r.Key, len(r.Value))
				}
			}
			continue
		}
		if o.write && !w.cfg.RMW {
			if err := tx.Put(o.key, w.value(0)); err != nil {
				return err
			}
			continue
		}
		v, err := tx.Get(o.key)
		var counter uint64
		switch {
		case err == nil && len(v) >= 8:
			counter = binary.LittleEndian.Uint64(v)
		case err == nil:
			return fmt.Errorf("ycsbt: key %q holds %d bytes, want at least 8", o.key, len(v))
		case !errors.Is(err, client.ErrNotFound):
			return err
		}
		if o.write {
			if incs != nil {
				*incs = append(*incs, o.idx)
			}
			if err := tx.Put(o.key, w.value(counter+1)); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkKeysPerTxn bounds the keys one of Check's transactions reads.
const checkKeysPerTxn = 100

// Verifies reports whether Check checks anything: only read-modify-writes count.
func (w *Workload) Verifies() bool { return w.cfg.RMW }

// CheckError lists the keys whose counter is outside [acknowledged, acknowledged + unknown].
type CheckError struct {
	Keys       int      // keys read
	Violations []string // "key K: counter C, acknowledged increments A, unknown U"
}

func (e *CheckError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "ycsbt: %d of %d keys hold a counter outside [acknowledged increments, acknowledged + unknown]", len(e.Violations), e.Keys)
	for i, v := range e.Violations {
		if i == 10 {
			b.WriteString("; …")
			break
		}
		b.WriteString("; ")
		b.WriteString(v)
	}
	return b.String()
}

// checkRetries is how hard the check tries each read: as hard as list-append's final read (50
// attempts), with backoffs up to a second. It starts while messages a run slowed may still be on
// their way and old locks still held, and with the client's default 10 attempts, backoffs of at
// most 100 ms, a no-wait or wait-die spanner aborted every one (a sweep's seeds under
// --random-slowdowns).
var checkRetries = client.RetryPolicy{MaxAttempts: 50, MaxBackoff: time.Second}

// Check verifies, on a quiescent database (every client stopped), that each key some attempt of
// a read-modify-write wrote holds a counter between the increments of the attempts that
// committed (A) and those plus the increments of the attempts whose outcome is unknown (U). It
// reads the keys in index order, checkKeysPerTxn of them per read-write transaction (so that
// every protocol reads the latest committed values, as the final reads of list-append do). It
// returns a *CheckError listing the keys out of bounds, or another error if the database could
// not be read. Without RMW it checks nothing and returns nil.
func (w *Workload) Check(db *client.DB) error {
	if !w.cfg.RMW {
		return nil
	}
	w.mu.Lock()
	keys := make([]uint64, 0, len(w.tally))
	for k := range w.tally {
		keys = append(keys, k)
	}
	tally := make(map[uint64]keyTally, len(w.tally))
	for k, t := range w.tally {
		tally[k] = *t
	}
	w.mu.Unlock()
	slices.Sort(keys)
	var vs []string
	names := make([]string, 0, checkKeysPerTxn)
	for first := 0; first < len(keys); first += checkKeysPerTxn {
		batch := keys[first:min(first+checkKeysPerTxn, len(keys))]
		names = names[:0]
		for _, k := range batch {
			names = append(names, w.KeyName(k))
		}
		var reads []client.Read
		err := client.RunTxnWith(db, client.TxnOptions{}, checkRetries, func(tx *client.Txn) error {
			var err error
			reads, err = tx.GetMany(names)
			return err
		})
		if err != nil {
			return fmt.Errorf("ycsbt check: keys %s..%s: %w", names[0], names[len(names)-1], err)
		}
		for i, r := range reads {
			t := tally[batch[i]]
			var counter uint64
			if r.Found {
				if len(r.Value) < 8 {
					vs = append(vs, fmt.Sprintf("key %s: holds %d bytes, want at least 8, acknowledged increments %d, unknown %d", names[i], len(r.Value), t.acked, t.unknown))
					continue
				}
				counter = binary.LittleEndian.Uint64(r.Value)
			}
			if counter < t.acked || counter-t.acked > t.unknown {
				vs = append(vs, fmt.Sprintf("key %s: counter %d, acknowledged increments %d, unknown %d", names[i], counter, t.acked, t.unknown))
			}
		}
	}
	if len(vs) > 0 {
		return &CheckError{Keys: len(keys), Violations: vs}
	}
	return nil
}
