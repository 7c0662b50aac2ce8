// Package workload defines what a benchmark driver needs from a workload generator, and small
// helpers shared by the generators in its subpackages (ycsbt, tpcc, listappend, zipf, memdb).
//
// A Workload is built once per run from a topology, loads its initial database through a
// client.DB, and hands each closed-loop client a Client that yields transactions one at a time.
// A transaction's body (Txn.Run) only uses Get, Put and Delete, so every protocol can run every
// workload whether or not it supports scans. Generators are deterministic: a client's sequence
// of transactions depends only on its id, region and the seed of the rng it is given.
package workload

import (
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/meridiandb/meridian/client"
	"github.com/meridiandb/meridian/internal/history"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/wire"
)

// ErrUserAbort is returned by a Txn's Run when the transaction rolls back by its own decision
// (TPC-C's 1% of New-Order transactions with an unused item number). The driver aborts the
// transaction and counts it as a success of type Type+"-rollback", not as a failure, and never
// retries it.
var ErrUserAbort = errors.New("workload: transaction rolled back by user request")

// Workload generates the transactions of a benchmark.
type Workload interface {
	Name() string
	// Load writes the initial database through db. It is called once, before clients start,
	// and may run many transactions.
	Load(db *client.DB) error
	// NewClient returns the transaction generator of one closed-loop client in region region,
	// drawing all its randomness from rng.
	NewClient(id int, region topo.RegionID, rng *rand.Rand) Client
}

// Client yields one client's transactions.
type Client interface {
	// Next returns the next transaction to run.
	Next() Txn
}

// Homed is implemented by clients bound to a part of the data (a TPC-C terminal and its home
// warehouse). Home returns a key of that part; drivers then pick, as the client's coordinator,
// the node holding that key when it is in the client's region, so the client's local work
// needs no hop between nodes.
type Homed interface {
	Home() string
}

// Txn is one logical transaction.
type Txn struct {
	Type     string // "ycsbt", "new-order", "payment", "list-append", …: latencies are kept per type
	ReadOnly bool   // declared read-only (client.TxnOptions.ReadOnly)
	// Label, if set, is a finer kind than Type passed to the protocol for its per-kind metrics
	// (client.TxnOptions.Label), e.g. TPC-C's "new-order/remote-stock"; empty means Type.
	Label string
	// Run is the body. It must be safe to re-run on a fresh client.Txn after a retryable abort,
	// and returns client errors as they are (or ErrUserAbort). The driver commits after it.
	Run func(tx *client.Txn) error
	// Invoke and Result are set by workloads whose transactions go into a checked history
	// (listappend): Invoke is the invocation's micro-ops (reads with null values), Result
	// returns the micro-ops of the latest Run with the values it read (reads it did not reach
	// stay null). Both are nil for benchmark-only workloads.
	Invoke []history.MicroOp
	Result func() []history.MicroOp
	// Done, if set, is told how each attempt of the transaction ended, once per attempt, after
	// the driver's commit or abort of it returned: workloads that keep a tally of what committed
	// (YCSB-T's read-modify-write counters) keep it here. A retry after a retryable abort is a
	// new attempt of the same Txn, so the attempts of one logical transaction report one
	// Committed or Unknown at most, after any number of Aborted.
	Done func(Outcome)
}

// Outcome is how one attempt of a transaction ended.
type Outcome int

const (
	// Aborted: the attempt took no effect. It aborted (retryable or not), rolled back on the
	// workload's request (ErrUserAbort), or failed before its commit was sent or with its commit
	// refused unprocessed (client.ErrUnavailable).
	Aborted Outcome = iota
	// Committed: the commit was acknowledged.
	Committed
	// Unknown: the attempt may or may not have committed (client.UnknownError), and may still
	// take effect later.
	Unknown
)

func (o Outcome) String() string {
	switch o {
	case Aborted:
		return "aborted"
	case Committed:
		return "committed"
	case Unknown:
		return "unknown"
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// RowSource enumerates a workload's initial database, row by row, in a deterministic order.
// emit's error stops the enumeration and is returned.
type RowSource func(emit func(key string, value []byte) error) error

// LoadError is LoadRows's error for a batch that did not commit: the rows before it did, so a
// caller that can reach the cluster again may go on from Loaded.
type LoadError struct {
	Loaded   int    // rows of src committed before the failed batch, in src's order
	FirstKey string // the failed batch's first row
	Rows     int    // and how many it held
	Err      error
}

func (e *LoadError) Error() string {
	return fmt.Sprintf("load rows %d..%d (first key %q): %v", e.Loaded, e.Loaded+e.Rows-1, e.FirstKey, e.Err)
}

func (e *LoadError) Unwrap() error { return e.Err }

// LoadRows writes the rows of src through db in transactions of at most batchRows puts, retrying
// each batch on retryable aborts; a batch that still fails ends it with a *LoadError. A simulator
// may instead call src itself and install the rows directly into storage.
func LoadRows(db *client.DB, src RowSource, batchRows int) error {
	if batchRows <= 0 {
		batchRows = 100
	}
	batch := make([]wire.KV, 0, batchRows)
	inBatch := make(map[string]bool, batchRows)
	loaded := 0
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		// One request per transaction: the rows' writes go out together (PutMany).
		err := client.RunTxn(db, client.TxnOptions{}, func(tx *client.Txn) error { return tx.PutMany(batch) })
		if err != nil {
			return &LoadError{Loaded: loaded, FirstKey: batch[0].Key, Rows: len(batch), Err: err}
		}
		loaded += len(batch)
		batch = batch[:0]
		clear(inBatch)
		return nil
	}
	err := src(func(k string, v []byte) error {
		if inBatch[k] {
			// A batch names each key once; a row emitted again goes in the next transaction,
			// after the first, so the later value wins as it would one row at a time.
			if err := flush(); err != nil {
				return err
			}
		}
		batch = append(batch, wire.KV{Key: k, Value: v})
		inBatch[k] = true
		if len(batch) == batchRows {
			return flush()
		}
		return nil
	})
	if err != nil {
		return err
	}
	return flush()
}
