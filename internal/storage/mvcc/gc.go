package mvcc

import (
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
// Finding garbage costs no scan. A key is queued once, at the lowest horizon at which a pass
// would remove one of its versions (nextGarbage): its second-oldest committed version's
// timestamp, or its oldest aborted version's if lower. A decision that lowers that point queues
// the key lower (the item at the old point goes stale and is skipped); a pass visits the queued
// keys whose point is at or below the horizon, lowest first and at most budget of them, and
// queues each again at its next point. So garbage is never left unqueued (also a version
// decided below a newer one, or an aborted one the horizon lands on exactly), the queue holds
// about one item per key however often the key is rewritten, and a pass's budget is spent on
// distinct keys.
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

// gcItem says that a pass at a horizon at or above ts would remove a version of key, unless the
// key's entry has been queued elsewhere since (its gcAt differs: the item is stale).
type gcItem struct {
	ts  ts.Timestamp
	key string
}

// gcQueue is a min-heap of gcItems by (ts, key): a total order, so passes are deterministic.
// Hand-written rather than container/heap, whose Push boxed every item into an allocation of
// its own (110 MB over a paper-scale K2 TPC-C run, where every decided version queues its key).
type gcQueue []gcItem

func (q gcQueue) less(i, j int) bool {
	if c := q[i].ts.Compare(q[j].ts); c != 0 {
		return c < 0
	}
	return q[i].key < q[j].key
}

func (q *gcQueue) push(it gcItem) {
	*q = append(*q, it)
	h := *q
	for i := len(h) - 1; i > 0; {
		p := (i - 1) / 2
		if !h.less(i, p) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
}

func (q *gcQueue) pop() gcItem {
	h := *q
	top := h[0]
	n := len(h) - 1
	h[0] = h[n]
	h[n] = gcItem{}
	h = h[:n]
	for i := 0; ; {
		m := 2*i + 1
		if m >= n {
			break
		}
		if r := m + 1; r < n && h.less(r, m) {
			m = r
		}
		if !h.less(m, i) {
			break
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
	*q = h
	return top
}

// GCHorizon returns the garbage-collection horizon: operations below it must be refused, since
// the versions they would need may be gone. It only rises.
func (s *Store) GCHorizon() ts.Timestamp { return s.gcHorizon }

// OldestGarbage returns the lowest queued timestamp, the earliest horizon at which a pass would
// find something to visit, and false when nothing is queued.
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
		it := s.gc.pop()
		e := s.byKey[it.key]
		if e == nil || !e.gcQueued || e.gcAt != it.ts {
			continue // stale: the key was dropped, or queued lower and visited since
		}
		e.gcQueued = false
		st.KeysVisited++
		st.VersionsRemoved += s.compact(e, s.gcHorizon)
		if e.empty() {
			s.dropIfEmpty(e)
			st.KeysRemoved++
			continue
		}
		if next, ok := e.nextGarbage(); ok {
			// What compact left at or below the horizon is an aborted version exactly at it,
			// which goes once the horizon is past it.
			if next.LessEq(s.gcHorizon) {
				next = s.gcHorizon.Next()
			}
			s.queueGC(e, next)
		}
	}
	return st
}

// noteDecided queues e for garbage collection after one of its versions was decided or added
// below the others, if that gives a pass something to remove.
func (s *Store) noteDecided(e *entry) {
	if next, ok := e.nextGarbage(); ok {
		s.queueGC(e, next)
	}
}

// queueGC queues e at at, unless it is queued at or below at already: the pass that visits it
// there queues it again at whatever point its versions then call for.
func (s *Store) queueGC(e *entry, at ts.Timestamp) {
	if e.gcQueued && e.gcAt.LessEq(at) {
		return
	}
	e.gcQueued, e.gcAt = true, at
	s.gc.push(gcItem{at, e.key})
}

// nextGarbage returns the lowest horizon at which a pass would remove one of e's versions as
// they stand: the timestamp of its second-oldest committed version (which supersedes the oldest
// there) or of its oldest aborted version (removed once the horizon is past it), whichever
// comes first, and false if neither exists. Versions are ascending, so the first match is it.
func (e *entry) nextGarbage() (ts.Timestamp, bool) {
	committed := 0
	for i := range e.versions {
		switch v := &e.versions[i]; v.State {
		case Aborted:
			return v.TS, true
		case Committed:
			if committed++; committed == 2 {
				return v.TS, true
			}
		}
	}
	return ts.Zero, false
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

// recoverGC restores the persisted horizon and queues every key that holds garbage.
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
		s.noteDecided(e)
		return true
	})
	return nil
}
