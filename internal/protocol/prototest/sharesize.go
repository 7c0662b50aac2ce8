package prototest

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/meridiandb/meridian/client"
	"github.com/meridiandb/meridian/internal/node"
	"github.com/meridiandb/meridian/internal/protocol"
	"github.com/meridiandb/meridian/internal/sim"
	"github.com/meridiandb/meridian/internal/wire"
)

// frameWatch wraps a protocol so that every message its nodes send is encoded with the wire
// codec and measured: the simulator hands messages over as values and enforces no frame, while
// a real node reading a frame over wire.MaxFrameBytes drops the connection.
type frameWatch struct {
	protocol.Protocol
	t       testing.TB
	largest int
	kind    string
	over    []string // messages over wire.MaxFrameBytes: kind and size
}

func (w *frameWatch) NewNode(cfg node.Config) (node.Handler, error) {
	cfg.Env = &watchedEnv{Env: cfg.Env, w: w}
	return w.Protocol.NewNode(cfg)
}

type watchedEnv struct {
	node.Env
	w *frameWatch
}

func (e *watchedEnv) Send(to node.ID, m wire.Msg) {
	b, err := wire.Encode(m)
	if err != nil {
		e.w.t.Errorf("node %d: %v", e.Self(), err)
	}
	if len(b) > e.w.largest {
		e.w.largest, e.w.kind = len(b), wire.Name(m.Kind())
	}
	if len(b) > wire.MaxFrameBytes {
		e.w.over = append(e.w.over, fmt.Sprintf("%s of %d bytes from node %d to %d", wire.Name(m.Kind()), len(b), e.Self(), to))
	}
	e.Env.Send(to, m)
}

// check fails t for every message that would not have fitted a frame.
func (w *frameWatch) check(t testing.TB) {
	t.Helper()
	t.Logf("largest message: %s of %d bytes (frame %d)", w.kind, w.largest, wire.MaxFrameBytes)
	for _, o := range w.over {
		t.Errorf("a %s: over a frame (%d bytes)", o, wire.MaxFrameBytes)
	}
}

// newWatchedSim is NewSim with every message its nodes send measured.
func newWatchedSim(t testing.TB, c Case) (*sim.Sim, *frameWatch) {
	t.Helper()
	cfg, err := SimConfig(c)
	if err != nil {
		t.Fatal(err)
	}
	w := &frameWatch{Protocol: cfg.Protocol, t: t}
	cfg.Protocol = w
	s, err := sim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s, w
}

// bigValue is key's client.MaxValueBytes-long value, told apart from every other key's.
func bigValue(key string) []byte {
	v := bytes.Repeat([]byte(key), client.MaxValueBytes/len(key))
	return append(v, make([]byte, client.MaxValueBytes-len(v))...)
}

// ShareOverFrame: a GetMany whose keys all live on one data node, 17 values of
// client.MaxValueBytes, so that the node's share of the answer (17 MiB) exceeds a frame. Every
// message between nodes must still fit one (wire.MaxFrameBytes; the simulator does not enforce
// it, so each is encoded and measured), and the client gets every value, in a read-write and in
// a read-only transaction: the coordinator refuses the batch's answer as too large
// (wire.BatchAnswerTooLarge) and the Go client reads the keys one at a time.
func ShareOverFrame(t *testing.T, protocol string, opts map[string]string) {
	t.Helper()
	const n = 17
	s, watch := newWatchedSim(t, Case{Protocol: protocol, Options: opts, Seed: 1})
	tp := s.Topology()
	keys := KeysOn(t, tp, tp.DataNodes(1)[0], "share", n)
	var failures []string
	fail := func(format string, args ...any) { failures = append(failures, fmt.Sprintf(format, args...)) }
	runClient(t, s, 60*time.Second, func(db *client.DB) {
		// Loaded a few keys per transaction, well within wire.MaxTxnWriteBytes.
		for from := 0; from < n; from += 4 {
			err := client.RunTxn(db, client.TxnOptions{}, func(tx *client.Txn) error {
				for _, k := range keys[from:min(from+4, n)] {
					if err := tx.Put(k, bigValue(k)); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				fail("load keys %d..: %v", from, err)
				return
			}
		}
		for _, ro := range []bool{false, true} {
			err := client.RunTxn(db, client.TxnOptions{ReadOnly: ro}, func(tx *client.Txn) error {
				got, err := tx.GetMany(keys)
				if err != nil {
					return err
				}
				for i, k := range keys {
					if i >= len(got) || !got[i].Found || !bytes.Equal(got[i].Value, bigValue(k)) {
						fail("read-only=%v: %s not read back whole", ro, k)
					}
				}
				return nil
			})
			if err != nil {
				fail("read-only=%v GetMany of %d keys on one node: %v", ro, n, err)
			}
		}
	})
	for _, f := range failures {
		t.Error(f)
	}
	watch.check(t)
}
