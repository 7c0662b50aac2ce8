// Package memdb is an in-memory client.Transport that executes transactions one at a time
// over a map: the trivially serializable reference store that workload tests (TPC-C's
// consistency conditions, list-append histories) run against before any real protocol.
//
// Every transaction holds the store's lock from its first request to its commit or abort, so
// transactions are serial even when clients run in parallel goroutines. Writes are buffered and
// applied at commit; reads see the transaction's own writes. One Transport serves one client
// (one client.DB). A client must finish a transaction before another client in the same
// goroutine starts one, or the second blocks forever.
//
// For testing retry paths, a Store can abort a share of commits with a retryable abort.
package memdb

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/meridiandb/meridian/internal/wire"
)

// Store is the shared database.
type Store struct {
	txnMu sync.Mutex // held by the running transaction

	mu        sync.Mutex // guards the fields below, for direct access from tests
	data      map[string][]byte
	now       int64
	abortRate float64
	rng       *rand.Rand
	commits   int
	aborts    int
}

// New returns an empty store.
func New() *Store { return &Store{data: map[string][]byte{}} }

// AbortCommits makes the store answer a share rate of commits with a retryable abort (cause
// "memdb-injected"), drawing from a rng seeded with seed.
func (s *Store) AbortCommits(rate float64, seed uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.abortRate = rate
	s.rng = rand.New(rand.NewPCG(seed, 0x6d656d6462))
}

// Stats returns how many transactions committed and how many commits were aborted.
func (s *Store) Stats() (commits, aborts int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.commits, s.aborts
}

// Get reads a key outside any transaction (for tests).
func (s *Store) Get(key string) ([]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.data[key]
	return v, ok
}

// Put writes a key outside any transaction (for tests that corrupt a database on purpose).
func (s *Store) Put(key string, value []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.data[key] = append([]byte(nil), value...)
}

// Delete removes a key outside any transaction.
func (s *Store) Delete(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.data, key)
}

// Len is the number of keys.
func (s *Store) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.data)
}

// Keys returns every key, sorted.
func (s *Store) Keys() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.data))
	for k := range s.data {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Transport returns a new client endpoint on the store.
func (s *Store) Transport() *Transport { return &Transport{s: s} }

// Transport is one client's connection to a Store.
type Transport struct {
	s      *Store
	active bool
	txn    uint64
	writes map[string][]byte // nil value: deleted
}

// RoundTrip executes one request of the client's current transaction.
func (t *Transport) RoundTrip(req *wire.ClientRequest) (*wire.ClientReply, error) {
	if t.active && req.Txn != t.txn {
		// The client abandoned its previous transaction without finishing it.
		t.finish()
	}
	if !t.active {
		if req.Op == wire.OpAbort || req.Op == wire.OpCommit && req.Seq == 0 {
			return &wire.ClientReply{Txn: req.Txn, Seq: req.Seq, Code: wire.CodeOK}, nil
		}
		t.s.txnMu.Lock()
		t.active, t.txn, t.writes = true, req.Txn, map[string][]byte{}
	}
	rep := &wire.ClientReply{Txn: req.Txn, Seq: req.Seq, Code: wire.CodeOK}
	s := t.s
	switch req.Op {
	case wire.OpGet, wire.OpPut, wire.OpDelete:
		rep.Found, rep.Value = t.apply(req.Op, req.Key, req.Value)
	case wire.OpScan:
		rep.Rows = t.scan(req.Key, req.EndKey, int(req.Limit))
	case wire.OpBatch:
		rep.Results = make([]wire.BatchResult, len(req.Batch))
		for i, op := range req.Batch {
			found, v := t.apply(op.Op, op.Key, op.Value)
			rep.Results[i] = wire.BatchResult{Found: found, Value: v}
		}
	case wire.OpCommit:
		s.mu.Lock()
		if s.abortRate > 0 && s.rng.Float64() < s.abortRate {
			s.aborts++
			s.mu.Unlock()
			t.finish()
			return &wire.ClientReply{Txn: req.Txn, Seq: req.Seq, Code: wire.CodeAborted, Cause: "memdb-injected"}, nil
		}
		for k, v := range t.writes { // order is irrelevant: every write lands
			if v == nil {
				delete(s.data, k)
			} else {
				s.data[k] = v
			}
		}
		s.commits++
		s.now++
		s.mu.Unlock()
		t.finish()
	case wire.OpAbort:
		t.finish()
	default:
		return &wire.ClientReply{Txn: req.Txn, Seq: req.Seq, Code: wire.CodeBadArgument, Error: fmt.Sprintf("memdb: unknown op %d", req.Op)}, nil
	}
	return rep, nil
}

// apply runs one read or write of the current transaction; a read returns what it found.
func (t *Transport) apply(op wire.Op, key string, value []byte) (bool, []byte) {
	switch op {
	case wire.OpGet:
		if v, ok := t.writes[key]; ok {
			return v != nil, clone(v)
		}
		t.s.mu.Lock()
		v, ok := t.s.data[key]
		t.s.mu.Unlock()
		return ok, clone(v)
	case wire.OpPut:
		t.writes[key] = append([]byte{}, value...)
	case wire.OpDelete:
		t.writes[key] = nil
	}
	return false, nil
}

func (t *Transport) scan(start, end string, limit int) []wire.KV {
	s := t.s
	s.mu.Lock()
	var keys []string
	for k := range s.data {
		if k >= start && (end == "" || k < end) {
			keys = append(keys, k)
		}
	}
	s.mu.Unlock()
	for k, v := range t.writes {
		if k >= start && (end == "" || k < end) && v != nil {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var rows []wire.KV
	for i, k := range keys {
		if i > 0 && keys[i-1] == k {
			continue
		}
		v, ok := t.writes[k]
		if !ok {
			s.mu.Lock()
			v = s.data[k]
			s.mu.Unlock()
		} else if v == nil {
			continue
		}
		rows = append(rows, wire.KV{Key: k, Value: clone(v)})
		if limit > 0 && len(rows) == limit {
			break
		}
	}
	return rows
}

func (t *Transport) finish() {
	t.active, t.writes = false, nil
	t.s.txnMu.Unlock()
}

// Sleep does not sleep: retries against a serial store need no backoff.
func (t *Transport) Sleep(time.Duration) {}

// Now returns a logical clock that advances by one per committed transaction.
func (t *Transport) Now() int64 {
	t.s.mu.Lock()
	defer t.s.mu.Unlock()
	return t.s.now
}

func clone(v []byte) []byte {
	if v == nil {
		return nil
	}
	return append([]byte{}, v...)
}

// Dump renders the store as sorted "key=len" lines, for debugging failed tests.
func (s *Store) Dump() string {
	var b strings.Builder
	for _, k := range s.Keys() {
		v, _ := s.Get(k)
		fmt.Fprintf(&b, "%q=%d bytes\n", k, len(v))
	}
	return b.String()
}
