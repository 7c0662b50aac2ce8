package runtime

import (
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	_ "unsafe" // go:linkname

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/meridiandb/meridian/internal/node"
	"github.com/meridiandb/meridian/internal/storage/durable"
)

// diskHealthTick is how often Pebble's disk-health checks look for slow operations (2 s);
// shortened here so that a hung sync is found within milliseconds. Pebble exports no way to
// set it.
//
//go:linkname diskHealthTick github.com/cockroachdb/pebble/v2/vfs.defaultTickInterval
var diskHealthTick time.Duration

// A node whose disk hangs on a sync of its log (no error: the sync never returns) stops
// (fail-stop) once the sync has been under way for the max sync duration, with a one-line
// reason, instead of withholding its acknowledgements for ever while it looks alive; Close
// does not wait on the hung sync, the slow disk is counted in the node's metrics, and what the
// node acknowledged before is in its store.
func TestNodeStopsWhenItsDiskStalls(t *testing.T) {
	old := diskHealthTick
	diskHealthTick = 5 * time.Millisecond
	cfg := testConfig(t, nil)
	id := cfg.Topology.DataNodes(0)[0]
	dir := t.TempDir()
	var hang atomic.Bool
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	fs := errorfs.Wrap(vfs.Default, errorfs.InjectorFunc(func(op errorfs.Op) error {
		switch op.Kind {
		case errorfs.OpFileSync, errorfs.OpFileSyncData, errorfs.OpFileSyncTo:
			if hang.Load() && strings.HasSuffix(op.Path, ".log") {
				once.Do(func() { close(entered) })
				<-release
			}
		}
		return nil
	}))
	store, err := durable.OpenPebbleWith(dir, durable.PebbleOptions{FS: fs, SlowDisk: 20 * time.Millisecond, MaxSyncDuration: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	s, err := Start(cfg, id, Options{store: store, NoGRPC: true})
	if err != nil {
		t.Fatal(err)
	}
	released := false
	defer func() {
		if !released {
			close(release)
		}
		s.Close()
		diskHealthTick = old
	}()
	persist := func(k string) <-chan struct{} {
		acked := make(chan struct{})
		s.post(event{fn: func() {
			(*env)(s).Persist([]node.Write{{Key: []byte(k), Value: []byte("v")}}, func() { close(acked) })
		}})
		return acked
	}
	select {
	case <-persist("acked"):
	case <-time.After(5 * time.Second):
		t.Fatal("a persist on a healthy disk was not acknowledged")
	}

	hang.Store(true)
	waiting := persist("waiting")
	select {
	case <-entered:
	case <-time.After(5 * time.Second):
		t.Fatal("the persist never synced the log")
	}
	select {
	case <-s.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the node was still running 5 s into a hung sync: a wedged disk goes unnoticed")
	}
	err = s.Err()
	t.Logf("node stopped: %v", err)
	if !errors.Is(err, durable.ErrDiskStalled) || strings.Contains(err.Error(), "\n") ||
		!strings.Contains(err.Error(), "disk stalled: syncdata of "+dir) {
		t.Errorf("the node stopped with %v, want one line saying its log's sync stalled", err)
	}
	select {
	case <-waiting:
		t.Error("the persist waiting on the hung sync was acknowledged")
	default:
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(&nodeCollector{s: s})
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	slow := -1.0
	for _, f := range families {
		if f.GetName() == "meridian_disk_slow_total" {
			slow = f.GetMetric()[0].GetCounter().GetValue()
		}
	}
	if slow != 1 {
		t.Errorf("meridian_disk_slow_total %v, want 1", slow)
	}

	closed := make(chan struct{})
	go func() { s.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close waited on the hung sync")
	}
	// The disk comes back; once the old store lets go of it, what was acknowledged is there.
	released = true
	close(release)
	deadline := time.Now().Add(5 * time.Second)
	for {
		p, err := durable.OpenPebble(dir)
		if err == nil {
			var got string
			err = p.Scan([]byte("acked"), []byte("ackee"), func(k, v []byte) bool { got = string(v); return true })
			_ = p.Close()
			if err != nil || got != "v" {
				t.Errorf("after the restart the acknowledged write reads %q (%v), want v", got, err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the store could not be opened again once the disk came back: %v", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
