package spanner

import (
	"slices"
	"testing"
	"time"

	"github.com/meridiandb/meridian/internal/node"
	"github.com/meridiandb/meridian/internal/node/nodetest"
	"github.com/meridiandb/meridian/internal/protocol"
	"github.com/meridiandb/meridian/internal/protocol/prototest"
	"github.com/meridiandb/meridian/internal/storage"
	"github.com/meridiandb/meridian/internal/storage/durable"
	"github.com/meridiandb/meridian/internal/storage/locks"
	"github.com/meridiandb/meridian/internal/storage/mvcc"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/ts"
	"github.com/meridiandb/meridian/internal/wire"
)

// scanScript is a participant driven by hand that leads the shard its keys are pinned to, with
// committed rows "r-"+name for each of rows, and a range [r-, r.) holding them.
type scanScript struct {
	p    *Participant
	env  *nodetest.ScriptEnv
	disk *durable.Mem
	key  func(string) string
	rg   ScanRange
}

const scanCoord node.ID = 4

func newScanScript(t *testing.T, policy locks.Policy, rows ...string) *scanScript {
	t.Helper()
	tp, err := topo.FromPreset(prototest.Topology, topo.DefaultLayout())
	if err != nil {
		t.Fatal(err)
	}
	shard := tp.ShardsHomedIn(0)[0]
	s := &scanScript{disk: durable.NewMem(), key: func(r string) string { return topo.PinnedKey(shard, r) }}
	s.env = &nodetest.ScriptEnv{ID: tp.Shards[shard].Primary(), Topo: tp, Clock: int64(time.Second), Epsilon: time.Millisecond, Disk: s.disk}
	c := Config{Policy: policy, CommitWait: true, IdleTimeout: 5 * time.Second, DecisionTimeout: 500 * time.Millisecond}
	s.p = newParticipant(s.env, c, protocol.NewMetrics(), mvcc.New(mvcc.Options{SingleIntent: true}))
	for _, r := range rows {
		if err := s.p.store.Preload(s.key("r-"+r), []byte(r)); err != nil {
			t.Fatal(err)
		}
	}
	s.rg = ScanRange{Start: s.key("r-"), End: s.key("r.")}
	return s
}

// scan sends a read-write scan of the range limited to limit rows, and returns its answer, if
// it was answered at once.
func (s *scanScript) scan(txn storage.TxnID, age int64, limit int32) *ScanResp {
	rg := s.rg
	rg.Limit = limit
	s.p.onScan(scanCoord, &ScanReq{Txn: txn, Age: ts.Timestamp{Wall: age}, Scan: rg})
	return scanResps(s.env.Take())[txn]
}

// write prepares txn's writes (a "" value deletes) and returns its vote, if it voted.
func (s *scanScript) write(txn storage.TxnID, age int64, kv ...string) *PrepareResp {
	var ws []Write
	for i := 0; i < len(kv); i += 2 {
		ws = append(ws, Write{Key: s.key(kv[i]), Value: []byte(kv[i+1]), Delete: kv[i+1] == ""})
	}
	s.p.onPrepare(2, &PrepareReq{Txn: txn, Age: ts.Timestamp{Wall: age}, Writes: ws})
	s.env.Flush()
	return votes(s.env.Take())[txn]
}

// commit decides txn committed, at a timestamp above every one used so far.
func (s *scanScript) commit(txn storage.TxnID) {
	s.env.Clock += int64(10 * time.Millisecond)
	s.p.onDecide(2, &DecideReq{Txn: txn, Commit: true, TS: ts.Timestamp{Wall: s.env.Clock}})
	s.env.Flush()
}

// rowNames returns the names of rows ("r-a" → "a") joined with their values.
func (s *scanScript) rowNames(rows []wire.KV) []string {
	var out []string
	for _, r := range rows {
		out = append(out, r.Key[len(s.key("r-")):]+"="+string(r.Value))
	}
	return out
}

// TestScanLimitLocksOnlyItsRows: a read-write scan limited to two rows of a, b, c, d locks the
// range up to b only. A write to c, past its last row, goes on under every lock policy; writes
// at or before b (an update of b, an insert between a and b, an insert before a) conflict with
// it and wait or are refused as the policy says. Before, the scan locked all of [r-, r.) and
// the write to c waited for its decision.
func TestScanLimitLocksOnlyItsRows(t *testing.T) {
	for _, pol := range []locks.Policy{locks.WoundWait, locks.WaitDie, locks.NoWait, locks.Wait} {
		t.Run(pol.String(), func(t *testing.T) {
			s := newScanScript(t, pol, "a", "b", "c", "d")
			scanner := storage.MakeTxnID(int32(scanCoord), 1)
			r := s.scan(scanner, 100, 2)
			if r == nil || !r.OK {
				t.Fatalf("scan: %+v", r)
			}
			if got, want := s.rowNames(r.Rows), []string{"a=a", "b=b"}; !slices.Equal(got, want) {
				t.Fatalf("scan, limit 2: %v, want %v", got, want)
			}
			past := storage.MakeTxnID(2, 1)
			if v := s.write(past, 200, "r-c", "c2"); v == nil || !v.OK {
				t.Fatalf("a write past the scan's last row did not prepare: %+v", v)
			}
			for i, k := range []string{"r-b", "r-a5", "r-"} {
				w := storage.MakeTxnID(2, uint64(10+i))
				if v := s.write(w, 200, k, "x"); v != nil && v.OK {
					t.Errorf("a write to %s, within the scan's rows, prepared under its range lock", k)
				}
			}
			if got, want := s.p.locks.HeldRanges(scanner), []locks.Range{{Start: s.rg.Start, End: s.key("r-b") + "\x00"}}; !slices.Equal(got, want) {
				t.Errorf("range locks %v, want %v", got, want)
			}
		})
	}
}

// TestScanStepRelistsAfterWait: a step that waits for its range lock lists its part again once
// the lock is granted, since the transactions it waited for may have inserted or deleted rows
// there. The scan lists a and c, locks [r-, r-c] and waits for a writer that holds b
// exclusively without a version of it yet (an eager write, pending until prepare), or that is
// queued for b ahead of the scan (a prepare waiting behind a reader's shared lock). The writer
// commits b, so the scan must return a and b; its stale list returned a and c, missing b,
// committed before the scan's read: a phantom. A delete sends the scan on to another step,
// whose lock begins where the first one's ends; the vote records the one range they make.
func TestScanStepRelistsAfterWait(t *testing.T) {
	for _, pol := range []locks.Policy{locks.WoundWait, locks.Wait} {
		for _, how := range []string{"eager", "queued"} {
			t.Run(pol.String()+"/insert-"+how, func(t *testing.T) {
				s := newScanScript(t, pol, "a", "c", "d")
				holder, scanner := storage.MakeTxnID(2, 1), storage.MakeTxnID(int32(scanCoord), 1)
				holderAge := ts.Timestamp{Wall: 50}
				prep := &PrepareReq{Txn: holder, Age: holderAge}
				reader := storage.MakeTxnID(3, 1)
				if how == "eager" {
					s.p.onWrite(2, &WriteReq{Txn: holder, Age: holderAge, Seq: 1, Key: s.key("r-b"), Value: []byte("b")})
					prep.Seen = 1
				} else {
					s.p.onRead(3, &ReadReq{Txn: reader, Age: ts.Timestamp{Wall: 10}, Seq: 1, Key: s.key("r-b")})
					prep.Writes = []Write{{Key: s.key("r-b"), Value: []byte("b")}}
					s.p.onPrepare(2, prep)
				}
				s.env.Take()
				if r := s.scan(scanner, 100, 2); r != nil {
					t.Fatalf("the scan was answered while the holder held or awaited b: %+v", r)
				}
				if how == "eager" {
					s.p.onPrepare(2, prep)
				} else {
					s.p.onDecide(3, &DecideReq{Txn: reader})
				}
				s.env.Flush()
				if v := votes(s.env.Take())[holder]; v == nil || !v.OK {
					t.Fatalf("holder's vote: %+v", v)
				}
				s.commit(holder)
				r := scanResps(s.env.Take())[scanner]
				if r == nil || !r.OK {
					t.Fatalf("scan once the holder committed: %+v", r)
				}
				if got, want := s.rowNames(r.Rows), []string{"a=a", "b=b"}; !slices.Equal(got, want) {
					t.Fatalf("scan, limit 2: %v, want %v", got, want)
				}
			})
		}
		t.Run(pol.String()+"/delete", func(t *testing.T) {
			s := newScanScript(t, pol, "a", "b", "c", "d")
			holder, scanner := storage.MakeTxnID(2, 1), storage.MakeTxnID(int32(scanCoord), 1)
			if v := s.write(holder, 50, "r-a", ""); v == nil || !v.OK {
				t.Fatalf("holder's vote: %+v", v)
			}
			if r := s.scan(scanner, 100, 2); r != nil {
				t.Fatalf("the scan was answered under the holder's intent: %+v", r)
			}
			s.commit(holder)
			r := scanResps(s.env.Take())[scanner]
			if r == nil || !r.OK {
				t.Fatalf("scan once the holder committed: %+v", r)
			}
			if got, want := s.rowNames(r.Rows), []string{"b=b", "c=c"}; !slices.Equal(got, want) {
				t.Fatalf("scan, limit 2: %v, want %v", got, want)
			}
			cEnd := s.key("r-c") + "\x00"
			// The second step's part, granted at once, extends the first's.
			if got, want := s.p.locks.HeldRanges(scanner), []locks.Range{{Start: s.rg.Start, End: cEnd}}; !slices.Equal(got, want) {
				t.Fatalf("range locks %v, want %v", got, want)
			}
			if v := s.write(storage.MakeTxnID(2, 2), 200, "r-d", "d2"); v == nil || !v.OK {
				t.Fatalf("a write past the scan's last row did not prepare: %+v", v)
			}
			if v := s.write(storage.MakeTxnID(2, 3), 200, "r-c", "c2"); v != nil && v.OK {
				t.Fatal("a write to the scan's last row, read by its second step, prepared")
			}
			s.p.onPrepare(scanCoord, &PrepareReq{Txn: scanner, Age: ts.Timestamp{Wall: 100}, Seen: 1})
			s.env.Flush()
			if v := votes(s.env.Take())[scanner]; v == nil || !v.OK {
				t.Fatalf("scanner's vote: %+v", v)
			}
			var recorded []locks.Range
			if err := s.disk.Scan(rangeVotePrefix, rangeVoteEnd, func(k, v []byte) bool {
				if id, _ := recordTxn(rangeVotePrefix, k); id == scanner {
					recorded, _ = decodeRanges(v)
				}
				return true
			}); err != nil {
				t.Fatal(err)
			}
			if want := []locks.Range{{Start: s.rg.Start, End: cEnd}}; !slices.Equal(recorded, want) {
				t.Fatalf("range-vote record %v, want %v", recorded, want)
			}
		})
	}
}

// snapResps returns the SnapReadResps among msgs, by transaction.
func snapResps(msgs []nodetest.Sent) map[storage.TxnID]*SnapReadResp {
	return respsByTxn(msgs, func(r *SnapReadResp) storage.TxnID { return r.Txn })
}

// TestSnapScanLimitStopsAtItsRows: a read-only scan limited to two rows reads a, then a5, whose
// only version is above its snapshot and gives no row, then b, and stops: the transaction
// prepared on c, past its last row, does not hold it up. Before, the scan read every key of
// the range and waited on c's intent for a row it then cut away. A scan whose limit reaches c
// still waits for it, and sees it once it commits below the snapshot.
func TestSnapScanLimitStopsAtItsRows(t *testing.T) {
	s := newScanScript(t, locks.WoundWait, "a", "b", "c")
	at := ts.Timestamp{Wall: s.env.Clock + int64(time.Second)}
	if err := s.p.store.PutCommitted(s.key("r-a5"), mvcc.Version{TS: ts.Timestamp{Wall: at.Wall + 1}, Txn: storage.MakeTxnID(3, 1), Value: []byte("later")}); err != nil {
		t.Fatal(err)
	}
	writer := storage.MakeTxnID(2, 1)
	if v := s.write(writer, 50, "r-c", "c2"); v == nil || !v.OK || !v.TS.Less(at) {
		t.Fatalf("writer's vote: %+v (snapshot %v)", v, at)
	}
	snap := func(txn storage.TxnID, limit int32) *SnapReadResp {
		rg := s.rg
		rg.Limit = limit
		s.p.onSnapRead(scanCoord, &SnapReadReq{Txn: txn, At: at, Scan: &rg})
		return snapResps(s.env.Take())[txn]
	}
	short, long := storage.MakeTxnID(int32(scanCoord), 1), storage.MakeTxnID(int32(scanCoord), 2)
	r := snap(short, 2)
	if r == nil || r.Cause != "" {
		t.Fatalf("a scan limited to a and b waited on the intent on c: %+v", r)
	}
	if got, want := s.rowNames(r.Rows), []string{"a=a", "b=b"}; !slices.Equal(got, want) {
		t.Fatalf("snapshot scan, limit 2: %v, want %v", got, want)
	}
	if r := snap(long, 3); r != nil {
		t.Fatalf("a scan whose limit reaches c was answered under c's prepared intent: %+v", r)
	}
	s.commit(writer)
	r = snapResps(s.env.Take())[long]
	if r == nil || r.Cause != "" {
		t.Fatalf("the scan was not answered once the writer committed: %+v", r)
	}
	if got, want := s.rowNames(r.Rows), []string{"a=a", "b=b", "c=c2"}; !slices.Equal(got, want) {
		t.Fatalf("snapshot scan, limit 3: %v, want %v", got, want)
	}
}
