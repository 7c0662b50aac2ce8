package k2

import (
	"encoding/binary"
	"fmt"
	"maps"
	"slices"

	"github.com/meridiandb/meridian/internal/protocol/txnkit"
	"github.com/meridiandb/meridian/internal/storage"
	"github.com/meridiandb/meridian/internal/storage/txnrec"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/wire"
)

// Forgetting decided records.
//
// A recorder keeps a record only while someone may still validly ask about its transaction X;
// otherwise every transaction ever run would stay in its memory and on its disk. When a record
// can go follows from who asks, and what the recorder answers once it no longer knows X.
//
// Who asks. Only two kinds of node ever send the recorder R anything about X:
//   - X's coordinator C (the node in X's id): the write that creates the record, later writes
//     to R as a participant (refused if the record is aborted), CommitReq (re-sent after
//     op-timeout while unanswered), AbortReq and heartbeats. C sends CommitReq only until it
//     has the decision, and nothing at all once it has ended X (dropped it from byID): a
//     restarted C is a new incarnation, whose ids differ, and which never knew its previous
//     life's transactions.
//   - A data node D holding an undecided intent of X: PUSHWS, re-sent every lease while a read
//     waits. Once D has finalized X it holds no intent of X and never will again (every write
//     of a committed X was answered before C committed it; a late copy of one cannot lay an
//     intent where X's committed version is, mvcc refuses the clash), so it never pushes X
//     again: resolve drops the push and its re-send timer.
//
// Links are FIFO per (sender, receiver) pair: the simulator keeps each directed link in order
// (sim.Config.Reorder, which no k2 test or command enables, is the exception); the real
// runtime sends each pair's messages over one TCP connection, which loses but does not
// reorder. So anything a node sent R before a message reaches R before that message. Only a
// duplicate's extra copy (sim --duplicate) may come up to --duplicate-delay late, overtaking
// later messages; every rule below holds a late copy harmless (it finds its transaction
// decided, its version taken, or its request answered).
//
// The rules.
//   - A committed record is forgotten once (a) every participant (every node C sent a write,
//     listed in the CommitReq and persisted with the decision) has acknowledged that its
//     finalization of X is durable (Finalized), and (b) C has the decision. (b) holds whenever
//     (a) does: a participant acknowledges a FinalizeReq, which C sends only once it has the
//     decision and R re-sends only once C has said it ended X (EndedQuery, Ended). By (b) no
//     CommitReq of X follows. By (a) and FIFO, every PUSHWS about X that a participant sent
//     arrived before its acknowledgement and was answered from the record, and no participant
//     pushes X afterwards. A participant acknowledges only once the finalization is on disk,
//     so its crash cannot bring an intent of X back.
//   - An aborted record is forgotten once C has ended X: C's AbortReq (C ends X as it sends
//     it), or C's answer to an EndedQuery that R sends when it aborted X on its own (lease
//     expiry). No commit of X can follow, so "aborted" stays the only right answer about X,
//     and R still gives it: see the next point. Participants need not acknowledge an abort.
//   - R answers an unknown X as it always did (notes/k2.md §3.5, "PUSHWS before the record
//     exists"): a placeholder, aborted when C's lease on it runs out. R now also asks C at
//     once (EndedQuery) and aborts the placeholder when C says it ended X. That abort is right
//     whenever it can happen: X is unknown and C ended it, so X either never committed, or
//     committed and was forgotten; the latter needs every participant to have acknowledged,
//     after which (above) none pushes X. So a forgotten committed X is never pushed, and a
//     forgotten aborted X is answered "aborted" again. Even a pusher that broke these rules
//     could only abort intents: aborting a transaction never touches its committed versions
//     (mvcc AbortTxn), so no committed write can be removed by a late answer.
//   - R commits X only if X's first write created its record: the CommitReq of an unknown X,
//     or of one whose record is a PUSHWS's placeholder, is refused. A CommitReq can outlive the
//     rules above (a network's late copy; a restarted coordinator talks on a new connection in
//     the real runtime): X aborted on its lease, its CommitReq refused, C's AbortReq ends and
//     forgets it, a participant whose abort finalization is still on its way pushes X and so
//     makes a placeholder, and a late copy of the CommitReq would commit X there and answer
//     the pusher "committed", showing a write whose client was told X aborted. A legitimate
//     CommitReq always finds the created record: X's first write reaches R before C commits,
//     since C commits only once every write is durable.
//
// Restarts. Records are persisted with their decision, committed ones with their participants,
// and forgetting one persists its deletion. A recorder that crashes loses only which
// participants acknowledged and which coordinators said they ended a transaction; a deletion
// it had not flushed brings its record back, still decided. It rebuilds the list from its
// records, and a lease later asks the coordinators of those still not forgotten, re-sending
// committed ones' finalization to their participants once the coordinator has ended them
// (finalization is idempotent). A participant that crashes acknowledged only what was durable.
// A coordinator that crashes comes back as a new incarnation, which answers an EndedQuery about
// any transaction of its previous lives: ended.
//
// What is never forgotten: a record whose coordinator stays down (it cannot say it ended the
// transaction), and a committed record whose participant stays down. Both go once the node is
// back.

// gcRec is a decided record the recorder has not forgotten yet.
type gcRec struct {
	committed bool
	waitFor   []topo.NodeID // committed: participants that have not acknowledged, ascending
	ended     bool          // its coordinator has said it ended the transaction
	nudged    int64         // local time of the decision, or of the last query or re-drive
	keep      bool          // committed, but its participants are unknown: never forgotten
}

// Metadata of a committed record: its participants, 4 bytes each.
func encodeParticipants(ps []topo.NodeID) []byte {
	b := make([]byte, 0, 4*len(ps))
	for _, p := range ps {
		b = binary.BigEndian.AppendUint32(b, uint32(p))
	}
	return b
}

func decodeParticipants(b []byte) ([]topo.NodeID, error) {
	if len(b)%4 != 0 {
		return nil, fmt.Errorf("k2: participant list of %d bytes", len(b))
	}
	ps := make([]topo.NodeID, 0, len(b)/4)
	for i := 0; i < len(b); i += 4 {
		ps = append(ps, topo.NodeID(binary.BigEndian.Uint32(b[i:])))
	}
	return ps, nil
}

// isDataNode reports whether id names a data node of the deployment: a participant or recorder
// named in a message must be one, or the message is malformed.
func (n *Node) isDataNode(id topo.NodeID) bool { return txnkit.IsDataNode(n.tp, id) }

// participantsOf returns the valid participants of a CommitReq, ascending and without repeats.
// The recorder is always one (the record is created by a write to it).
func (n *Node) participantsOf(c *CommitReq) []topo.NodeID {
	ps := []topo.NodeID{n.self}
	for _, p := range c.Participants {
		if n.isDataNode(p) {
			ps = append(ps, p)
		}
	}
	slices.Sort(ps)
	return slices.Compact(ps)
}

// trackDecided starts waiting to forget txn, whose decision is now durable. ended says its
// coordinator is known to have ended it.
func (n *Node) trackDecided(txn storage.TxnID, r txnrec.Record, ended bool) {
	g := n.gc[txn]
	if g == nil {
		g = &gcRec{nudged: n.env.Elapsed()}
		n.gc[txn] = g
		if r.Status == txnrec.Committed {
			g.committed = true
			ps, err := decodeParticipants(r.Meta)
			if err != nil || len(ps) == 0 {
				// Not a record this recorder wrote (every commit lists at least the
				// recorder): without its participants nothing says when it may go.
				n.m.Add("error.recorder-participants", 1)
				g.keep = true
			}
			g.waitFor = ps
		}
	}
	g.ended = g.ended || ended
	if n.cfg.forgetAtDecision {
		// Broken on purpose (tests only): forget before anyone acknowledged.
		g.waitFor, g.ended, g.keep = nil, true, false
	}
	n.maybeForget(txn, g)
}

// maybeForget forgets txn's record if the rules above allow it. The deletion goes to disk with
// the node's next batch, or at the next tick (gcTick) if none comes: it needs no flush of its
// own, since a record a crash brings back is still decided and is simply forgotten again, and a
// busy recorder forgets many records per flush.
func (n *Node) maybeForget(txn storage.TxnID, g *gcRec) {
	switch {
	case g.keep:
		return
	case g.committed && len(g.waitFor) > 0:
		return
	case !g.committed && !g.ended:
		return
	}
	if err := n.recs.Forget(txn); err != nil {
		return // waiters still queued: a later event retries
	}
	delete(n.gc, txn)
	delete(n.leases, txn)
	n.m.Add("recorder.forgotten", 1)
}

// ackFinalized is a participant's durable finalization of committed txn, heard by its recorder:
// in a Finalized message, or directly when the participant is the recorder.
func (n *Node) ackFinalized(from topo.NodeID, txn storage.TxnID) {
	g := n.gc[txn]
	if g == nil || !g.committed {
		return // forgotten already, or a late duplicate
	}
	i, found := slices.BinarySearch(g.waitFor, from)
	if !found {
		return
	}
	g.waitFor = slices.Delete(g.waitFor, i, i+1)
	n.maybeForget(txn, g)
}

func (n *Node) onFinalized(from topo.NodeID, m *Finalized) {
	for _, txn := range m.Txns {
		n.ackFinalized(from, txn)
	}
}

// noteFinalized queues the acknowledgement of a commit's durable finalization for txn's
// recorder; one flush's acknowledgements go out as one message per recorder.
func (n *Node) noteFinalized(recorder topo.NodeID, txn storage.TxnID) {
	if recorder == n.self {
		n.ackFinalized(n.self, txn)
		return
	}
	n.finNotes.Add(recorder, txn)
}

// onEndedQuery tells a recorder which of the named transactions of this coordinator it no
// longer runs. A transaction it holds an id for is running until finish; one of an earlier
// incarnation, or never begun, is not.
func (n *Node) onEndedQuery(from topo.NodeID, q *EndedQuery) {
	if ended := txnkit.EndedOf(n.self, q.Txns, func(txn storage.TxnID) bool { return n.byID[txn] != nil }); len(ended) > 0 {
		n.env.Send(from, &Ended{Txns: ended})
	}
}

// onEnded hears from a coordinator that it ended transactions of its own: an undecided one can
// never commit and is aborted now, an aborted one is forgotten, and a committed one's
// finalization may be re-sent.
func (n *Node) onEnded(from topo.NodeID, m *Ended) {
	for _, txn := range m.Txns {
		if txn.Coordinator() != int32(from) {
			continue // only the coordinator may say
		}
		r, ok := n.recs.Get(txn)
		switch {
		case !ok:
		case !r.Status.Final():
			if n.decideAbort(txn, true) {
				n.m.Add("recorder.ended-abort", 1)
			}
		default:
			g := n.gc[txn]
			if g == nil {
				continue
			}
			g.ended = true
			if g.committed && len(g.waitFor) > 0 {
				n.redrive(txn, r, g)
			}
			n.maybeForget(txn, g)
		}
	}
}

// redrive sends a committed transaction's finalization to the participants that have not
// acknowledged it: the coordinator's may have been lost (its crash, a partition, the
// participant's crash), or the acknowledgement died with this recorder's memory.
func (n *Node) redrive(txn storage.TxnID, r txnrec.Record, g *gcRec) {
	g.nudged = n.env.Elapsed()
	for _, p := range g.waitFor {
		n.m.Add("recorder.refinalize", 1)
		n.env.Send(p, &FinalizeReq{Txn: txn, Commit: true, TS: r.CommitTS, Recorder: n.self})
	}
}

// gcTick, every lease/4, persists the deletions of forgotten records that no batch took, and
// follows up the decided records that have waited a lease since their decision or their last
// follow-up: it asks their coordinators whether they ended them, and re-sends a committed
// one's finalization once its coordinator has.
func (n *Node) gcTick() {
	n.persist(n.dataWrites(), nil) // deletions no other batch has taken since the last tick
	now := n.env.Elapsed()
	ask := txnkit.EndedQueries{}
	for _, txn := range slices.Sorted(maps.Keys(n.gc)) {
		g := n.gc[txn]
		if now-g.nudged < int64(n.cfg.lease) {
			continue
		}
		if !g.ended {
			g.nudged = now
			ask.Add(n.tp, txn)
			continue
		}
		if r, ok := n.recs.Get(txn); ok && g.committed {
			n.redrive(txn, r, g)
		}
	}
	if asked := ask.Send(n.env, func(txns []storage.TxnID) wire.Msg { return &EndedQuery{Txns: txns} }); asked > 0 {
		n.m.Add("recorder.ended-query", int64(asked))
	}
}

// recordsKept returns how many records the recorder holds (tests).
func (n *Node) recordsKept() int { return n.recs.Len() }
