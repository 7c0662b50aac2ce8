// Package mvcc is the in-memory multi-version index of one node, shared by every protocol.
//
// A Store maps keys to versions ordered by timestamp. Each version carries a value (or a
// tombstone), the writer's transaction id, a state (intent, committed, aborted) and an opaque
// per-protocol metadata field: K2 keeps the recorder address and commit epoch there, Wren its
// remote dependency time and source replica, FW-KV its vector clock and version-access-set.
//
// How the protocols map onto it:
//   - K2-MVTO keeps several intents per key (its write stream, notes/k2.md §3.3) at the writer's
//     start timestamp, commits them in place (commitTS == intent TS) and reads with VisibleAt,
//     which returns the newest committed version at or below the read timestamp and the
//     lower-timestamp intents the reader must PUSHWS on.
//   - CRDB (MVTO-HLC) and Spanner 2PL set Options.SingleIntent: a second writer's PutIntent fails
//     with an *IntentError naming the holder. CRDB's timestamp cache is the read watermark; its
//     intents are resolved to a commit timestamp different from their write timestamp by Commit.
//   - FaRM, Wren, Walter and FW-KV install committed versions directly with PutCommitted and read
//     snapshots with Get.
//
// The read watermark (K2's RT, CRDB's timestamp cache) is the highest timestamp any reader used on
// a key. It is kept in memory only: after a restart, or to bound memory, a node-wide floor is
// raised (RaiseReadFloor) and per-key entries at or below it are forgotten; every key then reports
// at least the floor (notes/k2.md §3.5). Options.ReadWatermarkLimit makes the store do this by
// itself when too many keys are tracked.
//
// Rules the caller relies on:
//   - Single logical thread: no method may be called concurrently; nothing here blocks.
//   - Determinism: iteration is in key order (a B-tree); the Go map is used only for point lookups.
//   - Every mutation that must survive a crash is appended, as node.Write entries, to a buffer the
//     protocol drains with TakeWrites and passes to node.Env.Persist; Recover rebuilds a Store from
//     what was persisted. Read watermarks are never persisted.
//   - The store keeps the Value and Meta slices it is given, and returns its own slices from reads:
//     neither side may modify them afterwards.
package mvcc

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/google/btree"
	"github.com/meridiandb/meridian/internal/node"
	"github.com/meridiandb/meridian/internal/storage"
	"github.com/meridiandb/meridian/internal/ts"
)

// State is the lifecycle state of a version.
type State uint8

// Version states. Intents are provisional writes of undecided transactions; aborted versions stay
// (invisible) until garbage collection so a late duplicate resolution finds them.
const (
	Intent State = iota + 1
	Committed
	Aborted
)

func (s State) String() string {
	switch s {
	case Intent:
		return "intent"
	case Committed:
		return "committed"
	case Aborted:
		return "aborted"
	}
	return fmt.Sprintf("state(%d)", uint8(s))
}

// Version is one version of a key.
type Version struct {
	TS        ts.Timestamp  // version timestamp: K2's start ts, CRDB's write ts then commit ts
	Txn       storage.TxnID // writer
	State     State
	Tombstone bool   // a delete: readers treat the key as absent from TS on
	Value     []byte // nil for tombstones
	Meta      []byte // opaque per-protocol metadata, persisted with the version
}

// Options configure a Store.
type Options struct {
	// SingleIntent allows at most one undecided intent per key (CRDB, Spanner, FaRM, K2's "no MV
	// for writes" ablation). K2 leaves it false: several intents per key form its write stream.
	SingleIntent bool
	// ReadWatermarkLimit bounds how many keys keep a per-key read watermark; 0 means unbounded.
	// When the bound is exceeded the store raises its read floor past the older half of them.
	ReadWatermarkLimit int
	// Volatile turns off recording of persist writes (replicas of in-memory protocols, benchmarks).
	Volatile bool
}

// IntentError reports that a key already holds another transaction's intent in SingleIntent mode.
type IntentError struct {
	Key    string
	Holder storage.TxnID
	TS     ts.Timestamp
}

func (e *IntentError) Error() string {
	return fmt.Sprintf("mvcc: key %q already has an intent of %v at %v", e.Key, e.Holder, e.TS)
}

// Errors returned by the Store.
var (
	ErrKeyTooLarge   = fmt.Errorf("mvcc: key longer than %d bytes", storage.MaxKeyBytes)
	ErrValueTooLarge = fmt.Errorf("mvcc: value longer than %d bytes", storage.MaxValueBytes)
	ErrMetaTooLarge  = fmt.Errorf("mvcc: metadata longer than %d bytes", storage.MaxMetaBytes)
	ErrNoTxn         = errors.New("mvcc: an intent needs a non-zero transaction id")
	ErrNoIntent      = errors.New("mvcc: no intent of the transaction on the key")
	ErrNoVersion     = errors.New("mvcc: no such version")
	ErrConflict      = errors.New("mvcc: a different version already exists at that timestamp")
)

// entry is one key. A store holds one per key it has ever seen, millions at paper scale (about
// 5 million over the 25 nodes of a 100-warehouse TPC-C deployment), so its fields are laid out
// to fit 80 bytes rather than 96: the count is an int32, the flags share one word with it.
type entry struct {
	key      string
	versions []Version    // ascending by (TS, Txn)
	readTS   ts.Timestamp // zero when untracked (the floor applies)
	gcAt     ts.Timestamp // where the key is queued for garbage collection, if gcQueued (gc.go)
	intents  int32        // undecided intents among versions
	inTree   bool         // indexed in Store.tree (new keys wait in Store.pending)
	gcQueued bool
}

func (e *entry) empty() bool { return len(e.versions) == 0 && e.readTS.IsZero() }

func entryLess(a, b *entry) bool { return a.key < b.key }

// Store is the in-memory MVCC index of one node. The zero value is not usable; call New.
type Store struct {
	opts    Options
	byKey   map[string]*entry
	tree    *btree.BTreeG[*entry] // key order, for scans; see ordered
	pending []*entry              // keys created since the tree was last brought up to date
	// treeBuilt is false until something first needs key order: until then new keys are not
	// queued in pending, and the first ordered walk builds the tree from byKey.
	treeBuilt bool
	byTxn     map[storage.TxnID][]string // keys holding an undecided intent of the txn
	readFloor ts.Timestamp
	tracked   int // entries with a per-key read watermark above the floor
	writes    []node.Write

	entryBlock []entry // what is left of the block preloaded rows' entries are taken from

	prefetched int64 // what Prefetch read, so that its loads are not optimized away

	gc              gcQueue      // keys that may hold garbage (gc.go)
	gcHorizon       ts.Timestamp // operations below it are refused by the protocol
	recordedHorizon ts.Timestamp // the highest horizon recorded for persistence
}

// New returns an empty store.
func New(opts Options) *Store {
	return &Store{
		opts:  opts,
		byKey: make(map[string]*entry),
		tree:  btree.NewG(32, entryLess),
		byTxn: make(map[storage.TxnID][]string),
	}
}

// Options returns the options the store was built with.
func (s *Store) Options() Options { return s.opts }

// Len returns the number of keys with at least one version.
func (s *Store) Len() int {
	n := 0
	s.ordered().Ascend(func(e *entry) bool {
		if len(e.versions) > 0 {
			n++
		}
		return true
	})
	return n
}

// TakeWrites returns the persist writes recorded since the last call, in mutation order, and
// clears the buffer. Pass them to node.Env.Persist as one batch.
func (s *Store) TakeWrites() []node.Write {
	w := s.writes
	s.writes = nil
	return w
}

func (s *Store) get(key string) *entry { return s.byKey[key] }

func (s *Store) getOrCreate(key string) *entry {
	if e := s.byKey[key]; e != nil {
		return e
	}
	return s.add(&entry{key: key})
}

func (s *Store) add(e *entry) *entry {
	s.byKey[e.key] = e
	if s.treeBuilt {
		s.pending = append(s.pending, e)
	}
	return e
}

// preloadBlock is how many preloaded rows' entries share one allocation.
const preloadBlock = 1024

// preloadEntry returns a new entry for a preloaded row holding v, carved from a block shared
// with the rows preloaded next to it. A 100-warehouse TPC-C deployment preloads about 5 million
// entries over its nodes, as many small objects that the collector marked one by one at every
// cycle: at the paper-scale K2 point with 1,600 clients per region, blocks cut its mark work
// from 8.0 s to 5.0 s of CPU. An entry in a block is never freed alone, but preloaded keys live
// for the whole run (version GC keeps every key's newest committed version).
func (s *Store) preloadEntry(key string, v Version) *entry {
	if len(s.entryBlock) == 0 {
		s.entryBlock = make([]entry, preloadBlock)
	}
	e := &s.entryBlock[0]
	s.entryBlock = s.entryBlock[1:]
	e.key = key
	e.versions = []Version{v}
	return s.add(e)
}

// ordered brings the key-ordered tree up to date and returns it. Creating a key only queues it:
// point reads and writes (almost every operation) never pay for ordering, and scans, GC and
// recovery pay once for all keys created since the last ordered walk.
//
// Until the first walk over a non-empty store nothing is queued: many runs never walk (TPC-C
// reads and writes single rows), and queueing every key for a tree nobody built kept a pointer
// per key alive for the whole run (46 MB over a 100-warehouse deployment's nodes). The first
// walk sorts what byKey holds instead.
func (s *Store) ordered() *btree.BTreeG[*entry] {
	if !s.treeBuilt {
		if len(s.byKey) == 0 {
			return s.tree
		}
		all := make([]*entry, 0, len(s.byKey))
		for _, e := range s.byKey {
			all = append(all, e)
		}
		slices.SortFunc(all, func(a, b *entry) int { return strings.Compare(a.key, b.key) })
		for _, e := range all {
			s.tree.ReplaceOrInsert(e)
			e.inTree = true
		}
		s.treeBuilt = true
		return s.tree
	}
	for _, e := range s.pending {
		if s.byKey[e.key] == e && !e.inTree {
			s.tree.ReplaceOrInsert(e)
			e.inTree = true
		}
	}
	clear(s.pending)
	s.pending = s.pending[:0]
	return s.tree
}

func (s *Store) dropIfEmpty(e *entry) {
	if e.empty() {
		delete(s.byKey, e.key)
		if e.inTree {
			s.tree.Delete(e)
			e.inTree = false
		}
	}
}

func checkSizes(key string, v *Version) error {
	switch {
	case len(key) > storage.MaxKeyBytes:
		return fmt.Errorf("%w (have %d)", ErrKeyTooLarge, len(key))
	case len(v.Value) > storage.MaxValueBytes:
		return fmt.Errorf("%w (key %q, have %d)", ErrValueTooLarge, key, len(v.Value))
	case len(v.Meta) > storage.MaxMetaBytes:
		return fmt.Errorf("%w (key %q, have %d)", ErrMetaTooLarge, key, len(v.Meta))
	}
	return nil
}

func versionCmp(a Version, t ts.Timestamp, txn storage.TxnID) int {
	if c := a.TS.Compare(t); c != 0 {
		return c
	}
	switch {
	case a.Txn < txn:
		return -1
	case a.Txn > txn:
		return 1
	}
	return 0
}

// search returns the index of (t, txn) in e.versions, or where it would be inserted.
func (e *entry) search(t ts.Timestamp, txn storage.TxnID) (int, bool) {
	return slices.BinarySearchFunc(e.versions, struct {
		t   ts.Timestamp
		txn storage.TxnID
	}{t, txn}, func(v Version, k struct {
		t   ts.Timestamp
		txn storage.TxnID
	}) int {
		return versionCmp(v, k.t, k.txn)
	})
}

// upper returns the number of versions with TS <= at.
func (e *entry) upper(at ts.Timestamp) int {
	vs := e.versions
	// Most reads are at or above the newest version: check it before searching.
	if n := len(vs); n == 0 || vs[n-1].TS.LessEq(at) {
		return n
	}
	return sort.Search(len(vs), func(i int) bool { return at.Less(vs[i].TS) })
}

func (e *entry) findTxn(txn storage.TxnID, state State) int {
	for i := len(e.versions) - 1; i >= 0; i-- {
		if v := &e.versions[i]; v.Txn == txn && v.State == state {
			return i
		}
	}
	return -1
}

func (s *Store) insert(e *entry, v Version) error {
	i, found := e.search(v.TS, v.Txn)
	if found {
		return fmt.Errorf("%w: key %q, %v by %v", ErrConflict, e.key, v.TS, v.Txn)
	}
	e.versions = slices.Insert(e.versions, i, v)
	if v.State == Intent {
		e.intents++
	}
	s.recordPut(e.key, &e.versions[i])
	return nil
}

func (s *Store) removeAt(e *entry, i int) {
	v := e.versions[i]
	if v.State == Intent {
		e.intents--
	}
	e.versions = slices.Delete(e.versions, i, i+1)
	s.recordDelete(e.key, v.TS, v.Txn)
}

func (s *Store) recordPut(key string, v *Version) {
	if s.opts.Volatile {
		return
	}
	dk := encodeVersionKey(key, v.TS, v.Txn)
	s.writes = append(s.writes, node.Write{Key: dk, Value: encodeVersionValue(dk, v)})
}

func (s *Store) recordDelete(key string, t ts.Timestamp, txn storage.TxnID) {
	if s.opts.Volatile {
		return
	}
	s.writes = append(s.writes, node.Write{Key: encodeVersionKey(key, t, txn), Delete: true})
}

func (s *Store) addTxnKey(txn storage.TxnID, key string) {
	s.byTxn[txn] = append(s.byTxn[txn], key)
}

func (s *Store) removeTxnKey(txn storage.TxnID, key string) {
	keys := s.byTxn[txn]
	if i := slices.Index(keys, key); i >= 0 {
		keys = slices.Delete(keys, i, i+1)
	}
	if len(keys) == 0 {
		delete(s.byTxn, txn)
		return
	}
	s.byTxn[txn] = keys
}

// PutIntent lays down a provisional version of v.Txn at v.TS (v.State is ignored). A transaction
// writing a key it already has an intent on replaces that intent, wherever its timestamp was. In
// SingleIntent mode another transaction's undecided intent makes it fail with *IntentError.
// Whether the write is allowed below the read watermark is the protocol's decision.
func (s *Store) PutIntent(key string, v Version) error {
	if err := checkSizes(key, &v); err != nil {
		return err
	}
	if v.Txn == 0 {
		return fmt.Errorf("%w (key %q)", ErrNoTxn, key)
	}
	v.State = Intent
	if v.Tombstone {
		v.Value = nil
	}
	e := s.getOrCreate(key)
	own := e.findTxn(v.Txn, Intent)
	if s.opts.SingleIntent && e.intents > 0 && own < 0 {
		for i := len(e.versions) - 1; i >= 0; i-- {
			if h := e.versions[i]; h.State == Intent {
				return &IntentError{Key: key, Holder: h.Txn, TS: h.TS}
			}
		}
	}
	if own >= 0 && e.versions[own].TS == v.TS {
		e.versions[own] = v
		s.recordPut(key, &e.versions[own])
		return nil
	}
	if _, clash := e.search(v.TS, v.Txn); clash {
		s.dropIfEmpty(e)
		return fmt.Errorf("%w: key %q, %v by %v", ErrConflict, key, v.TS, v.Txn)
	}
	if own >= 0 {
		s.removeAt(e, own)
	} else {
		s.addTxnKey(v.Txn, key)
	}
	return s.insert(e, v) // cannot fail: the slot was checked free above
}

// PutCommitted installs an already-committed version (protocols that buffer writes until commit,
// replicas applying replicated versions, bulk loads). Installing the same version twice is a
// no-op, so duplicated replication messages are harmless.
func (s *Store) PutCommitted(key string, v Version) error {
	if err := checkSizes(key, &v); err != nil {
		return err
	}
	v.State = Committed
	if v.Tombstone {
		v.Value = nil
	}
	e := s.getOrCreate(key)
	if i, found := e.search(v.TS, v.Txn); found && e.versions[i].State == Committed &&
		e.versions[i].Tombstone == v.Tombstone && bytes.Equal(e.versions[i].Value, v.Value) {
		return nil
	}
	if err := s.insert(e, v); err != nil {
		s.dropIfEmpty(e)
		return err
	}
	s.noteDecided(e)
	return nil
}

// Commit turns txn's intent on key into a committed version at commitTS (which may differ from
// the intent's timestamp: CRDB pushes, Spanner assigns at commit). Committing again at the same
// timestamp is a no-op; committing a key the txn has no intent on returns ErrNoIntent.
func (s *Store) Commit(key string, txn storage.TxnID, commitTS ts.Timestamp) error {
	e := s.get(key)
	if e == nil {
		return fmt.Errorf("%w: %v on %q", ErrNoIntent, txn, key)
	}
	i := e.findTxn(txn, Intent)
	if i < 0 {
		if j, found := e.search(commitTS, txn); found && e.versions[j].State == Committed {
			return nil
		}
		return fmt.Errorf("%w: %v on %q", ErrNoIntent, txn, key)
	}
	v := e.versions[i]
	v.State = Committed
	if v.TS == commitTS {
		e.versions[i] = v
		e.intents--
		s.recordPut(key, &e.versions[i])
	} else {
		if _, clash := e.search(commitTS, txn); clash {
			return fmt.Errorf("%w: key %q, %v by %v", ErrConflict, key, commitTS, txn)
		}
		v.TS = commitTS
		s.removeAt(e, i)
		if err := s.insert(e, v); err != nil {
			return err // unreachable: the slot was checked free above
		}
	}
	s.removeTxnKey(txn, key)
	s.noteDecided(e)
	return nil
}

// AbortIntent marks txn's intent on key aborted (invisible) and reports whether there was one.
// Aborting twice, or aborting a write that never arrived, is a no-op.
func (s *Store) AbortIntent(key string, txn storage.TxnID) bool {
	e := s.get(key)
	if e == nil {
		return false
	}
	i := e.findTxn(txn, Intent)
	if i < 0 {
		return false
	}
	e.versions[i].State = Aborted
	e.intents--
	s.recordPut(key, &e.versions[i])
	s.removeTxnKey(txn, key)
	s.noteDecided(e)
	return true
}

// IntentKeys returns, in key order, the keys holding an undecided intent of txn. (Key order, not
// write order, so that a recovered store answers exactly like the one that crashed.)
func (s *Store) IntentKeys(txn storage.TxnID) []string {
	keys := slices.Clone(s.byTxn[txn])
	slices.Sort(keys)
	return keys
}

// CommitTxn commits every intent of txn at commitTS and returns how many it committed.
func (s *Store) CommitTxn(txn storage.TxnID, commitTS ts.Timestamp) (int, error) {
	keys := s.IntentKeys(txn)
	for i, k := range keys {
		if err := s.Commit(k, txn, commitTS); err != nil {
			return i, err
		}
	}
	return len(keys), nil
}

// AbortTxn aborts every intent of txn and returns how many it aborted.
func (s *Store) AbortTxn(txn storage.TxnID) int {
	keys := s.IntentKeys(txn)
	for _, k := range keys {
		s.AbortIntent(k, txn)
	}
	return len(keys)
}

// PendingTxns returns the transactions with undecided intents in this store, ascending. After a
// restart the protocol asks their recorders for the decision.
func (s *Store) PendingTxns() []storage.TxnID {
	out := make([]storage.TxnID, 0, len(s.byTxn))
	for t := range s.byTxn {
		out = append(out, t)
	}
	slices.Sort(out)
	return out
}

// UpdateMeta replaces the metadata of the version (at, txn) of key (FW-KV's version-access-set,
// K2's commit epoch), whatever its state.
func (s *Store) UpdateMeta(key string, at ts.Timestamp, txn storage.TxnID, meta []byte) error {
	if len(meta) > storage.MaxMetaBytes {
		return fmt.Errorf("%w (key %q, have %d)", ErrMetaTooLarge, key, len(meta))
	}
	e := s.get(key)
	if e == nil {
		return fmt.Errorf("%w: %q at %v by %v", ErrNoVersion, key, at, txn)
	}
	i, found := e.search(at, txn)
	if !found {
		return fmt.Errorf("%w: %q at %v by %v", ErrNoVersion, key, at, txn)
	}
	e.versions[i].Meta = meta
	s.recordPut(key, &e.versions[i])
	return nil
}

// Get returns the newest committed version of key with TS <= at. A tombstone is returned like
// any version (found, with Tombstone set): the caller decides whether "deleted" differs from
// "never written" (read-set validation needs the tombstone's timestamp).
func (s *Store) Get(key string, at ts.Timestamp) (Version, bool) {
	e := s.byKey[key]
	if e == nil {
		return Version{}, false
	}
	for i := e.upper(at) - 1; i >= 0; i-- {
		if e.versions[i].State == Committed {
			return e.versions[i], true
		}
	}
	return Version{}, false
}

// Latest returns the newest committed version of key at any timestamp (CRDB's WriteTooOld check).
func (s *Store) Latest(key string) (Version, bool) { return s.Get(key, ts.Max) }

// Visible is the answer of VisibleAt.
type Visible struct {
	Version Version // the version to read, valid when Found
	Found   bool
	// Pending are other transactions' undecided intents with TS <= at that are newer than Version,
	// newest first. The reader must learn their fate (K2's PUSHWS, CRDB's push) before it may
	// return Version: if the first commits it is the answer, if it aborts try the next.
	Pending []Version
}

// VisibleAt applies the read rule shared by the intent-based protocols: the reader's own intent
// wins (at any timestamp: a CRDB transaction reads its writes even after its write timestamp was
// pushed); otherwise the newest committed version with TS <= at, skipping aborted versions and
// newer intents, and reporting the lower-timestamp intents in between as Pending. reader 0 means
// "no own writes" (read-only transactions).
func (s *Store) VisibleAt(key string, at ts.Timestamp, reader storage.TxnID) Visible {
	e := s.byKey[key]
	if e == nil {
		return Visible{}
	}
	if reader != 0 && e.intents > 0 {
		if i := e.findTxn(reader, Intent); i >= 0 {
			return Visible{Version: e.versions[i], Found: true}
		}
	}
	var out Visible
	for i := e.upper(at) - 1; i >= 0; i-- {
		switch v := e.versions[i]; v.State {
		case Committed:
			out.Version, out.Found = v, true
			return out
		case Intent:
			out.Pending = append(out.Pending, v)
		}
	}
	return out
}

// Prefetch looks key up and reads its newest version without using either, so that they are
// in the cache when the caller reads or writes the key next. At paper scale a store holds
// hundreds of thousands of keys, and every lookup of one waits on memory several times (the
// index, the key, the entry, its versions): a data node serving a batch of operations that
// prefetches their keys first has those waits overlap instead of following one another.
func (s *Store) Prefetch(key string) {
	if e := s.byKey[key]; e != nil && len(e.versions) > 0 {
		s.prefetched += e.versions[len(e.versions)-1].TS.Wall
	}
}

// Versions returns all versions of key, ascending by timestamp, including intents and aborted
// ones. The slice belongs to the store: do not modify it or keep it across a mutation.
func (s *Store) Versions(key string) []Version {
	if e := s.byKey[key]; e != nil {
		return e.versions
	}
	return nil
}

// Scan calls fn, in key order, for every key in [start, end) whose newest committed version at
// or below at exists and is not a tombstone, stopping after limit calls (limit <= 0: no limit) or
// when fn returns false. An empty end means "to the end of the key space". Intents are ignored:
// protocols that must wait on them use Ascend.
func (s *Store) Scan(start, end string, at ts.Timestamp, limit int, fn func(key string, v Version) bool) {
	n := 0
	s.Ascend(start, end, func(key string, versions []Version) bool {
		for i := upperOf(versions, at) - 1; i >= 0; i-- {
			v := versions[i]
			if v.State != Committed {
				continue
			}
			if v.Tombstone {
				return true
			}
			n++
			return fn(key, v) && (limit <= 0 || n < limit)
		}
		return true
	})
}

func upperOf(vs []Version, at ts.Timestamp) int {
	return sort.Search(len(vs), func(i int) bool { return at.Less(vs[i].TS) })
}

// Ascend calls fn, in key order, with all versions of every key in [start, end) that has any
// (empty end: no upper bound), until fn returns false. The slices belong to the store and must
// not be modified or mutated through the store during the walk.
func (s *Store) Ascend(start, end string, fn func(key string, versions []Version) bool) {
	visit := func(e *entry) bool {
		if len(e.versions) == 0 {
			return true
		}
		return fn(e.key, e.versions)
	}
	if end == "" {
		s.ordered().AscendGreaterOrEqual(&entry{key: start}, visit)
		return
	}
	s.ordered().AscendRange(&entry{key: start}, &entry{key: end}, visit)
}

// BumpReadWatermark records that a reader at t read key (whether or not the key exists, so
// phantom point reads are covered).
func (s *Store) BumpReadWatermark(key string, t ts.Timestamp) {
	if t.LessEq(s.readFloor) {
		return
	}
	e := s.getOrCreate(key)
	// Invariant: a non-zero per-key watermark is above the floor and counted in tracked.
	if e.readTS.IsZero() {
		s.tracked++
	} else if t.LessEq(e.readTS) {
		return
	}
	e.readTS = t
	if lim := s.opts.ReadWatermarkLimit; lim > 0 && s.tracked > lim {
		s.evictReadWatermarks()
	}
}

// ReadWatermark returns the highest read timestamp recorded for key, or the node-wide floor if
// that is higher.
func (s *Store) ReadWatermark(key string) ts.Timestamp {
	if e := s.byKey[key]; e != nil && !e.readTS.IsZero() {
		return e.readTS
	}
	return s.readFloor
}

// ReadFloor returns the node-wide read watermark floor.
func (s *Store) ReadFloor() ts.Timestamp { return s.readFloor }

// TrackedReadWatermarks returns how many keys hold a per-key watermark above the floor.
func (s *Store) TrackedReadWatermarks() int { return s.tracked }

// RaiseReadFloor raises the node-wide read watermark to at least f and forgets per-key entries
// at or below it. It only ever makes watermarks higher, so it is always safe (it can only cause
// more writer aborts or pushes): use it after a restart with a timestamp above anything a
// pre-crash reader could have used (notes/k2.md §3.5), and to bound memory.
func (s *Store) RaiseReadFloor(f ts.Timestamp) {
	if f.LessEq(s.readFloor) {
		return
	}
	s.readFloor = f
	var drop []*entry
	s.ordered().Ascend(func(e *entry) bool {
		if !e.readTS.IsZero() && e.readTS.LessEq(f) {
			drop = append(drop, e)
		}
		return true
	})
	for _, e := range drop {
		e.readTS = ts.Zero
		s.tracked--
		s.dropIfEmpty(e)
	}
}

// evictReadWatermarks raises the floor to the median tracked watermark, forgetting about half of
// the entries. It runs once per ~limit/2 bumps, so its O(n log n) cost is amortized O(log n).
func (s *Store) evictReadWatermarks() {
	all := make([]ts.Timestamp, 0, s.tracked)
	s.ordered().Ascend(func(e *entry) bool {
		if !e.readTS.IsZero() {
			all = append(all, e.readTS)
		}
		return true
	})
	slices.SortFunc(all, ts.Timestamp.Compare)
	s.RaiseReadFloor(all[(len(all)-1)/2])
}

// PreloadTS is the timestamp of preloaded rows: before any timestamp a clock can produce, so
// every transaction sees them.
var PreloadTS = ts.Timestamp{Wall: -1 << 62}

// PreloadTxn is the writer id of preloaded rows; no coordinator can produce it (its coordinator
// field is 0xFFFF, beyond any node id).
const PreloadTxn = storage.TxnID(0xFFFF << 48)

// Reserve sizes an empty store's key index for n keys, so preloading millions of rows does not
// rehash it over and over.
func (s *Store) Reserve(n int) {
	if len(s.byKey) == 0 && n > 0 {
		s.byKey = make(map[string]*entry, n)
	}
}

// Preload installs a workload's initial row as a committed version at PreloadTS, as if a
// transaction before all others had written it. Preloaded rows are the node's initial image:
// they are not recorded for TakeWrites (persisting millions of them would cost more than the run),
// so the runtime installs them again whenever the node restarts. Preloading a row that is already
// there is a no-op.
func (s *Store) Preload(key string, value []byte) error {
	v := Version{TS: PreloadTS, Txn: PreloadTxn, State: Committed, Value: value}
	if err := checkSizes(key, &v); err != nil {
		return err
	}
	e := s.byKey[key]
	if e == nil {
		s.noteDecided(s.preloadEntry(key, v))
		return nil
	}
	if len(e.versions) > 0 && e.versions[0].TS == PreloadTS {
		return nil
	}
	// PreloadTS is below every other timestamp, so the version goes first. Reinstalled under
	// versions a restarted node recovered, it is garbage once the next one is.
	e.versions = slices.Insert(e.versions, 0, v)
	s.noteDecided(e)
	return nil
}
