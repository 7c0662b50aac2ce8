package spanner

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/meridiandb/meridian/client"
	"github.com/meridiandb/meridian/internal/node"
	"github.com/meridiandb/meridian/internal/protocol/prototest"
	"github.com/meridiandb/meridian/internal/storage/locks"
	"github.com/meridiandb/meridian/internal/wire"
)

// TestBatchTooLarge: a batch request or answer over wire.MaxScanBytes is refused as a bad
// argument (an answer that large would not fit a frame), the transaction goes on, and the Go
// client's GetMany falls back to reading the keys one at a time (prototest.BatchTooLarge).
func TestBatchTooLarge(t *testing.T) { prototest.BatchTooLarge(t, "spanner", nil) }

// TestBatchShareTooLarge: a participant's answer to its share of a batch travels between nodes,
// and a node reading a frame over wire.MaxFrameBytes drops the link. A read-write batch's OpsResp
// and a read-only batch's SnapReadResp holding 17 values of 1 MiB did exceed it. The participant
// leaves the values out (keeping the versions, which the commit timestamp must exceed), the
// client's batch is refused (wire.BatchAnswerTooLarge), and the transaction goes on: its read
// locks stay held until it commits, and are released then.
func TestBatchShareTooLarge(t *testing.T) {
	for _, ro := range []bool{false, true} {
		t.Run(fmt.Sprintf("read-only=%v", ro), func(t *testing.T) {
			c := newTestCluster(t, locks.WoundWait, false)
			const cl node.ID = 100
			var keys []string
			for i := range 17 {
				k := c.key(1, i%2, fmt.Sprintf("big%d", i))
				keys = append(keys, k)
				if err := c.preload(wire.KV{Key: k, Value: bytes.Repeat([]byte{byte('a' + i)}, client.MaxValueBytes)}); err != nil {
					t.Fatal(err)
				}
			}
			c.takeInbox()
			r := c.request(cl, &wire.ClientRequest{Txn: 1, Op: wire.OpBatch, ReadOnly: ro, Batch: gets(keys...)})
			if r == nil || r.Code != wire.CodeBadArgument || r.Error != wire.BatchAnswerTooLarge {
				t.Fatalf("batch of %d MiB: %+v, want the refusal %q", len(keys), r, wire.BatchAnswerTooLarge)
			}
			for _, d := range c.takeInbox() {
				enc, err := wire.Encode(d.m)
				if err != nil {
					t.Fatal(err)
				}
				if len(enc) > wire.MaxFrameBytes {
					t.Errorf("node %d sent node %d a %T of %d bytes, more than a frame holds (%d)", d.from, d.to, d.m, len(enc), wire.MaxFrameBytes)
				}
			}
			if !ro && c.nodes[1].Part.Len() != 1 {
				t.Errorf("participant 1 tracks %d transactions after the refusal, want the reader, holding its locks", c.nodes[1].Part.Len())
			}
			r = c.request(cl, &wire.ClientRequest{Txn: 1, Seq: 1, Op: wire.OpGet, ReadOnly: ro, Key: keys[3]})
			if r == nil || r.Code != wire.CodeOK || !bytes.Equal(r.Value, bytes.Repeat([]byte{'d'}, client.MaxValueBytes)) {
				t.Fatalf("get after the refused batch: %+v", r)
			}
			if r := c.request(cl, &wire.ClientRequest{Txn: 1, Seq: 2, Op: wire.OpCommit, ReadOnly: ro}); r == nil || r.Code != wire.CodeOK {
				t.Fatalf("commit after the refused batch: %+v", r)
			}
			if n := c.nodes[1].Part.Len(); n != 0 {
				t.Errorf("participant 1 still tracks %d transactions after the commit", n)
			}
			if n := c.nodes[0].Coord.Active(); n != 0 {
				t.Errorf("coordinator still runs %d transactions", n)
			}
		})
	}
}
