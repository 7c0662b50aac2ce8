package crdb

import (
	"maps"
	"slices"

	"github.com/meridiandb/meridian/internal/node"
	"github.com/meridiandb/meridian/internal/protocol/txnkit"
	"github.com/meridiandb/meridian/internal/storage"
	"github.com/meridiandb/meridian/internal/storage/txnrec"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/ts"
	"github.com/meridiandb/meridian/internal/wire"
)

// Forgetting decided records.
//
// A record holder keeps a record only while someone may still validly ask about its
// transaction X; otherwise every transaction ever run stays in its memory (recState) and on its
// disk (the record and its push floor). When a record can go follows from who asks, and what
// the holder answers once it no longer knows X.
//
// Who asks. Only these send the holder H anything about X:
//   - X's coordinator C (the node in X's id): the write that creates the record, heartbeats,
//     EndTxn (stage, commit, abort). C sends them only while it runs X; it ends X after its
//     last word, which is an EndAbort, a staged X's explicit EndCommit (sent unanswered), or
//     an EndCommit that H commits once its answer reaches C (after an EndPushed or EndAborted
//     answer C stages again or aborts; until an answer comes C sends its commit again), and
//     then sends nothing more about X. A restarted C never knew its previous life's
//     transactions.
//   - A leaseholder L whose request is blocked on an intent of X: a push, re-sent while the
//     request waits. Once L has resolved X's intents it holds none and never will again
//     (every write of a committed X was answered before X committed, and a late copy of one
//     finds X's committed version, or for an aborted X the leaseholder's aborted list), and
//     resolving wakes and ends every request that waited on them, so L pushes X no more.
//   - H itself: recovery of a STAGING record whose coordinator is silent.
//
// Links are FIFO per (sender, receiver) pair: the simulator keeps each directed link in order
// (sim.Config.Reorder, which no crdb test or command enables, is the exception); the real
// runtime sends each pair's messages over one TCP connection, which loses but does not reorder.
// So anything a node sent H before a message reaches H before that message, or never. Only a
// duplicate's copy breaks this: the simulator delivers it up to --duplicate-delay after its
// original, after messages sent later. So late copies of a forgotten X's messages do come, and
// are refused or dropped where they could re-open X: a heartbeat's (onHeartbeat), an EndAbort's
// and a stage's or commit's (onEndTxn), and a write's (writeDone). A late copy of a push may
// still decide a forgotten X aborted, harmlessly: the pusher's request ended before its
// leaseholder acknowledged X's resolution, so it drops the answer, and the record goes again
// once C says it ended X.
//
// What H answers about a transaction it does not know: a push that aborts or pushes a
// timestamp does so at once; a waiting push is answered with the decision once there is one,
// which the coordinator's answer to H's question brings, or the record's expiry (5 heartbeats
// from the first push) if the coordinator is down (answering it "pending", to be polled again,
// would loop: by the next poll H has aborted and forgotten X anew, and finds it unknown
// again); a heartbeat creates the record unless X ended where its first write went (a late
// copy), an abort unless X is aborted here already; a stage or a commit is refused, since the
// first write creates the record before either can come, so that even a message delivered
// later than FIFO links allow cannot commit X once it is forgotten (the real runtime redials a
// lost connection, and a restarted node connects anew: frames still unread on the old
// connection may be read after newer ones). So a forgotten X that was committed must never be
// asked about again (an abort would have a leaseholder discard a committed intent; a timestamp
// push would let a reader skip a write that then commits below it), and a forgotten X that
// was aborted may be, provided nothing can commit it: an abort or a push of an aborted
// transaction is harmless.
//
// The rules.
//   - A committed record is forgotten once (a) the leaseholder of every key it wrote (the
//     staged key list, or the key list of a commit that was not staged, persisted with the
//     record) has acknowledged that its resolution of X is durable (Resolved), and (b) C has
//     ended X (a staged X's explicit EndCommit came; C resolved H's own key, which it does
//     only on the answer to a commit it waited for, and where C is H only once C no longer
//     runs X, since H's recovery resolves from the same node; or C answered an EndedQuery). By (b) C sends
//     nothing more about X. By (a) and FIFO, every push a leaseholder sent about X arrived
//     before its acknowledgement and was answered from the record, and none follows. A
//     leaseholder acknowledges only once the resolution is on disk, so its crash cannot bring
//     an intent back.
//   - An aborted record is forgotten once C has ended X: its EndAbort, or its answer to an
//     EndedQuery that H sends about a record it aborted itself (a push, an expired record).
//     Nothing can commit X afterwards, so the answers above about an unknown X are right for
//     it; leaseholders need not acknowledge an abort.
//   - H asks C about an undecided record whose coordinator has been silent for the expiry
//     (EndedQuery), and aborts it when C says it ended X: C will never stage or commit it.
//     A STAGING record of an ended or expired coordinator is recovered rather than aborted, as
//     a push would; a recovered commit is resolved by H itself, and its record goes once C has
//     ended X. A committed record some leaseholder has not acknowledged for the expiry has its
//     resolution re-sent once C has ended X (resolution is idempotent).
//
// Restarts. Records are persisted with their decision (committed ones with their keys), and
// forgetting one persists its deletion and its push floor's. A holder that crashes loses only
// which leaseholders acknowledged and whether coordinators ended their transactions: it asks
// again an expiry after its restart, and re-sends resolutions; a deletion it had not flushed
// brings the record back, still decided. A leaseholder that crashes acknowledged only what was
// durable. A coordinator that restarts answers an EndedQuery about its previous life's
// transactions: ended.
//
// What is never forgotten: a record whose coordinator stays down, and a committed record one of
// whose leaseholders stays down. Both go once the node is back.

// isDataNode reports whether id names a data node of the deployment.
func (n *Node) isDataNode(id topo.NodeID) bool { return txnkit.IsDataNode(n.tp, id) }

// trackDecided runs once txn's decision is durable: its record may go now or later.
func (n *Node) trackDecided(txn storage.TxnID) {
	rs := n.recState[txn]
	if rs == nil {
		return
	}
	rs.nudged = n.env.Now()
	if n.set.forgetAtDecision {
		// Broken on purpose (tests only): forget before anyone acknowledged.
		rs.ended = true
		rs.resolved, _ = groupByNode(n.tp, rs.inFlight)
	}
	n.maybeForget(txn)
}

// unresolvedNodes returns the leaseholders of a committed transaction's keys that have not
// acknowledged its resolution.
func (n *Node) unresolvedNodes(rs *recState) []topo.NodeID {
	nodes, _ := groupByNode(n.tp, rs.inFlight)
	return slices.DeleteFunc(nodes, func(nd topo.NodeID) bool {
		_, ok := slices.BinarySearch(rs.resolved, nd)
		return ok
	})
}

// maybeForget forgets txn's record if the rules above allow it, with its push floor. The
// deletions go to disk with the node's next batch, or at the next tick (gcTick) if none comes:
// they need no flush of their own, since a record a crash brings back is still decided and is
// simply forgotten again, and a busy holder forgets many records per flush.
func (n *Node) maybeForget(txn storage.TxnID) {
	rs := n.recState[txn]
	r, ok := n.recs.Get(txn)
	switch {
	case rs == nil || !ok || !rs.ended || rs.keep:
		return
	case r.Status == txnrec.Committed && len(n.unresolvedNodes(rs)) > 0:
		return
	case r.Status != txnrec.Committed && r.Status != txnrec.Aborted:
		return
	}
	if err := n.recs.Forget(txn); err != nil {
		return // not durable yet: the decision's persist completion calls again
	}
	if !rs.floor.IsZero() {
		n.gcWrites = append(n.gcWrites, node.Write{Key: storage.EncodeTxnID([]byte{prefixPushFloor}, txn), Delete: true})
	}
	delete(n.recState, txn)
	n.m.Add("record/forgotten", 1)
	n.gcPending = true
}

// ackResolved is a leaseholder's durable resolution of committed txn, heard by its record
// holder: in a Resolved message, or directly when the leaseholder holds the record.
func (n *Node) ackResolved(from topo.NodeID, txn storage.TxnID) {
	rs := n.recState[txn]
	if rs == nil {
		return // forgotten already, or a late duplicate
	}
	if i, found := slices.BinarySearch(rs.resolved, from); !found {
		rs.resolved = slices.Insert(rs.resolved, i, from)
	}
	n.maybeForget(txn)
}

func (n *Node) onResolved(from topo.NodeID, m *Resolved) {
	for _, txn := range m.Txns {
		n.ackResolved(from, txn)
	}
}

// noteResolved queues the acknowledgement of a commit's durable resolution for txn's record
// holder; one flush's acknowledgements go out as one message per holder.
func (n *Node) noteResolved(record topo.NodeID, txn storage.TxnID) {
	if record == n.self {
		n.ackResolved(n.self, txn)
		return
	}
	n.resNotes.Add(record, txn)
}

// commitAnswerHeard runs when the coordinator of committed txn resolves the key this holder
// leads: it does so only on the answer to its commit (coord.go, committed), so it has ended the
// transaction and will not ask about it again.
func (n *Node) commitAnswerHeard(txn storage.TxnID) {
	if rs := n.recState[txn]; rs != nil && rs.status == statusCommit {
		rs.ended = true // maybeForget follows once this node's resolution is durable (onResolve)
	}
}

// onEndedQuery tells a record holder which of the named transactions of this coordinator it no
// longer runs (not finished nor dropped here; a previous life's never were).
func (n *Node) onEndedQuery(from topo.NodeID, q *EndedQuery) {
	if ended := txnkit.EndedOf(n.self, q.Txns, func(txn storage.TxnID) bool { return n.byID[txn] != nil }); len(ended) > 0 {
		n.env.Send(from, &Ended{Txns: ended})
	}
}

// onEnded hears from a coordinator that it ended transactions of its own: an undecided record
// can never be staged or committed now and is aborted (a staging one recovered), a decided one
// may go, or have its resolution re-sent.
func (n *Node) onEnded(from topo.NodeID, m *Ended) {
	for _, txn := range m.Txns {
		rs := n.recState[txn]
		if rs == nil || txn.Coordinator() != int32(from) {
			continue // unknown, or not the coordinator's to say
		}
		rs.ended = true
		switch rs.status {
		case statusNoRecord, statusPending:
			if err := n.decide(txn, txnrec.Aborted, ts.Zero, nil); err == nil {
				n.m.Add("record/ended-abort", 1)
			}
		case statusStaging:
			n.recoverStaging(txn)
		default:
			if r, ok := n.recs.Get(txn); ok && r.Status == txnrec.Committed {
				n.reresolve(txn, r, rs)
			}
			n.maybeForget(txn)
		}
	}
}

// reresolve sends a committed transaction's resolution to the leaseholders that have not
// acknowledged it: the coordinator's may have been lost (its crash, a partition, the
// leaseholder's crash), or the acknowledgement died with this holder's memory.
func (n *Node) reresolve(txn storage.TxnID, r txnrec.Record, rs *recState) {
	rs.nudged = n.env.Now()
	missing := n.unresolvedNodes(rs)
	if len(missing) == 0 {
		return
	}
	_, byNode := groupByNode(n.tp, rs.inFlight)
	for _, nd := range missing {
		n.m.Add("record/reresolve", 1)
		n.env.Send(nd, &ResolveReq{Txn: txn, Keys: byNode[nd], Commit: true, TS: r.CommitTS, Record: n.self})
	}
}

// armGCTick runs gcTick, sends again the requests unanswered for their retransmission timeout
// (retransmit), and forgets what the coordinator keeps of clients for an idle timeout (retry
// ages, ended transactions), every heartbeat interval.
func (n *Node) armGCTick() {
	n.env.After(n.set.heartbeat, func() {
		n.gcTick()
		n.retransmit()
		n.clientAge.Expire(n.env.Now(), n.set.idle)
		n.ended.Expire(n.env.Now(), n.set.idle)
		n.armGCTick()
	})
}

// gcTick persists the deletions of forgotten records that no batch took, and follows up the
// records that wait on someone who has been silent for the expiry: an undecided record's
// coordinator is asked whether it ended the transaction, a staging one is recovered (sooner:
// stagingSilent), a decided one's coordinator is asked, and a committed one's resolution re-sent
// once its coordinator has ended it.
func (n *Node) gcTick() {
	if n.gcPending {
		n.flush(nil, nil)
	}
	now := n.env.Now()
	expiry := int64(n.set.expiry)
	ask := txnkit.EndedQueries{}
	query := func(txn storage.TxnID, rs *recState) {
		rs.nudged = now
		ask.Add(n.tp, txn)
	}
	for _, txn := range slices.Sorted(maps.Keys(n.recState)) {
		rs := n.recState[txn]
		due := now-rs.nudged >= expiry
		switch rs.status {
		case statusNoRecord, statusPending:
			if due && now-rs.lastHB > expiry {
				query(txn, rs)
			}
		case statusStaging:
			if n.stagingSilent(txn, rs) {
				n.recoverStaging(txn)
			}
		default:
			r, ok := n.recs.Get(txn)
			switch {
			case !due || !ok || !r.Status.Final():
			case !rs.ended:
				query(txn, rs)
			case r.Status == txnrec.Committed:
				n.reresolve(txn, r, rs)
			}
		}
	}
	if asked := ask.Send(n.env, func(txns []storage.TxnID) wire.Msg { return &EndedQuery{Txns: txns} }); asked > 0 {
		n.m.Add("record/ended-query", int64(asked))
	}
}

// recordsKept returns how many records the holder keeps (tests).
func (n *Node) recordsKept() int { return n.recs.Len() }
