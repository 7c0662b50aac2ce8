package storage_test

import (
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/meridiandb/meridian/internal/storage"
	"github.com/meridiandb/meridian/internal/storage/locks"
	"github.com/meridiandb/meridian/internal/storage/mvcc"
	"github.com/meridiandb/meridian/internal/storage/txnrec"
	"github.com/meridiandb/meridian/internal/ts"
)

// scenario is a conformance case: build state through the public API, persist it through the
// backend, then check the live store and the store recovered after a restart the same way.
type scenario struct {
	name  string
	opts  mvcc.Options
	build func(t *testing.T, s *mvcc.Store)
	check func(t *testing.T, s *mvcc.Store)
}

type getCase struct {
	key   string
	at    int64
	found bool
	value string
	tomb  bool
}

func checkGets(t *testing.T, s *mvcc.Store, cases []getCase) {
	t.Helper()
	for _, c := range cases {
		v, ok := s.Get(c.key, at(c.at))
		if ok != c.found || (ok && (string(v.Value) != c.value || v.Tombstone != c.tomb)) {
			t.Errorf("Get(%q, %d) = %q tomb=%v found=%v, want %q tomb=%v found=%v", c.key, c.at, v.Value, v.Tombstone, ok, c.value, c.tomb, c.found)
		}
	}
}

func mustPut(t *testing.T, s *mvcc.Store, key string, v mvcc.Version) {
	t.Helper()
	if err := s.PutIntent(key, v); err != nil {
		t.Fatalf("PutIntent(%q, %v): %v", key, v.TS, err)
	}
}

func mustCommit(t *testing.T, s *mvcc.Store, key string, id storage.TxnID, c int64) {
	t.Helper()
	if err := s.Commit(key, id, at(c)); err != nil {
		t.Fatalf("Commit(%q, %v, %d): %v", key, id, c, err)
	}
}

func scenarios() []scenario {
	return []scenario{
		{
			name: "visibility at a timestamp",
			build: func(t *testing.T, s *mvcc.Store) {
				for _, c := range []struct {
					wall int64
					val  string
					tomb bool
				}{{10, "a", false}, {20, "b", false}, {40, "", true}, {50, "c", false}} {
					if err := s.PutCommitted("k", mvcc.Version{TS: at(c.wall), Txn: txn(uint64(c.wall)), Value: []byte(c.val), Tombstone: c.tomb}); err != nil {
						t.Fatal(err)
					}
				}
				mustPut(t, s, "k", mvcc.Version{TS: at(30), Txn: txn(30), Value: []byte("intent")})
				mustPut(t, s, "k", mvcc.Version{TS: at(35), Txn: txn(35), Value: []byte("aborted")})
				s.AbortIntent("k", txn(35))
				if err := s.PutCommitted("other", mvcc.Version{TS: at(5), Txn: txn(5), Value: []byte("o")}); err != nil {
					t.Fatal(err)
				}
			},
			check: func(t *testing.T, s *mvcc.Store) {
				checkGets(t, s, []getCase{
					{"k", 9, false, "", false},
					{"k", 10, true, "a", false},
					{"k", 19, true, "a", false},
					{"k", 20, true, "b", false},
					{"k", 30, true, "b", false}, // intent at 30 invisible
					{"k", 36, true, "b", false}, // aborted at 35 invisible
					{"k", 45, true, "", true},   // tombstone
					{"k", 1000, true, "c", false},
					{"missing", 1000, false, "", false},
				})
				var keys []string
				s.Scan("", "", at(45), 0, func(k string, v mvcc.Version) bool { keys = append(keys, k+"="+string(v.Value)); return true })
				if want := []string{"other=o"}; !slices.Equal(keys, want) {
					t.Errorf("Scan at 45 = %v, want %v (tombstoned key skipped)", keys, want)
				}
				keys = nil
				s.Scan("", "", at(60), 1, func(k string, v mvcc.Version) bool { keys = append(keys, k+"="+string(v.Value)); return true })
				if want := []string{"k=c"}; !slices.Equal(keys, want) {
					t.Errorf("Scan at 60 limit 1 = %v, want %v", keys, want)
				}
			},
		},
		{
			name: "intent states: commit in place, commit at a pushed ts, abort",
			build: func(t *testing.T, s *mvcc.Store) {
				mustPut(t, s, "a", mvcc.Version{TS: at(10), Txn: txn(1), Value: []byte("a1"), Meta: []byte("recorder=3")})
				mustPut(t, s, "b", mvcc.Version{TS: at(10), Txn: txn(1), Value: []byte("b1")})
				mustPut(t, s, "c", mvcc.Version{TS: at(12), Txn: txn(2), Value: []byte("c2")})
				mustPut(t, s, "d", mvcc.Version{TS: at(14), Txn: txn(3), Value: []byte("d3")})
				mustCommit(t, s, "a", txn(1), 10) // K2: in place
				mustCommit(t, s, "b", txn(1), 10)
				mustCommit(t, s, "c", txn(2), 25) // CRDB: pushed
				if !s.AbortIntent("d", txn(3)) {
					t.Fatal("AbortIntent found no intent")
				}
				if err := s.UpdateMeta("a", at(10), txn(1), []byte("epoch=7")); err != nil {
					t.Fatal(err)
				}
			},
			check: func(t *testing.T, s *mvcc.Store) {
				checkGets(t, s, []getCase{
					{"a", 10, true, "a1", false},
					{"c", 12, false, "", false},
					{"c", 24, false, "", false},
					{"c", 25, true, "c2", false},
					{"d", 100, false, "", false},
				})
				if v, _ := s.Get("a", at(10)); string(v.Meta) != "epoch=7" {
					t.Errorf("meta = %q, want epoch=7", v.Meta)
				}
				vs := s.Versions("d")
				if len(vs) != 1 || vs[0].State != mvcc.Aborted {
					t.Errorf("d versions = %+v, want one aborted", vs)
				}
				if len(s.PendingTxns()) != 0 {
					t.Errorf("pending txns %v, want none", s.PendingTxns())
				}
				if err := s.Commit("d", txn(3), at(14)); !errors.Is(err, mvcc.ErrNoIntent) {
					t.Errorf("committing an aborted intent: err %v, want ErrNoIntent", err)
				}
				if err := s.Commit("c", txn(2), at(25)); err != nil {
					t.Errorf("duplicate commit: %v, want no-op", err)
				}
			},
		},
		{
			name: "multiple intents per key (K2 write stream)",
			build: func(t *testing.T, s *mvcc.Store) {
				if err := s.PutCommitted("k", mvcc.Version{TS: at(5), Txn: txn(9), Value: []byte("base")}); err != nil {
					t.Fatal(err)
				}
				for i, w := range []int64{20, 10, 30} {
					mustPut(t, s, "k", mvcc.Version{TS: at(w), Txn: txn(uint64(i + 1)), Value: []byte{byte('a' + i)}})
				}
				// A transaction rewriting its key replaces its intent.
				mustPut(t, s, "k", mvcc.Version{TS: at(10), Txn: txn(2), Value: []byte("B")})
			},
			check: func(t *testing.T, s *mvcc.Store) {
				vis := s.VisibleAt("k", at(25), 0)
				if !vis.Found || string(vis.Version.Value) != "base" {
					t.Fatalf("VisibleAt 25 = %+v, want base", vis)
				}
				var pend []int64
				for _, p := range vis.Pending {
					pend = append(pend, p.TS.Wall)
				}
				if want := []int64{20, 10}; !slices.Equal(pend, want) {
					t.Errorf("pending = %v, want %v (newest first, 30 skipped)", pend, want)
				}
				if own := s.VisibleAt("k", at(1), txn(3)); !own.Found || string(own.Version.Value) != "c" {
					t.Errorf("reader's own intent not visible: %+v", own)
				}
				if n := len(s.Versions("k")); n != 4 {
					t.Errorf("%d versions, want 4", n)
				}
				if got, want := s.PendingTxns(), []storage.TxnID{txn(1), txn(2), txn(3)}; !slices.Equal(got, want) {
					t.Errorf("pending txns %v, want %v", got, want)
				}
			},
		},
		{
			name: "single intent per key (CRDB, Spanner)",
			opts: mvcc.Options{SingleIntent: true},
			build: func(t *testing.T, s *mvcc.Store) {
				mustPut(t, s, "k", mvcc.Version{TS: at(10), Txn: txn(1), Value: []byte("x")})
				var ie *mvcc.IntentError
				if err := s.PutIntent("k", mvcc.Version{TS: at(20), Txn: txn(2)}); !errors.As(err, &ie) || ie.Holder != txn(1) {
					t.Fatalf("second intent: err %v, want IntentError held by %v", err, txn(1))
				}
				mustPut(t, s, "k", mvcc.Version{TS: at(15), Txn: txn(1), Value: []byte("y")}) // own rewrite moves it
				mustPut(t, s, "j", mvcc.Version{TS: at(10), Txn: txn(3), Value: []byte("j")})
				s.AbortIntent("j", txn(3))
				mustPut(t, s, "j", mvcc.Version{TS: at(11), Txn: txn(4), Value: []byte("j4")}) // abort frees the key
			},
			check: func(t *testing.T, s *mvcc.Store) {
				vs := s.Versions("k")
				if len(vs) != 1 || vs[0].TS != at(15) || string(vs[0].Value) != "y" {
					t.Errorf("k versions %+v, want the one intent at 15", vs)
				}
				var ie *mvcc.IntentError
				if err := s.PutIntent("j", mvcc.Version{TS: at(30), Txn: txn(5)}); !errors.As(err, &ie) || ie.Holder != txn(4) {
					t.Errorf("intent on j: err %v, want IntentError held by %v", err, txn(4))
				}
			},
		},
		{
			name: "read watermark",
			opts: mvcc.Options{ReadWatermarkLimit: 4},
			build: func(t *testing.T, s *mvcc.Store) {
				mustPut(t, s, "w", mvcc.Version{TS: at(1), Txn: txn(1), Value: []byte("v")})
			},
			check: func(t *testing.T, s *mvcc.Store) {
				// Watermarks are volatile: a (recovered or fresh) store starts at zero.
				if rt := s.ReadWatermark("a"); !rt.IsZero() {
					t.Fatalf("fresh watermark %v, want zero", rt)
				}
				s.BumpReadWatermark("a", at(10))
				s.BumpReadWatermark("a", at(5)) // never lowers
				s.BumpReadWatermark("phantom", at(7))
				if rt := s.ReadWatermark("a"); rt != at(10) {
					t.Errorf("RT(a) = %v, want 10", rt)
				}
				if rt := s.ReadWatermark("phantom"); rt != at(7) {
					t.Errorf("RT(phantom) = %v, want 7 (reads of absent keys are tracked)", rt)
				}
				// Raising the floor forgets entries below it but never lowers any watermark.
				s.RaiseReadFloor(at(8))
				if rt := s.ReadWatermark("phantom"); rt != at(8) {
					t.Errorf("RT(phantom) after floor 8 = %v, want 8", rt)
				}
				if rt := s.ReadWatermark("a"); rt != at(10) {
					t.Errorf("RT(a) after floor 8 = %v, want 10", rt)
				}
				if n := s.TrackedReadWatermarks(); n != 1 {
					t.Errorf("tracked = %d, want 1", n)
				}
				// Bounded memory: past the limit the oldest half is folded into the floor.
				for i, k := range []string{"b", "c", "d", "e", "f"} {
					s.BumpReadWatermark(k, at(int64(20+i)))
				}
				if n := s.TrackedReadWatermarks(); n > 4 {
					t.Errorf("tracked = %d, want <= limit 4", n)
				}
				want := map[string]int64{"a": 10, "b": 20, "c": 21, "d": 22, "e": 23, "f": 24}
				for k, w := range want {
					if rt := s.ReadWatermark(k); rt.Less(at(w)) {
						t.Errorf("RT(%s) = %v after eviction, lower than the %d it was bumped to", k, rt, w)
					}
				}
				if rt := s.ReadWatermark("never-read"); rt != s.ReadFloor() {
					t.Errorf("RT(never-read) = %v, want the floor %v", rt, s.ReadFloor())
				}
				if len(s.Versions("w")) != 1 {
					t.Errorf("floor raising dropped a key with versions")
				}
			},
		},
		{
			name: "GC keeps the newest committed version at or below the safe point",
			build: func(t *testing.T, s *mvcc.Store) {
				for _, w := range []int64{10, 20, 30} {
					if err := s.PutCommitted("k", mvcc.Version{TS: at(w), Txn: txn(uint64(w)), Value: []byte{byte(w)}}); err != nil {
						t.Fatal(err)
					}
				}
				mustPut(t, s, "k", mvcc.Version{TS: at(15), Txn: txn(15), Value: []byte("aborted")})
				s.AbortIntent("k", txn(15))
				mustPut(t, s, "k", mvcc.Version{TS: at(18), Txn: txn(18), Value: []byte("pending")})
				if err := s.PutCommitted("only", mvcc.Version{TS: at(5), Txn: txn(5), Value: []byte("o")}); err != nil {
					t.Fatal(err)
				}
				if err := s.PutCommitted("gone", mvcc.Version{TS: at(5), Txn: txn(5), Value: []byte("g")}); err != nil {
					t.Fatal(err)
				}
				if err := s.PutCommitted("gone", mvcc.Version{TS: at(6), Txn: txn(6), Tombstone: true}); err != nil {
					t.Fatal(err)
				}
				st := s.CollectGarbage(at(25), math.MaxInt)
				if st.VersionsRemoved != 3 {
					t.Errorf("GC removed %d versions, want 3 (k@10, k@15 aborted, gone@5)", st.VersionsRemoved)
				}
			},
			check: func(t *testing.T, s *mvcc.Store) {
				var got []int64
				for _, v := range s.Versions("k") {
					got = append(got, v.TS.Wall)
				}
				if want := []int64{18, 20, 30}; !slices.Equal(got, want) {
					t.Errorf("k versions after GC %v, want %v (intent kept)", got, want)
				}
				checkGets(t, s, []getCase{
					{"k", 25, true, "\x14", false},
					{"k", 30, true, "\x1e", false},
					{"only", 25, true, "o", false},
					{"gone", 25, true, "", true},
				})
			},
		},
		{
			name: "deletes and keys with awkward bytes",
			build: func(t *testing.T, s *mvcc.Store) {
				for i, k := range []string{"", "\x00", "\x00\x01", "a\x00b", "\xff\xff"} {
					if err := s.PutCommitted(k, mvcc.Version{TS: at(int64(i + 1)), Txn: txn(1), Value: []byte(k + "!")}); err != nil {
						t.Fatal(err)
					}
				}
				mustPut(t, s, "a\x00b", mvcc.Version{TS: at(100), Txn: txn(2), Tombstone: true, Value: []byte("ignored")})
				mustCommit(t, s, "a\x00b", txn(2), 100)
			},
			check: func(t *testing.T, s *mvcc.Store) {
				var keys []string
				s.Scan("", "", at(1000), 0, func(k string, v mvcc.Version) bool {
					if string(v.Value) != k+"!" {
						t.Errorf("key %q has value %q", k, v.Value)
					}
					keys = append(keys, k)
					return true
				})
				if want := []string{"", "\x00", "\x00\x01", "\xff\xff"}; !slices.Equal(keys, want) {
					t.Errorf("scan keys %q, want %q", keys, want)
				}
				checkGets(t, s, []getCase{{"a\x00b", 99, true, "a\x00b!", false}, {"a\x00b", 100, true, "", true}})
			},
		},
	}
}

func TestConformance(t *testing.T) {
	for _, b := range backends() {
		for _, sc := range scenarios() {
			t.Run(b.name+"/"+sc.name, func(t *testing.T) {
				be := b.open(t)
				live := mvcc.New(sc.opts)
				sc.build(t, live)
				persist(t, be, live.TakeWrites())
				want := dump(live)
				if sc.check != nil {
					t.Run("live", func(t *testing.T) { sc.check(t, live) })
				}
				be = b.restart(t, be)
				rec, err := mvcc.Recover(be, sc.opts)
				if err != nil {
					t.Fatalf("recover: %v", err)
				}
				if got := dump(rec); got != want {
					t.Fatalf("recovered state differs:\n got:\n%s\nwant:\n%s", got, want)
				}
				if sc.check != nil {
					t.Run("recovered", func(t *testing.T) { sc.check(t, rec) })
				}
			})
		}
	}
}

// TestConformanceLocksAfterRestart: a 2PL participant's exclusive locks are volatile; after a
// restart it re-acquires them for its prepared transactions from their recovered intents. Each
// policy must then decide exactly as it did before the crash.
func TestConformanceLocksAfterRestart(t *testing.T) {
	type req struct {
		txn  storage.TxnID
		mode locks.Mode
		pol  locks.Policy
		age  int64
	}
	type want struct {
		out    locks.Outcome
		reason string
		wound  int
	}
	cases := []struct {
		r req
		w want
	}{
		{req{txn(10), locks.Shared, locks.NoWait, 5}, want{locks.Aborted, locks.ReasonNoWait, 0}},
		{req{txn(11), locks.Shared, locks.WaitDie, 1}, want{locks.Waiting, "", 0}}, // older than holder (age 2)
		{req{txn(12), locks.Shared, locks.WaitDie, 9}, want{locks.Aborted, locks.ReasonWaitDie, 0}},
		{req{txn(13), locks.Exclusive, locks.WoundWait, 1}, want{locks.Waiting, "", 1}}, // wounds the holder
		{req{txn(14), locks.Exclusive, locks.WoundWait, 9}, want{locks.Waiting, "", 0}},
	}
	ageOf := map[storage.TxnID]int64{txn(1): 2}
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			be := b.open(t)
			s := mvcc.New(mvcc.Options{SingleIntent: true})
			tab := locks.New()
			// Prepared txn 1 holds X on "k" and has its intent persisted.
			if r := tab.Acquire(txn(1), "k", locks.Exclusive, locks.NoWait, ts.New(ageOf[txn(1)])); r.Outcome != locks.Granted {
				t.Fatalf("prepare lock: %v", r.Outcome)
			}
			mustPut(t, s, "k", mvcc.Version{TS: at(50), Txn: txn(1), Value: []byte("p")})
			persist(t, be, s.TakeWrites())

			decide := func(tab *locks.Table) []want {
				var out []want
				for _, c := range cases {
					r := tab.Acquire(c.r.txn, "k", c.r.mode, c.r.pol, ts.New(c.r.age))
					out = append(out, want{r.Outcome, r.Reason, len(r.Wound)})
					tab.Release(c.r.txn)
				}
				return out
			}
			before := decide(tab)

			be = b.restart(t, be)
			rec, err := mvcc.Recover(be, mvcc.Options{SingleIntent: true})
			if err != nil {
				t.Fatal(err)
			}
			tab2 := locks.New()
			for _, id := range rec.PendingTxns() {
				for _, k := range rec.IntentKeys(id) {
					if r := tab2.Acquire(id, k, locks.Exclusive, locks.NoWait, ts.New(ageOf[id])); r.Outcome != locks.Granted {
						t.Fatalf("re-acquire %v on %q: %v", id, k, r.Outcome)
					}
				}
			}
			after := decide(tab2)
			for i, c := range cases {
				if before[i] != c.w || after[i] != c.w {
					t.Errorf("request %d (%v): before crash %+v, after %+v, want %+v", i, c.r.pol, before[i], after[i], c.w)
				}
			}
		})
	}
}

func TestConformanceTxnRecords(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			be := b.open(t)
			tab := txnrec.New()
			if _, err := tab.Create(txn(1), []byte("coord=2")); err != nil {
				t.Fatal(err)
			}
			if _, err := tab.Create(txn(2), nil); err != nil {
				t.Fatal(err)
			}
			var woken []txnrec.Record
			if _, decided := tab.Wait(txn(1), func(r txnrec.Record) { woken = append(woken, r) }); decided {
				t.Fatal("undecided txn reported decided")
			}
			if err := tab.Decide(txn(1), txnrec.Committed, at(77), 4); err != nil {
				t.Fatal(err)
			}
			// Not durable yet: still in progress to everyone.
			if r, _ := tab.Get(txn(1)); r.Status != txnrec.InProgress || len(woken) != 0 {
				t.Fatalf("decision visible before persist: %v, %d woken", r.Status, len(woken))
			}
			persist(t, be, tab.TakeWrites())
			if n := tab.Decided(txn(1), tab.Version(txn(1))); n != 1 || len(woken) != 1 || woken[0].Status != txnrec.Committed || woken[0].Epoch != 4 {
				t.Fatalf("Decided woke %d: %+v", n, woken)
			}
			if err := tab.Decide(txn(1), txnrec.Aborted, ts.Zero, 0); !errors.Is(err, txnrec.ErrFinal) {
				t.Errorf("aborting a committed txn: %v, want ErrFinal", err)
			}
			if err := tab.Decide(txn(3), txnrec.Aborted, ts.Zero, 0); err != nil { // never created here
				t.Fatal(err)
			}
			if err := tab.Stage(txn(2), at(90), []byte("inflight=a,b")); err != nil {
				t.Fatal(err)
			}
			persist(t, be, tab.TakeWrites())
			tab.Decided(txn(3), tab.Version(txn(3)))
			tab.Decided(txn(2), tab.Version(txn(2)))
			want := dumpRecords(tab)

			be = b.restart(t, be)
			rec, err := txnrec.Recover(be)
			if err != nil {
				t.Fatal(err)
			}
			if got := dumpRecords(rec); got != want {
				t.Fatalf("recovered records:\n%s\nwant:\n%s", got, want)
			}
			if r, decided := rec.Wait(txn(1), nil); !decided || r.CommitTS != at(77) {
				t.Errorf("recovered txn 1: %+v decided=%v", r, decided)
			}
		})
	}
}
