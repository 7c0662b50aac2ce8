package k2

import (
	"encoding/binary"
	"errors"
	"maps"
	"slices"

	"github.com/meridiandb/meridian/internal/node"
	"github.com/meridiandb/meridian/internal/protocol/txnkit"
	"github.com/meridiandb/meridian/internal/storage"
	"github.com/meridiandb/meridian/internal/storage/mvcc"
	"github.com/meridiandb/meridian/internal/storage/txnrec"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/ts"
)

// refuseBelowGCHorizon is turned off only by a test, which shows that without it a read older
// than the GC horizon is answered wrongly.
var refuseBelowGCHorizon = true

// readOp is a read being served at a data node, possibly parked behind a PUSHWS.
type readOp struct {
	reply     func(*ReadResp)
	req       ReadReq
	waitLocal int64 // when the current PUSHWS wait began (0: not waiting)
	pushNanos int64 // total PUSHWS wait so far
	done      bool
	timer     node.TimerID
	// markAtValue: the read raises its key's watermark when it takes its value (a point read
	// under read-mark=value). A scan's reads leave that to the range watermark their step set.
	markAtValue bool
}

// push is one outstanding PUSHWS from this node: every read waiting for the same writer shares it.
type push struct {
	txn      storage.TxnID
	ts       ts.Timestamp // the writer's timestamp (its intents' version)
	recorder topo.NodeID
	waiters  []*readOp
	timer    node.TimerID
}

// intentRef names a transaction's intent on a key.
type intentRef struct {
	txn storage.TxnID
	key string
}

// Intent metadata: the recorder's node id, so a reader knows where to send PUSHWS, then the
// write's sequence number in its transaction, so a data node can tell which write of the
// transaction a (recovered) intent holds.
func encodeMeta(recorder topo.NodeID, wseq uint32) []byte {
	return binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, uint32(recorder)), wseq)
}

func decodeMeta(b []byte) (recorder topo.NodeID, wseq uint32, ok bool) {
	if len(b) != 8 {
		return 0, 0, false
	}
	return topo.NodeID(binary.BigEndian.Uint32(b)), binary.BigEndian.Uint32(b[4:]), true
}

// onRead is Fig. 10's READ: pick the version, waiting by PUSHWS on an undecided intent below
// the read, and register the read in the key's watermark so no lower write can land afterwards.
//
// When the read registers is read-mark's choice. The paper: "whenever an operation reads a
// value, K2-MVTO records the reader's timestamp in a read version tracker"; its Fig. 10, which
// would say where, is an image missing from the text. By default (value) a read registers when
// it takes its value, in the same event as its final choice of version, so nothing can land
// below it between the two. A read waiting on PUSHWS has taken no value yet: a write below it
// may still land, and the read, which looks at the key afresh once the writer it waited on is
// decided (serveRead), then reads that write or waits on it too: it may wait on several in
// turn. Only transactions with lower timestamps can land below it, and (Property 4.1) every
// transaction that starts once true time has passed the reader's timestamp gets a higher one,
// so this is no livelock; but an older transaction still running (an interactive one may idle
// up to idle-timeout) can hold the reader until the coordinator's op-timeout aborts it. With
// read-mark=arrival (notes §3.4's inference, our default before) the read registers as it
// arrives, and every older writer that came while it waited was refused, though nothing had
// been read: a quick-scale Zipf 0.99 YCSB-T run (seed 1) refused 713 writes, 554 of them at a
// watermark of a reader that had waited by PUSHWS, and aborted 705 attempts; with
// read-mark=value it refused 216 (25 such) and aborted 214.
func (n *Node) onRead(r *ReadReq, reply func(*ReadResp)) {
	if !n.cfg.markAtValue {
		n.store.BumpReadWatermark(r.Key, r.TS)
	}
	n.serveRead(&readOp{reply: reply, req: *r, markAtValue: n.cfg.markAtValue})
}

// onOps serves an OpsReq: each read and write as if it had come alone. Its operations are on
// distinct keys, so their order does not matter.
//
// What is answered while the request is being served goes out in one OpsResp; whatever waits
// (a read parked on PUSHWS, a write waiting for its flush without pipelining) follows in one
// more once the last of it is done. Holding everything for the slowest would make a write's
// answer wait out a read's PUSHWS (and a read's a flush), which Table 2 would then count as
// write (or read) time. A refusal goes out alone and at once: it aborts the transaction, so
// nothing else of the request is worth serving or sending, and a refusal held behind a parked
// read would keep the doomed transaction's intents in other readers' way for as long as the
// read waits.
func (n *Node) onOps(from topo.NodeID, r *OpsReq) {
	var ready OpsResp // sized for all: most operations are answered while the request is served
	if len(r.Reads) > 0 {
		ready.Reads = make([]ReadResp, 0, len(r.Reads))
	}
	if len(r.Writes) > 0 {
		ready.Writes = make([]WriteResp, 0, len(r.Writes))
	}
	left := len(r.Reads) + len(r.Writes)
	serving, refused := true, false
	send := func() {
		// Cut into as many messages as the reads' values need: a node's share of a batch
		// may hold up to wire.MaxBatchOps values of 1 MiB, and a node reading a frame over
		// wire.MaxFrameBytes drops the link (17 of them were a 17.8 MB OpsResp). Each answer
		// names its request, so the coordinator takes them as they come, as it takes those
		// of the second OpsResp; it then refuses the client's batch as too large to answer
		// (wire.BatchAnswerTooLarge), the reads having raised their keys' watermarks as
		// single reads do. Cut rather than refused (as spanner's participant refuses its
		// share): a share's answers already come in two parts, neither knowing the other's
		// size, and a cut leaves every answer as it was.
		for reads := ready.Reads; len(reads)+len(ready.Writes) > 0; {
			cut := txnkit.ValuesThatFit(len(reads), func(i int) []byte { return reads[i].Value })
			n.env.Send(from, &OpsResp{Reads: reads[:cut], Writes: ready.Writes})
			reads, ready.Writes = reads[cut:], nil
		}
		ready = OpsResp{}
	}
	// Once serving is over, what is left waits: its operations are held in n.serving until
	// their answers leave. Those answered while serving are not held: their answers leave now,
	// and if that OpsResp is lost a loss probe must hear so before the rest is answered.
	var held []uint64
	answered := func(w *WriteResp, rr *ReadResp) {
		if refused {
			return
		}
		left--
		if (w != nil && w.Aborted) || (rr != nil && rr.Aborted) {
			refused, ready = true, OpsResp{}
		}
		switch {
		case w != nil:
			ready.Writes = append(ready.Writes, *w)
		case rr != nil:
			ready.Reads = append(ready.Reads, *rr)
		}
		if refused || (left == 0 && !serving) {
			send()
			for _, id := range held {
				delete(n.serving, opRef{from, id})
			}
		}
	}
	// The operations are served one after another, each waiting on memory for its key: look
	// them all up first, so that those waits overlap. At paper scale the waits were a tenth of
	// the run's CPU (Store.Prefetch).
	for i := range r.Writes {
		n.store.Prefetch(r.Writes[i].Key)
	}
	for i := range r.Reads {
		n.store.Prefetch(r.Reads[i].Key)
	}
	for i := 0; i < len(r.Writes) && !refused; i++ {
		n.onWrite(from, &r.Writes[i], func(w *WriteResp) { answered(w, nil) })
	}
	for i := 0; i < len(r.Reads) && !refused; i++ {
		n.onRead(&r.Reads[i], func(rr *ReadResp) { answered(nil, rr) })
	}
	serving = false
	if left > 0 && !refused {
		out := make(map[uint64]bool, len(ready.Reads)+len(ready.Writes))
		for i := range ready.Reads {
			out[ready.Reads[i].ReqID] = true
		}
		for i := range ready.Writes {
			out[ready.Writes[i].ReqID] = true
		}
		opsOf(r, func(id uint64) {
			if !out[id] {
				held = append(held, id)
				n.serving[opRef{from, id}] = struct{}{}
			}
		})
	}
	send()
}

// replyTo answers a request id that came alone. A nil write answer is none (a stale
// duplicate). Call served once the request has been handled: if it is not answered by then, it
// waits, and is held in n.serving until it is.
func (n *Node) replyTo(from topo.NodeID, id uint64) (read func(*ReadResp), write func(*WriteResp), served func()) {
	ref := opRef{from, id}
	answered, waiting := false, false
	done := func() {
		answered = true
		if waiting {
			delete(n.serving, ref)
		}
	}
	read = func(r *ReadResp) {
		done()
		n.env.Send(from, r)
	}
	write = func(w *WriteResp) {
		done()
		if w != nil {
			n.env.Send(from, w)
		}
	}
	served = func() {
		if !answered {
			waiting = true
			n.serving[ref] = struct{}{}
		}
	}
	return read, write, served
}

// opsOf calls fn with the request id of each of r's operations.
func opsOf(r *OpsReq, fn func(id uint64)) {
	for i := range r.Reads {
		fn(r.Reads[i].ReqID)
	}
	for i := range r.Writes {
		fn(r.Writes[i].ReqID)
	}
}

// onOpsProbe tells a coordinator which of the operations it asks about this node does not hold
// (OpsProbeResp). Messages held while the node recovers hold their operations too.
func (n *Node) onOpsProbe(from topo.NodeID, p *OpsProbe) {
	var held map[uint64]bool
	if len(n.held) > 0 { // while recovering or before the incarnation is durable
		held = map[uint64]bool{}
		for _, h := range n.held {
			if h.from != from {
				continue
			}
			switch m := h.m.(type) {
			case *ReadReq:
				held[m.ReqID] = true
			case *WriteReq:
				held[m.ReqID] = true
			case *OpsReq:
				opsOf(m, func(id uint64) { held[id] = true })
			case *ScanReq:
				held[m.ReqID] = true
			}
		}
	}
	resp := &OpsProbeResp{ReqID: p.ReqID}
	for _, id := range p.Ops {
		if _, ok := n.serving[opRef{from, id}]; !ok && !held[id] {
			resp.Missing = append(resp.Missing, id)
		}
	}
	n.env.Send(from, resp)
}

func (n *Node) serveRead(op *readOp) {
	if op.done {
		return
	}
	r := &op.req
	if n.vgc.TooOld(r.TS) && refuseBelowGCHorizon {
		// The versions this read may need can be gone (also when the horizon passed it while
		// it waited on PUSHWS): refuse rather than answer from what GC left.
		op.done = true
		n.env.Cancel(op.timer)
		op.reply(&ReadResp{ReqID: r.ReqID, Aborted: true, Cause: txnkit.AbortTooOld})
		return
	}
	vis := n.store.VisibleAt(r.Key, r.TS, r.Txn)
	own := vis.Found && vis.Version.Txn == r.Txn && vis.Version.State == mvcc.Intent
	var wait *mvcc.Version
	if !n.cfg.mvReads && !own {
		// Ablation "no MV for reads": any write stream on the key blocks the reader, whatever
		// the writers' timestamps.
		if all := n.store.VisibleAt(r.Key, ts.Max, r.Txn); len(all.Pending) > 0 {
			wait = &all.Pending[0]
			if r.TS.Less(wait.TS) && op.timer == 0 {
				// Waiting on a younger writer can deadlock (it may wait on us); bound it.
				op.timer = n.env.After(n.cfg.readBlockTimeout, func() {
					if !op.done {
						op.done = true
						op.reply(&ReadResp{ReqID: r.ReqID, Aborted: true, Cause: "read-blocked"})
					}
				})
			}
		}
	}
	if wait == nil && len(vis.Pending) > 0 {
		wait = &vis.Pending[0]
	}
	if wait != nil {
		n.pushFor(*wait, op)
		return
	}
	op.done = true
	n.env.Cancel(op.timer)
	if op.markAtValue {
		n.store.BumpReadWatermark(r.Key, r.TS)
	}
	resp := &ReadResp{ReqID: r.ReqID, PushNanos: op.pushNanos}
	if vis.Found && !vis.Version.Tombstone {
		resp.Found, resp.Value = true, vis.Version.Value
	}
	op.reply(resp)
}

// pushFor parks op until the writer of v is decided, sending PUSHWS to its recorder unless one
// is already out.
func (n *Node) pushFor(v mvcc.Version, op *readOp) {
	op.waitLocal = n.env.Elapsed()
	if r := op.req; n.waitedReads[r.Key].Less(r.TS) {
		n.waitedReads[r.Key] = r.TS
	}
	p := n.pushes[v.Txn]
	if p == nil {
		rec, _, ok := decodeMeta(v.Meta)
		if !ok {
			// Cannot happen for intents this protocol wrote; refuse rather than wait forever.
			op.done = true
			op.reply(&ReadResp{ReqID: op.req.ReqID, Aborted: true, Cause: "corrupt-intent"})
			return
		}
		p = &push{txn: v.Txn, ts: v.TS, recorder: rec}
		n.pushes[v.Txn] = p
		n.sendPush(p)
	}
	p.waiters = append(p.waiters, op)
}

// sendPush sends PUSHWS and repeats it while readers wait, since the recorder may have crashed
// and restarted (waiters are not persisted, notes/k2.md §3.5).
func (n *Node) sendPush(p *push) {
	n.m.Add("pushws", 1)
	n.env.Send(p.recorder, &PushReq{Txn: p.txn})
	p.timer = n.env.After(n.cfg.lease, func() {
		if n.pushes[p.txn] == p {
			n.sendPush(p)
		}
	})
}

func (n *Node) onPushResp(r *PushResp) {
	at := r.TS
	if p := n.pushes[r.Txn]; p != nil {
		at = p.ts
	}
	n.resolve(r.Txn, r.Committed, at)
	n.persist(n.dataWrites(), nil)
}

// resolve applies a decision to this node's intents of txn (lazy finalization) and resumes the
// reads that waited for it.
func (n *Node) resolve(txn storage.TxnID, committed bool, at ts.Timestamp) {
	if committed {
		if _, err := n.store.CommitTxn(txn, at); err != nil {
			n.m.Add("error.finalize", 1)
		}
	} else {
		n.store.AbortTxn(txn)
	}
	p := n.pushes[txn]
	if p == nil {
		return
	}
	delete(n.pushes, txn)
	n.env.Cancel(p.timer)
	now := n.env.Elapsed()
	for _, op := range p.waiters {
		if op.waitLocal != 0 {
			op.pushNanos += now - op.waitLocal
			op.waitLocal = 0
		}
		n.serveRead(op)
	}
}

// onWrite is Fig. 10's WRITE. Its single abort rule: a write below the key's read watermark.
// Otherwise it always adds an intent to the write stream, never waiting for other writers.
// from is the coordinator, told later when a pipelined write becomes durable. reply(nil) means
// that the write gets no answer.
func (n *Node) onWrite(from topo.NodeID, w *WriteReq, reply func(*WriteResp)) {
	refuse := func(cause string) {
		reply(&WriteResp{ReqID: w.ReqID, Aborted: true, Cause: cause})
	}
	if w.Recorder == n.self {
		if r, ok := n.recs.Get(w.Txn); ok && r.Status == txnrec.Aborted {
			refuse("coordinator-timeout")
			return
		}
	}
	if n.staleWrite(w, reply) {
		return
	}
	if n.vgc.TooOld(w.TS) {
		// A transaction older than the GC horizon is refused everywhere (its reads would be).
		refuse(txnkit.AbortTooOld)
		return
	}
	// Strict: a write at the watermark is the transaction's own earlier read (timestamps are
	// unique), which must not abort it.
	if wm := n.readWatermark(w.Key); w.TS.Less(wm) {
		// Which reads refuse writes: with read-mark=arrival also one still waiting by
		// PUSHWS (counted apart below); by default only reads that took their value.
		n.m.Add("write-refused.read-watermark", 1)
		if n.waitedReads[w.Key] == wm {
			n.m.Add("write-refused.read-watermark/waiting-reader", 1)
		}
		refuse("read-watermark")
		return
	}
	err := n.store.PutIntent(w.Key, mvcc.Version{TS: w.TS, Txn: w.Txn, Tombstone: w.Tombstone, Value: w.Value, Meta: encodeMeta(w.Recorder, w.WSeq)})
	var ie *mvcc.IntentError
	switch {
	case errors.As(err, &ie):
		refuse("write-intent") // ablation "one intent per key"
		return
	case err != nil:
		refuse("storage")
		return
	}
	if w.CreateRecord && w.Recorder == n.self {
		if _, err := n.recs.Create(w.Txn, nil); err != nil {
			n.store.AbortIntent(w.Key, w.Txn)
			n.persist(n.dataWrites(), nil)
			refuse("storage")
			return
		}
		if _, ok := n.leases[w.Txn]; !ok {
			n.leases[w.Txn] = n.env.Elapsed()
		}
	}
	id := w.ReqID
	if !n.cfg.pipelineWrites {
		// "All data and temporary write streams are persisted upon creation": answer only
		// once the intent (and the record it may create) is durable.
		n.persist(n.dataWrites(), func() {
			reply(&WriteResp{ReqID: id, Inc: n.inc.N})
		})
		return
	}
	// Write pipelining: the conflict check is done and the intent is in the write stream, so
	// the write is answered now; the intent is still persisted upon creation, in the next
	// group commit, and the coordinator hears when it is durable. Until then a reader that
	// meets the intent only pushes its recorder, which cannot commit the transaction before
	// the coordinator knows every write durable.
	ref := intentRef{w.Txn, w.Key}
	wseq, txn := w.WSeq, w.Txn
	n.unflushed[ref] = wseq
	reply(&WriteResp{ReqID: id, Pending: true, Inc: n.inc.N})
	n.persist(n.dataWrites(), func() {
		if n.unflushed[ref] == wseq {
			delete(n.unflushed, ref)
		}
		// Tell the coordinator, batched: every write a flush made durable for one coordinator
		// goes out in one message once the flush's completions have run.
		n.durNotes.Add(from, DurableNote{Txn: txn, WSeq: wseq})
		if q, ok := n.durWaiters[txn]; ok {
			delete(n.durWaiters, txn)
			n.onDurableReq(q.from, q.req)
		}
	})
}

// staleWrite serves a write that is not newer (by WSeq) than the intent its transaction already
// has on the key, and reports whether it was one. A coordinator numbers a transaction's writes
// and sends a key's next write only once the previous one was answered, so such a write is a
// duplicate delivered late: installing it would put an older value of the transaction back in
// place of a newer one, which the transaction would then commit. The same write again changes
// nothing and is answered as the first copy was (pending while its flush is, and without
// pipelining only once it is durable); an older one is dropped unanswered, since its
// coordinator took its answer before it sent the newer write.
func (n *Node) staleWrite(w *WriteReq, reply func(*WriteResp)) bool {
	vis := n.store.VisibleAt(w.Key, ts.Max, w.Txn)
	if !vis.Found || vis.Version.Txn != w.Txn || vis.Version.State != mvcc.Intent {
		return false
	}
	_, have, ok := decodeMeta(vis.Version.Meta)
	if !ok || w.WSeq > have {
		return false
	}
	n.m.Add("write-duplicate", 1)
	switch id := w.ReqID; {
	case w.WSeq < have:
		reply(nil)
	case n.cfg.pipelineWrites:
		reply(&WriteResp{ReqID: id, Pending: n.unflushed[intentRef{w.Txn, w.Key}] == w.WSeq, Inc: n.inc.N})
	default:
		// Batches complete in issue order: this one completes after the first copy's.
		n.persist(n.dataWrites(), func() { reply(&WriteResp{ReqID: id, Inc: n.inc.N}) })
	}
	return true
}

// durWaiter is a coordinator's durability question waiting for a flush to complete.
type durWaiter struct {
	from topo.NodeID
	req  *DurableReq
}

// onDurableReq answers a coordinator that asks which writes are durable. If one of them is still
// being flushed, the answer waits for the flush. A
// write whose intent is not in the store at all (or holds an older write of the transaction)
// was lost by a crash of this node, or the transaction was aborted here; either way it must
// not commit.
func (n *Node) onDurableReq(from topo.NodeID, r *DurableReq) {
	resp := &WriteDurable{Txn: r.Txn, Inc: n.inc.N}
	pending := false
	for _, w := range r.Writes {
		vis := n.store.VisibleAt(w.Key, ts.Max, r.Txn)
		have := uint32(0)
		if vis.Found && vis.Version.Txn == r.Txn && vis.Version.State == mvcc.Intent {
			_, have, _ = decodeMeta(vis.Version.Meta)
		}
		switch {
		case have < w.WSeq:
			resp.Lost = true
		case have > w.WSeq:
			// A later write of the transaction replaced it; the coordinator asks about that one.
		case n.unflushed[intentRef{r.Txn, w.Key}] == w.WSeq:
			pending = true // still being flushed: answer when its flush completes
		default:
			resp.WSeqs = append(resp.WSeqs, w.WSeq)
		}
	}
	if pending && !resp.Lost {
		n.durWaiters[r.Txn] = durWaiter{from: from, req: r}
		return
	}
	n.env.Send(from, resp)
}

// onCommit is the recorder's one-phase commit: persist COMMITTED, with the participants that
// must acknowledge its finalization before the record may be forgotten (gc.go), then wake
// PUSHWS waiters and answer. A transaction already aborted (lease expiry) stays aborted, and
// one the recorder holds no record of is refused: its first write created the record before
// the coordinator could commit, so the record was forgotten, which only an ended or aborted
// transaction's is. So is one whose record is only a PUSHWS's placeholder: a late copy of the
// CommitReq of a transaction aborted, ended and forgotten, then pushed by a participant still
// holding its intent, committed it, and the pusher showed a write whose client was told it
// aborted.
func (n *Node) onCommit(from topo.NodeID, c *CommitReq) {
	r, ok := n.recs.Get(c.Txn)
	if !ok || n.recs.Placeholder(c.Txn) {
		n.env.Send(from, &CommitResp{ReqID: c.ReqID, Cause: "unknown-transaction"})
		return
	}
	if r.Status == txnrec.Aborted {
		n.env.Send(from, &CommitResp{ReqID: c.ReqID, Cause: "coordinator-timeout"})
		return
	}
	if err := n.recs.DecideWith(c.Txn, txnrec.Committed, c.TS, 0, encodeParticipants(n.participantsOf(c))); err != nil {
		n.env.Send(from, &CommitResp{ReqID: c.ReqID, Cause: "coordinator-timeout"})
		return
	}
	delete(n.leases, c.Txn)
	id, txn, v := c.ReqID, c.Txn, n.recs.Version(c.Txn)
	answered := false
	if n.cfg.earlyCommit {
		// Broken on purpose: the coordinator may tell the client before a crash can no longer
		// undo the commit.
		n.env.Send(from, &CommitResp{ReqID: id, Committed: true})
		answered = true
	}
	n.persist(n.dataWrites(), func() {
		n.recs.Decided(txn, v)
		r, _ := n.recs.Get(txn)
		committed := r.Status == txnrec.Committed
		if committed {
			n.trackDecided(txn, r, false)
		}
		if !answered {
			n.env.Send(from, &CommitResp{ReqID: id, Committed: committed})
		}
	})
}

// onAbort records the coordinator's abort. The coordinator ends the transaction as it sends it,
// so the record may go as soon as the abort is durable.
func (n *Node) onAbort(a *AbortReq) { n.decideAbort(a.Txn, true) }

// decideAbort records an abort at the recorder; ended says the coordinator has ended the
// transaction. Deciding a committed transaction aborted is refused by the record table, so a
// late abort can never undo a commit.
func (n *Node) decideAbort(txn storage.TxnID, ended bool) bool {
	delete(n.leases, txn)
	if err := n.recs.Decide(txn, txnrec.Aborted, ts.Zero, 0); err != nil {
		return false
	}
	v := n.recs.Version(txn)
	n.persist(n.dataWrites(), func() {
		n.recs.Decided(txn, v)
		if r, ok := n.recs.Get(txn); ok && r.Status == txnrec.Aborted {
			n.trackDecided(txn, r, ended)
		}
	})
	return true
}

// onPush is PUSHWS at the recorder: answer with the durable decision, now or once it exists. A
// PUSHWS may overtake the record's creation (or follow a recorder restart that lost nothing but
// its waiters, or name a transaction whose record was forgotten): the unknown transaction gets
// a placeholder whose lease bounds the wait, and its coordinator is asked whether it ended the
// transaction, which settles it at once (gc.go).
func (n *Node) onPush(from topo.NodeID, p *PushReq) {
	answer := func(r txnrec.Record) {
		n.env.Send(from, &PushResp{Txn: r.Txn, Committed: r.Status == txnrec.Committed, TS: r.CommitTS})
	}
	if _, known := n.recs.Get(p.Txn); !known {
		if c := topo.NodeID(p.Txn.Coordinator()); n.isDataNode(c) {
			n.m.Add("recorder.ended-query", 1)
			n.env.Send(c, &EndedQuery{Txns: []storage.TxnID{p.Txn}})
		}
	}
	r, decided := n.recs.Wait(p.Txn, answer)
	if decided {
		answer(r)
		return
	}
	if _, ok := n.leases[p.Txn]; !ok {
		n.leases[p.Txn] = n.env.Elapsed()
	}
}

func (n *Node) onHeartbeat(h *Heartbeat) {
	now := n.env.Elapsed()
	for _, txn := range h.Txns {
		if _, ok := n.leases[txn]; ok {
			n.leases[txn] = now
		}
	}
}

// expireDeadLives ends the leases of the undecided transactions recorded here that an earlier
// life of node from coordinated, from having restarted as its life-th: that life crashed with
// everything it kept of them, so no heartbeat or commit of them can come, and the next tick
// aborts them. Leased on, their PUSHWS readers waited up to a further lease after the
// coordinator was back. (A recorder's own are ended as it recovers, newNode.)
func (n *Node) expireDeadLives(from topo.NodeID, life uint64) {
	out := n.env.Elapsed() - int64(n.cfg.lease) - 1
	for txn, at := range n.leases {
		if r, ok := n.recs.Get(txn); ok && r.Status.Final() {
			continue // decided: a PUSHWS re-armed its lease while the decision was persisted
		}
		if topo.NodeID(txn.Coordinator()) == from && txnkit.LifeOf(txn) < life && at > out {
			n.m.Add("recorder.coordinator-restarted", 1)
			n.leases[txn] = out
		}
	}
}

// recorderTick aborts undecided transactions whose coordinator has been silent for a lease
// (coordinator failure, §3.5): "the recorder marks these transactions as aborted and promises
// they will not be committed in the future".
func (n *Node) recorderTick() {
	if n.recovering || !n.ready {
		// The coordinators' heartbeats are held unread until recovery ends and are applied
		// before the next tick, so a silence measured now would be ours, not theirs.
		return
	}
	now := n.env.Elapsed()
	for _, txn := range slices.Sorted(maps.Keys(n.leases)) {
		if r, ok := n.recs.Get(txn); ok && r.Status.Final() {
			delete(n.leases, txn) // a PUSHWS re-armed it while the decision was being persisted
			continue
		}
		if now-n.leases[txn] > int64(n.cfg.lease) && n.decideAbort(txn, false) {
			n.m.Add("recorder.lease-abort", 1)
		}
	}
}

// onFinalize installs or discards a decided transaction's intents (Fig. 10, FINALIZE). Once a
// commit's finalization is durable the recorder hears of it, so that it can forget the record
// (gc.go); an abort's it need not.
func (n *Node) onFinalize(from topo.NodeID, f *FinalizeReq) {
	n.resolve(f.Txn, f.Commit, f.TS)
	tell := f.Commit && n.isDataNode(f.Recorder)
	if !f.Ack && !tell {
		n.persist(n.dataWrites(), nil)
		return
	}
	id, txn, rec, ack := f.ReqID, f.Txn, f.Recorder, f.Ack
	n.persist(n.dataWrites(), func() {
		if ack {
			n.env.Send(from, &FinalizeResp{ReqID: id})
		}
		if tell {
			n.noteFinalized(rec, txn)
		}
	})
}

// pendingIntents reports the transactions with undecided intents on this node (tests).
func (n *Node) pendingIntents() []storage.TxnID { return n.store.PendingTxns() }
