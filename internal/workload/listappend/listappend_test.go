package listappend

import (
	"errors"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/meridiandb/meridian/client"
	"github.com/meridiandb/meridian/internal/history"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/wire"
	"github.com/meridiandb/meridian/internal/workload"
	"github.com/meridiandb/meridian/internal/workload/memdb"
)

func testTopo(t *testing.T) *topo.Topology {
	t.Helper()
	tp, err := topo.FromPreset("k2-3region", topo.DefaultLayout())
	if err != nil {
		t.Fatal(err)
	}
	return tp
}

// model is a serial reference: the value of each key after the committed transactions so far.
type model struct {
	lists map[int64][]int64
	regs  map[int64]int64
}

// apply checks one committed transaction's reads against the model and applies its writes.
func (m *model) apply(ops []history.MicroOp, register bool) error {
	for _, op := range ops {
		switch op.F {
		case history.FRead:
			var want history.Value
			if register {
				if v, ok := m.regs[op.Key]; ok {
					want = history.IntValue(v)
				}
			} else {
				want = history.ListValue(append([]int64{}, m.lists[op.Key]...))
			}
			if !reflect.DeepEqual(op.Value, want) {
				return errors.New("read " + string(mustJSON(op)) + ", model has " + string(mustJSON(history.MicroOp{F: "r", Key: op.Key, Value: want})))
			}
		case history.FAppend:
			m.lists[op.Key] = append(m.lists[op.Key], op.Value.Int)
		case history.FWrite:
			m.regs[op.Key] = op.Value.Int
		}
	}
	return nil
}

func mustJSON(op history.MicroOp) []byte { b, _ := op.MarshalJSON(); return b }

// runSerial runs txns transactions round-robin over clients against a serial store (with
// injected aborts) and checks every committed transaction's reads against the model. corrupt,
// if set, tampers with the store halfway through.
func runSerial(t *testing.T, w *Workload, clients, txns int, corrupt func(*memdb.Store)) error {
	t.Helper()
	s := memdb.New()
	s.AbortCommits(0.2, 3)
	var dbs []*client.DB
	var gens []workload.Client
	for i := 0; i < clients; i++ {
		dbs = append(dbs, client.Open(s.Transport()))
		gens = append(gens, w.NewClient(i, topo.RegionID(i%3), rand.New(rand.NewPCG(uint64(i), 1))))
	}
	m := &model{lists: map[int64][]int64{}, regs: map[int64]int64{}}
	for i := 0; i < txns; i++ {
		if i == txns/2 && corrupt != nil {
			corrupt(s)
		}
		c := i % clients
		tx := gens[c].Next()
		for _, op := range tx.Invoke {
			if op.F == history.FRead && op.Value.Kind != history.None {
				t.Fatalf("invocation read carries a value: %s", mustJSON(op))
			}
		}
		err := client.RunTxnWith(dbs[c], client.TxnOptions{ReadOnly: tx.ReadOnly}, client.RetryPolicy{MaxAttempts: 50}, tx.Run)
		if err != nil {
			t.Fatalf("txn %d: %v", i, err)
		}
		if err := m.apply(tx.Result(), w.cfg.Register); err != nil {
			return err
		}
	}
	return nil
}

func TestSerialHistoriesMatchModel(t *testing.T) {
	for _, reg := range []bool{false, true} {
		w, err := New(testTopo(t), Config{Keys: 8, Register: reg})
		if err != nil {
			t.Fatal(err)
		}
		if err := runSerial(t, w, 5, 2000, nil); err != nil {
			t.Errorf("register=%v: %v", reg, err)
		}
	}
}

// The model check must catch a store that lost a write.
func TestModelCatchesLostWrite(t *testing.T) {
	for _, reg := range []bool{false, true} {
		w, _ := New(testTopo(t), Config{Keys: 3, Register: reg, ReadRatio: 0.3})
		err := runSerial(t, w, 3, 400, func(s *memdb.Store) {
			for k := int64(0); k < 3; k++ {
				s.Delete(w.KeyName(k))
			}
		})
		if err == nil {
			t.Errorf("register=%v: a wiped store went unnoticed", reg)
		}
	}
}

func TestGeneratorShape(t *testing.T) {
	tp := testTopo(t)
	w, err := New(tp, Config{Keys: 30, MinOps: 2, MaxOps: 3, RegionLocalRatio: 1})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int64]bool{}
	a := w.NewClient(0, 1, rand.New(rand.NewPCG(5, 5)))
	for i := 0; i < 500; i++ {
		tx := a.Next()
		if n := len(tx.Invoke); n < 2 || n > 3 {
			t.Fatalf("%d micro-ops, want 2..3", n)
		}
		ro := true
		for _, op := range tx.Invoke {
			if tp.HomeOf(w.KeyName(op.Key)) != 1 {
				t.Fatalf("key %d is homed in region %d, client in region 1 with region-local ratio 1", op.Key, tp.HomeOf(w.KeyName(op.Key)))
			}
			if op.F == history.FAppend {
				ro = false
				if seen[op.Value.Int] {
					t.Fatalf("value %d appended twice", op.Value.Int)
				}
				seen[op.Value.Int] = true
			}
		}
		if ro != tx.ReadOnly {
			t.Fatalf("ReadOnly=%v for %s", tx.ReadOnly, tx.Type)
		}
	}
	regions := w.KeyRegions()
	if len(regions) != 30 || regions[4] != int(tp.HomeOf(w.KeyName(4))) {
		t.Fatalf("KeyRegions: %v", regions)
	}
}

func TestDeterministic(t *testing.T) {
	draw := func() [][]history.MicroOp {
		w, _ := New(testTopo(t), Config{})
		c := w.NewClient(0, 0, rand.New(rand.NewPCG(11, 11)))
		var out [][]history.MicroOp
		for i := 0; i < 100; i++ {
			out = append(out, c.Next().Invoke)
		}
		return out
	}
	if a, b := draw(), draw(); !reflect.DeepEqual(a, b) {
		t.Fatal("equal seeds gave different transactions")
	}
}

func TestBadConfig(t *testing.T) {
	for _, c := range []Config{{Keys: -1}, {MinOps: 3, MaxOps: 2}, {ReadRatio: 2}, {RegionLocalRatio: -1}} {
		if _, err := New(testTopo(t), c); err == nil {
			t.Errorf("accepted %+v", c)
		}
	}
}

func TestListEncoding(t *testing.T) {
	for _, l := range [][]int64{{}, {1}, {1, -2, 300, 1 << 40}} {
		got, err := DecodeList(EncodeList(l))
		if err != nil || !reflect.DeepEqual(got, l) {
			t.Errorf("round trip of %v: %v, %v", l, got, err)
		}
	}
	if _, err := DecodeList([]byte{0x80}); err == nil {
		t.Error("truncated varint decoded")
	}
}

// TestReadBack: with ReadBack every writing transaction ends, for each key it wrote, with a read
// of the key and another write of it; the reads, served by the store after the transaction's
// writes, must show them (the serial model checks each read against what came before it).
func TestReadBack(t *testing.T) {
	for _, reg := range []bool{false, true} {
		w, err := New(testTopo(t), Config{Keys: 8, Register: reg, ReadBack: true})
		if err != nil {
			t.Fatal(err)
		}
		gen := w.NewClient(0, 0, rand.New(rand.NewPCG(7, 1)))
		for range 200 {
			tx := gen.Next()
			if tx.ReadOnly {
				continue
			}
			written := map[int64]bool{}
			n := len(tx.Invoke)
			for _, op := range tx.Invoke {
				if op.F != history.FRead {
					written[op.Key] = true
				}
			}
			tail := tx.Invoke[n-2*len(written):]
			for i := 0; i < len(tail); i += 2 {
				if tail[i].F != history.FRead || tail[i+1].F == history.FRead || tail[i].Key != tail[i+1].Key || !written[tail[i].Key] {
					t.Fatalf("register=%v: transaction %s does not end with a read and a write of each key it wrote", reg, mustJSONs(tx.Invoke))
				}
				delete(written, tail[i].Key)
			}
		}
		if err := runSerial(t, w, 5, 2000, nil); err != nil {
			t.Errorf("register=%v: %v", reg, err)
		}
	}
}

func mustJSONs(ops []history.MicroOp) string {
	s := ""
	for _, op := range ops {
		s += string(mustJSON(op)) + " "
	}
	return s
}

// scriptedAborts aborts the requests abort picks, told whether each writes and reads, as a
// store that aborts the transaction there would.
type scriptedAborts struct {
	*memdb.Transport
	abort func(writes, reads bool) bool
	// refuse answers the picked requests as bad arguments instead: refused, nothing applied.
	refuse bool
}

func (a *scriptedAborts) RoundTrip(req *wire.ClientRequest) (*wire.ClientReply, error) {
	writes, reads := req.Op == wire.OpPut, req.Op == wire.OpGet
	for _, op := range req.Batch {
		writes = writes || op.Op == wire.OpPut
		reads = reads || op.Op == wire.OpGet
	}
	switch pick := a.abort(writes, reads); {
	case pick && a.refuse:
		return &wire.ClientReply{Txn: req.Txn, Seq: req.Seq, Code: wire.CodeBadArgument, Error: "value too large (test)"}, nil
	case pick:
		return &wire.ClientReply{Txn: req.Txn, Seq: req.Seq, Code: wire.CodeAborted, Cause: "test"}, nil
	}
	return a.Transport.RoundTrip(req)
}

// abortReadsAfterWrite aborts the first read a transaction sends after one of its writes (the
// read-back's).
func abortReadsAfterWrite() *scriptedAborts {
	wrote := false
	return &scriptedAborts{Transport: memdb.New().Transport(), abort: func(writes, reads bool) bool {
		if reads && wrote {
			wrote = false
			return true
		}
		wrote = wrote || writes
		return false
	}}
}

// abortFirstWrite aborts a transaction's first request that writes: the write was sent, and
// may have reached the store.
func abortFirstWrite() *scriptedAborts {
	done := false
	return &scriptedAborts{Transport: memdb.New().Transport(), abort: func(writes, _ bool) bool {
		if writes && !done {
			done = true
			return true
		}
		return false
	}}
}

// refuseFirstWrite refuses a transaction's first request that writes as a bad argument (a
// value over the limit): the store applied nothing of it.
func refuseFirstWrite() *scriptedAborts {
	a := abortFirstWrite()
	a.refuse = true
	return a
}

// eachAbortedAttempt runs 50 of the workload's read-write transactions, one attempt each, on a
// store that aborts what abort picks, and hands each failed attempt to check.
func eachAbortedAttempt(t *testing.T, cfg Config, store func() *scriptedAborts, check func(tx workload.Txn)) {
	t.Helper()
	w, err := New(testTopo(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	gen := w.NewClient(0, 0, rand.New(rand.NewPCG(7, 1)))
	checked := 0
	for range 50 {
		tx := gen.Next()
		if tx.ReadOnly {
			continue
		}
		db := client.Open(store())
		if err := client.RunTxnWith(db, client.TxnOptions{}, client.RetryPolicy{MaxAttempts: 1}, tx.Run); err == nil {
			t.Fatalf("transaction %s committed, want it aborted", mustJSONs(tx.Invoke))
		}
		check(tx)
		checked++
	}
	if checked == 0 {
		t.Fatal("no read-write transaction generated")
	}
}

// writesOf returns the micro-ops of ops that write.
func writesOf(ops []history.MicroOp) []history.MicroOp {
	var out []history.MicroOp
	for _, op := range ops {
		if op.F != history.FRead {
			out = append(out, op)
		}
	}
	return out
}

// TestAbortedAttemptListsOnlyWritesSent: an attempt aborted at its read-back lists the writes it
// sent and the reads it completed, not the read-back's reads and writes, which never went. It
// listed every write of the transaction, which swelled the final read's count of failed writes.
func TestAbortedAttemptListsOnlyWritesSent(t *testing.T) {
	eachAbortedAttempt(t, Config{Keys: 8, ReadBack: true}, abortReadsAfterWrite, func(tx workload.Txn) {
		written := map[int64]bool{}
		for _, op := range writesOf(tx.Invoke) {
			written[op.Key] = true
		}
		want := writesOf(tx.Invoke[:len(tx.Invoke)-2*len(written)])
		if got := writesOf(tx.Result()); !reflect.DeepEqual(got, want) {
			t.Fatalf("aborted at its read-back, transaction %s lists writes %s, want only those it sent: %s", mustJSONs(tx.Invoke), mustJSONs(got), mustJSONs(want))
		}
	})
}

// TestAbortedAttemptListsTheWriteItSent: an attempt whose write was refused lists that write:
// it went to the store, and a history without it could hide the write taking effect after all.
func TestAbortedAttemptListsTheWriteItSent(t *testing.T) {
	eachAbortedAttempt(t, Config{Keys: 8}, abortFirstWrite, func(tx workload.Txn) {
		if len(writesOf(tx.Result())) == 0 {
			t.Fatalf("aborted at its first write, transaction %s lists no write", mustJSONs(tx.Invoke))
		}
	})
}

// TestRefusedWriteIsNotListed: a Put refused as a bad argument was not applied, so the attempt
// does not list it (it would count as a failed write the final read looks for). One at a time:
// a refused PutMany stays listed (TestSplitPutManyRefusalListsTheChunkSent).
func TestRefusedWriteIsNotListed(t *testing.T) {
	eachAbortedAttempt(t, Config{Keys: 8, BatchRatio: -1}, refuseFirstWrite, func(tx workload.Txn) {
		if w := writesOf(tx.Result()); len(w) != 0 {
			t.Fatalf("its first write refused, transaction %s lists writes %s", mustJSONs(tx.Invoke), mustJSONs(w))
		}
	})
}

// TestSplitPutManyRefusalListsTheChunkSent: a PutMany whose rows exceed client.MaxScanBytes
// goes as several requests, and "one that needs several requests keeps the requests before the
// refused one written" (client.Put). Refused at its second request, the attempt still sent its
// first, which reached the store, and must list those writes.
func TestSplitPutManyRefusalListsTheChunkSent(t *testing.T) {
	w, err := New(testTopo(t), Config{Keys: 8})
	if err != nil {
		t.Fatal(err)
	}
	store := memdb.New()
	// Five lists of ~0.9 MiB: within MaxValueBytes each, over MaxScanBytes (4 MiB) together.
	big := make([]int64, 300_000)
	for i := range big {
		big[i] = 1_000_000
	}
	const keys = 5
	var ops []history.MicroOp
	for k := range int64(keys) {
		store.Put(w.names[k], EncodeList(big))
		ops = append(ops, history.MicroOp{F: history.FAppend, Key: k, Value: history.IntValue(k + 1)})
	}
	b := &body{w: w, ops: ops, batch: true}
	seen := 0 // requests that write
	tr := &scriptedAborts{Transport: store.Transport(), refuse: true, abort: func(writes, _ bool) bool {
		if writes {
			seen++
		}
		return writes && seen == 2
	}}
	db := client.Open(tr)
	if err := client.RunTxnWith(db, client.TxnOptions{}, client.RetryPolicy{MaxAttempts: 1}, b.run); err == nil {
		t.Fatal("the transaction committed, want its second write request refused")
	}
	if seen < 2 {
		t.Fatalf("the PutMany went as %d write request(s), want it split", seen)
	}
	if got := writesOf(b.result()); len(got) == 0 {
		t.Fatalf("the first of the PutMany's requests reached the store, but the attempt lists no write (result %s)", mustJSONs(b.result()))
	}
}

// TestMaxWritesPerKey: with a limit, no key takes more writes than the limit plus what one
// transaction drawn before its retirement adds; a replacement key keeps its slot's shard and
// region; the final reads read every key drawn, once; and serial histories still match the
// model, read-back included.
func TestMaxWritesPerKey(t *testing.T) {
	const limit, keys, maxOps = 5, 8, 4
	tp := testTopo(t)
	for _, c := range []Config{{Keys: keys, MaxOps: maxOps, MinOps: 1, MaxWritesPerKey: limit}, {Keys: keys, MaxOps: maxOps, MinOps: 1, MaxWritesPerKey: limit, Theta: 0.9, ReadBack: true}} {
		w, err := New(tp, c)
		if err != nil {
			t.Fatal(err)
		}
		g := w.NewClient(0, 0, rand.New(rand.NewPCG(1, 2)))
		writes := map[int64]int{}
		for range 2000 {
			for _, op := range g.Next().Invoke {
				if op.F != history.FRead {
					writes[op.Key]++
				}
			}
		}
		perTxn := maxOps
		if c.ReadBack {
			perTxn *= 2
		}
		for k, n := range writes {
			if n > limit+perTxn {
				t.Errorf("key %d took %d writes, past the limit %d and one transaction's %d", k, n, limit, perTxn)
			}
			slot := k % keys
			if name, first := w.KeyName(k), w.KeyName(slot); tp.HomeOf(name) != tp.HomeOf(first) || tp.ShardOf(name) != tp.ShardOf(first) {
				t.Errorf("key %d (slot %d) lives on shard %d of region %d, its slot's first key on shard %d of region %d",
					k, slot, tp.ShardOf(name), tp.HomeOf(name), tp.ShardOf(first), tp.HomeOf(first))
			}
		}
		if len(writes) <= keys {
			t.Fatalf("%d keys written in 2000 transactions with a limit of %d writes each: none was replaced", len(writes), limit)
		}
		read := map[int64]int{}
		for _, tx := range w.FinalReads() {
			for _, op := range tx.Invoke {
				read[op.Key]++
			}
		}
		regions := w.KeyRegions()
		for k := range writes {
			if read[k] != 1 {
				t.Errorf("the final reads read written key %d %d times, want once", k, read[k])
			}
			if _, ok := regions[k]; !ok {
				t.Errorf("KeyRegions leaves out written key %d", k)
			}
		}
		if err := runSerial(t, w, 5, 2000, nil); err != nil {
			t.Errorf("%+v: %v", c, err)
		}
	}
}
