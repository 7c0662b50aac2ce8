package crdb

import (
	"slices"
	"time"

	"github.com/meridiandb/meridian/internal/node"
	"github.com/meridiandb/meridian/internal/protocol/txnkit"
	"github.com/meridiandb/meridian/internal/storage"
	"github.com/meridiandb/meridian/internal/storage/mvcc"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/ts"
	"github.com/meridiandb/meridian/internal/wire"
)

// Leaseholder side: evaluating reads, writes, refreshes and intent queries against the MVCC
// store, the timestamp cache (the store's read watermark plus lastReader), and the per-key wait
// queues of requests blocked on another transaction's intent.

// readMark remembers which transaction raised a key's timestamp-cache entry, so that a
// transaction is not pushed by its own read (CockroachDB's tscache stores the reader's id too).
// txn 0 means "several transactions read at that timestamp".
type readMark struct {
	at  ts.Timestamp
	txn storage.TxnID
}

// blockedOp is a request waiting for another transaction's intent to go away.
type blockedOp struct {
	key      string
	txn      TxnMeta
	from     topo.NodeID // who sent the request, and its id there: a copy of it is dropped
	req      uint64
	write    bool
	pushTo   ts.Timestamp
	pushee   storage.TxnID
	since    int64
	retry    func()
	timer    node.TimerID
	done     bool
	pushReqs []uint64 // every push sent, answered or not: none is awaited once done
}

func (n *Node) bumpReadTS(key string, at ts.Timestamp, txn storage.TxnID) {
	wm := n.store.ReadWatermark(key)
	switch c := at.Compare(wm); {
	case c > 0:
		n.store.BumpReadWatermark(key, at)
		n.lastReader[key] = readMark{at, txn}
	case c == 0:
		if rm, ok := n.lastReader[key]; !ok || rm.at != at || rm.txn != txn {
			n.lastReader[key] = readMark{at, 0}
		}
	}
}

// writeFloor is the lowest timestamp txn may write key at: above every read of another
// transaction.
func (n *Node) writeFloor(key string, txn storage.TxnID) ts.Timestamp {
	return ts.MaxOf(n.keyWriteFloor(key, txn), n.spanWriteFloor(key, txn))
}

// keyWriteFloor is writeFloor as far as the key's own timestamp-cache entry goes.
func (n *Node) keyWriteFloor(key string, txn storage.TxnID) ts.Timestamp {
	wm := n.store.ReadWatermark(key)
	if rm, ok := n.lastReader[key]; ok && rm.at == wm && rm.txn == txn && txn != 0 && n.store.ReadFloor().Less(wm) {
		// Our own read set the entry; reads of others are strictly below it. Writing at wm
		// itself would still hide from a reader at wm, but that reader is us. Not when wm is
		// the read floor: span marks folded into it (markSpan), or dropped under it, stand for
		// other transactions' scans of key at wm that lastReader never saw.
		return ts.Zero
	}
	if wm.IsZero() {
		return ts.Zero
	}
	return wm.Next()
}

func (n *Node) onRead(from topo.NodeID, req *ReadReq) {
	if n.waitingHere(from, req.Txn.ID, req.Req, req.Key) {
		return
	}
	n.startRead(from, req, func(r *ReadResp) { n.env.Send(from, r) })
}

// waitingHere reports whether the request numbered req that from sent for txn waits here on an
// intent on key: a copy of it (the network's, or its sender's again: retransmit) is dropped,
// since the waiting one is answered once the intent goes. Evaluated again, it would queue a
// second time and push the intent's transaction twice as often, for one answer that is used.
func (n *Node) waitingHere(from topo.NodeID, txn storage.TxnID, req uint64, key string) bool {
	for _, op := range n.blocked[key] {
		if !op.done && op.from == from && op.req == req && op.txn.ID == txn {
			return true
		}
	}
	return false
}

// startRead evaluates a read that just arrived; respond gets its answer (now, or once the
// intents it waits on are gone).
func (n *Node) startRead(from topo.NodeID, req *ReadReq, respond func(*ReadResp)) {
	n.observe(req.ReadTS)
	// Observed timestamp: nothing written here after now can have committed before the reader
	// began, so the uncertainty interval ends at this node's clock (the coordinator passes the
	// first reading it saw from us in Limit on later visits). Fixed once per request, so a
	// request that waits does not see its interval grow with the clock.
	r := *req
	// After a restart the clock may be below what the previous life wrote with timestamps from
	// faster clocks: the observed timestamp is then the read floor, which lies above all of it,
	// as CockroachDB raises it to a new lease's start (review: a stale read after a restart).
	r.Limit = ts.MinOf(req.Limit, ts.MaxOf(n.hlc.Last(), n.store.ReadFloor()))
	n.evalRead(from, &r, n.env.Now(), respond)
}

func (n *Node) evalRead(from topo.NodeID, req *ReadReq, since int64, respond func(*ReadResp)) {
	reply := func(r *ReadResp) {
		r.Req, r.Clock, r.Floor = req.Req, n.now(), n.floorAbove()
		respond(r)
	}
	if n.belowGCHorizon(req.ReadTS) {
		// The versions this read may need can be gone (also when the horizon passed ReadTS
		// while the read waited on an intent): refuse rather than answer from what GC left.
		reply(&ReadResp{TooOld: true})
		return
	}
	// Values at or below the read timestamp are always visible: the uncertainty interval is
	// (ReadTS, limit], and an observed clock reading below ReadTS (this node's clock behind the
	// gateway's) empties it rather than hiding committed values the read must see.
	limit := ts.MaxOf(req.Limit, req.ReadTS)
	vs := n.store.Versions(req.Key)
	for i := len(vs) - 1; i >= 0; i-- {
		if v := vs[i]; v.State == mvcc.Intent && v.Txn == req.Txn.ID {
			reply(&ReadResp{Found: !v.Tombstone, Value: v.Value})
			return
		}
	}
	if req.OwnWrite {
		// This node acknowledged the transaction's write of Key, and the intent is gone: a
		// crash lost it before it was durable, or an older writer's push aborted the
		// transaction here. What lies below is not what the transaction wrote
		// (ReadReq.OwnWrite).
		n.ownWriteGone(req.Txn.ID, func(aborted bool) { reply(&ReadResp{WriteLost: true, Aborted: aborted}) })
		return
	}
	for i := len(vs) - 1; i >= 0; i-- {
		v := vs[i]
		if v.State == mvcc.Aborted || limit.Less(v.TS) {
			continue
		}
		if v.State == mvcc.Intent {
			_, age := decodeIntentMeta(v.Meta)
			if v.TS.LessEq(req.ReadTS) {
				// A conflicting intent below the read: wait for it, or push it above us.
				n.block(req.Key, v, &blockedOp{txn: req.Txn, from: from, req: req.Req, pushTo: req.ReadTS.Next(), since: since,
					retry: func() { n.evalRead(from, req, since, respond) }})
				return
			}
			// An intent in the uncertainty interval: it may commit below the limit. An older
			// reader pushes it past the limit (an observed clock reading, so this never drags
			// timestamps far ahead of physical time); a younger one waits for it.
			pushTo := ts.Zero
			if older(req.Txn.Age, req.Txn.ID, age, v.Txn) {
				pushTo = limit.Next()
			}
			n.block(req.Key, v, &blockedOp{txn: req.Txn, from: from, req: req.Req, pushTo: pushTo, since: since,
				retry: func() { n.evalRead(from, req, since, respond) }})
			return
		}
		if req.ReadTS.Less(v.TS) {
			reply(&ReadResp{Uncertain: true, ValueTS: v.TS})
			return
		}
		n.bumpReadTS(req.Key, req.ReadTS, req.Txn.ID)
		n.observeWait(since)
		reply(&ReadResp{Found: !v.Tombstone, Value: v.Value})
		return
	}
	n.bumpReadTS(req.Key, req.ReadTS, req.Txn.ID)
	n.observeWait(since)
	reply(&ReadResp{})
}

// ownWriteGone answers a read or scan that found gone an intent of txn it says this node
// acknowledged: aborted says whether this node aborted txn (a push), and a loss it did not
// (a crash) is counted.
func (n *Node) ownWriteGone(txn storage.TxnID, answer func(aborted bool)) {
	aborted := n.aborted[txn]
	if !aborted {
		n.m.Add("read/own-write-lost", 1)
	}
	answer(aborted)
}

// hasOwnIntent reports whether txn holds an intent on key here.
func (n *Node) hasOwnIntent(key string, txn storage.TxnID) bool {
	for _, v := range n.store.Versions(key) {
		if v.State == mvcc.Intent && v.Txn == txn {
			return true
		}
	}
	return false
}

func (n *Node) observeWait(since int64) {
	if d := n.env.Now() - since; d > 0 {
		n.m.Observe("phase/lock-wait", d)
	}
}

func (n *Node) rememberAborted(txn storage.TxnID) {
	if n.aborted[txn] {
		return
	}
	n.aborted[txn] = true
	n.abortedLog = append(n.abortedLog, txn)
	if len(n.abortedLog) > n.set.abortMemory {
		delete(n.aborted, n.abortedLog[0])
		n.abortedLog = n.abortedLog[1:]
	}
}

func (n *Node) onWrite(from topo.NodeID, req *WriteReq) {
	if n.waitingHere(from, req.Txn.ID, req.Req, req.Key) {
		return
	}
	n.startWrite(from, req, func(r *WriteResp) { n.env.Send(from, r) })
}

// startWrite evaluates a write that just arrived; respond gets its answer.
func (n *Node) startWrite(from topo.NodeID, req *WriteReq, respond func(*WriteResp)) {
	n.observe(req.WriteTS)
	n.evalWrite(from, req, n.env.Now(), respond)
}

func (n *Node) evalWrite(from topo.NodeID, req *WriteReq, since int64, respond func(*WriteResp)) {
	reply := func(r *WriteResp) {
		r.Req, r.Clock = req.Req, n.now()
		respond(r)
	}
	id := req.Txn.ID
	if n.aborted[id] {
		reply(&WriteResp{Aborted: true})
		return
	}
	if n.writeDone(req, reply) {
		return
	}
	if n.belowGCHorizon(req.WriteTS) {
		// A transaction older than the horizon is refused everywhere (its reads would be).
		reply(&WriteResp{TooOld: true})
		return
	}
	if req.CreateRecord {
		if rs := n.recState[id]; rs != nil && rs.status == statusAborted {
			reply(&WriteResp{Aborted: true})
			return
		}
	}
	if latest, ok := n.store.Latest(req.Key); ok && !req.ReadAt.IsZero() && req.ReadAt.Less(latest.TS) {
		// A read-modify-write that lost the race: the commit would have to refresh the read of
		// Key past latest, which fails. CockroachDB answers WriteTooOldError at once, and its
		// refresh fails there; laying the intent instead held the key against every reader and
		// writer until the commit found out, and on a hot key most intents were such doomed
		// ones (TestWriteTooOldAbortsAtOnce).
		reply(&WriteResp{WriteTooOld: true})
		return
	}
	vs := n.store.Versions(req.Key)
	var own *mvcc.Version
	for i := len(vs) - 1; i >= 0; i-- {
		v := vs[i]
		if v.State != mvcc.Intent {
			continue
		}
		if v.Txn != id {
			// One intent per key: write-write conflicts block (or push by priority).
			n.block(req.Key, v, &blockedOp{txn: req.Txn, from: from, req: req.Req, write: true, since: since,
				retry: func() { n.evalWrite(from, req, since, respond) }})
			return
		}
		own = &vs[i]
	}
	wts := ts.MaxOf(req.WriteTS, n.writeFloor(req.Key, id))
	if latest, ok := n.store.Latest(req.Key); ok && wts.LessEq(latest.TS) {
		wts = latest.TS.Next() // WriteTooOld: write above the newer committed value
	}
	if own != nil {
		wts = ts.MaxOf(wts, own.TS) // it may have been pushed by a reader
	}
	if req.WriteTS.Less(wts) {
		n.m.Add("write/pushed", 1)
	}
	if req.CreateRecord {
		n.createRecord(id)
		n.rec(id).written = true
	}
	v := mvcc.Version{TS: wts, Txn: id, Tombstone: req.Tombstone, Value: req.Value, Meta: encodeIntentMeta(req.Txn, req.Req)}
	if err := n.store.PutIntent(req.Key, v); err != nil {
		// Only oversized input or a broken invariant gets here; the transaction cannot go on.
		reply(&WriteResp{Aborted: true})
		return
	}
	n.observeWait(since)
	resp := &WriteResp{WrittenTS: wts}
	// A write that replaces the transaction's own intent is answered only once durable, even
	// with pipelining: the commit's proof finds an intent of the transaction on the key, not
	// which write laid it, so a crash that lost the replacement but kept the earlier intent on
	// disk let the transaction commit its earlier value over its later one (an intermediate
	// value committed: sim --workload list-append --read-back --flush-latency 30ms with
	// crashes, G1b). Answered only once durable, a lost replacement is one its coordinator
	// still awaits, and sends again to the restarted node.
	pipelined := n.set.pipelining && own == nil
	if own != nil {
		n.rewritten[req.Key] = true
	} else {
		delete(n.rewritten, req.Key)
	}
	if g := n.writeGroup; g != nil {
		// Part of an OpsReq: its intents go to disk together once all are evaluated.
		g.keys = append(g.keys, req.Key)
		if pipelined {
			reply(resp)
		} else {
			g.durable = append(g.durable, func() { reply(resp) })
		}
		return
	}
	if pipelined {
		n.intentGen[req.Key] = n.flush(nil, nil)
		reply(resp)
		return
	}
	n.intentGen[req.Key] = n.flush(nil, func() { reply(resp) })
}

// writeDone answers a write that was evaluated here already, and reports whether it did: a copy
// the network delivered twice (late, after later messages of the same coordinator), or one its
// coordinator sent again (retransmit, onRestarted). If the transaction's intent on the key was
// laid by this write or a later one, the answer is where the intent stands now (a reader may
// have pushed it), once it is durable if writes are not pipelined; evaluating the write again
// would put back the value of an earlier write over a later one's (the transaction would commit
// a value its client overwrote: TestWriteCopies), or move the intent above where the commit's
// proof looks for it.
// If the transaction has a committed version of the key, it committed and this is a late copy:
// laying the intent again left one no resolution ever comes for, and every request on the key
// waited on it; a push that found the transaction committed could not clear it either (its
// commit clashes with the committed version), so the request pushed again at once, until the
// record was forgotten. An aborted transaction is refused, as by n.aborted.
func (n *Node) writeDone(req *WriteReq, reply func(*WriteResp)) bool {
	vs := n.store.Versions(req.Key)
	for i := len(vs) - 1; i >= 0; i-- {
		v := vs[i]
		if v.Txn != req.Txn.ID {
			continue
		}
		switch {
		case v.State == mvcc.Committed:
			reply(&WriteResp{WrittenTS: v.TS})
			return true
		case v.State == mvcc.Aborted:
			reply(&WriteResp{Aborted: true}) // also once n.aborted has forgotten it
			return true
		case v.State == mvcc.Intent && req.Req <= intentReq(v.Meta):
			at := v.TS
			answer := func() { reply(&WriteResp{WrittenTS: at}) }
			if n.set.pipelining && !n.rewritten[req.Key] {
				answer()
			} else {
				// A copy of a write that replaced the transaction's own intent waits for it as
				// the write's own answer does (evalWrite): answered at once, a retransmission
				// of a replacement whose flush outlasted the retransmission timeout let a crash
				// keep the earlier intent for the commit (sim --workload list-append
				// --read-back --flush-latency 400ms with crashes, seed 3: G1b).
				n.afterGen(n.intentGen[req.Key], answer)
			}
			return true
		}
	}
	return false
}

// writeGroup gathers the intents an OpsReq lays down while it is evaluated, so that they are
// persisted with one flush instead of one each.
type writeGroup struct {
	keys    []string
	durable []func() // answers that wait for the flush (no write pipelining)
}

// onOps evaluates each sub-request of an OpsReq in order, as if it had arrived alone, and
// answers with one OpsResp once every sub-request has its answer.
func (n *Node) onOps(from topo.NodeID, req *OpsReq) {
	// A sub-request malformed, or waiting here already (this is a copy), gets no answer; an
	// OpsReq left with none, no OpsResp.
	skip := func(op SubReq) bool {
		switch {
		case op.Read != nil:
			return n.waitingHere(from, op.Read.Txn.ID, op.Read.Req, op.Read.Key)
		case op.Write != nil:
			return n.waitingHere(from, op.Write.Txn.ID, op.Write.Req, op.Write.Key)
		}
		return true
	}
	ops := slices.DeleteFunc(slices.Clone(req.Ops), skip)
	count := len(ops)
	if count == 0 {
		return
	}
	// The sub-requests are evaluated one after another, each waiting on memory for its key:
	// look them all up first, so that those waits overlap (Store.Prefetch, as K2's data node).
	for _, op := range ops {
		if op.Read != nil {
			n.store.Prefetch(op.Read.Key)
		} else {
			n.store.Prefetch(op.Write.Key)
		}
	}
	resp := &OpsResp{Ops: make([]SubResp, count)}
	left := count + 1 // one more, held until every sub-request has been evaluated
	answered := func() {
		if left--; left > 0 {
			return
		}
		resp.Clock = n.now()
		// Cut into as many messages as the reads' values need: a share of a batch may hold
		// up to wire.MaxBatchOps values of 1 MiB, and a node reading a frame over
		// wire.MaxFrameBytes drops the link (17 of them were a 17.8 MB OpsResp). Every
		// sub-answer names its request and is taken alone, so the coordinator gets each as
		// if it were the one message, every read in its read set and the timestamp cache as
		// before; it then refuses the client's batch as too large to answer
		// (wire.BatchAnswerTooLarge). Cut rather than refused (as spanner's participant
		// refuses its share): every sub-answer stays as it was, an uncertain read's, which
		// the coordinator reads again higher, included.
		for ops := resp.Ops; len(ops) > 0; {
			cut := txnkit.ValuesThatFit(len(ops), func(i int) []byte {
				if r := ops[i].Read; r != nil {
					return r.Value
				}
				return nil
			})
			n.env.Send(from, &OpsResp{Clock: resp.Clock, Ops: ops[:cut]})
			ops = ops[cut:]
		}
	}
	g := &writeGroup{}
	n.writeGroup = g
	for i, op := range ops {
		slot := &resp.Ops[i]
		if op.Read != nil {
			n.startRead(from, op.Read, func(r *ReadResp) { slot.Read = r; answered() })
		} else {
			n.startWrite(from, op.Write, func(r *WriteResp) { slot.Write = r; answered() })
		}
	}
	n.writeGroup = nil
	if len(g.keys) > 0 {
		var done func()
		if len(g.durable) > 0 {
			done = func() {
				for _, fn := range g.durable {
					fn()
				}
			}
		}
		gen := n.flush(nil, done)
		for _, k := range g.keys {
			n.intentGen[k] = gen
		}
	}
	answered()
}

// block queues op behind intent on key and starts pushing the intent's transaction.
func (n *Node) block(key string, intent mvcc.Version, op *blockedOp) {
	op.key, op.pushee = key, intent.Txn
	n.blocked[key] = append(n.blocked[key], op)
	rn, age := decodeIntentMeta(intent.Meta)
	typ := PushQuery
	if older(op.txn.Age, op.txn.ID, age, intent.Txn) {
		if op.write {
			typ = PushAbort
		} else if !op.pushTo.IsZero() {
			typ = PushTimestamp
		}
	}
	n.push(op, rn, typ)
}

func (n *Node) push(op *blockedOp, recordNode topo.NodeID, typ uint8) {
	if op.done {
		return
	}
	switch typ {
	case PushAbort:
		n.m.Add("push/abort", 1)
	case PushTimestamp:
		n.m.Add("push/timestamp", 1)
	default:
		n.m.Add("push/wait", 1)
	}
	if recordNode < 0 || int(recordNode) >= len(n.tp.Nodes) {
		// Unreachable for well-formed intents; wait for a resolution instead of pushing.
		return
	}
	retry := func(d time.Duration) {
		n.env.Cancel(op.timer)
		op.timer = n.env.After(d, func() { n.push(op, recordNode, typ) })
	}
	id := n.call(recordNode, func(r uint64) wire.Msg {
		return &PushReq{Req: r, Pushee: op.pushee, Type: typ, PushTo: op.pushTo}
	}, func(m wire.Msg) {
		r := m.(*PushResp)
		if op.done {
			return
		}
		switch r.Outcome {
		case PushAborted:
			n.resolveLocal(op.key, op.pushee, false, ts.Zero)
		case PushCommitted:
			n.resolveLocal(op.key, op.pushee, true, r.TS)
		case PushPushed:
			n.moveIntent(op.key, op.pushee, r.TS)
		default:
			retry(n.set.pollPeriod)
			return
		}
		n.env.Cancel(op.timer)
		n.wake(op.key)
	})
	// Answered pushes are no longer pending: keep the ones still out, whose answers are as good,
	// but send only the newest again if unanswered (retransmit): it asks the same.
	op.pushReqs = append(slices.DeleteFunc(op.pushReqs, func(req uint64) bool {
		c, out := n.pending[req]
		if out {
			c.superseded = true
		}
		return !out
	}), id)
	// If the record holder is down the answer never comes: ask again.
	retry(n.set.expiry)
}

// wake re-evaluates every request blocked on key, oldest transaction first (arrival order
// among requests of one transaction). The first writer re-evaluated lays the next intent and
// everyone after it queues behind that intent again, so the order decides who gets the key:
// it must be the waiter no other waiter may push out. Granting in arrival order instead hands
// the key to whichever waiter came first, and every older waiter behind it then push-aborts
// it at once (PUSH_ABORT), only for the next-in-line to be granted and aborted in its turn.
// Under a hot key that convoy aborts most waiters, each abort costs a retry that keeps its age
// and rejoins the queue, and the queue and the aborts grow together (TestWakeOldestFirst).
// CockroachDB's lock wait-queues are FIFO, but there a normal-priority waiter cannot abort the
// lock's next holder, so FIFO is consistent with its pushes; here the grant order must agree
// with the push rule (older wins), as in wound-wait.
func (n *Node) wake(key string) {
	q := n.blocked[key]
	if len(q) == 0 {
		return
	}
	delete(n.blocked, key)
	slices.SortStableFunc(q, func(a, b *blockedOp) int {
		switch {
		case a.txn.ID == b.txn.ID:
			return 0
		case older(a.txn.Age, a.txn.ID, b.txn.Age, b.txn.ID):
			return -1
		}
		return 1
	})
	for _, op := range q {
		if op.done {
			continue
		}
		op.done = true
		n.env.Cancel(op.timer)
		for _, req := range op.pushReqs {
			delete(n.pending, req)
		}
		op.retry()
	}
}

// moveIntent raises txn's intent on key to at least to (a successful timestamp push).
func (n *Node) moveIntent(key string, txn storage.TxnID, to ts.Timestamp) {
	vs := n.store.Versions(key)
	for i := len(vs) - 1; i >= 0; i-- {
		v := vs[i]
		if v.State != mvcc.Intent || v.Txn != txn {
			continue
		}
		if v.TS.Less(to) {
			v.TS = to
			if err := n.store.PutIntent(key, v); err == nil {
				n.intentGen[key] = n.flush(nil, nil)
			}
		}
		return
	}
}

// resolveLocal commits or aborts txn's intent on key, if it is still there.
func (n *Node) resolveLocal(key string, txn storage.TxnID, commit bool, at ts.Timestamp) bool {
	if !commit {
		n.rememberAborted(txn)
		if n.store.AbortIntent(key, txn) {
			n.flush(nil, nil)
			return true
		}
		return false
	}
	if err := n.store.Commit(key, txn, at); err != nil {
		return false
	}
	n.flush(nil, nil)
	return true
}

func (n *Node) onResolve(from topo.NodeID, req *ResolveReq) {
	n.observe(req.TS)
	if req.Commit && req.Record == n.self && from == topo.NodeID(req.Txn.Coordinator()) && (from != n.self || n.byID[req.Txn] == nil) {
		// The coordinator's resolution on its commit's answer. A holder that is also the
		// coordinator sends itself its recovery's resolutions too, while the coordinator may
		// still await a proof: only once it no longer runs the transaction is it the answer's.
		n.commitAnswerHeard(req.Txn)
	}
	if !req.Commit {
		n.rememberAborted(req.Txn)
	}
	changed := false
	for _, k := range req.Keys {
		if req.Commit {
			changed = n.store.Commit(k, req.Txn, req.TS) == nil || changed
		} else {
			changed = n.store.AbortIntent(k, req.Txn) || changed
		}
	}
	var gen uint64
	if changed {
		gen = n.flush(nil, nil)
	} else {
		gen = n.issuedGen // resolved before (a push's answer): durable with the last flush at the latest
	}
	if rec, txn := req.Record, req.Txn; req.Commit && n.isDataNode(rec) {
		// The record holder waits for this before forgetting the record: said once durable,
		// so that a crash cannot bring an intent back (gc.go).
		n.afterGen(gen, func() { n.noteResolved(rec, txn) })
	}
	for _, k := range req.Keys {
		n.wake(k)
	}
}

func (n *Node) onRefresh(from topo.NodeID, req *RefreshReq) {
	n.observe(req.To)
	// A refresh asks whether another transaction committed a value of a key in (From, To]. GC
	// removed from each key only aborted versions, which a refresh ignores, and committed
	// versions older than the newest committed one at or below the horizon H, which it kept
	// (call it w); intents it never removes. If To >= H, a removed committed version v in
	// (From, To] is older than w, and w <= H <= To, so w lies in (From, To] too and the
	// refresh fails as it must; removing versions cannot make a conflict appear either. So
	// From may be below the horizon: a transaction whose reads were served above the horizon
	// of their time can still move past a later one. If To < H, w may lie in (To, H] while
	// the v it superseded in (From, To] is gone, and the refresh would succeed wrongly: refuse
	// it, which aborts the transaction (too-old). TestRefreshAcrossGCHorizon shows both.
	if n.belowGCHorizon(req.To) {
		n.env.Send(from, &RefreshResp{Req: req.Req, Clock: n.now(), TooOld: true})
		return
	}
	ok := true
	for _, k := range req.Keys {
		if conflictsWithRefresh(n.store.Versions(k), req.Txn, req.From, req.To) {
			ok = false
			break
		}
	}
	ok = ok && n.refreshSpans(req.Spans, req.Txn, req.From, req.To)
	if ok {
		// The reads now hold at To: protect them there.
		for _, k := range req.Keys {
			n.bumpReadTS(k, req.To, req.Txn)
		}
		for _, sp := range req.Spans {
			n.markSpan(sp, req.To, req.Txn)
		}
	}
	n.env.Send(from, &RefreshResp{Req: req.Req, Clock: n.now(), OK: ok})
}

func (n *Node) onQueryIntent(from topo.NodeID, req *QueryIntentReq) {
	n.observe(req.TS)
	reply := func(found bool) {
		n.env.Send(from, &QueryIntentResp{Req: req.Req, Clock: n.now(), Found: found})
	}
	var gen uint64 // the persist generation every found intent is durable with
	missing := false
	for _, k := range req.Keys {
		found := false
	versions:
		for _, v := range n.store.Versions(k) {
			if v.Txn != req.Txn || !v.TS.LessEq(req.TS) {
				continue
			}
			switch v.State {
			case mvcc.Intent:
				// Found, but a pipelined write is proven only once durable.
				gen = max(gen, n.intentGen[k])
				found = true
				break versions
			case mvcc.Committed:
				found = true // already resolved by a recovery or a duplicate commit
				break versions
			}
		}
		if !found {
			missing = true
			if req.Prevent {
				// The write never made it (or was lost in a crash). Make sure it cannot land at
				// or below the staging timestamp later, so the transaction stays
				// not-implicitly-committed.
				n.bumpReadTS(k, req.TS, 0)
			}
		}
	}
	if missing {
		reply(false)
		return
	}
	n.afterGen(gen, func() { reply(true) })
}
