// Package listappend generates Elle-style transactions for checking: list-append (each key holds
// a list of integers; micro-ops append a unique value or read the whole list) and its
// read-write-register variant (micro-ops write a unique value or read the current one).
//
// Transactions have MinOps..MaxOps micro-ops over a small integer key space, so that
// transactions collide often and every anomaly has a chance to show. Appended and written values
// are unique across the whole run (one counter shared by all clients), which is what lets the
// checker recover the version order of each key from the reads.
//
// Storage: integer key k is stored at topo.PinnedKey(k mod shards, "la/k") ("lr/k" for a
// register), so it lives on shard k mod shards and its region is that shard's home (KeyRegions,
// for region-aware models). A list is stored as the concatenation of its elements' zig-zag
// varints; a register as one varint. The list [7] and the register 7 are the same bytes, so the
// two kinds never share a name: a run of one never reads the other's values as its own.
//
// The body reads each key at most once per attempt and buffers its appends, writing each changed
// key once at the end, so it does not rely on a protocol's read-your-own-writes; reads that come
// after an append in the same transaction observe that append, as Elle expects. Config.ReadBack
// adds, on purpose, a read of each written key from the store after the writes and a second
// write of it, so that a protocol's read-your-own-writes is checked too.
package listappend

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/meridiandb/meridian/client"
	"github.com/meridiandb/meridian/internal/history"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/wire"
	"github.com/meridiandb/meridian/internal/workload"
	"github.com/meridiandb/meridian/internal/workload/zipf"
)

// Config shapes the transactions.
type Config struct {
	Keys             int     // key space size; default 10
	MinOps, MaxOps   int     // micro-ops per transaction; default 1..4
	ReadRatio        float64 // share of micro-ops that are reads; default 0.5 (set a negative value for 0)
	Register         bool    // read-write registers instead of lists
	RegionLocalRatio float64 // share of transactions whose keys all live in the client's region
	// Theta, if positive, draws keys from a scrambled Zipfian of that skew (below 1) instead of
	// uniformly, so checked histories can run under the skewed contention of YCSB-T's sweeps.
	Theta float64
	// BatchRatio is the share of transactions that read all their keys with one GetMany and
	// write them with one PutMany (the protocol may run those operations concurrently); the
	// rest read and write one key at a time. 0 means 0.5, a negative value none.
	BatchRatio float64
	// Namespace, if set, prefixes every key's storage name, so runs against a long-lived
	// cluster each start from absent keys and their histories judge only their own values.
	Namespace string
	// BlindWrites (registers only) writes a register the transaction has not read yet without
	// reading it first. Otherwise every writer reads its key first, which under K2 refuses any
	// writer older than another that wrote since, so a key never holds two writers' intents
	// at once and multi-intent write streams go unexercised.
	BlindWrites bool
	// ReadBack has every transaction that writes read each key it wrote back from the store
	// once it has written them, and then write the key again from what it read (appending
	// another value, or writing another register value), recorded as a read and a write at its
	// end. Otherwise a transaction reads a key only before writing it (its later reads come
	// from what it holds), so a protocol that lost or hid a transaction's own write from it
	// went unseen: a crash took a write acknowledged before it was durable, the transaction
	// read the key and wrote it again, and its commit found the second write. The checker
	// finds such a read by internal consistency, and the final read the lost value.
	ReadBack bool
	// MaxWritesPerKey, if positive, retires a key once transactions have been drawn that write
	// it this many times, and draws a fresh key in its place from then on, as Elle's list-append
	// generator does (max-writes-per-key): without it a list grows for the whole run, every
	// append rewrites it and every read returns it, so a run's bytes and its history grow with
	// the square of its length (a 10 s run of 8,000 commits a second on 10 keys took ~10 GB to
	// check). Key k's replacement is k+Keys·shards: the same slot of the key space (k mod Keys,
	// so the same Zipfian weight) on the same shard (so the same region).
	MaxWritesPerKey int
}

// Workload is a list-append or register workload.
type Workload struct {
	cfg          Config
	t            *topo.Topology
	names        []string
	keysByRegion [][]int64
	pick         zipf.Generator   // over all keys (nil: uniform)
	pickLocal    []zipf.Generator // over each region's keys (nil: uniform)
	nextValue    atomic.Int64     // shared by all clients: values are unique in the run

	// With MaxWritesPerKey: each slot's current key and the writes drawn for it, shared by all
	// clients (real runs draw from several goroutines; the simulator's one at a time keeps the
	// draws in its seeded order).
	mu        sync.Mutex
	current   []int64
	slotWrote []int
}

// keyStep is the gap between a slot's successive keys (Config.MaxWritesPerKey).
func (w *Workload) keyStep() int64 { return int64(w.cfg.Keys) * int64(len(w.t.Shards)) }

// New builds the workload for topology t.
func New(t *topo.Topology, cfg Config) (*Workload, error) {
	if cfg.Keys == 0 {
		cfg.Keys = 10
	}
	if cfg.MinOps == 0 && cfg.MaxOps == 0 {
		cfg.MinOps, cfg.MaxOps = 1, 4
	}
	switch {
	case cfg.ReadRatio == 0:
		cfg.ReadRatio = 0.5
	case cfg.ReadRatio < 0:
		cfg.ReadRatio = 0
	}
	switch {
	case cfg.BatchRatio == 0:
		cfg.BatchRatio = 0.5
	case cfg.BatchRatio < 0:
		cfg.BatchRatio = 0
	}
	if cfg.Keys < 1 || cfg.Keys > 1_000_000 {
		return nil, fmt.Errorf("listappend: key count must be 1..1000000, got %d", cfg.Keys)
	}
	if cfg.MaxWritesPerKey < 0 || cfg.MaxWritesPerKey > 1_000_000 {
		return nil, fmt.Errorf("listappend: max writes per key must be 0 (no limit) to 1000000, got %d", cfg.MaxWritesPerKey)
	}
	if cfg.MinOps < 1 || cfg.MaxOps < cfg.MinOps || cfg.MaxOps > 1000 {
		return nil, fmt.Errorf("listappend: want 1 ≤ min ops ≤ max ops ≤ 1000, got %d..%d", cfg.MinOps, cfg.MaxOps)
	}
	if !(cfg.Theta >= 0 && cfg.Theta < 1) {
		return nil, fmt.Errorf("listappend: zipf θ must be in [0, 1), got %g", cfg.Theta)
	}
	if cfg.BlindWrites && !cfg.Register {
		return nil, errors.New("listappend: blind writes apply to registers only (an append rewrites the list it read)")
	}
	if cfg.ReadRatio > 1 || cfg.RegionLocalRatio < 0 || cfg.RegionLocalRatio > 1 || cfg.BatchRatio > 1 {
		return nil, fmt.Errorf("listappend: read, region-local and batch ratios must be in [0, 1]")
	}
	if t == nil || len(t.Shards) == 0 {
		return nil, errors.New("listappend: topology has no shards")
	}
	w := &Workload{cfg: cfg, t: t, keysByRegion: make([][]int64, len(t.Regions))}
	if cfg.MaxWritesPerKey > 0 {
		w.current, w.slotWrote = make([]int64, cfg.Keys), make([]int, cfg.Keys)
		for k := range w.current {
			w.current[k] = int64(k)
		}
	}
	for k := 0; k < cfg.Keys; k++ {
		name := StorageKey(t, cfg.Namespace, int64(k), cfg.Register)
		w.names = append(w.names, name)
		r := t.HomeOf(name)
		w.keysByRegion[r] = append(w.keysByRegion[r], int64(k))
	}
	if cfg.Theta > 0 {
		var err error
		if w.pick, err = skewed(cfg.Keys, cfg.Theta); err != nil {
			return nil, err
		}
		w.pickLocal = make([]zipf.Generator, len(w.keysByRegion))
		for r, keys := range w.keysByRegion {
			if w.pickLocal[r], err = skewed(len(keys), cfg.Theta); err != nil {
				return nil, err
			}
		}
	}
	return w, nil
}

// skewed returns a scrambled Zipfian over n items, or nil (uniform) when n is too small for one.
func skewed(n int, theta float64) (zipf.Generator, error) {
	if n < 2 {
		return nil, nil
	}
	g, err := zipf.NewScrambled(uint64(n), theta)
	if err != nil {
		return nil, fmt.Errorf("listappend: %w", err)
	}
	return g, nil
}

// draw picks an index in [0, n) from g, or uniformly when g is nil.
func draw(g zipf.Generator, n int, r *rand.Rand) int {
	if g == nil {
		return r.IntN(n)
	}
	return int(g.Next(r))
}

// StorageKey is the storage name of integer key k in namespace ns ("" for none), a list's or a
// register's: it lives on shard k mod shards. Tools that read a workload's data (meridian kv
// exec) use the same names.
func StorageKey(t *topo.Topology, ns string, k int64, register bool) string {
	kind := "la/"
	if register {
		kind = "lr/"
	}
	rest := kind + strconv.FormatInt(k, 10)
	if ns != "" {
		rest = kind + ns + "/" + strconv.FormatInt(k, 10)
	}
	return topo.PinnedKey(topo.ShardID(k%int64(len(t.Shards))), rest)
}

// Name is "list-append" or "rw-register".
func (w *Workload) Name() string {
	if w.cfg.Register {
		return "rw-register"
	}
	return "list-append"
}

// KeyName is the storage key of integer key k.
func (w *Workload) KeyName(k int64) string {
	if k < int64(len(w.names)) {
		return w.names[k]
	}
	return StorageKey(w.t, w.cfg.Namespace, k, w.cfg.Register) // a replacement key
}

// usedKeys lists every key drawn so far, ascending: the first Keys, and each slot's
// replacements up to its current one.
func (w *Workload) usedKeys() []int64 {
	keys := make([]int64, 0, len(w.names))
	for k := range w.names {
		keys = append(keys, int64(k))
	}
	w.mu.Lock()
	for slot, cur := range w.current {
		for k := int64(slot) + w.keyStep(); k <= cur; k += w.keyStep() {
			keys = append(keys, k)
		}
	}
	w.mu.Unlock()
	slices.Sort(keys)
	return keys
}

// KeyRegions maps each integer key drawn so far to its home region, for
// history.Recorder.SetKeyRegion (a replacement key's is its slot's).
func (w *Workload) KeyRegions() map[int64]int {
	keys := w.usedKeys()
	m := make(map[int64]int, len(keys))
	for _, k := range keys {
		m[k] = int(w.t.HomeOf(w.names[k%int64(len(w.names))]))
	}
	return m
}

// Load writes nothing: every key starts absent (an empty list, a null register).
func (w *Workload) Load(*client.DB) error { return nil }

// finalReadKeys is how many keys one of FinalReads' transactions reads: few enough that the
// lists' bytes stay well inside a batch's bound as they grow.
const finalReadKeys = 16

// FinalReads returns transactions that together read every key once, with one GetMany each, for
// a driver to run after its clients have finished: what a run's acknowledged writes left. They
// are declared read-write, so that protocols read the latest committed values (a lock-free
// snapshot read of a protocol without commit wait may lawfully miss the newest).
func (w *Workload) FinalReads() []workload.Txn {
	var txns []workload.Txn
	keys := w.usedKeys()
	for first := 0; first < len(keys); first += finalReadKeys {
		ops := make([]history.MicroOp, 0, finalReadKeys)
		for _, k := range keys[first:min(first+finalReadKeys, len(keys))] {
			ops = append(ops, history.MicroOp{F: history.FRead, Key: k})
		}
		b := &body{w: w, ops: ops, batch: true}
		txns = append(txns, workload.Txn{Type: "final-read", Run: b.run, Invoke: cloneOps(ops), Result: b.result})
	}
	return txns
}

// NewClient returns client id's generator.
func (w *Workload) NewClient(id int, region topo.RegionID, rng *rand.Rand) workload.Client {
	return &gen{w: w, region: region, rng: rng}
}

type gen struct {
	w      *Workload
	region topo.RegionID
	rng    *rand.Rand
}

// Next draws a transaction.
func (g *gen) Next() workload.Txn {
	w, cfg := g.w, g.w.cfg
	n := cfg.MinOps + g.rng.IntN(cfg.MaxOps-cfg.MinOps+1)
	var local []int64
	if cfg.RegionLocalRatio > 0 && g.rng.Float64() < cfg.RegionLocalRatio && int(g.region) < len(w.keysByRegion) {
		local = w.keysByRegion[g.region]
	}
	ops := make([]history.MicroOp, n)
	readOnly := true
	for i := range ops {
		var k int64
		if len(local) > 0 {
			var pl zipf.Generator
			if w.pickLocal != nil {
				pl = w.pickLocal[g.region]
			}
			k = local[draw(pl, len(local), g.rng)]
		} else {
			k = int64(draw(w.pick, cfg.Keys, g.rng))
		}
		switch {
		case g.rng.Float64() < cfg.ReadRatio:
			ops[i] = history.MicroOp{F: history.FRead, Key: k}
		case cfg.Register:
			ops[i] = history.MicroOp{F: history.FWrite, Key: k, Value: history.IntValue(w.nextValue.Add(1))}
			readOnly = false
		default:
			ops[i] = history.MicroOp{F: history.FAppend, Key: k, Value: history.IntValue(w.nextValue.Add(1))}
			readOnly = false
		}
	}
	w.replaceKeys(ops)
	b := &body{w: w, ops: ops, batch: cfg.BatchRatio > 0 && g.rng.Float64() < cfg.BatchRatio}
	if cfg.ReadBack && !readOnly {
		seen := map[int64]bool{}
		for _, op := range ops {
			if op.F != history.FRead && !seen[op.Key] {
				seen[op.Key] = true
				again := history.MicroOp{F: op.F, Key: op.Key, Value: history.IntValue(w.nextValue.Add(1))}
				b.ops = append(b.ops, history.MicroOp{F: history.FRead, Key: op.Key}, again)
				b.readBack += 2
			}
		}
	}
	return workload.Txn{Type: w.Name(), ReadOnly: readOnly, Run: b.run, Invoke: cloneOps(b.ops), Result: b.result}
}

// replaceKeys maps ops' slots to their current keys and counts the writes drawn, retiring a key
// once it has MaxWritesPerKey (with read-back, each key written counts once more: the read-back
// writes it again).
// A transaction keeps the keys it was drawn with, so a key may take a few writes past the
// limit from transactions drawn together.
func (w *Workload) replaceKeys(ops []history.MicroOp) {
	if w.cfg.MaxWritesPerKey == 0 {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := range ops {
		slot := ops[i].Key
		ops[i].Key = w.current[slot]
	}
	readBack := map[int64]bool{} // keys the read-back writes again, once each
	for _, op := range ops {
		if op.F == history.FRead {
			continue
		}
		slot := op.Key % int64(w.cfg.Keys)
		if op.Key != w.current[slot] {
			continue // the slot moved on within this transaction
		}
		w.slotWrote[slot]++
		if w.cfg.ReadBack && !readBack[op.Key] {
			readBack[op.Key] = true
			w.slotWrote[slot]++
		}
		if w.slotWrote[slot] >= w.cfg.MaxWritesPerKey {
			w.current[slot] += w.keyStep()
			w.slotWrote[slot] = 0
		}
	}
}

type body struct {
	w     *Workload
	batch bool // read with one GetMany, write with one PutMany
	ops   []history.MicroOp
	// readBack is how many of ops, at the end, read written keys back from the store after the
	// writes and write them again, a read and a write per key (Config.ReadBack).
	readBack int
	latest   []history.MicroOp // the last attempt's completed micro-ops
	// reached says which of the last attempt's reads returned a value, and which of its writes
	// went to the store.
	reached []bool
}

// result is what the last attempt did: only the reads it actually completed and the writes it
// sent. An attempt that aborted before a read must not claim to have read anything there (a null
// read of a list means "empty", which opacity would then judge); one that aborted before a write
// went did not attempt it, and it would only swell the count of failed writes the final read
// checks (bench.Durability).
func (b *body) result() []history.MicroOp {
	out := make([]history.MicroOp, 0, len(b.latest))
	for i, op := range b.latest {
		if !b.reached[i] {
			continue
		}
		out = append(out, op)
	}
	return cloneOps(out)
}

// keyState is one key's value as this attempt sees it.
type keyState struct {
	exists bool
	list   []int64
	reg    int64
	dirty  bool
}

func (b *body) run(tx *client.Txn) error {
	b.latest = cloneOps(b.ops)
	b.reached = make([]bool, len(b.ops))
	state := map[int64]*keyState{}
	if b.batch {
		if err := b.loadAll(tx, state); err != nil {
			return err
		}
	}
	var dirty []int64 // keys to write, in the order of their first write
	ops := b.ops[:len(b.ops)-b.readBack]
	for i, op := range ops {
		st, ok := state[op.Key]
		if !ok && b.blind(op) {
			st, ok = &keyState{}, true
			state[op.Key] = st
		}
		if !ok {
			var err error
			if st, err = b.load(tx, op.Key); err != nil {
				return err
			}
			state[op.Key] = st
		}
		switch op.F {
		case history.FRead:
			b.record(i, st)
		case history.FAppend:
			st.list = append(st.list, op.Value.Int)
		case history.FWrite:
			st.reg = op.Value.Int
		}
		if op.F != history.FRead {
			st.exists = true
			if !st.dirty {
				st.dirty = true
				dirty = append(dirty, op.Key)
			}
		}
	}
	sent := func(k int64) {
		for i, op := range ops {
			if op.Key == k && op.F != history.FRead {
				b.reached[i] = true
			}
		}
	}
	if err := b.write(tx, dirty, state, sent); err != nil {
		return err
	}
	return b.readBackAndWrite(tx, len(ops))
}

// write puts the keys of dirty with the values state holds for them; sent learns each key as
// its put goes.
func (b *body) write(tx *client.Txn, dirty []int64, state map[int64]*keyState, sent func(key int64)) error {
	rows := make([]wire.KV, len(dirty))
	for i, k := range dirty {
		st := state[k]
		rows[i].Key = b.w.KeyName(k)
		if b.w.cfg.Register {
			rows[i].Value = binary.AppendVarint(nil, st.reg)
		} else {
			rows[i].Value = EncodeList(st.list)
		}
	}
	// A Put refused as a bad argument (a list grown past the value limit) was not applied; any
	// other outcome, an abort or a lost answer included, may have reached the store. A refused
	// PutMany stays listed whole: rows over client.MaxScanBytes go as several requests, and a
	// refusal of a later one keeps the earlier ones written (client.Put). Listing a write that
	// did not go only swells the count of failed writes; leaving out one that did would hide it
	// from the final read's check.
	if b.batch {
		for _, k := range dirty {
			sent(k)
		}
		return tx.PutMany(rows)
	}
	for i, r := range rows {
		err := tx.Put(r.Key, r.Value)
		if !errors.Is(err, client.ErrBadArgument) {
			sent(dirty[i])
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// readBackAndWrite runs the read-back micro-ops, b.ops[from:]: it reads each written key back
// from the store, then writes it again from what it read.
func (b *body) readBackAndWrite(tx *client.Txn, from int) error {
	if b.readBack == 0 {
		return nil
	}
	back := b.ops[from:]
	var keys []int64
	for i := 0; i < len(back); i += 2 {
		keys = append(keys, back[i].Key)
	}
	state := map[int64]*keyState{}
	if err := b.readKeys(tx, keys, state); err != nil {
		return err
	}
	at := map[int64]int{} // each key's write micro-op
	for i, k := range keys {
		st := state[k]
		b.record(from+2*i, st)
		at[k] = from + 2*i + 1
		if again := back[2*i+1]; b.w.cfg.Register {
			st.reg, st.exists = again.Value.Int, true
		} else {
			st.list, st.exists = append(st.list, again.Value.Int), true
		}
	}
	return b.write(tx, keys, state, func(k int64) { b.reached[at[k]] = true })
}

// record completes read micro-op i of the attempt with the value st holds.
func (b *body) record(i int, st *keyState) {
	switch {
	case b.w.cfg.Register && st.exists:
		b.latest[i].Value = history.IntValue(st.reg)
	case b.w.cfg.Register:
		b.latest[i].Value = history.Value{}
	default:
		b.latest[i].Value = history.ListValue(append([]int64{}, st.list...))
	}
	b.reached[i] = true
}

// loadAll reads every key the transaction touches with one GetMany.
func (b *body) loadAll(tx *client.Txn, state map[int64]*keyState) error {
	var keys []int64
	for _, op := range b.ops[:len(b.ops)-b.readBack] {
		if _, ok := state[op.Key]; !ok {
			if b.blind(op) {
				state[op.Key] = &keyState{}
				continue
			}
			state[op.Key] = nil
			keys = append(keys, op.Key)
		}
	}
	return b.readKeys(tx, keys, state)
}

// readKeys reads keys from the store into state: with one GetMany if the transaction batches,
// else one Get each.
func (b *body) readKeys(tx *client.Txn, keys []int64, state map[int64]*keyState) error {
	if !b.batch {
		for _, k := range keys {
			var err error
			if state[k], err = b.load(tx, k); err != nil {
				return err
			}
		}
		return nil
	}
	names := make([]string, len(keys))
	for i, k := range keys {
		names[i] = b.w.KeyName(k)
	}
	reads, err := tx.GetMany(names)
	if err != nil {
		return err
	}
	for i, k := range keys {
		if state[k], err = b.decode(k, reads[i].Value, reads[i].Found); err != nil {
			return err
		}
	}
	return nil
}

// blind reports whether op, the transaction's first micro-op on its key, writes it unread.
func (b *body) blind(op history.MicroOp) bool {
	return b.w.cfg.BlindWrites && op.F == history.FWrite
}

func (b *body) load(tx *client.Txn, k int64) (*keyState, error) {
	v, err := tx.Get(b.w.KeyName(k))
	if errors.Is(err, client.ErrNotFound) {
		return &keyState{}, nil
	}
	if err != nil {
		return nil, err
	}
	return b.decode(k, v, true)
}

// decode parses key k's stored value (found false: the key is absent).
func (b *body) decode(k int64, v []byte, found bool) (*keyState, error) {
	if !found {
		return &keyState{}, nil
	}
	var err error
	st := &keyState{exists: true}
	if b.w.cfg.Register {
		x, n := binary.Varint(v)
		if n <= 0 || n != len(v) {
			return nil, fmt.Errorf("listappend: key %d holds %d bytes that are not one varint", k, len(v))
		}
		st.reg = x
		return st, nil
	}
	if st.list, err = DecodeList(v); err != nil {
		return nil, fmt.Errorf("listappend: key %d: %w", k, err)
	}
	return st, nil
}

// EncodeList encodes a list as concatenated zig-zag varints.
func EncodeList(l []int64) []byte {
	out := make([]byte, 0, 2*len(l))
	for _, x := range l {
		out = binary.AppendVarint(out, x)
	}
	return out
}

// DecodeList decodes EncodeList's output.
func DecodeList(v []byte) ([]int64, error) {
	l := []int64{}
	for len(v) > 0 {
		x, n := binary.Varint(v)
		if n <= 0 {
			return nil, errors.New("malformed list encoding")
		}
		l = append(l, x)
		v = v[n:]
	}
	return l, nil
}

func cloneOps(ops []history.MicroOp) []history.MicroOp {
	out := make([]history.MicroOp, len(ops))
	for i, m := range ops {
		out[i] = m
		if m.Value.Kind == history.List {
			out[i].Value.List = append([]int64{}, m.Value.List...)
		}
	}
	return out
}
