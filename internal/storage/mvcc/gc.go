package mvcc

import (
	"container/heap"
	"fmt"

	"github.com/meridiandb/meridian/internal/node"
	"github.com/meridiandb/meridian/internal/storage"
	"github.com/meridiandb/meridian/internal/ts"
)

// Garbage collection of old versions.
//
// A version is garbage once no reader can ask for it. The protocol decides when that is: it
// picks a horizon (typically its clock minus a TTL), calls CollectGarbage, and from then on
// refuses every operation below GCHorizon() — a transaction that old is aborted, as CockroachDB
// refuses a batch below its GC threshold. For each key the store keeps the newest committed
// version at or below the horizon and everything newer, so every read at or above the horizon
// answers exactly as before; older committed versions and aborted ones below the horizon go.
// Undecided intents are never removed.
//
// Finding garbage costs no scan. Whenever a version of a key that holds others is decided
// (committed or aborted), the store queues (the version's timestamp, the key); a pass visits the
// queued keys whose timestamp is at or below the horizon, oldest first, and at most budget of
// them, so its cost is bounded and proportional to what was written.
//
// Removals are recorded as persist deletes like any other mutation. The horizon is recorded
// ahead of a pass's first delete, so whatever prefix of the writes reaches the disk, a removal
// is durable only with a horizon covering it; Recover restores the horizon, and a restarted node
// keeps refusing what its earlier life could no longer answer. A crash that loses deletes brings
// old versions back, which changes no read at or above the horizon.

// GCStats reports what a garbage-collection pass did.
type GCStats struct {
	KeysVisited     int
	VersionsRemoved int
	KeysRemoved     int
	// More is true when keys at or below the horizon are still queued (the budget ran out).
	More bool
}

// gcItem says that key may hold a version older than the one decided at ts.
type gcItem struct {
	ts  ts.Timestamp
	key string
}

// gcQueue is a min-heap of gcItems by (ts, key): a total order, so passes are deterministic.
type gcQueue []gcItem

func (q gcQueue) Len() int { return len(q) }
func (q gcQueue) Less(i, j int) bool {
	if c := q[i].ts.Compare(q[j].ts); c != 0 {
		return c < 0
	}
	return q[i].key < q[j].key
}
func (q gcQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *gcQueue) Push(x any)   { *q = append(*q, x.(gcItem)) }
func (q *gcQueue) Pop() any {
	old := *q
	it := old[len(old)-1]
	*q = old[:len(old)-1]
	return it
}

// GCHorizon returns the garbage-collection horizon: operations below it must be refused, since
// the versions they would need may be gone. It only rises.
func (s *Store) GCHorizon() ts.Timestamp { return s.gcHorizon }

// OldestGarbage returns the timestamp of the oldest queued decision, the earliest horizon at
// which a pass would find something to visit, and false when nothing is queued.
func (s *Store) OldestGarbage() (ts.Timestamp, bool) {
	if len(s.gc) == 0 {
		return ts.Zero, false
	}
	return s.gc[0].ts, true
}

// CollectGarbage raises the horizon to at least horizon and removes, from at most budget of the
// queued keys decided at or below it, every version no reader at or above the horizon can see.
func (s *Store) CollectGarbage(horizon ts.Timestamp, budget int) GCStats {
	if s.gcHorizon.Less(horizon) {
		s.gcHorizon = horizon
	}
	var st GCStats
	for len(s.gc) > 0 && s.gc[0].ts.LessEq(s.gcHorizon) {
		if st.KeysVisited == budget {
			st.More = true
			break
		}
		it := heap.Pop(&s.gc).(gcItem)
		e := s.byKey[it.key]
		if e == nil {
			continue
		}
		st.KeysVisited++
		st.VersionsRemoved += s.compact(e, s.gcHorizon)
		if e.empty() {
			s.dropIfEmpty(e)
			st.KeysRemoved++
		}
	}
	return st
}

// noteDecided queues e for garbage collection once a version of it at t is decided, if the key
// holds anything a pass could remove.
func (s *Store) noteDecided(e *entry, t ts.Timestamp, state State) {
	if len(e.versions) > 1 || state == Aborted {
		heap.Push(&s.gc, gcItem{t, e.key})
	}
}

// compact removes e's versions that no reader at or above safePoint can see: committed versions
// older than the newest committed one at or below safePoint, and aborted versions below it.
func (s *Store) compact(e *entry, safePoint ts.Timestamp) int {
	keep := -1 // the newest committed version <= safePoint
	for i := e.upper(safePoint) - 1; i >= 0; i-- {
		if e.versions[i].State == Committed {
			keep = i
			break
		}
	}
	removed := 0
	for i := len(e.versions) - 1; i >= 0; i-- {
		v := e.versions[i]
		if (v.State == Committed && i < keep) || (v.State == Aborted && v.TS.Less(safePoint)) {
			if removed == 0 {
				s.recordHorizon()
			}
			s.removeAt(e, i)
			removed++
		}
	}
	return removed
}

// gcHorizonKey is the durable key of the horizon record.
var gcHorizonKey = []byte{storage.PrefixGC}

// recordHorizon records the horizon for persistence unless a record at least as high is already
// recorded.
func (s *Store) recordHorizon() {
	if s.opts.Volatile || s.gcHorizon.LessEq(s.recordedHorizon) {
		return
	}
	s.recordedHorizon = s.gcHorizon
	s.writes = append(s.writes, node.Write{Key: gcHorizonKey, Value: s.gcHorizon.Encode(nil)})
}

// recoverGC restores the persisted horizon and queues every key that may hold garbage, at the
// timestamp of its newest decided version.
func (s *Store) recoverGC(d node.Durable) error {
	var derr error
	err := d.Scan(gcHorizonKey, []byte{storage.PrefixGC + 1}, func(k, v []byte) bool {
		h, err := ts.Decode(v)
		if err != nil || len(k) != 1 || len(v) != ts.EncodedLen {
			derr = fmt.Errorf("%w: garbage-collection horizon %x=%x", ErrCorrupt, k, v)
			return false
		}
		s.gcHorizon, s.recordedHorizon = h, h
		return true
	})
	if err != nil {
		return fmt.Errorf("mvcc: recover: scan: %w", err)
	}
	if derr != nil {
		return fmt.Errorf("mvcc: recover: %w", derr)
	}
	s.ordered().Ascend(func(e *entry) bool {
		for i := len(e.versions) - 1; i >= 0; i-- {
			if v := e.versions[i]; v.State != Intent {
				s.noteDecided(e, v.TS, v.State)
				break
			}
		}
		return true
	})
	return nil
}
