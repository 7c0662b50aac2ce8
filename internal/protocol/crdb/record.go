package crdb

import (
	"errors"
	"slices"

	"github.com/meridiandb/meridian/internal/node"
	"github.com/meridiandb/meridian/internal/storage"
	"github.com/meridiandb/meridian/internal/storage/mvcc"
	"github.com/meridiandb/meridian/internal/storage/txnrec"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/ts"
	"github.com/meridiandb/meridian/internal/wire"
)

// Record holder side: transaction records (PENDING → STAGING → COMMITTED, or ABORTED), the
// coordinator's heartbeats, pushes from blocked requests, and recovery of STAGING records whose
// coordinator went silent.

// Latest record statuses. txnrec reports only the durable status; pushes must also see a
// status change whose persist is still in flight (an abort must not overtake a staging that
// is about to be acknowledged), so the holder tracks the latest one here.
const (
	statusPending  = txnrec.InProgress
	statusStaging  = txnrec.Staging
	statusCommit   = txnrec.Committed
	statusAborted  = txnrec.Aborted
	statusNoRecord = txnrec.Status(0)
)

type recState struct {
	status     txnrec.Status
	lastHB     int64        // local clock of the last sign of life from the coordinator
	floor      ts.Timestamp // the transaction may not commit below this (timestamp pushes)
	stageTS    ts.Timestamp
	inFlight   []string // every written key (staged, or committed): whose leaseholders must acknowledge
	recovering bool
	// written says the transaction's first write (CreateRecord) reached this node: only then may
	// it stage or commit here. A heartbeat that overtakes the first write makes the record, but
	// a heartbeat that is a late copy makes one too, for a transaction that ended here: a late
	// copy of its refused commit committed that record, whatever its rollback told the client
	// (review: 1 seed in 700 of a lossy, duplicating run with parallel commits off, G1a).
	// Records recovered from disk count as written.
	written bool

	// Forgetting the record (gc.go).
	ended    bool          // the coordinator has ended the transaction (EndCommit, EndAbort, Ended)
	keep     bool          // committed, but its keys are unknown: never forgotten
	resolved []topo.NodeID // leaseholders that acknowledged the commit's resolution, ascending
	nudged   int64         // local time of the last query or re-sent resolution (or creation)
	// waiting holds the answers to waiting pushes (PushQuery) about a transaction the holder
	// did not know when they came, given once the decision is durable. Answering them
	// "pending" instead would have the pusher poll again, and a forgotten aborted transaction
	// is aborted and forgotten anew between two polls once its coordinator says it ended it,
	// so every poll would find it unknown again, and the request would wait forever.
	waiting []func(outcome uint8, at ts.Timestamp)
	// waitingReqs names the pushes in waiting, by pusher and request: a copy of one (the
	// pusher's retransmission, or the network's) waits with it rather than being answered
	// "pending", which would complete the pusher's request before the decision comes.
	waitingReqs []pushRef
}

// pushRef names a push request: its pusher and the pusher's request id.
type pushRef struct {
	from topo.NodeID
	req  uint64
}

func (n *Node) rec(txn storage.TxnID) *recState {
	rs := n.recState[txn]
	if rs == nil {
		// A pusher may arrive before the record is written: count liveness from now.
		now := n.env.Now()
		rs = &recState{lastHB: now, status: statusNoRecord, nudged: now}
		n.recState[txn] = rs
	}
	return rs
}

func (n *Node) createRecord(txn storage.TxnID) {
	rs := n.rec(txn)
	if rs.status != statusNoRecord {
		return
	}
	if _, err := n.recs.Create(txn, nil); err == nil {
		rs.status = statusPending
		rs.lastHB = n.env.Now()
	}
}

// decide records a final status and calls done once it is durable.
func (n *Node) decide(txn storage.TxnID, st txnrec.Status, at ts.Timestamp, done func()) error {
	return n.decideWith(txn, st, at, nil, done)
}

// decideWith is decide that, given keys, also persists them with the decision as the
// transaction's written keys (a commit not staged first: its leaseholders must acknowledge the
// resolution before the record can go, also after a restart).
func (n *Node) decideWith(txn storage.TxnID, st txnrec.Status, at ts.Timestamp, keys []string, done func()) error {
	var err error
	if keys != nil {
		err = n.recs.DecideWith(txn, st, at, 0, encodeKeys(keys))
	} else {
		err = n.recs.Decide(txn, st, at, 0)
	}
	if err != nil {
		return err
	}
	rs := n.rec(txn)
	rs.status = st
	if keys != nil {
		rs.inFlight = append([]string(nil), keys...)
	}
	v := n.recs.Version(txn)
	n.flush(nil, func() {
		n.recs.Decided(txn, v)
		// The waiting pushes first: they need nothing done does, and were done ever to
		// forget the record, they would go with it.
		n.answerWaiting(txn)
		if done != nil {
			done()
		}
		n.trackDecided(txn)
	})
	return nil
}

// answerWaiting gives the pushes held for txn its durable decision.
func (n *Node) answerWaiting(txn storage.TxnID) {
	rs := n.recState[txn]
	r, ok := n.recs.Get(txn)
	if rs == nil || !ok || !r.Status.Final() {
		return
	}
	ws := rs.waiting
	rs.waiting, rs.waitingReqs = nil, nil
	for _, reply := range ws {
		if r.Status == txnrec.Committed {
			reply(PushCommitted, r.CommitTS)
		} else {
			reply(PushAborted, ts.Zero)
		}
	}
}

func (n *Node) onHeartbeat(from topo.NodeID, req *HeartbeatReq) {
	if n.recState[req.Txn] == nil && n.endedAt(req.Txn, req.Key) {
		// A copy the network delivered after the transaction ended here and its record was
		// forgotten (its coordinator heartbeats only while it runs it, and every heartbeat
		// it sent came before its last word about the transaction). Creating the record again
		// re-opened a finished transaction: a PENDING record on disk, which the holder later
		// asked the coordinator about and aborted, committed or not. Nobody waits for an answer.
		n.m.Add("record/late-heartbeat", 1)
		return
	}
	rs := n.rec(req.Txn)
	if req.Aborted {
		// Not a sign of life: the coordinator heard from this holder that the transaction was
		// aborted, and keeps it only until its client's next request. A record not aborted here
		// lost that abort in a crash before it was durable; counted alive by these heartbeats,
		// it kept every push on the transaction's keys waiting until the client came back (a
		// crash run with 400 ms flushes: 2.7 s). Aborted again, as it was.
		if rs.status == statusPending || rs.status == statusNoRecord {
			n.m.Add("record/abort-reaffirmed", 1)
			_ = n.decide(req.Txn, txnrec.Aborted, ts.Zero, nil)
		}
		n.env.Send(from, &HeartbeatResp{Txn: req.Txn, Aborted: rs.status == statusAborted})
		return
	}
	rs.lastHB = n.env.Now()
	if rs.status == statusNoRecord {
		// Lost in a crash before it was persisted, or the first write is still on its way.
		n.createRecord(req.Txn)
		n.flush(nil, nil)
	}
	n.env.Send(from, &HeartbeatResp{Txn: req.Txn, Aborted: rs.status == statusAborted})
}

// endedAt reports whether txn has ended at this node as the leaseholder of key: it committed or
// aborted its write of key here. The holder leads the key of the write that creates a
// transaction's record, and that write's intent is resolved there before the record can be
// forgotten (gc.go), so a record missing while this holds was forgotten, not yet to be created.
func (n *Node) endedAt(txn storage.TxnID, key string) bool {
	if n.aborted[txn] {
		return true
	}
	for _, v := range n.store.Versions(key) {
		if v.Txn == txn && v.State != mvcc.Intent {
			return true
		}
	}
	return false
}

// wait holds a push's answer until the transaction's decision is durable (answerWaiting).
func (rs *recState) wait(from topo.NodeID, req uint64, reply func(outcome uint8, at ts.Timestamp)) {
	rs.waiting = append(rs.waiting, reply)
	rs.waitingReqs = append(rs.waitingReqs, pushRef{from, req})
}

func (n *Node) onPush(from topo.NodeID, req *PushReq) {
	n.observe(req.PushTo)
	reply := func(outcome uint8, at ts.Timestamp) {
		n.env.Send(from, &PushResp{Req: req.Req, Clock: n.now(), Outcome: outcome, TS: at})
	}
	_, known := n.recState[req.Pushee]
	if !known {
		// Not started here yet (the record is on its way), or forgotten: its coordinator
		// tells whether it ended the transaction, which settles it (gc.go).
		if c := topo.NodeID(req.Pushee.Coordinator()); n.isDataNode(c) {
			n.m.Add("record/ended-query", 1)
			n.env.Send(c, &EndedQuery{Txns: []storage.TxnID{req.Pushee}})
		}
	}
	rs := n.rec(req.Pushee)
	if rec, ok := n.recs.Get(req.Pushee); ok && rec.Status.Final() {
		if rec.Status == txnrec.Committed {
			reply(PushCommitted, rec.CommitTS)
		} else {
			reply(PushAborted, ts.Zero)
		}
		return
	}
	if slices.Contains(rs.waitingReqs, pushRef{from, req.Req}) {
		return // a copy of a push waiting here: its answer comes with the decision
	}
	expired := n.env.Now()-rs.lastHB > int64(n.set.expiry)
	switch rs.status {
	case statusCommit, statusAborted:
		// Decided; the decision is being persisted, and the persist's completion answers the
		// pushes waiting for it (answerWaiting). Answered "pending" at once, a pusher whose
		// first push is waiting here for a forgotten transaction's decision, and whose copy
		// the network (or its retransmission) brings in meanwhile, took the copy's answer for
		// its request's and dropped the decision when it came; with 400 ms flushes the
		// record was then forgotten and aborted anew between two pushes, for ever: a reader
		// blocked behind a dead coordinator's intent until the run gave up (6 of 20 read-back
		// runs with three crashes, the final read aborted coordinator-timeout).
		rs.wait(from, req.Req, reply)
		return
	case statusStaging:
		// A staging transaction may already be implicitly committed: it can be neither pushed
		// nor aborted, only recovered once its coordinator is gone or its explicit commit lost.
		if n.stagingSilent(req.Pushee, rs) {
			n.recoverStaging(req.Pushee)
		}
		reply(PushPending, ts.Zero)
		return
	}
	switch {
	case expired || req.Type == PushAbort:
		if expired {
			n.m.Add("push/expired", 1)
		}
		if err := n.decide(req.Pushee, txnrec.Aborted, ts.Zero, func() { reply(PushAborted, ts.Zero) }); err != nil {
			reply(PushPending, ts.Zero)
		} else if !expired {
			// An older writer aborted a younger holder: the conflict that CockroachDB's wait
			// queues would let form into a deadlock and then break, avoided here by age, as
			// spanner's wound-wait does. Counted as spanner counts a wound (a victim, once:
			// a later push finds the record decided), so Fig. 17d compares like with like.
			n.m.Add("deadlocks", 1)
		}
	case req.Type == PushTimestamp:
		if req.PushTo.LessEq(rs.floor) {
			// Already pushed at least that far (durably, or about to be: answer after the
			// batch carrying it, which every later batch follows).
			n.flush(nil, func() { reply(PushPushed, rs.floor) })
			return
		}
		rs.floor = req.PushTo
		key := storage.EncodeTxnID([]byte{prefixPushFloor}, req.Pushee)
		n.flush([]node.Write{{Key: key, Value: req.PushTo.Encode(nil)}}, func() { reply(PushPushed, req.PushTo) })
	case !known:
		rs.wait(from, req.Req, reply)
	default:
		reply(PushPending, ts.Zero)
	}
}

func (n *Node) onEndTxn(from topo.NodeID, req *EndTxnReq) {
	n.observe(req.TS)
	reply := func(outcome uint8, at ts.Timestamp) {
		if req.Req != 0 {
			n.env.Send(from, &EndTxnResp{Req: req.Req, Clock: n.now(), Outcome: outcome, TS: at})
		}
	}
	if req.Status != EndAbort {
		if rs := n.recState[req.Txn]; rs == nil || rs.status == statusNoRecord || !rs.written {
			// The first write creates the record before the coordinator can stage or commit,
			// so a transaction without one here was forgotten, which only an ended one is, or
			// lost its record in a crash, with the intent persisted beside it, and no
			// heartbeat has brought it back since. Only a message delivered later than FIFO
			// links allow gets here (the real runtime redials a lost connection, and a
			// restarted node connects anew), and staging or committing then would resolve as
			// committed the intents of a transaction its coordinator rolled back. Refusing
			// costs at most an abort. So does one whose record only a heartbeat made (written).
			reply(EndAborted, ts.Zero)
			return
		}
	} else if n.recState[req.Txn] == nil && (n.aborted[req.Txn] || req.Req != 0) {
		// A copy delivered after the rollback it belongs to was done with: the coordinator
		// resolves the record holder's own key after sending this, so its intent there is
		// aborted only once this came, and the record was forgotten then. Deciding again
		// would write an aborted record to disk, and delete it, for nothing. An awaited abort
		// (coord.go, abortStaged) follows a staging this holder answered once durable, so a
		// record missing here was forgotten, which its coordinator had ended first: this is a
		// late copy, whose transaction may have committed (recovery did, and the original
		// was answered EndCommitted). Deciding would write an aborted record for it.
		reply(EndAborted, ts.Zero)
		return
	}
	rs := n.rec(req.Txn)
	rs.lastHB = n.env.Now()
	switch req.Status {
	case EndStage, EndCommit:
		switch rs.status {
		case statusAborted:
			reply(EndAborted, ts.Zero)
			return
		case statusCommit:
			if req.Status == EndCommit && req.Req == 0 {
				// A staged transaction's explicit commit, the coordinator's last word about it
				// (gc.go): it ended the transaction as it sent it.
				rs.ended = true
				n.maybeForget(req.Txn)
			}
			n.flush(nil, func() { reply(EndOK, ts.Zero) })
			return
		}
		if req.Status == EndStage || rs.status != statusStaging {
			// An explicit commit after STAGING is already implied; otherwise the push floor rules.
			if req.TS.Less(rs.floor) {
				reply(EndPushed, rs.floor)
				return
			}
		}
		n.createRecord(req.Txn)
		if req.Status == EndCommit {
			var keys []string
			done := func() { reply(EndOK, ts.Zero) }
			if rs.status != statusStaging {
				// Not staged: the commit's written keys come with it, and the coordinator
				// resolves them on the answer.
				keys = append([]string{}, req.InFlight...)
			} else {
				// Staged (parallel commit): the coordinator left the resolution to us, for once
				// the commit is durable (committed, in coord.go, says why).
				txn, staged, at := req.Txn, rs.inFlight, req.TS
				done = func() {
					reply(EndOK, ts.Zero)
					n.resolveAll(txn, staged, true, at, n.self)
				}
			}
			if err := n.decideWith(req.Txn, txnrec.Committed, req.TS, keys, done); err != nil {
				reply(EndAborted, ts.Zero)
				return
			}
			// A staged transaction's explicit commit is its coordinator's last word. One the
			// coordinator waits for is not until the answer reaches it, which its resolution of
			// this node's key shows (onResolve), or its answer to an EndedQuery: forgotten
			// before that, the record could no longer tell a copy of the commit sent again
			// that it committed. A version of the holder's key was taken for that proof, but
			// version GC removes it once superseded, and the commit was answered "aborted"
			// (sim --protocol crdb --opt parallel-commits=off --opt gc-ttl=10ms, 2 such
			// transactions in 424 under loss and duplicates).
			rs.ended = req.Req == 0
			return
		}
		meta := encodeKeys(req.InFlight)
		if err := n.recs.Stage(req.Txn, req.TS, meta); err != nil {
			if errors.Is(err, txnrec.ErrFinal) {
				reply(EndAborted, ts.Zero)
			} else {
				// Too many in-flight writes to list: refuse rather than risk an unrecoverable record.
				reply(EndAborted, ts.Zero)
			}
			return
		}
		rs.status, rs.stageTS, rs.inFlight = statusStaging, req.TS, append([]string(nil), req.InFlight...)
		txn, v := req.Txn, n.recs.Version(req.Txn)
		if n.set.earlyStage {
			// Broken on purpose: the coordinator may count the record as staged, and with its
			// writes proven acknowledge the commit, before a crash can no longer undo it.
			reply(EndOK, ts.Zero)
			reply = func(uint8, ts.Timestamp) {}
		}
		n.flush(nil, func() {
			// This persist carried STAGING, and publishes only that. A decision taken while it
			// was in flight (recovery, or a commit after a resent stage) waits for its own,
			// later persist: published here, a push was answered committed while the disk held
			// STAGING, and after a crash recovery could abort what a pusher had already resolved
			// as committed (TestStageFlushPublishesLaterDecision).
			n.recs.Decided(txn, v)
			reply(EndOK, ts.Zero)
		})
	case EndAbort:
		if rs.status == statusCommit && req.Req != 0 {
			// The coordinator found a write missing after staging: recovery committed the
			// record meanwhile, having found every write, and its resolution and version GC
			// may have removed the write since. The coordinator still waits, so it has not
			// ended the transaction; it learns here that it committed.
			txn := req.Txn
			n.flush(nil, func() {
				if r, ok := n.recs.Get(txn); ok && r.Status == txnrec.Committed {
					reply(EndCommitted, r.CommitTS)
				}
			})
			return
		}
		// The coordinator ends the transaction as it sends an unanswered abort, and on the
		// answer to an awaited one.
		rs.ended = true
		if rs.status == statusCommit {
			n.maybeForget(req.Txn)
			return
		}
		// Deciding aborted again is a no-op that still answers once durable; only a committed
		// record refuses, and that was answered above.
		_ = n.decide(req.Txn, txnrec.Aborted, ts.Zero, func() { reply(EndAborted, ts.Zero) })
	}
}

// stagingSilent reports whether a STAGING record has waited too long for its coordinator's next
// word, so that the holder recovers it. Its coordinator heartbeats every interval while it
// runs the transaction and, once the staging and the proofs are answered, sends the explicit
// commit at once and falls silent; so a record that heard nothing for a heartbeat interval plus
// the retransmission timeout to the coordinator (rto) lost that commit, or the coordinator, as
// surely as a request unanswered that long was lost. Waiting for the record expiry (5 intervals)
// instead, as for a PENDING record, left every request on the transaction's keys waiting a
// second for each explicit commit the network lost (list-append under 2% loss, seeds 1-6: 166
// commits a run, 193 with this). Recovering a live coordinator's transaction is safe, only
// wasted: every write was answered before the staging, so recovery finds them as the
// coordinator's proofs do, and decides as it would; a PENDING record, which a push would abort,
// still waits for the expiry.
func (n *Node) stagingSilent(txn storage.TxnID, rs *recState) bool {
	silence := n.set.expiry
	if c := topo.NodeID(txn.Coordinator()); n.isDataNode(c) {
		silence = min(silence, n.set.heartbeat+n.rto(c))
	}
	return n.env.Now()-rs.lastHB > int64(silence)
}

// recoverStaging decides a STAGING transaction whose coordinator went silent: it is committed
// iff every in-flight write is durable at or below the staging timestamp. Each missing write is
// prevented from landing there later, so the answer cannot change after it is given.
func (n *Node) recoverStaging(txn storage.TxnID) {
	rs := n.rec(txn)
	if rs.recovering || rs.status != statusStaging {
		return
	}
	rs.recovering = true
	keys, at := rs.inFlight, rs.stageTS
	nodes, byNode := groupByNode(n.tp, keys)
	missing, left := false, len(nodes)
	var calls []uint64
	// The answers are awaited for the record expiry, and at least a retransmission timeout of
	// the farthest leaseholder: with heartbeats of 10 ms the expiry (50 ms) was shorter than a
	// round trip between regions, no answer ever came in time, and a STAGING record whose
	// explicit commit was lost was never decided, its intents blocking readers for good.
	wait := n.set.expiry
	for _, nd := range nodes {
		wait = max(wait, n.rto(nd))
	}
	timer := n.env.After(wait, func() {
		// A leaseholder is down: a later attempt asks again, and this one's answers, which
		// a crash may have swallowed, are no longer awaited.
		rs.recovering = false
		for _, id := range calls {
			delete(n.pending, id)
		}
	})
	finish := func() {
		n.env.Cancel(timer)
		rs.recovering = false
		if rs.status != statusStaging {
			return
		}
		st := txnrec.Committed
		if missing {
			st = txnrec.Aborted
		}
		if err := n.decide(txn, st, at, func() { n.resolveAll(txn, keys, st == txnrec.Committed, at, n.self) }); err != nil {
			return
		}
		n.m.Add("recovery/"+st.String(), 1)
	}
	if left == 0 {
		finish()
		return
	}
	for _, nd := range nodes {
		nodeKeys := byNode[nd]
		calls = append(calls, n.call(nd, func(r uint64) wire.Msg {
			return &QueryIntentReq{Req: r, Txn: txn, Keys: nodeKeys, TS: at, Prevent: true}
		}, func(m wire.Msg) {
			if !m.(*QueryIntentResp).Found {
				missing = true
			}
			if left--; left == 0 {
				finish()
			}
		}))
	}
}

// resolveAll sends intent resolutions to the leaseholders of keys, one message per node in
// node order; record is the record holder, which each tells once a commit's resolution is
// durable.
func (n *Node) resolveAll(txn storage.TxnID, keys []string, commit bool, at ts.Timestamp, record topo.NodeID) {
	nodes, byNode := groupByNode(n.tp, keys)
	for _, nd := range nodes {
		n.env.Send(nd, &ResolveReq{Txn: txn, Keys: byNode[nd], Commit: commit, TS: at, Record: record})
	}
}

// groupByNode splits keys by leaseholder, returning the nodes in ascending order (so sends are
// deterministic) and each node's keys in their original order.
func groupByNode(tp *topo.Topology, keys []string) ([]topo.NodeID, map[topo.NodeID][]string) {
	byNode := map[topo.NodeID][]string{}
	var nodes []topo.NodeID
	for _, k := range keys {
		nd := tp.PrimaryOf(k)
		if _, ok := byNode[nd]; !ok {
			nodes = append(nodes, nd)
		}
		byNode[nd] = append(byNode[nd], k)
	}
	sortNodes(nodes)
	return nodes, byNode
}
