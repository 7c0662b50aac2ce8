package durable

import (
	"errors"
	"sync"

	"github.com/meridiandb/meridian/internal/node"
)

// Committer is the group commit of the real runtime. A node's event loop submits each persist
// batch with a completion callback and continues; one background goroutine applies batches to
// the Backend, merging everything that arrived while the previous sync was in flight into a
// single Apply, so N concurrent batches cost one fsync instead of N.
//
// Guarantees:
//   - batches become durable in submission order, and each is all-or-nothing (merged batches are
//     applied as one atomic backend batch, and later writes to a key override earlier ones just as
//     sequential application would);
//   - each done callback runs exactly once, after its batch is durable (err == nil) or has
//     failed, in submission order, on the Committer's goroutine;
//   - once a batch has failed, every later one fails with the same error and is not applied: a
//     node acknowledges what a batch carries on the strength of every earlier batch being
//     durable too, so a batch applied after a lost one could make a decision durable without
//     the writes it decided (and after an fsync error the kernel may have dropped the failed
//     batch's pages while the next sync succeeds).
//
// Because done runs on the Committer's goroutine, not the node's, the runtime must post the
// completion back to the node's event loop (e.g. send it on the loop's channel) rather than call
// into protocol code directly: protocols assume one logical thread. A persist error means the
// node's durability is gone; the runtime should stop the node (fail-stop) rather than continue.
//
// This is runtime code: it uses a goroutine and is not used by the simulator, whose disk model
// delays persist completions in virtual time.
type Committer struct {
	b             Backend
	maxBatchBytes int

	mu      sync.Mutex
	cond    *sync.Cond
	queue   []pending
	closed  bool
	stopped chan struct{}

	// Stats, read with Stats.
	syncs, batches int64

	failed error // the first Apply error, which every later batch gets; run's own
}

type pending struct {
	batch    []node.Write
	done     func(error)
	rejected error // ValidateBatch's refusal: fails this batch and every later one
}

// ErrClosed is passed to callbacks of batches submitted after Close.
var ErrClosed = errors.New("durable: committer closed")

// NewCommitter starts a committer over b. maxBatchBytes caps how many bytes of keys and values
// one merged Apply may carry (a single larger batch is still applied alone); 0 means 4 MiB.
func NewCommitter(b Backend, maxBatchBytes int) *Committer {
	if maxBatchBytes <= 0 {
		maxBatchBytes = 4 << 20
	}
	c := &Committer{b: b, maxBatchBytes: maxBatchBytes, stopped: make(chan struct{})}
	c.cond = sync.NewCond(&c.mu)
	go c.run()
	return c
}

// Submit queues batch; done (which may be nil) is called once it is durable or has failed.
// Submit never blocks on I/O. The batch slices must not be modified after the call. A batch that
// ValidateBatch rejects is never merged with others, so it cannot fail the valid batches queued
// before it, but it fails every batch after it, as a failed Apply does: a later batch may
// carry what is acknowledged on the strength of the rejected one (a review found the batches
// after a rejected one written and reported durable).
func (c *Committer) Submit(batch []node.Write, done func(error)) {
	rejected := ValidateBatch(batch)
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		if done != nil {
			done(ErrClosed)
		}
		return
	}
	c.queue = append(c.queue, pending{batch: batch, done: done, rejected: rejected})
	c.cond.Signal()
	c.mu.Unlock()
}

// Stats returns how many backend syncs were issued and how many batches they carried.
func (c *Committer) Stats() (syncs, batches int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.syncs, c.batches
}

// Close stops accepting batches, waits until every queued batch is applied and its callback has
// run, and returns. It does not close the Backend.
func (c *Committer) Close() {
	c.mu.Lock()
	c.closed = true
	c.cond.Signal()
	c.mu.Unlock()
	<-c.stopped
}

func (c *Committer) run() {
	defer close(c.stopped)
	var merged []node.Write
	for {
		c.mu.Lock()
		for len(c.queue) == 0 && !c.closed {
			c.cond.Wait()
		}
		if len(c.queue) == 0 {
			c.mu.Unlock()
			return
		}
		// Take as many queued batches as fit the byte budget (at least one), up to a rejected
		// one, which goes alone.
		n, size := 0, 0
		for n < len(c.queue) {
			s := batchBytes(c.queue[n].batch)
			if n > 0 && (size+s > c.maxBatchBytes || c.queue[n].rejected != nil) {
				break
			}
			size += s
			n++
			if c.queue[n-1].rejected != nil {
				break
			}
		}
		group := make([]pending, n)
		copy(group, c.queue[:n])
		c.queue = c.queue[n:]
		c.syncs++
		c.batches += int64(n)
		c.mu.Unlock()

		if c.failed == nil && group[0].rejected != nil {
			c.failed = group[0].rejected
		}
		err := c.failed
		if err == nil {
			merged = merged[:0]
			for _, p := range group {
				merged = append(merged, p.batch...)
			}
			err = c.b.Apply(merged)
			c.failed = err
		}
		for _, p := range group {
			if p.done != nil {
				p.done(err)
			}
		}
	}
}

func batchBytes(b []node.Write) int {
	n := 0
	for _, w := range b {
		n += len(w.Key) + len(w.Value) + 1
	}
	return n
}
