package spanner

import (
	"testing"

	"github.com/meridiandb/meridian/internal/node"
	"github.com/meridiandb/meridian/internal/storage/locks"
	"github.com/meridiandb/meridian/internal/wire"
)

// TestLateCopyAfterRestartDoesNotRestoreLocks: a transaction reads a1 at participant 1, which
// restarts (the read lock lost; its restart notice to the coordinator lost too), and a writer
// commits a1 = v1. A late copy of the transaction's first ReadReq (Seen 0: a network duplicate,
// or a resend) then reaches the new life, which admits it afresh and grants one lock, the very
// Seen its coordinator counts. The transaction must not commit: what it read came from the lost
// lock, and it would commit above the writer (a lost update in list-append: sim seed 42 of
// --workload list-append --keys 5 --zipf 0.99 --clients 8 --loss 0.05 --duplicate 0.5
// --duplicate-delay 300ms --crash 1@600ms/40ms ... lost an acknowledged append).
//
// prepare-after: the prepare reaches the new life after the copy (Seen matched).
// prepare-resent: the prepare went while the participant was down; the keep-alive finds the
// transaction there, unprepared, and has the prepare sent again (ResendReq), which matched too.
func TestLateCopyAfterRestartDoesNotRestoreLocks(t *testing.T) {
	const client, writer node.ID = 100, 101
	for _, resent := range []bool{false, true} {
		name := map[bool]string{false: "prepare-after", true: "prepare-resent"}[resent]
		t.Run(name, func(t *testing.T) {
			c := newTestCluster(t, locks.WoundWait, false)
			a1, b2 := c.key(1, 0, "a1"), c.key(2, 0, "b2")
			if err := c.preload(wire.KV{Key: a1, Value: []byte("v0")}); err != nil {
				t.Fatal(err)
			}
			c.takeInbox()
			if r := c.request(client, &wire.ClientRequest{Txn: 1, Op: wire.OpGet, Key: a1}); r == nil || r.Code != wire.CodeOK || string(r.Value) != "v0" {
				t.Fatalf("read a1: %+v", r)
			}
			var late *ReadReq
			for _, d := range c.takeInbox() {
				if m, ok := d.m.(*ReadReq); ok && d.to == 1 {
					late = m
				}
			}
			if r := c.request(client, &wire.ClientRequest{Txn: 1, Seq: 1, Op: wire.OpPut, Key: b2, Value: []byte("from-v0")}); r == nil || r.Code != wire.CodeOK {
				t.Fatalf("put b2: %+v", r)
			}
			c.crash(1)
			if resent {
				c.send(client, 0, &wire.ClientRequest{Txn: 1, Seq: 2, Op: wire.OpCommit}) // its prepare to 1 is lost
				c.run()
			}
			c.drop = func(d delivered) bool { _, ok := d.m.(*Restarted); return ok }
			c.reboot(t, 1, 2)
			if err := c.nodes[1].Preload([]wire.KV{{Key: a1, Value: []byte("v0")}}); err != nil { // what its disk kept
				t.Fatal(err)
			}
			c.run()
			c.drop = nil
			c.send(writer, 2, &wire.ClientRequest{Txn: 1, Op: wire.OpPut, Key: a1, Value: []byte("v1")})
			c.run()
			c.send(writer, 2, &wire.ClientRequest{Txn: 1, Seq: 1, Op: wire.OpCommit})
			c.run()
			if got := c.replies[writer]; len(got) != 2 || got[1].Code != wire.CodeOK {
				t.Fatalf("writer: %+v", got)
			}
			c.send(0, 1, late)
			c.run()
			var r *wire.ClientReply
			if resent {
				r, _ = c.awaitReply(client, 2, c.cfg.IdleTimeout)
			} else {
				r = c.request(client, &wire.ClientRequest{Txn: 1, Seq: 2, Op: wire.OpCommit})
			}
			if r != nil && r.Code == wire.CodeOK {
				t.Fatalf("committed at %v on a read of a1 = v0 whose lock the restart lost, above the writer's a1 = v1", r.CommitTS)
			}
			if r == nil {
				t.Fatalf("the commit was not answered")
			}
		})
	}
}
