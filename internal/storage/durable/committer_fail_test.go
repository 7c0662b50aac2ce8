package durable

import (
	"errors"
	"testing"

	"github.com/meridiandb/meridian/internal/node"
)

// failOnce is a Mem whose first Apply blocks until released and then fails (an fsync error, a
// full disk), as a real disk may fail one sync and take the next.
type failOnce struct {
	*Mem
	calls   int
	entered chan struct{}
	release chan struct{}
}

var errDisk = errors.New("disk: input/output error")

func (f *failOnce) Apply(b []node.Write) error {
	f.calls++
	if f.calls == 1 {
		close(f.entered)
		<-f.release
		return errDisk
	}
	return f.Mem.Apply(b)
}

// Batches become durable in submission order: once one has failed, no later one may be
// reported durable, since a node acknowledges what a batch carries on the strength of every
// earlier batch being on disk too (crdb's persist generations, k2's intents before the
// decision that follows them). A later batch applied after a failed one is durable while the
// one before it is lost: a crash then recovers a decision without the writes it decided.
func TestCommitterFailureFailsLaterBatches(t *testing.T) {
	b := &failOnce{Mem: NewMem(), entered: make(chan struct{}), release: make(chan struct{})}
	c := NewCommitter(b, 0)
	errs := make(chan error, 2)
	c.Submit([]node.Write{{Key: []byte("intent"), Value: []byte("v")}}, func(err error) { errs <- err })
	<-b.entered // the first batch is being applied alone; the next queues behind it
	c.Submit([]node.Write{{Key: []byte("decision"), Value: []byte("committed")}}, func(err error) { errs <- err })
	close(b.release)
	if err := <-errs; !errors.Is(err, errDisk) {
		t.Fatalf("first batch: %v, want the disk error", err)
	}
	if err := <-errs; err == nil {
		t.Fatal("the batch queued behind a failed one was reported durable")
	}
	c.Submit([]node.Write{{Key: []byte("later"), Value: []byte("x")}}, func(err error) { errs <- err })
	if err := <-errs; err == nil {
		t.Fatal("a batch submitted after a failed one was reported durable")
	}
	c.Close()
	for _, k := range []string{"decision", "later"} {
		if _, ok := b.Mem.m[k]; ok {
			t.Fatalf("%q was applied after the failed batch: durable without the batch before it", k)
		}
	}
}
