package crdb

import (
	"slices"
	"time"

	"github.com/meridiandb/meridian/internal/node"
	"github.com/meridiandb/meridian/internal/protocol/txnkit"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/ts"
	"github.com/meridiandb/meridian/internal/wire"
)

// Coordinator (gateway) side: one coordTxn per client transaction. It keeps the provisional
// commit timestamp (writeTS), the timestamp the reads hold at (readTS), the read and write sets,
// and drives refresh, heartbeats and the (parallel) commit.

type coordTxn struct {
	key      txnkit.ClientTxn
	meta     TxnMeta
	readOnly bool
	readTS   ts.Timestamp                 // reads are valid at this timestamp
	writeTS  ts.Timestamp                 // provisional commit timestamp, >= readTS
	limit    ts.Timestamp                 // global uncertainty limit: begin + max offset
	observed map[topo.NodeID]ts.Timestamp // first clock reading of each node visited

	readKeys  []string
	readSpans []Span // spans scanned, refreshed like readKeys
	read      map[string]bool
	writeKeys []string
	wrote     map[string]bool
	// acked are the written keys whose leaseholder acknowledged the write. A pipelined write is
	// acknowledged before its intent is durable, so a leaseholder that crashes meanwhile comes
	// back without it: a later read or scan of the key then says so (ReadReq.OwnWrite,
	// ScanReq.OwnKeys) and is refused rather than answered with what lies below the lost write.
	acked map[string]bool
	// writeBytes holds the writes to wire.MaxTxnWriteBytes: the staging record (EndTxnReq)
	// lists every key written, and each leaseholder's proof and resolution its share of them.
	writeBytes txnkit.TxnWrites

	// calls are the requests sent for the transaction: once it ends their answers are not
	// awaited, and one a crash or a lost message swallowed would otherwise be for ever.
	calls []uint64

	remoteAbort string // learned from a heartbeat: the record was aborted by a pusher
	// createRecord: the record is anchored (meta.RecordNode) but no write has carried
	// CreateRecord yet; the next write sent does.
	createRecord bool
	anchorKey    string // the key of the write that creates the record (HeartbeatReq.Key)
	busy         bool
	nextSeq      uint32 // requests numbered below it were served already
	committing   bool
	req          *wire.ClientRequest // the request being served
	opStart      int64
	idleTimer    node.TimerID
	hbTimer      node.TimerID
}

// causeUnknownTxn answers a request of a transaction the coordinator does not hold (onClient).
const causeUnknownTxn = txnkit.CauseUnknownTxn

// causeClientAbort answers the request a client gave up on when it aborts meanwhile (onClient).
const causeClientAbort = "client-abort"

// maxWaitingBeforeReady bounds the client requests held while the incarnation is persisted.
const maxWaitingBeforeReady = 10000

type queuedReq struct {
	from topo.NodeID
	req  *wire.ClientRequest
}

// persistIncarnation makes n.inc durable, at a start or after a Renew; client requests wait
// until then.
func (n *Node) persistIncarnation() {
	n.ready = false
	n.flush([]node.Write{n.inc.Write()}, n.becomeReady)
}

// becomeReady runs once this life's incarnation is durable: transaction ids may be handed out,
// and the client requests that came earlier are served, in arrival order.
func (n *Node) becomeReady() {
	n.ready = true
	if !n.started {
		n.started = true
		early := n.early
		n.early = nil
		for _, e := range early {
			n.Handle(e.from, e.m)
		}
	}
	n.announceRestart()
	n.sendHeld()
	w := n.waiting
	n.waiting = nil
	for _, q := range w {
		n.onClient(q.from, q.req)
	}
}

func (n *Node) onClient(from topo.NodeID, req *wire.ClientRequest) {
	if bad := txnkit.Validate(req); bad != nil {
		n.env.Send(from, bad)
		return
	}
	if !n.ready {
		if len(n.waiting) >= maxWaitingBeforeReady {
			txnkit.Reply(n.env, from, req, &wire.ClientReply{Code: wire.CodeUnavailable, Error: "crdb: coordinator recovering"})
			return
		}
		n.waiting = append(n.waiting, queuedReq{from, req})
		return
	}
	k := txnkit.ClientTxn{Client: from, Txn: req.Txn}
	t := n.txns[k]
	if t == nil {
		if n.ended.RefuseLateFirst(n.env, from, req) {
			// A copy of an ended transaction's first request, delivered late.
			n.m.Add("late-first-request", 1)
			return
		}
		// A later request of a transaction the idle timeout dropped (its writes are being
		// rolled back) or an earlier life held is refused, never begun afresh.
		if answered, refused := txnkit.AnswerUnheld(n.env, from, req); answered {
			if refused {
				n.m.Add("abort/"+causeUnknownTxn, 1)
			}
			return
		}
		if n.inc.Spent() {
			// The next id would repeat this life's first: take the next number, and wait,
			// with every request after this one, until it is durable, as at a start.
			if err := n.inc.Renew(); err != nil {
				txnkit.Reply(n.env, from, req, &wire.ClientReply{Code: wire.CodeUnavailable, Error: "crdb: " + err.Error()})
				return
			}
			n.persistIncarnation()
			n.waiting = append(n.waiting, queuedReq{from, req})
			return
		}
		t = n.begin(k, req)
	}
	if req.Seq < t.nextSeq {
		// A duplicate of the request being served, or of one already answered: running it
		// again could redo a write, and its answer could be taken for a later request's.
		return
	}
	if t.busy {
		if req.Op == wire.OpAbort && !t.committing {
			// The client stopped waiting for its request (its timeout: the request or its
			// answer may be lost for good) and abandons the transaction. Dropped, the abort
			// cost the client a second timeout, and the intents and the heartbeated record
			// blocked the transaction's keys until the idle timeout. Rolling back now leaves
			// nothing of the request behind: finish forgets its calls, so late answers (and
			// retransmissions) stop, and every callback checks live; a write still on its way
			// is in writeKeys already, so it is resolved, or found by a pusher under the
			// ABORTED record. While a commit is in flight its outcome is pending (a STAGING
			// record whose writes are all proven is committed): an abort then could roll back
			// a committed transaction, so it is refused like any request sent while another
			// is in flight (below); the client, which never aborts after a commit it sent,
			// learns the outcome from the commit's answer.
			n.rollback(t, "")
			txnkit.Aborted(n.env, t.key.Client, t.req, causeClientAbort)
			t.busy, t.req = false, nil
			txnkit.OK(n.env, from, req)
			return
		}
		// A client that did not wait for its previous answer (a gRPC client pipelining its
		// requests). Dropped, the request was never answered, and a commit sent after the
		// answer it did get succeeded without it.
		txnkit.Reply(n.env, from, req, &wire.ClientReply{Code: wire.CodeBadArgument, Error: "request while another of the transaction is in flight"})
		return
	}
	t.busy, t.req, t.opStart, t.nextSeq = true, req, n.env.Now(), req.Seq+1
	n.armIdle(t)
	if t.remoteAbort != "" && req.Op != wire.OpAbort {
		n.abort(t, t.remoteAbort)
		return
	}
	if !t.writeBytes.Admit(req) {
		// Refused before anything is sent: the transaction goes on without it.
		n.replyClient(t, txnkit.TxnWritesRefused())
		return
	}
	switch req.Op {
	case wire.OpGet:
		n.read(t, req.Key)
	case wire.OpPut, wire.OpDelete:
		n.write(t, req)
	case wire.OpBatch:
		n.batch(t, req.Batch)
	case wire.OpScan:
		n.scan(t, Span{Start: req.Key, End: req.EndKey}, req.Limit)
	case wire.OpCommit:
		n.commit(t)
	case wire.OpAbort:
		n.rollback(t, "")
		n.replyClient(t, &wire.ClientReply{Code: wire.CodeOK})
	}
}

// begin starts a client's transaction. A retry (Attempt > 0) takes the age the client's
// aborted attempt left (rollback); anything else starts a new age (txnkit.RetryAges, which
// keeps an age only from an abort to the client's next begin, for an idle timeout at most).
func (n *Node) begin(k txnkit.ClientTxn, req *wire.ClientRequest) *coordTxn {
	now := n.now()
	age := n.clientAge.Begin(k.Client, req.Attempt, now)
	t := &coordTxn{
		key:      k,
		meta:     TxnMeta{ID: n.inc.NextTxnID(n.self), Age: age, RecordNode: -1, Coord: n.self},
		readOnly: req.ReadOnly,
		readTS:   now,
		writeTS:  now,
		limit:    ts.Timestamp{Wall: now.Wall + int64(n.set.maxOffset)},
		read:     map[string]bool{},
		wrote:    map[string]bool{},
		acked:    map[string]bool{},
		observed: map[topo.NodeID]ts.Timestamp{},
	}
	n.txns[k] = t
	n.byID[t.meta.ID] = t
	return t
}

func (n *Node) armIdle(t *coordTxn) {
	n.env.Cancel(t.idleTimer)
	t.idleTimer = n.env.After(n.set.idle, func() {
		if n.txns[t.key] != t {
			return
		}
		switch {
		case t.committing:
			// Staging or proving hung (a node is down): the outcome is for recovery to decide.
			n.m.Add("commit/unknown", 1)
			n.replyClient(t, &wire.ClientReply{Code: wire.CodeUnknown, Error: "crdb: commit timed out"})
			n.drop(t)
		default:
			n.abort(t, "coordinator-timeout")
		}
	})
}

// replyClient answers the request being served.
func (n *Node) replyClient(t *coordTxn, r *wire.ClientReply) {
	if !t.busy || t.req == nil {
		return
	}
	if d := n.env.Now() - t.opStart; d >= 0 {
		n.m.Observe("phase/"+t.req.Op.String(), d)
	}
	txnkit.Reply(n.env, t.key.Client, t.req, r)
	t.busy, t.req = false, nil
}

// live reports whether t is still the coordinator's transaction (not finished or dropped).
func (n *Node) live(t *coordTxn) bool { return n.txns[t.key] == t }

func (n *Node) read(t *coordTxn, key string) {
	n.sendRead(t, key, nil, func(resp *ReadResp) {
		if resp.Uncertain {
			n.m.Add("uncertainty/hit", 1)
			n.refreshPastUncertainty(t, resp.ValueTS, func() { n.read(t, key) })
			return
		}
		n.noteRead(t, key)
		n.replyClient(t, &wire.ClientReply{Code: wire.CodeOK, Found: resp.Found, Value: resp.Value})
	})
}

// sendRead reads key at t.readTS (fixed when the request leaves) and hands a live
// transaction's answer to then. With an outbox the request waits there (see sendOutbox).
func (n *Node) sendRead(t *coordTxn, key string, ob *outbox, then func(*ReadResp)) {
	nd := n.tp.PrimaryOf(key)
	limit := t.limit
	if o, ok := t.observed[nd]; ok {
		limit = ts.MinOf(limit, o)
	}
	n.callFor(t, ob, nd, func(r uint64) wire.Msg {
		return &ReadReq{Req: r, Txn: t.meta, Key: key, ReadTS: t.readTS, Limit: limit, ReadOnly: t.readOnly, OwnWrite: t.acked[key]}
	}, func(m wire.Msg) {
		resp := m.(*ReadResp)
		if !n.live(t) {
			return
		}
		if _, ok := t.observed[nd]; !ok {
			t.observed[nd] = observedAt(resp.Clock, resp.Floor)
		}
		if resp.WriteLost && resp.Aborted {
			n.abort(t, "push-abort") // an older writer's push removed the intent
			return
		}
		if resp.WriteLost {
			n.abort(t, "write-lost")
			return
		}
		if resp.TooOld {
			n.abort(t, txnkit.AbortTooOld)
			return
		}
		then(resp)
	})
}

// noteRead adds a completed read to the set every refresh validates.
func (n *Node) noteRead(t *coordTxn, key string) {
	if !t.read[key] {
		t.read[key] = true
		t.readKeys = append(t.readKeys, key)
	}
}

// refreshPastUncertainty handles ReadWithinUncertaintyInterval: a value at valueTS may have been
// written before we began, so the transaction moves up to it, refreshing the reads made so far;
// if they no longer hold, it restarts (the client retries; the HLC has learned the value's
// timestamp, so the retry begins above it). retry re-issues the uncertain read(s) at the new
// readTS. The caller must have no read still out at the old readTS: its answer would be valid
// only there, and the refresh could not vouch for it.
func (n *Node) refreshPastUncertainty(t *coordTxn, valueTS ts.Timestamp, retry func()) {
	n.refresh(t, ts.MaxOf(t.writeTS, valueTS), func(ok bool) {
		if !ok {
			n.m.Add("uncertainty/restart", 1)
			n.abort(t, "uncertainty")
			return
		}
		n.m.Add("uncertainty/refreshed", 1)
		retry()
	})
}

func (n *Node) write(t *coordTxn, req *wire.ClientRequest) {
	n.anchorRecord(t, req.Key)
	n.sendWrite(t, req.Key, req.Value, req.Op == wire.OpDelete, nil, func() {
		n.replyClient(t, &wire.ClientReply{Code: wire.CodeOK})
	})
}

// anchorRecord makes key's leaseholder the home of t's record if t has none yet; the next
// write sent creates the record there.
func (n *Node) anchorRecord(t *coordTxn, key string) {
	if t.meta.RecordNode >= 0 {
		return
	}
	t.meta.RecordNode = n.tp.PrimaryOf(key)
	t.createRecord = true
	t.anchorKey = key
	n.heartbeat(t)
}

// sendWrite lays t's intent on key at t.writeTS; then runs once it is acknowledged, with
// writeTS raised to where the intent landed. An aborted answer aborts t ("push-abort"), and so
// does a WriteTooOld refusal of a key t read ("write-too-old"). With an outbox the request waits
// there (see sendOutbox).
func (n *Node) sendWrite(t *coordTxn, key string, value []byte, tombstone bool, ob *outbox, then func()) {
	create := t.createRecord
	t.createRecord = false
	if !t.wrote[key] {
		// Listed before the answer, so an abort resolves it even if the answer never comes.
		t.wrote[key] = true
		t.writeKeys = append(t.writeKeys, key)
	}
	var readAt ts.Timestamp
	if t.read[key] && !n.set.noRefresh {
		readAt = t.readTS
	}
	n.callFor(t, ob, n.tp.PrimaryOf(key), func(r uint64) wire.Msg {
		return &WriteReq{Req: r, Txn: t.meta, Key: key, Value: value, Tombstone: tombstone,
			WriteTS: t.writeTS, CreateRecord: create, ReadAt: readAt}
	}, func(m wire.Msg) {
		resp := m.(*WriteResp)
		if !n.live(t) {
			return
		}
		if resp.TooOld {
			n.abort(t, txnkit.AbortTooOld)
			return
		}
		if resp.Aborted {
			n.abort(t, "push-abort")
			return
		}
		if resp.WriteTooOld {
			n.abort(t, "write-too-old")
			return
		}
		if t.writeTS.Less(resp.WrittenTS) {
			t.writeTS = resp.WrittenTS
		}
		t.acked[key] = true
		then()
	})
}

// batch runs an OpBatch's operations concurrently, as DistSender runs a BatchRequest's parts
// on different ranges in parallel: every read at the same readTS, every write at the same
// writeTS, all sent at once. Uncertain reads are settled only once the whole round has
// answered: refreshing earlier would move readTS while other reads are still out at the old
// one, and those would then complete unvalidated between the two. After the refresh (which
// covers the round's completed reads, now in readKeys) only the uncertain reads go out again,
// as a new round; they may be uncertain again, so this loops as a single read does. A round
// costs one message per leaseholder it touches (and one answer from each), not one per
// operation.
func (n *Node) batch(t *coordTxn, ops []wire.BatchOp) {
	n.m.Add("batch/requests", 1)
	n.m.Add("batch/ops", int64(len(ops)))
	results := make([]wire.BatchResult, len(ops))
	// The record goes with the first write in request order, before anything is sent, so every
	// operation of the batch carries the same RecordNode.
	for _, op := range ops {
		if op.Op != wire.OpGet {
			n.anchorRecord(t, op.Key)
			break
		}
	}
	var round func(idx []int)
	round = func(idx []int) {
		left := len(idx)
		var uncertain []int
		var uncertainTS ts.Timestamp
		answered := func() {
			if left--; left > 0 {
				return
			}
			if len(uncertain) == 0 {
				if txnkit.ResultsTooLarge(results) {
					// It would not fit a frame. The reads are in the read set and the writes'
					// intents listed, as for single requests, so the transaction goes on.
					n.replyClient(t, txnkit.BatchAnswerRefused())
					return
				}
				n.replyClient(t, &wire.ClientReply{Code: wire.CodeOK, Results: results})
				return
			}
			slices.Sort(uncertain) // answer order is arrival order; retry in request order
			n.refreshPastUncertainty(t, uncertainTS, func() { round(uncertain) })
		}
		ob := &outbox{}
		for _, i := range idx {
			op := ops[i]
			if op.Op == wire.OpGet {
				n.sendRead(t, op.Key, ob, func(resp *ReadResp) {
					if resp.Uncertain {
						n.m.Add("uncertainty/hit", 1)
						uncertain = append(uncertain, i)
						uncertainTS = ts.MaxOf(uncertainTS, resp.ValueTS)
					} else {
						n.noteRead(t, op.Key)
						results[i] = wire.BatchResult{Found: resp.Found, Value: resp.Value}
					}
					answered()
				})
				continue
			}
			n.sendWrite(t, op.Key, op.Value, op.Op == wire.OpDelete, ob, answered)
		}
		n.sendOutbox(ob)
	}
	all := make([]int, len(ops))
	for i := range all {
		all[i] = i
	}
	round(all)
}

// outbox holds a round's requests until all are built, so that the requests for one node can
// travel as one OpsReq.
type outbox struct {
	nodes []topo.NodeID // in order of first use, so sends are deterministic
	msgs  [][]wire.Msg  // parallel to nodes
}

func (ob *outbox) add(to topo.NodeID, m wire.Msg) {
	for i, nd := range ob.nodes {
		if nd == to {
			ob.msgs[i] = append(ob.msgs[i], m)
			return
		}
	}
	ob.nodes = append(ob.nodes, to)
	ob.msgs = append(ob.msgs, []wire.Msg{m})
}

// sendOutbox sends each node its requests: a lone request as itself, several as one OpsReq.
func (n *Node) sendOutbox(ob *outbox) {
	for i, to := range ob.nodes {
		msgs := ob.msgs[i]
		if len(msgs) == 1 {
			n.env.Send(to, msgs[0])
			continue
		}
		req := &OpsReq{Ops: make([]SubReq, len(msgs))}
		for j, m := range msgs {
			switch m := m.(type) {
			case *ReadReq:
				req.Ops[j].Read = m
			case *WriteReq:
				req.Ops[j].Write = m
			}
		}
		n.env.Send(to, req)
	}
}

// onOpsResp hands each sub-answer to the request it answers, in request order, as if each had
// come alone.
func (n *Node) onOpsResp(m *OpsResp) {
	n.observe(m.Clock)
	for _, sub := range m.Ops {
		switch {
		case sub.Read != nil:
			n.complete(sub.Read.Req, sub.Read.Clock, sub.Read)
		case sub.Write != nil:
			n.complete(sub.Write.Req, sub.Write.Clock, sub.Write)
		}
	}
}

func (n *Node) heartbeat(t *coordTxn) {
	t.hbTimer = n.env.After(n.set.heartbeat, func() {
		if !n.live(t) {
			return
		}
		n.env.Send(t.meta.RecordNode, &HeartbeatReq{Txn: t.meta.ID, Key: t.anchorKey, Aborted: t.remoteAbort != ""})
		n.heartbeat(t)
	})
}

func (n *Node) onHeartbeatResp(m *HeartbeatResp) {
	if t := n.byID[m.Txn]; t != nil && m.Aborted && !t.committing {
		t.remoteAbort = "push-abort"
	}
}

// refresh re-validates every read at to (CockroachDB's read refresh): success moves readTS
// (and writeTS) to to. The no-refresh mutant skips the validation. A leaseholder that refuses
// the refresh because to is below its GC horizon (onRefresh) aborts the transaction with cause
// too-old, whatever done would have done: it can no longer commit anywhere up to to.
func (n *Node) refresh(t *coordTxn, to ts.Timestamp, done func(ok bool)) {
	if to.LessEq(t.readTS) {
		done(true)
		return
	}
	ok := func() {
		t.readTS = to
		t.writeTS = ts.MaxOf(t.writeTS, to)
		done(true)
	}
	if n.set.noRefresh || len(t.readKeys)+len(t.readSpans) == 0 {
		ok()
		return
	}
	if n.set.refreshOff {
		n.m.Add("refresh/off", 1)
		done(false)
		return
	}
	start := n.env.Now()
	shares := refreshShares(n.tp, t.readKeys, t.readSpans)
	left, good, tooOld := len(shares), true, false
	from := t.readTS
	for _, sh := range shares {
		n.callFor(t, nil, sh.node, func(r uint64) wire.Msg {
			return &RefreshReq{Req: r, Txn: t.meta.ID, Keys: sh.keys, Spans: sh.spans, From: from, To: to}
		}, func(m wire.Msg) {
			r := m.(*RefreshResp)
			good, tooOld = good && r.OK, tooOld || r.TooOld
			if left--; left > 0 || !n.live(t) {
				return
			}
			n.m.Observe("phase/refresh", n.env.Now()-start)
			if tooOld {
				n.m.Add("refresh/failed", 1)
				n.abort(t, txnkit.AbortTooOld)
				return
			}
			if good {
				n.m.Add("refresh/ok", 1)
				ok()
			} else {
				n.m.Add("refresh/failed", 1)
				done(false)
			}
		})
	}
}

func (n *Node) commit(t *coordTxn) {
	if len(t.writeKeys) == 0 {
		// Read-only: every read already holds at readTS (uncertainty refreshed eagerly). A
		// readTS above the gateway's clock is waited out as a commit timestamp is (committed),
		// as CockroachDB commit-waits a read-only transaction at a future timestamp: it comes
		// from an HLC that observed a write pushed to a restarted leaseholder's floor (or from
		// an uncertain value there), and the reads may have found such a write decided before
		// its own gateway's wait ended; acknowledged at once, a read begun afterwards through
		// another gateway, its uncertainty interval ending max-offset above its clock, did not
		// find what this one returned (TestNoStaleReadAfterFutureRead).
		if n.waitOut(t, t.readTS, func() { n.commit(t) }) {
			return
		}
		n.m.Add("commit/read-only", 1)
		n.finish(t)
		n.replyClient(t, &wire.ClientReply{Code: wire.CodeOK, CommitTS: t.readTS})
		return
	}
	t.committing = true
	n.commitAt(t, t.writeTS)
}

// commitAt refreshes the reads up to c if the timestamp was pushed, then commits at c.
func (n *Node) commitAt(t *coordTxn, c ts.Timestamp) {
	n.refresh(t, c, func(ok bool) {
		if !ok {
			n.abort(t, "refresh-failed")
			return
		}
		n.stage(t, c)
	})
}

// stage runs the commit at c. With parallel commits, the STAGING record and the proofs of the
// pipelined writes go out together, and the transaction is committed as soon as both are
// durable; without, the writes are proven first and the record then marked COMMITTED.
func (n *Node) stage(t *coordTxn, c ts.Timestamp) {
	start := n.env.Now()
	var (
		endOutcome uint8
		endTS      ts.Timestamp
		endDone    bool
		proofsLeft int
		missing    bool
	)
	decideIfReady := func() {
		if !endDone || proofsLeft > 0 || !n.live(t) {
			return
		}
		switch endOutcome {
		case EndAborted:
			n.abort(t, "push-abort")
		case EndPushed:
			// A reader pushed our timestamp: refresh up to it and try again.
			n.m.Add("commit/pushed", 1)
			n.commitAt(t, ts.MaxOf(endTS, c))
		default:
			if missing && n.set.parallel {
				n.abortStaged(t)
				return
			}
			if missing {
				n.abort(t, "write-lost")
				return
			}
			n.m.Observe("phase/stage", n.env.Now()-start)
			n.committed(t, c)
		}
	}
	sendEnd := func(status uint8) {
		n.callFor(t, nil, t.meta.RecordNode, func(r uint64) wire.Msg {
			return &EndTxnReq{Req: r, Txn: t.meta.ID, Status: status, TS: c, InFlight: t.writeKeys}
		}, func(m wire.Msg) {
			resp := m.(*EndTxnResp)
			endOutcome, endTS, endDone = resp.Outcome, resp.TS, true
			decideIfReady()
		})
	}
	// One proof per leaseholder, covering all of its keys.
	nodes, byNode := groupByNode(n.tp, t.writeKeys)
	proofsLeft = len(nodes)
	for _, nd := range nodes {
		keys := byNode[nd]
		n.callFor(t, nil, nd, func(r uint64) wire.Msg {
			return &QueryIntentReq{Req: r, Txn: t.meta.ID, Keys: keys, TS: c, Prevent: true}
		}, func(m wire.Msg) {
			if !m.(*QueryIntentResp).Found {
				missing = true
			}
			proofsLeft--
			if proofsLeft == 0 && !endDone && !n.set.parallel {
				if missing || !n.live(t) {
					endDone, endOutcome = true, EndOK
					decideIfReady()
					return
				}
				sendEnd(EndCommit)
				return
			}
			decideIfReady()
		})
	}
	if n.set.parallel {
		sendEnd(EndStage)
	}
}

// abortStaged rolls back a staged transaction one of whose writes a proof found missing, unless
// its record holder has committed it meanwhile. A missing write means the transaction can no
// longer commit implicitly (the proof prevented it), but not that it did not commit: the
// holder recovers a STAGING record whose coordinator seems silent (the proof's answer lost and
// re-sent), finds every write, commits and resolves them, and once a later write supersedes
// the resolved version, version GC may remove it before the re-sent proof comes. Aborting on
// the proof then told the client a committed transaction had aborted (sim --protocol crdb
// --opt gc-ttl=1s under 20% loss). So the abort is asked of the holder, and awaited: it
// answers with its commit if it has one.
func (n *Node) abortStaged(t *coordTxn) {
	n.callFor(t, nil, t.meta.RecordNode, func(r uint64) wire.Msg {
		return &EndTxnReq{Req: r, Txn: t.meta.ID, Status: EndAbort}
	}, func(m wire.Msg) {
		if !n.live(t) {
			return
		}
		if resp := m.(*EndTxnResp); resp.Outcome == EndCommitted {
			n.m.Add("commit/recovered", 1)
			n.committed(t, resp.TS)
			return
		}
		n.abort(t, "write-lost")
	})
}

// committed reports the commit to the client and has the intents resolved asynchronously.
// An intent is resolved as committed only once the record is durably COMMITTED: with parallel
// commits its holder resolves them when it has made the commit explicit (onEndTxn), as
// CockroachDB's record range does after EndTxn. Resolving from here at once, while the record
// was still STAGING, let a resolved write's version be superseded and garbage-collected before
// a recovery of the record (its holder down, the explicit commit lost) asked for it; recovery
// then found the write missing and aborted a transaction its client was told committed
// (TestRecoveryAfterGCKeepsCommit). Intents are never collected, so a STAGING record's are
// always found.
//
// A commit timestamp above the gateway's clock is waited out first, as CockroachDB waits out a
// commit timestamp in the future: single-key linearizability rests on every later reader's
// uncertainty interval covering the write, which holds for a timestamp no clock has passed only
// once the gateway's clock passes it. Timestamps taken from clocks never wait; one from a
// leaseholder's read floor, raised 2×max-offset ahead after its restart, does (a put committed
// at the floor in the restarted node's first second, then read through another gateway, was
// not found: TestNoStaleReadAfterLeaseholderStart). The transaction stays busy meanwhile, so a
// copy of the commit is still dropped rather than refused before the answer.
func (n *Node) committed(t *coordTxn, c ts.Timestamp) {
	if n.waitOut(t, c, func() { n.committed(t, c) }) {
		return
	}
	n.m.Add("commit/ok", 1)
	n.replyClient(t, &wire.ClientReply{Code: wire.CodeOK, CommitTS: c})
	if n.set.parallel {
		// Implicitly committed already; make it explicit so pushers need not recover it.
		n.env.Send(t.meta.RecordNode, &EndTxnReq{Txn: t.meta.ID, Status: EndCommit, TS: c})
	} else {
		// The record holder answered once the COMMITTED record was durable.
		n.resolveAll(t.meta.ID, t.writeKeys, true, c, t.meta.RecordNode)
	}
	n.finish(t)
}

// waitOut reports whether the gateway's clock is still below c, and if so runs again, once it
// has passed c and if t is still live, whatever the commit of t at c was about to answer.
func (n *Node) waitOut(t *coordTxn, c ts.Timestamp, again func()) bool {
	wait := c.Wall - n.env.Now()
	if wait <= 0 {
		return false
	}
	n.m.Add("commit/future-wait", 1)
	n.m.Observe("phase/future-commit-wait", wait)
	// The wait ends on its own (a crash ends it with everything else), so the idle timeout,
	// which catches a client gone silent or an operation that hangs, must not run through it:
	// shorter than the wait (up to 2×max-offset), it answered a commit that had succeeded as
	// of unknown outcome (TestFutureCommitWaitOutlastsIdleTimeout).
	n.env.Cancel(t.idleTimer)
	n.env.After(time.Duration(wait), func() {
		if n.live(t) {
			again()
		}
	})
	return true
}

// abort rolls t back and answers the request being served with cause.
func (n *Node) abort(t *coordTxn, cause string) {
	n.rollback(t, cause)
	n.replyClient(t, &wire.ClientReply{Code: wire.CodeAborted, Cause: cause})
}

func (n *Node) rollback(t *coordTxn, cause string) {
	if cause != "" {
		n.m.Add("abort/"+cause, 1)
	}
	// Kept before the client hears of the abort, so its retry finds it (begin).
	n.clientAge.Aborted(t.key.Client, t.meta.Age, n.env.Now())
	if t.meta.RecordNode >= 0 {
		n.env.Send(t.meta.RecordNode, &EndTxnReq{Txn: t.meta.ID, Status: EndAbort})
	}
	n.resolveAll(t.meta.ID, t.writeKeys, false, ts.Zero, t.meta.RecordNode)
	n.finish(t)
}

// callFor is callVia for a request of t.
func (n *Node) callFor(t *coordTxn, ob *outbox, to topo.NodeID, build func(req uint64) wire.Msg, then func(wire.Msg)) {
	t.calls = append(t.calls, n.callVia(ob, to, build, then))
}

// finish forgets t (its answer, if any, is sent by the caller).
func (n *Node) finish(t *coordTxn) {
	for _, id := range t.calls {
		delete(n.pending, id)
	}
	t.calls = nil
	n.env.Cancel(t.idleTimer)
	n.env.Cancel(t.hbTimer)
	delete(n.txns, t.key)
	delete(n.byID, t.meta.ID)
	n.ended.Ended(t.key, n.env.Now(), n.set.idle)
}

// drop forgets t without resolving anything (its fate belongs to recovery now).
func (n *Node) drop(t *coordTxn) { n.finish(t) }

func sortNodes(ns []topo.NodeID) { slices.Sort(ns) }
