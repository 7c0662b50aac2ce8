package spanner

import (
	"encoding/binary"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/meridiandb/meridian/internal/node"
	"github.com/meridiandb/meridian/internal/protocol"
	"github.com/meridiandb/meridian/internal/protocol/txnkit"
	"github.com/meridiandb/meridian/internal/storage"
	"github.com/meridiandb/meridian/internal/storage/locks"
	"github.com/meridiandb/meridian/internal/storage/txnrec"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/ts"
	"github.com/meridiandb/meridian/internal/wire"
)

// coordPhase is where a transaction is at its coordinator.
type coordPhase uint8

const (
	phaseActive    coordPhase = iota + 1 // executing client operations
	phasePreparing                       // prepares sent, collecting votes
	phaseCommitted                       // decided commit (persisting, waiting out commit wait, or done)
)

// participant is the coordinator's view of one participant of a transaction.
type participant struct {
	node    node.ID
	granted uint32 // locks it granted: reads, and eager writes
	life    uint64 // the participant's life that granted them (its answers' Life)
	writes  bool
	voted   bool
	acked   bool
}

// coordTxn is one transaction at its coordinator.
type coordTxn struct {
	key      txnkit.ClientTxn
	id       storage.TxnID
	age      locks.Age
	readOnly bool
	snapTS   ts.Timestamp // read-only transactions read at this TrueTime timestamp
	phase    coordPhase

	parts      []*participant // in first-touch order
	writes     map[string]Write
	writeOrder []string
	// writeBytes holds the writes to wire.MaxTxnWriteBytes: each participant's PrepareReq
	// carries every write buffered for it, values and all. Eager writes leave no such message,
	// but are held to the same bound: it is the client's, the same under every protocol.
	writeBytes txnkit.TxnWrites
	readLocks  readLocks    // the shared locks' keys and ranges, to maxTxnReadLockBytes
	maxRead    ts.Timestamp // newest version read: the commit timestamp must exceed it

	pending *wire.ClientRequest // the client request being served, if any
	// nextSeq is one above the last client request taken on: the client numbers its requests
	// 0, 1, 2, … and sends one at a time, so a request numbered below it is a copy the network
	// delivered twice (or late) and must get no second answer.
	nextSeq   uint32
	run       *opRun // its reads and writes in flight, if it is one of those
	abortedBy string // set when aborted with no request pending: the next one learns it
	votes     int
	prepMax   ts.Timestamp
	commitTS  ts.Timestamp
	start     int64 // local clock at the first request
	prepStart int64
	idleTimer node.TimerID

	// idleLapsed: the idle timer fired while a request was in flight (a long lock wait), so
	// the answer to it arms the timer again.
	idleLapsed bool
}

// Coordinator is the transaction-manager half of a data node: it runs the transactions of the
// clients attached to it, buffers their writes, drives two-phase commit with commit timestamps
// from TrueTime, and keeps the durable commit decisions (a presumed-abort 2PC log in txnrec).
type Coordinator struct {
	env     node.Env
	cfg     Config
	metrics *protocol.Metrics
	recs    *txnrec.Table
	self    uint32
	inc     txnkit.Incarnation // hands out transaction ids
	isReady bool
	queued  []queuedReq

	txns   map[txnkit.ClientTxn]*coordTxn
	byID   map[storage.TxnID]*coordTxn
	ages   txnkit.RetryAges // an aborted transaction's age, for its client's retry (begin)
	ended  txnkit.EndedTxns // each client's highest transaction that ended, against late copies
	lastTS ts.Timestamp
	// unacked holds committed decisions whose participants have not all acknowledged.
	unacked map[storage.TxnID]*unackedCommit
	// lossSeenAt is when a participant last asked for a request or prepare it never got
	// (ResendReq): messages between nodes are being lost, or a participant restarted. Until an
	// idle-timeout after it the coordinator chases overdue transactions (armChase); chasing
	// says that timer runs.
	lossSeenAt int64
	chasing    bool
}

// unackedCommit is a committed decision some participant has not acknowledged yet.
type unackedCommit struct {
	parts  []*participant
	ts     ts.Timestamp
	sentAt int64 // local clock when the decision last went to the participants (0: not yet)
}

type queuedReq struct {
	from node.ID
	req  *wire.ClientRequest
}

// maxQueuedBeforeReady bounds the requests held while the incarnation is persisted.
const maxQueuedBeforeReady = 10000

func newCoordinator(env node.Env, c Config, m *protocol.Metrics, recs *txnrec.Table, inc txnkit.Incarnation) *Coordinator {
	return &Coordinator{env: env, cfg: c, metrics: m, recs: recs, self: uint32(env.Self()), inc: inc,
		txns: map[txnkit.ClientTxn]*coordTxn{}, byID: map[storage.TxnID]*coordTxn{},
		unacked: map[storage.TxnID]*unackedCommit{}}
}

// recover resends committed decisions whose acknowledgements were lost in a crash.
func (c *Coordinator) recover() {
	var committed []txnrec.Record
	c.recs.Records(func(r txnrec.Record) bool {
		if r.Status == txnrec.Committed {
			committed = append(committed, r)
		}
		return true
	})
	for _, r := range committed {
		parts := decodeParticipants(r.Meta)
		c.unacked[r.Txn] = &unackedCommit{parts: parts, ts: r.CommitTS, sentAt: c.env.Now()}
		c.lastTS = ts.MaxOf(c.lastTS, r.CommitTS)
		for _, p := range parts {
			c.env.Send(p.node, &DecideReq{Txn: r.Txn, Commit: true, TS: r.CommitTS})
		}
	}
}

// ready runs once the incarnation a life starts with is durable.
func (c *Coordinator) ready() {
	c.armKeepAlive()
	c.resume()
}

// resume hands out ids again once the incarnation is durable, serving the requests queued
// meanwhile in arrival order.
func (c *Coordinator) resume() {
	c.isReady = true
	q := c.queued
	c.queued = nil
	for _, r := range q {
		c.Request(r.from, r.req)
	}
}

// Request handles one client request.
func (c *Coordinator) Request(from node.ID, m *wire.ClientRequest) {
	if bad := txnkit.Validate(m); bad != nil {
		c.env.Send(from, bad)
		return
	}
	if !c.isReady {
		if len(c.queued) >= maxQueuedBeforeReady {
			txnkit.Reply(c.env, from, m, &wire.ClientReply{Code: wire.CodeUnavailable, Error: "coordinator recovering"})
			return
		}
		cp := *m
		c.queued = append(c.queued, queuedReq{from, &cp})
		return
	}
	key := txnkit.ClientTxn{Client: from, Txn: m.Txn}
	t := c.txns[key]
	if t == nil {
		if c.ended.RefuseLateFirst(c.env, from, m) {
			// A copy of an ended transaction's first request, delivered late.
			c.metrics.Add("late-first-request", 1)
			return
		}
		// A later request of a transaction an abort or idle timeout ended, or an earlier life
		// held, is refused, never begun afresh without the requests before it.
		if answered, refused := txnkit.AnswerUnheld(c.env, from, m); answered {
			if refused {
				c.metrics.Add("aborts/"+causeUnknownTxn, 1)
			}
			return
		}
		if c.inc.Spent() {
			// The next id would repeat this life's first: take the next number, and queue
			// this request and every later one until it is durable, as at a start.
			if err := c.inc.Renew(); err != nil {
				txnkit.Reply(c.env, from, m, &wire.ClientReply{Code: wire.CodeUnavailable, Error: "spanner: " + err.Error()})
				return
			}
			c.isReady = false
			c.env.Persist([]node.Write{c.inc.Write()}, c.resume)
			c.Request(from, m)
			return
		}
		t = c.begin(key, m)
	}
	if m.Seq < t.nextSeq {
		// A duplicate of a request already taken on. Answering it would give the client a
		// second reply for that number, and the first to arrive wins: a "request while another
		// is in flight" refusal of a duplicated commit reached the client before the commit's
		// own answer, so a committed transaction was reported failed (G1a under
		// sim.SetDuplication). Running it again could also overwrite a later buffered write.
		return
	}
	if t.pending != nil {
		if m.Op == wire.OpAbort && t.phase == phaseActive {
			// The client stopped waiting for its request (its timeout) and abandons the
			// transaction. An answer may be lost for good (a lost message, a participant
			// that is down), and until the abort the keep-alives would hold the
			// transaction's locks everywhere.
			t.nextSeq = m.Seq + 1
			c.abort(t, causeClientAbort)
			txnkit.OK(c.env, from, m)
			return
		}
		// The client sends one request at a time; a second one is a bug.
		txnkit.Reply(c.env, from, m, &wire.ClientReply{Code: wire.CodeBadArgument, Error: "request while another is in flight"})
		return
	}
	t.nextSeq = m.Seq + 1
	if t.abortedBy != "" {
		cause := t.abortedBy
		c.forget(t)
		if m.Op == wire.OpAbort {
			txnkit.OK(c.env, from, m)
		} else {
			txnkit.Aborted(c.env, from, m, cause)
		}
		return
	}
	cp := *m
	if t.phase != phaseActive {
		txnkit.Reply(c.env, from, m, &wire.ClientReply{Code: wire.CodeBadArgument, Error: "request after commit"})
		return
	}
	c.armIdle(t)
	switch m.Op {
	case wire.OpGet, wire.OpPut, wire.OpDelete, wire.OpBatch:
		if t.readOnly && writes(m) {
			txnkit.Reply(c.env, from, m, &wire.ClientReply{Code: wire.CodeBadArgument, Error: "write in a read-only transaction"})
			return
		}
		takeReads, ok := c.admitReads(t, m)
		if !ok {
			// Nothing is locked, buffered or sent: the transaction goes on without it.
			txnkit.Reply(c.env, from, m, &wire.ClientReply{Code: wire.CodeBadArgument, Error: txnReadLocksTooLarge})
			return
		}
		if !t.writeBytes.Admit(m) {
			txnkit.Reply(c.env, from, m, txnkit.TxnWritesRefused())
			return
		}
		takeReads()
		c.execute(t, &cp)
	case wire.OpScan:
		takeReads, ok := c.admitReads(t, m)
		if !ok {
			txnkit.Reply(c.env, from, m, &wire.ClientReply{Code: wire.CodeBadArgument, Error: txnReadLocksTooLarge})
			return
		}
		takeReads()
		c.scan(t, &cp)
	case wire.OpCommit:
		t.pending = &cp
		c.commit(t)
	case wire.OpAbort:
		c.abort(t, causeClientAbort)
		txnkit.OK(c.env, from, m)
	}
}

// admitReads is t.readLocks.admit for a read-write transaction; a read-only one takes no locks
// (its reads are snapshot reads) and is admitted whatever it reads.
func (c *Coordinator) admitReads(t *coordTxn, m *wire.ClientRequest) (take func(), ok bool) {
	if t.readOnly {
		return func() {}, true
	}
	return t.readLocks.admit(m)
}

// writes reports whether a read/write request (single or batch) writes.
func writes(m *wire.ClientRequest) bool {
	if m.Op != wire.OpBatch {
		return m.Op == wire.OpPut || m.Op == wire.OpDelete
	}
	for _, op := range m.Batch {
		if op.Op != wire.OpGet {
			return true
		}
	}
	return false
}

// begin starts a transaction. Its lock age is the TrueTime start of the client's first attempt
// of the same logical transaction, so a retried transaction grows older and cannot starve: a
// retry (Attempt > 0) takes the age its aborted attempt left (abort).
func (c *Coordinator) begin(key txnkit.ClientTxn, m *wire.ClientRequest) *coordTxn {
	id := c.inc.NextTxnID(topo.NodeID(c.self))
	tt := c.env.TrueTime()
	age := c.ages.Begin(key.Client, m.Attempt, ts.Timestamp{Wall: tt.Earliest, Origin: c.self})
	t := &coordTxn{key: key, id: id, age: age,
		readOnly: m.ReadOnly, phase: phaseActive, writes: map[string]Write{}, start: c.env.Now()}
	if t.readOnly {
		// Spanner's snapshot read timestamp: TT.now().latest, no later than any transaction
		// that finished before this one started committed.
		t.snapTS = ts.Timestamp{Wall: tt.Latest, Origin: c.self}
	}
	c.txns[key] = t
	c.byID[t.id] = t
	return t
}

func (c *Coordinator) armIdle(t *coordTxn) {
	c.env.Cancel(t.idleTimer)
	t.idleTimer = c.env.After(c.cfg.IdleTimeout, func() {
		switch {
		case c.byID[t.id] == t && t.phase != phaseCommitted && t.pending == nil:
			c.abort(t, causeIdle)
			c.forget(t)
		case c.byID[t.id] == t && t.phase == phaseActive:
			// A request is in flight: the client is waiting, not silent. It has the whole
			// timeout again from the answer (groupDone); without this nothing armed the timer
			// again, and a client that then fell silent for good had its transaction, and
			// the locks its keep-alives hold, kept forever.
			t.idleLapsed = true
		case t.abortedBy != "":
			// Aborted while its client had nothing in flight, and kept for the client's next
			// request to learn the cause; a client silent this long may never send one, and
			// a running transaction would have ended here anyway. Its next request, if any,
			// is refused as unknown (AnswerUnheld).
			c.forget(t)
		}
	})
}

// armKeepAlive tells, every third of the idle timeout, each participant of every executing
// transaction that its coordinator is alive. A participant's idle timeout exists to free the
// locks of a transaction whose coordinator crashed; without this it also fired at participants
// where a live transaction held locks while it waited, longer than the timeout, for a lock at
// another participant (or at this one), turning the idle timeout into a lock-wait timeout.
// A participant that restarted answers a keep-alive for a transaction it lost with a WoundReq,
// so keep-alives also go to the participants whose vote is still missing: a PrepareReq (or
// its answer) lost in the crash would otherwise leave the transaction preparing for good, with
// the participants that voted yes holding its locks until then. One that voted has its vote
// durable and never forgets the transaction before the decision; it polls instead.
//
// A read-only transaction has no participants in this sense (snapshot reads take no locks and
// leave no state behind), but its request waits for its snapshot reads all the same: each one
// still unanswered gets a keep-alive too (Snap), which a participant that does not hold it
// refuses. Without it a snapshot read lost in a participant's crash (parked behind an intent,
// or sent while the participant was down) left the request unanswered until the client's own
// timeout, a minute in the simulator, although its coordinator never failed.
func (c *Coordinator) armKeepAlive() {
	c.env.After(c.cfg.IdleTimeout/3, func() {
		c.sendKeepAlives(func(*coordTxn, node.ID) bool { return true })
		c.resendDecisions()
		// The same period bounds how long past the idle timeout an unclaimed age stays.
		c.ages.Expire(c.env.Now(), c.cfg.IdleTimeout)
		c.ended.Expire(c.env.Now(), c.cfg.IdleTimeout)
		c.armKeepAlive()
	})
}

// noteLoss records that a participant never got a message sent to it, and starts the chase.
func (c *Coordinator) noteLoss() {
	c.lossSeenAt = c.env.Now()
	if !c.chasing {
		c.chasing = true
		c.armChase()
	}
}

// chaseAfter is how long a transaction waits for an answer or a vote before a chase asks after
// it. Past decision-timeout a participant takes its answer for lost and sends it again
// (Participant.onKeepAlive); the quarter more lets that answer's own trip, and the
// keep-alive's, fit inside.
func (c *Coordinator) chaseAfter() time.Duration { return c.cfg.DecisionTimeout * 5 / 4 }

// armChase sends, every chaseAfter while messages are being lost, the keep-alives of each
// transaction that has waited longer than that for a participant: so a lost message costs
// about chaseAfter rather than up to the keep-alive period, a third of the idle timeout. The
// keep-alives alone bound a lost message's cost; under heavy loss they did not keep up: with
// 15% of the messages lost, each transaction of a wound-wait run with eager writes lost
// several, waited a keep-alive period for each while holding locks that others queued
// behind, and 6 of 40 rw-register runs still had clients waiting when the 30 s drain ended.
// The chase runs only once a loss has been seen, and stops an idle-timeout after the last:
// without faults nothing changes, the trace included.
func (c *Coordinator) armChase() {
	c.env.After(c.chaseAfter(), func() {
		now := c.env.Now()
		c.sendKeepAlives(func(t *coordTxn, _ node.ID) bool { return c.overdue(t, now) })
		if now-c.lossSeenAt < int64(c.cfg.IdleTimeout) {
			c.armChase()
		} else {
			c.chasing = false
		}
	})
}

// overdue reports whether t has waited at least chaseAfter for an answer to its current
// request or for the votes of its prepare.
func (c *Coordinator) overdue(t *coordTxn, now int64) bool {
	after := int64(c.chaseAfter())
	switch {
	case t.phase == phasePreparing:
		return now-t.prepStart >= after
	case t.run != nil:
		for _, g := range t.run.groups {
			if !g.done && now-g.sentAt >= after {
				return true
			}
		}
	}
	return false
}

// sendKeepAlives sends the keep-alives of every executing transaction to the participants to
// accepts (see armKeepAlive).
func (c *Coordinator) sendKeepAlives(to func(t *coordTxn, n node.ID) bool) {
	for _, id := range slices.Sorted(maps.Keys(c.byID)) {
		t := c.byID[id]
		if t.phase == phaseCommitted {
			continue
		}
		if t.readOnly {
			if t.run != nil {
				for _, g := range t.run.groups {
					if !g.done && to(t, g.node) {
						c.env.Send(g.node, &KeepAlive{Txn: id, Seq: t.pending.Seq, Snap: true})
					}
				}
			}
			continue
		}
		for _, p := range t.parts {
			if (t.phase == phaseActive || !p.voted) && to(t, p.node) {
				ka := &KeepAlive{Txn: id, Seen: p.granted, Life: p.life}
				switch {
				case t.phase == phasePreparing:
					ka.Await = awaitVote
				case t.run != nil:
					for _, g := range t.run.groups {
						if g.node == p.node && !g.done {
							ka.Await, ka.Seq = awaitAnswer, t.pending.Seq
						}
					}
				}
				c.env.Send(p.node, ka)
			}
		}
	}
}

// resendDecisions sends a committed decision again to the participants that have not
// acknowledged it a keep-alive period after it last went: the DecideReq or the DecideAck was
// lost. A prepared participant that missed the decision learns it by polling anyway, but a lost
// acknowledgement would keep the commit record, and its entry here, for good. (An
// acknowledgement takes a round trip and a flush, far less than the period, so no decision goes
// twice unless a message was lost or a participant was down.)
func (c *Coordinator) resendDecisions() {
	now := c.env.Now()
	for _, id := range slices.Sorted(maps.Keys(c.unacked)) {
		d := c.unacked[id]
		if d.sentAt == 0 || now-d.sentAt < int64(c.cfg.IdleTimeout/3) {
			continue // not released yet (persist, commit wait), or not overdue
		}
		d.sentAt = now
		for _, p := range d.parts {
			if !p.acked {
				c.metrics.Add("decisions-resent", 1)
				c.env.Send(p.node, &DecideReq{Txn: id, Commit: true, TS: d.ts})
			}
		}
	}
}

// onRestarted runs the keep-alive round for a participant that restarted now, rather than at
// the next period (up to a third of the idle timeout away): whatever its earlier life held for
// a transaction that had not voted there (locks, pending writes, a parked request) is gone, and
// so is every request sent to it while it was down. The participant knows exactly which of the
// transactions it lost — those it does not know, or whose snapshot read it does not hold. Those
// that held locks there (KeepAlive.Seen) it refuses (WoundReq participant-lost-locks), so they
// abort and free their locks elsewhere; for the others, which held nothing there yet, and for
// snapshot reads (SnapReadResp participant-lost-read), it has the request sent again
// (onResend). One whose first request reached the new life goes on.
func (c *Coordinator) onRestarted(from node.ID) {
	c.sendKeepAlives(func(_ *coordTxn, n node.ID) bool { return n == from })
}

func (c *Coordinator) part(t *coordTxn, n node.ID) *participant {
	for _, p := range t.parts {
		if p.node == n {
			return p
		}
	}
	p := &participant{node: n}
	t.parts = append(t.parts, p)
	return p
}

// opRun is one client request's reads and writes in flight: a single OpGet/OpPut/OpDelete, or
// an OpBatch's operations. The operations that go to one participant form a group, sent as one
// message (a ReadReq or WriteReq for a single operation, an OpsReq or a multi-key SnapReadReq
// for several), which the participant answers once: groups run concurrently, and a batch costs
// one round trip to each participant it touches however many of its keys live there.
type opRun struct {
	ops     []wire.BatchOp
	results []wire.BatchResult // one per op, in request order; writes leave theirs empty
	scan    *ScanRange         // a scan: ops is its one OpScan, one group per participant it goes to
	rows    []wire.KV          // a scan's rows so far
	// scanTooLarge: a participant's share of the scan exceeded wire.MaxScanBytes.
	scanTooLarge bool
	// tooLarge: a participant's share of the batch's reads did, and left its values out.
	tooLarge bool
	groups   []*opGroup // in first-touch order, so sends are deterministic
	left     int        // groups not answered yet
}

// opGroup is the part of a run that goes to one participant.
type opGroup struct {
	node node.ID
	// ops are indices into opRun.ops in request order, the order in which the participant
	// takes their locks. Any order is safe under every lock policy, so the client's is kept: a
	// workload may put its hot rows first, so that a request waits at them before it holds
	// other locks. (Sorting by key, for one global order, cut TPC-C's throughput under detect
	// by about a tenth in seeds 1–3, presumably because a request parked at a hot row then held
	// the locks of every key sorting before it.)
	ops    []int
	done   bool
	sentAt int64 // local clock when the group was sent (the eager-write latency)
}

// execute runs a client request's reads and writes. Those that need no message complete at
// once: a buffered write goes into t.writes, and a read of a key the transaction buffered a
// write for is answered from it. The rest go to their keys' primaries.
func (c *Coordinator) execute(t *coordTxn, req *wire.ClientRequest) {
	ops := req.Batch
	if req.Op != wire.OpBatch {
		ops = []wire.BatchOp{{Op: req.Op, Key: req.Key, Value: req.Value}}
	}
	run := &opRun{ops: ops, results: make([]wire.BatchResult, len(ops))}
	tp := c.env.Topology()
	for i, op := range ops {
		if op.Op == wire.OpGet {
			if w, ok := t.writes[op.Key]; ok {
				run.results[i] = wire.BatchResult{Found: !w.Delete, Value: w.Value}
				continue
			}
		} else if !c.cfg.EagerWrites {
			if _, seen := t.writes[op.Key]; !seen {
				t.writeOrder = append(t.writeOrder, op.Key)
			}
			t.writes[op.Key] = Write{Key: op.Key, Value: slices.Clone(op.Value), Delete: op.Op == wire.OpDelete}
			continue
		}
		primary := tp.PrimaryOf(op.Key)
		var g *opGroup
		for _, h := range run.groups {
			if h.node == primary {
				g = h
			}
		}
		if g == nil {
			g = &opGroup{node: primary}
			run.groups = append(run.groups, g)
		}
		g.ops = append(g.ops, i)
	}
	if len(run.groups) == 0 {
		c.reply(t, req, run)
		return
	}
	t.pending, t.run = req, run
	run.left = len(run.groups)
	for _, g := range run.groups {
		c.sendGroup(t, g)
	}
}

// scan runs a scan (scan.go) at every participant that leads a shard the range may hold keys of
// (txnkit.ScanNodes), one group each, answered like a run: a snapshot scan in a read-only
// transaction, a locking scan in a read-write one, whose shares are cut at shareLimit so that
// the transaction's buffered deletes, applied at the reply, leave the limit filled.
func (c *Coordinator) scan(t *coordTxn, req *wire.ClientRequest) {
	rg := &ScanRange{Start: req.Key, End: req.EndKey, Limit: req.Limit}
	if !t.readOnly {
		rg.Limit = shareLimit(rg.Limit, t.writes, rg.keys())
	}
	run := &opRun{ops: []wire.BatchOp{{Op: wire.OpScan, Key: req.Key}}, results: make([]wire.BatchResult, 1), scan: rg}
	for _, p := range txnkit.ScanNodes(c.env.Topology(), req.Key, req.EndKey) {
		run.groups = append(run.groups, &opGroup{node: p, ops: []int{0}})
	}
	t.pending, t.run = req, run
	run.left = len(run.groups)
	for _, g := range run.groups {
		c.sendGroup(t, g)
	}
}

// groupKind is the message kind g goes out as, and so the answer it expects.
func (t *coordTxn) groupKind(g *opGroup) opsKind {
	switch {
	case t.run.scan != nil:
		return kindScan
	case len(g.ops) > 1:
		return kindOps
	case t.run.ops[g.ops[0]].Op == wire.OpGet:
		return kindRead
	}
	return kindWrite
}

// sendGroup sends g's operations to its participant: snapshot reads and scans (read-only
// transactions), reads under shared locks, scans under range locks, and eager writes
// (write-locks=eager), which the participant locks exclusively now and keeps pending until the
// decision. The coordinator keeps no copy of an
// eager write: the transaction's later reads of the key go to the participant, which answers
// from the pending write.
func (c *Coordinator) sendGroup(t *coordTxn, g *opGroup) {
	seq := t.pending.Seq
	g.sentAt = c.env.Now()
	if t.readOnly {
		m := &SnapReadReq{Txn: t.id, Seq: seq, At: t.snapTS}
		if t.run.scan != nil {
			m.Scan = t.run.scan
		} else if len(g.ops) == 1 {
			m.Key = t.run.ops[g.ops[0]].Key
		} else {
			m.Keys = make([]string, len(g.ops))
			for j, i := range g.ops {
				m.Keys[j] = t.run.ops[i].Key
			}
		}
		c.env.Send(g.node, m)
		return
	}
	p := c.part(t, g.node)
	switch t.groupKind(g) {
	case kindRead:
		c.env.Send(g.node, &ReadReq{Txn: t.id, Age: t.age, Seq: seq, Key: t.run.ops[g.ops[0]].Key, Seen: p.granted, Life: p.life})
	case kindWrite:
		op := t.run.ops[g.ops[0]]
		p.writes = true
		c.env.Send(g.node, &WriteReq{Txn: t.id, Age: t.age, Seq: seq, Key: op.Key, Value: slices.Clone(op.Value),
			Delete: op.Op == wire.OpDelete, Seen: p.granted, Life: p.life})
	case kindOps:
		m := &OpsReq{Txn: t.id, Age: t.age, Seq: seq, Ops: make([]Op, len(g.ops)), Seen: p.granted, Life: p.life}
		for j, i := range g.ops {
			op := t.run.ops[i]
			m.Ops[j].Key = op.Key
			if op.Op != wire.OpGet {
				p.writes = true
				m.Ops[j] = Op{Key: op.Key, Write: true, Value: slices.Clone(op.Value), Delete: op.Op == wire.OpDelete}
			}
		}
		c.env.Send(g.node, m)
	case kindScan:
		c.env.Send(g.node, &ScanReq{Txn: t.id, Age: t.age, Seq: seq, Scan: *t.run.scan, Seen: p.granted, Life: p.life})
	}
}

// outstanding finds the transaction and the group an answer from a participant is for: the one
// its run has out at from, if it went out as kind. Answers for aborted transactions, finished
// requests or other messages yield nil.
func (c *Coordinator) outstanding(id storage.TxnID, from node.ID, seq uint32, kind opsKind) (*coordTxn, *opGroup) {
	t := c.byID[id]
	if t == nil || t.run == nil || t.pending.Seq != seq {
		return nil, nil
	}
	for _, g := range t.run.groups {
		if g.node == from && !g.done {
			if t.groupKind(g) != kind {
				return nil, nil
			}
			return t, g
		}
	}
	return nil, nil
}

func (c *Coordinator) onReadResp(from node.ID, m *ReadResp) {
	t, g := c.outstanding(m.Txn, from, m.Seq, kindRead)
	if t == nil || t.readOnly {
		return // the transaction was aborted meanwhile
	}
	if !m.OK {
		c.abort(t, m.Cause)
		return
	}
	if !c.granted(t, from, m.Life, 1) {
		return
	}
	t.maxRead = ts.MaxOf(t.maxRead, m.Version)
	t.run.results[g.ops[0]] = wire.BatchResult{Found: m.Found, Value: m.Value}
	c.groupDone(t, g)
}

func (c *Coordinator) onWriteResp(from node.ID, m *WriteResp) {
	t, g := c.outstanding(m.Txn, from, m.Seq, kindWrite)
	if t == nil || t.readOnly {
		return // the transaction was aborted meanwhile
	}
	if !m.OK {
		c.abort(t, m.Cause)
		return
	}
	if !c.granted(t, from, m.Life, 1) {
		return
	}
	c.metrics.Observe("write", c.env.Now()-g.sentAt)
	c.groupDone(t, g)
}

// onOpsResp takes a participant's answer to a group of several operations: every one of them
// now holds its lock there.
func (c *Coordinator) onOpsResp(from node.ID, m *OpsResp) {
	t, g := c.outstanding(m.Txn, from, m.Seq, kindOps)
	if t == nil || t.readOnly {
		return // the transaction was aborted meanwhile
	}
	if !m.OK || len(m.Results) != len(g.ops) {
		cause := m.Cause
		if m.OK {
			cause = causeBadAnswer // a participant bug; the transaction cannot trust its locks
		}
		c.abort(t, cause)
		return
	}
	if !c.granted(t, from, m.Life, uint32(len(g.ops))) {
		return
	}
	for j, i := range g.ops {
		if t.run.ops[i].Op != wire.OpGet {
			c.metrics.Observe("write", c.env.Now()-g.sentAt)
			continue
		}
		r := m.Results[j]
		t.maxRead = ts.MaxOf(t.maxRead, r.Version)
		t.run.results[i] = wire.BatchResult{Found: r.Found, Value: r.Value}
	}
	t.run.tooLarge = t.run.tooLarge || m.TooLarge
	c.groupDone(t, g)
}

// onScanResp takes a participant's share of a read-write scan: it holds the range locks there.
func (c *Coordinator) onScanResp(from node.ID, m *ScanResp) {
	t, g := c.outstanding(m.Txn, from, m.Seq, kindScan)
	if t == nil || t.readOnly {
		return // the transaction was aborted meanwhile
	}
	if !m.OK {
		c.abort(t, m.Cause)
		return
	}
	if !c.granted(t, from, m.Life, 1) {
		return
	}
	t.maxRead = ts.MaxOf(t.maxRead, m.Version)
	t.run.rows = append(t.run.rows, m.Rows...)
	t.run.scanTooLarge = t.run.scanTooLarge || m.TooLarge
	c.groupDone(t, g)
}

// granted counts n more locks granted to t at from by its life life. Granted by another life
// than the earlier ones (it restarted meanwhile, and lost them), they abort t.
func (c *Coordinator) granted(t *coordTxn, from node.ID, life uint64, n uint32) bool {
	p := c.part(t, from)
	if p.granted > 0 && p.life != life {
		c.abort(t, causeLostLocks)
		return false
	}
	p.granted, p.life = p.granted+n, life
	return true
}

func (c *Coordinator) onSnapReadResp(from node.ID, m *SnapReadResp) {
	if m.Cause != "" {
		// A refusal carries no results, so it answers a group of either kind.
		t, _ := c.outstanding(m.Txn, from, m.Seq, kindRead)
		if t == nil {
			t, _ = c.outstanding(m.Txn, from, m.Seq, kindOps)
		}
		if t == nil {
			t, _ = c.outstanding(m.Txn, from, m.Seq, kindScan)
		}
		if t != nil && t.readOnly {
			if m.Cause == causeLostRead {
				// Not parked there: the read never arrived, or the participant restarted. A
				// snapshot read leaves no state behind, so it simply goes again.
				c.resend(t, from)
				return
			}
			c.abort(t, m.Cause)
		}
		return
	}
	kind := kindRead
	switch {
	case m.Scan:
		kind = kindScan
	case len(m.Results) > 0:
		kind = kindOps
	}
	t, g := c.outstanding(m.Txn, from, m.Seq, kind)
	if t == nil || !t.readOnly {
		return
	}
	switch kind {
	case kindScan:
		t.run.rows = append(t.run.rows, m.Rows...)
		t.run.scanTooLarge = t.run.scanTooLarge || m.TooLarge
	case kindRead:
		t.run.results[g.ops[0]] = wire.BatchResult{Found: m.Found, Value: m.Value}
	default:
		if len(m.Results) != len(g.ops) {
			c.abort(t, causeBadAnswer)
			return
		}
		for j, i := range g.ops {
			t.run.results[i] = wire.BatchResult{Found: m.Results[j].Found, Value: m.Results[j].Value}
		}
		t.run.tooLarge = t.run.tooLarge || m.TooLarge
	}
	c.groupDone(t, g)
}

// groupDone marks g answered; once every group of the run is, the client gets the reply.
func (c *Coordinator) groupDone(t *coordTxn, g *opGroup) {
	g.done = true
	t.run.left--
	if t.run.left > 0 {
		return
	}
	req, run := t.pending, t.run
	t.pending, t.run = nil, nil
	if t.idleLapsed {
		t.idleLapsed = false
		c.armIdle(t)
	}
	c.reply(t, req, run)
}

// reply answers a finished run: a batch with its results in request order, a read with its one
// result, a write with OK.
func (c *Coordinator) reply(t *coordTxn, req *wire.ClientRequest, run *opRun) {
	switch req.Op {
	case wire.OpScan:
		// The transaction's buffered writes, as its point reads see them (none in a read-only
		// transaction, nor with eager writes, which the participants applied).
		rows := txnkit.MergeScanRows(applyWrites(run.rows, t.writes, run.scan.keys()), req.Limit)
		if run.scanTooLarge || wire.RowsTooLarge(rows) {
			txnkit.Reply(c.env, t.key.Client, req, &wire.ClientReply{Code: wire.CodeBadArgument, Error: wire.ScanTooLarge})
			return
		}
		txnkit.Reply(c.env, t.key.Client, req, &wire.ClientReply{Code: wire.CodeOK, Rows: rows})
	case wire.OpBatch:
		if run.tooLarge || txnkit.ResultsTooLarge(run.results) {
			// It would not fit a frame. The reads' locks stay held, released at the
			// transaction's end as ever, and the transaction goes on.
			txnkit.Reply(c.env, t.key.Client, req, txnkit.BatchAnswerRefused())
			return
		}
		txnkit.Reply(c.env, t.key.Client, req, &wire.ClientReply{Code: wire.CodeOK, Results: run.results})
	case wire.OpGet:
		r := run.results[0]
		txnkit.Reply(c.env, t.key.Client, req, &wire.ClientReply{Code: wire.CodeOK, Found: r.Found, Value: r.Value})
	default:
		txnkit.OK(c.env, t.key.Client, req)
	}
}

// commit starts two-phase commit (or finishes a read-only transaction).
func (c *Coordinator) commit(t *coordTxn) {
	if t.readOnly {
		c.finishReadOnly(t)
		return
	}
	tp := c.env.Topology()
	for _, k := range t.writeOrder {
		c.part(t, tp.PrimaryOf(k)).writes = true
	}
	if len(t.parts) == 0 {
		req := t.pending
		c.forget(t)
		txnkit.OK(c.env, t.key.Client, req)
		return
	}
	t.phase, t.prepStart = phasePreparing, c.env.Now()
	for _, p := range t.parts {
		c.env.Send(p.node, &PrepareReq{Txn: t.id, Age: t.age, Seen: p.granted, Life: p.life, Writes: c.writesAt(t, p.node)})
	}
}

// writesAt returns t's buffered writes to n's keys, in key order (as its PrepareReq carries them).
func (c *Coordinator) writesAt(t *coordTxn, n node.ID) []Write {
	tp := c.env.Topology()
	keys := slices.Clone(t.writeOrder)
	slices.Sort(keys)
	var ws []Write
	for _, k := range keys {
		if tp.PrimaryOf(k) == n {
			ws = append(ws, t.writes[k])
		}
	}
	return ws
}

// onResend sends again the request or prepare a participant says it never got.
func (c *Coordinator) onResend(from node.ID, m *ResendReq) {
	c.noteLoss()
	t := c.byID[m.Txn]
	if t == nil || t.readOnly {
		return
	}
	if m.Prepare {
		if t.phase != phasePreparing {
			return
		}
		for _, p := range t.parts {
			if p.node == from && !p.voted {
				c.metrics.Add("requests-resent", 1)
				c.env.Send(from, &PrepareReq{Txn: t.id, Age: t.age, Seen: p.granted, Life: p.life, Writes: c.writesAt(t, from)})
			}
		}
		return
	}
	if t.phase == phaseActive && t.pending != nil && t.pending.Seq == m.Seq {
		c.resend(t, from)
	}
}

// resend sends again the group of t's current run that is still out at n, if any.
func (c *Coordinator) resend(t *coordTxn, n node.ID) {
	if t.run == nil {
		return
	}
	for _, g := range t.run.groups {
		if g.node == n && !g.done {
			c.metrics.Add("requests-resent", 1)
			c.sendGroup(t, g)
		}
	}
}

// finishReadOnly completes a snapshot transaction. With commit wait on it waits until its
// snapshot is in the past everywhere (TT.now().earliest > snapshot), so any transaction that
// starts after it gets a larger timestamp: the read-only half of strict serializability.
func (c *Coordinator) finishReadOnly(t *coordTxn) {
	req := t.pending
	answer := func() {
		c.forget(t)
		c.metrics.Add("ro_commits", 1)
		txnkit.Reply(c.env, t.key.Client, req, &wire.ClientReply{Code: wire.CodeOK, CommitTS: t.snapTS})
	}
	if !c.cfg.CommitWait || c.cfg.Mutant == MutantEarlyRelease {
		answer()
		return
	}
	c.settle(t)
	c.waitUntilPast(t.snapTS, answer)
}

// settle takes t, whose commit is decided but not yet answered (the decision being persisted,
// the commit wait running), out of the running transactions, and leaves it under its client's
// name until forget at the answer: a copy of the commit request that the network delivers
// meanwhile is then dropped as a duplicate (its number is below nextSeq). Forgotten at the
// decision, the transaction was not found, the copy was refused as of an unknown transaction
// (txnkit.AnswerUnheld), and the refusal reached the client ahead of the commit's OK: a
// committed transaction reported aborted, and retried (G1a in list-append histories).
func (c *Coordinator) settle(t *coordTxn) {
	c.env.Cancel(t.idleTimer)
	t.phase, t.pending = phaseCommitted, nil
	if c.byID[t.id] == t {
		delete(c.byID, t.id)
	}
}

// waitUntilPast calls fn once TT.now().earliest > at: Spanner's commit wait. The local timer
// drifts, so the wait re-reads TrueTime and sleeps again if it woke early.
func (c *Coordinator) waitUntilPast(at ts.Timestamp, fn func()) {
	start := c.env.Now()
	var step func()
	step = func() {
		left := at.Wall - c.env.TrueTime().Earliest + 1
		if left <= 0 {
			c.metrics.Observe("commit_wait", c.env.Now()-start)
			fn()
			return
		}
		c.env.After(time.Duration(left), step)
	}
	step()
}

func (c *Coordinator) onPrepareResp(from node.ID, m *PrepareResp) {
	t := c.byID[m.Txn]
	if t == nil || t.phase != phasePreparing {
		return
	}
	var p *participant
	for _, q := range t.parts {
		if q.node == from {
			p = q
		}
	}
	if p == nil || p.voted {
		return
	}
	if !m.OK {
		c.abort(t, m.Cause)
		return
	}
	p.voted = true
	t.votes++
	t.prepMax = ts.MaxOf(t.prepMax, m.TS)
	if t.votes < len(t.parts) {
		return
	}
	c.metrics.Observe("prepare", c.env.Now()-t.prepStart)
	c.decideCommit(t)
}

// decideCommit picks the commit timestamp — at least TT.now().latest, above every prepare
// timestamp, every version read and every timestamp this coordinator issued — persists the
// decision, waits out the commit wait, then releases the participants and answers the client.
func (c *Coordinator) decideCommit(t *coordTxn) {
	tt := c.env.TrueTime()
	s := ts.Timestamp{Wall: tt.Latest, Origin: c.self}
	for _, lower := range []ts.Timestamp{t.prepMax, t.maxRead, c.lastTS} {
		if !lower.Less(s) {
			s = tsAfter(lower, s.Wall, c.self)
		}
	}
	c.lastTS = s
	t.commitTS = s
	req := t.pending
	decision := &unackedCommit{parts: t.parts, ts: s}
	release := func() {
		c.forget(t)
		decision.sentAt = c.env.Now()
		for _, p := range t.parts {
			c.env.Send(p.node, &DecideReq{Txn: t.id, Commit: true, TS: s})
		}
		c.metrics.Add("commits", 1)
		c.metrics.Observe("commit_latency", c.env.Now()-t.start)
		txnkit.Reply(c.env, t.key.Client, req, &wire.ClientReply{Code: wire.CodeOK, CommitTS: s})
	}
	if _, err := c.recs.Create(t.id, encodeParticipants(t.parts)); err != nil {
		slog.Error("spanner: recording participants", "txn", t.id, "err", err)
	}
	if err := c.recs.Decide(t.id, txnrec.Committed, s, 0); err != nil {
		slog.Error("spanner: recording a commit decision", "txn", t.id, "err", err)
	}
	c.unacked[t.id] = decision
	c.settle(t)
	if c.cfg.Mutant == MutantEarlyRelease {
		// Broken on purpose: locks go and the client hears "committed" before the decision is
		// durable and before TT.now().earliest has passed s.
		release()
		v := c.recs.Version(t.id)
		c.env.Persist(c.recs.TakeWrites(), func() { c.recs.Decided(t.id, v) })
		return
	}
	v := c.recs.Version(t.id)
	c.env.Persist(c.recs.TakeWrites(), func() {
		c.recs.Decided(t.id, v)
		if !c.cfg.CommitWait {
			release()
			return
		}
		c.waitUntilPast(s, release)
	})
}

func (c *Coordinator) onDecideAck(from node.ID, m *DecideAck) {
	d := c.unacked[m.Txn]
	if d == nil {
		return
	}
	all := true
	for _, p := range d.parts {
		if p.node == from {
			p.acked = true
		}
		all = all && p.acked
	}
	if !all {
		return
	}
	if rec, ok := c.recs.Get(m.Txn); !ok || rec.Status != txnrec.Committed {
		return // the decision itself is not durable yet; a later ack or resend finishes this
	}
	delete(c.unacked, m.Txn)
	if err := c.recs.Forget(m.Txn); err == nil {
		c.env.Persist(c.recs.TakeWrites(), nil)
	}
}

// onWound aborts a transaction an older one wounded, the deadlock detector's victim, or one a
// restarted participant no longer knows, unless it already decided to commit (then the wounder simply waits: the locks go soon; for the
// detector, the wait it saw was already over).
func (c *Coordinator) onWound(m *WoundReq) {
	cause := causeWoundWait
	if m.Cause != "" {
		// The detector's victim, a transaction a participant lost, or one it aborted and whose
		// refusal was lost (onKeepAlive repeats it with its cause).
		cause = m.Cause
	}
	if t := c.byID[m.Txn]; t != nil && t.phase != phaseCommitted {
		c.abort(t, cause)
	}
}

// onStatusReq tells a participant the fate of a prepared transaction. A transaction this
// coordinator neither runs nor has a commit record for was aborted (presumed abort): a commit
// is always recorded durably before any participant hears of it.
func (c *Coordinator) onStatusReq(from node.ID, m *StatusReq) {
	// The poll repeats what the participant sent once and may have been lost: each is taken as
	// if it arrived now, and a copy of what did arrive changes nothing (a wound of a transaction
	// aborted or decided, a vote already counted).
	if m.Wounded {
		c.onWound(&WoundReq{Txn: m.Txn})
	}
	if t := c.byID[m.Txn]; t != nil && m.Voted {
		c.onPrepareResp(from, &PrepareResp{Txn: m.Txn, OK: true, TS: m.TS})
	}
	if t := c.byID[m.Txn]; t != nil {
		c.env.Send(from, &StatusResp{Txn: m.Txn, Status: statusInProgress})
		return
	}
	if rec, ok := c.recs.Get(m.Txn); ok {
		switch rec.Status {
		case txnrec.Committed:
			c.env.Send(from, &StatusResp{Txn: m.Txn, Status: statusCommitted, TS: rec.CommitTS})
			return
		case txnrec.InProgress, txnrec.Staging:
			c.env.Send(from, &StatusResp{Txn: m.Txn, Status: statusInProgress})
			return
		}
	}
	if _, deciding := c.unacked[m.Txn]; deciding {
		c.env.Send(from, &StatusResp{Txn: m.Txn, Status: statusInProgress})
		return
	}
	c.env.Send(from, &StatusResp{Txn: m.Txn, Status: statusAborted})
}

// abort aborts an undecided transaction everywhere and tells the client if it is waiting.
func (c *Coordinator) abort(t *coordTxn, cause string) {
	if t.phase == phaseCommitted || c.byID[t.id] != t {
		return
	}
	for _, p := range t.parts {
		c.env.Send(p.node, &DecideReq{Txn: t.id, Commit: false})
	}
	t.parts = nil
	// Kept before the client can hear of the abort, so that its retry finds it.
	c.ages.Aborted(t.key.Client, t.age, c.env.Now())
	if cause != causeClientAbort && cause != causeIdle {
		c.metrics.Add("aborts/"+cause, 1)
		if isLockPolicyCause(cause) {
			c.metrics.Add("deadlocks", 1)
		}
	}
	t.run = nil // late answers to its operations find no run and are dropped
	if t.pending != nil {
		req := t.pending
		c.forget(t)
		txnkit.Aborted(c.env, t.key.Client, req, cause)
		return
	}
	// No request in flight: the client learns of the abort at its next request, if it comes
	// before the idle timer (armed at its last one) drops the transaction.
	t.abortedBy = cause
	t.phase = phaseActive
	delete(c.byID, t.id)
}

func (c *Coordinator) forget(t *coordTxn) {
	c.env.Cancel(t.idleTimer)
	if c.txns[t.key] == t {
		delete(c.txns, t.key)
		c.ended.Ended(t.key, c.env.Now(), c.cfg.IdleTimeout)
	}
	if c.byID[t.id] == t {
		delete(c.byID, t.id)
	}
}

// Participant lists are stored in the commit record's metadata: uvarint count, then uvarint
// node ids.
func encodeParticipants(ps []*participant) []byte {
	b := binary.AppendUvarint(nil, uint64(len(ps)))
	for _, p := range ps {
		b = binary.AppendUvarint(b, uint64(p.node))
	}
	return b
}

func decodeParticipants(b []byte) []*participant {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)) {
		return nil
	}
	b = b[k:]
	out := make([]*participant, 0, n)
	for i := uint64(0); i < n; i++ {
		v, k := binary.Uvarint(b)
		if k <= 0 {
			return out
		}
		b = b[k:]
		out = append(out, &participant{node: node.ID(topo.NodeID(v))})
	}
	return out
}

// Active returns the number of transactions the coordinator runs (tests).
func (c *Coordinator) Active() int { return len(c.byID) }
