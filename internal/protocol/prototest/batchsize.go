package prototest

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/meridiandb/meridian/client"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/wire"
)

// BatchTooLarge: batches are held to wire.MaxScanBytes both ways, as scans are, since a frame
// between nodes (and to a client) holds wire.MaxFrameBytes and a node reading a longer one drops
// the link. Over the bound:
//   - a raw OpBatch request (as a gRPC client may send) is refused with a one-line bad-argument
//     error, and nothing begins;
//   - a raw OpBatch whose reads' values would make the answer larger is refused
//     (wire.BatchAnswerTooLarge) after it ran, and its transaction goes on: its next requests
//     are served and it commits;
//   - the Go client's GetMany of such keys returns every value (it falls back to reading them
//     one at a time), in read-write and read-only transactions, and the transaction stays
//     usable; its locks, if any, are released at its end, so a later writer gets through.
//
// Keys are read both when one data node holds them all (its own share of the answer is too
// large) and when they are spread over the shards (only the whole answer is).
func BatchTooLarge(t *testing.T, protocol string, opts map[string]string) {
	t.Helper()
	s := NewSim(t, Case{Protocol: protocol, Options: opts, Seed: 1})
	tp := s.Topology()
	const n = 5 // values of client.MaxValueBytes: over wire.MaxScanBytes together
	groups := map[string][]string{"one-node": KeysOn(t, tp, tp.DataNodes(1)[0], "big", n)}
	for i := range n {
		groups["spread"] = append(groups["spread"], topo.PinnedKey(topo.ShardID(i%len(tp.Shards)), fmt.Sprintf("big-spread/%d", i)))
	}
	names := []string{"one-node", "spread"}
	value := func(key string) []byte {
		v := bytes.Repeat([]byte(key), client.MaxValueBytes/len(key))
		return append(v, make([]byte, client.MaxValueBytes-len(v))...)
	}
	var failures []string
	fail := func(format string, args ...any) { failures = append(failures, fmt.Sprintf(format, args...)) }
	checkReads := func(what string, keys []string, got []client.Read) {
		if len(got) != len(keys) {
			fail("%s: %d reads for %d keys", what, len(got), len(keys))
			return
		}
		for i, k := range keys {
			if !got[i].Found || !bytes.Equal(got[i].Value, value(k)) {
				fail("%s: %s found=%v with %d bytes, want its %d-byte value", what, k, got[i].Found, len(got[i].Value), client.MaxValueBytes)
			}
		}
	}
	runClient(t, s, 60*time.Second, func(db *client.DB) {
		for _, g := range names {
			err := client.RunTxn(db, client.TxnOptions{}, func(tx *client.Txn) error {
				rows := make([]wire.KV, n)
				for i, k := range groups[g] {
					rows[i] = wire.KV{Key: k, Value: value(k)}
				}
				return tx.PutMany(rows)
			})
			if err != nil {
				fail("load %s: %v", g, err)
				return
			}
		}

		// Through the Go client: every value, and the transaction goes on.
		small := topo.PinnedKey(0, "big-small")
		for _, ro := range []bool{false, true} {
			err := client.RunTxn(db, client.TxnOptions{ReadOnly: ro}, func(tx *client.Txn) error {
				for _, g := range names {
					got, err := tx.GetMany(groups[g])
					if err != nil {
						return fmt.Errorf("GetMany %s: %w", g, err)
					}
					checkReads(fmt.Sprintf("read-only=%v GetMany %s", ro, g), groups[g], got)
				}
				if ro {
					return nil
				}
				if err := tx.Put(small, []byte("s")); err != nil {
					return fmt.Errorf("put after the GetMany: %w", err)
				}
				got, err := tx.GetMany([]string{small, groups["spread"][0]})
				if err != nil {
					return fmt.Errorf("small GetMany after the large ones: %w", err)
				}
				if !got[0].Found || string(got[0].Value) != "s" || !bytes.Equal(got[1].Value, value(groups["spread"][0])) {
					fail("small GetMany after the large ones: %q and %d bytes", got[0].Value, len(got[1].Value))
				}
				return nil
			})
			if err != nil {
				fail("read-only=%v transaction: %v", ro, err)
			}
		}

		// Raw requests, as a client of the gRPC API sends them.
		raw := func(req *wire.ClientRequest) *wire.ClientReply {
			rep, err := db.Transport().RoundTrip(req)
			if err != nil {
				fail("%v request seq %d: %v", req.Op, req.Seq, err)
				return &wire.ClientReply{Code: wire.CodeUnavailable}
			}
			return rep
		}
		oneLine := func(what string, rep *wire.ClientReply, want string) {
			if rep.Code != wire.CodeBadArgument || !strings.Contains(rep.Error, want) || strings.Contains(rep.Error, "\n") {
				fail("%s: %v %q, want a one-line bad-argument refusal containing %q", what, rep.Code, rep.Error, want)
			}
		}
		for _, g := range names {
			id := db.Begin(client.TxnOptions{}).ID() // a fresh transaction id, used raw
			ops := make([]wire.BatchOp, n)
			for i, k := range groups[g] {
				ops[i] = wire.BatchOp{Op: wire.OpGet, Key: k}
			}
			oneLine("raw GetMany "+g, raw(&wire.ClientRequest{Txn: id, Op: wire.OpBatch, Batch: ops}), wire.BatchAnswerTooLarge)
			if rep := raw(&wire.ClientRequest{Txn: id, Seq: 1, Op: wire.OpGet, Key: groups[g][1]}); rep.Code != wire.CodeOK || !bytes.Equal(rep.Value, value(groups[g][1])) {
				fail("raw get after the refused batch (%s): %v %q, %d bytes", g, rep.Code, rep.Error+rep.Cause, len(rep.Value))
			}
			if rep := raw(&wire.ClientRequest{Txn: id, Seq: 2, Op: wire.OpCommit}); rep.Code != wire.CodeOK {
				fail("raw commit after the refused batch (%s): %v %q", g, rep.Code, rep.Error+rep.Cause)
			}
		}
		id := db.Begin(client.TxnOptions{}).ID()
		puts := make([]wire.BatchOp, n)
		for i, k := range groups["spread"] {
			puts[i] = wire.BatchOp{Op: wire.OpPut, Key: k, Value: value("x")}
		}
		oneLine("raw PutMany of 5 MiB", raw(&wire.ClientRequest{Txn: id, Op: wire.OpBatch, Batch: puts}), "4 MiB")

		// Nothing of the above holds a lock or an intent any more: a writer gets through.
		err := client.RunTxn(db, client.TxnOptions{}, func(tx *client.Txn) error {
			v, err := tx.Get(groups["spread"][0])
			if err != nil {
				return err
			}
			if !bytes.Equal(v, value(groups["spread"][0])) {
				fail("the refused PutMany wrote %q…", v[:min(len(v), 8)])
			}
			return tx.PutMany([]wire.KV{{Key: groups["one-node"][0], Value: []byte("w")}, {Key: groups["spread"][0], Value: []byte("w")}})
		})
		if err != nil {
			fail("a later writer: %v", err)
		}
	})
	for _, f := range failures {
		t.Error(f)
	}
}
