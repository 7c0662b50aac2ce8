package k2

import (
	"slices"
	"sort"
	"time"

	"github.com/meridiandb/meridian/internal/node"
	"github.com/meridiandb/meridian/internal/protocol/txnkit"
	"github.com/meridiandb/meridian/internal/storage"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/ts"
	"github.com/meridiandb/meridian/internal/wire"
)

type txnState uint8

const (
	stWaitTS     txnState = iota + 1 // queued for a K2-TB timestamp
	stIdle                           // waiting for the client's next request
	stBusy                           // the reads and writes of a client request are out at data nodes
	stWriteWait                      // write pipelining: waiting until every write is durable
	stCommitWait                     // waiting out the commit wait
	stCommitting                     // the commit is out at the recorder
	stFinalizing                     // synchronous-finalization ablation: waiting for acks
	stDone
)

// ctxn is a transaction at its coordinator. The coordinator is stateless in the paper's sense:
// losing it loses nothing durable, because the recorder owns the decision.
type ctxn struct {
	key      txnkit.ClientTxn
	id       storage.TxnID
	ts       ts.Timestamp
	readOnly bool
	state    txnState

	arrivedLocal    int64 // first request arrived: the transaction's start for K2-TB
	tsMissesBefore  int64 // the coordinator's tsMisses when it queued: more by its Take means it waited (ts.waited)
	cwDeadlineLocal int64 // local time before which the transaction must not end
	lastClientLocal int64

	req       wire.ClientRequest // the request being served
	reqID     uint64             // the commit or finalization request out, if any
	sentLocal int64
	timer     node.TimerID
	tries     int
	// probeTimer fires when the earliest flight of the request is due for a loss probe
	// (lostops.go); cancelled with the request.
	probeTimer node.TimerID

	// The reads and writes of the request being served (one, or an OpBatch's), all out at
	// once: flights holds them in the order their request ids were minted, consecutively from
	// firstReq (Node.busy finds them by id), flightsOut counts those not answered yet, results
	// collects the answers in request order. The ends and the longest PUSHWS wait make the
	// request's phase times.
	flights          []flight
	firstReq         uint64
	flightsOut       int
	results          []wire.BatchResult
	rows             []wire.KV // a scan's rows so far, from the nodes that answered
	scanTooLarge     bool      // a node's share of the scan exceeded wire.MaxScanBytes
	round            uint64    // numbers the requests served, so a stale timer can tell
	readEndLocal     int64
	writeEndLocal    int64
	maxPushNanos     int64
	hasReads, hasWrs bool

	recorder        topo.NodeID
	hasRecorder     bool
	participants    []topo.NodeID // nodes sent writes, ascending
	acked           []topo.NodeID // synchronous finalization: participants that acknowledged
	commitSentLocal int64

	// Write durability. writes holds the latest write of each key (one per key: a rewrite
	// replaces the earlier one), in sending order; incs the incarnation each participant
	// first answered with. lost is set when a write may have died in a participant's crash.
	// Per-transaction phase totals (K2 Table 2 reports a NewOrder's phases summed over its
	// operations): observed as txn.* when a read-write transaction commits.
	getTSNanos, readNanos, pushNanos int64
	writePhaseNanos                  int64
	// label is the client's name for the transaction's kind (wire.ClientRequest.Label): the
	// txn.* phases are also kept per label, e.g. for Table 2's local and remote New-Orders.
	label string

	wseq           uint32
	writes         []twrite
	incs           map[topo.NodeID]uint64
	lost           bool
	writeNanos     int64 // without pipelining: time spent in writes, for phase.write
	writeWaitLocal int64 // with pipelining: when the commit began waiting for durability

	// writeBytes holds the writes to wire.MaxTxnWriteBytes: each participant's durability
	// question (DurableReq) lists every key the transaction wrote there.
	writeBytes txnkit.TxnWrites
}

// opKind is what a flight is: its answer must be of the same kind.
type opKind uint8

const (
	opRead opKind = iota
	opWrite
	opScan // one data node's share of a range scan (scan.go)
)

// flight is one read, write or scan share of a client request, out at a data node.
type flight struct {
	i    int // position in the request (0 for a single operation)
	kind opKind
	to   topo.NodeID
	// Loss recovery (lostops.go): when it was sent or last probed, and how long until the
	// next probe. The message to send it again is rebuilt from the request (opMessage).
	sentLocal int64
	rto       time.Duration
	wseq      uint32
	creates   bool // this write creates the transaction record
	out       bool // not answered yet
}

// twrite is a write of a transaction as its coordinator tracks its durability.
type twrite struct {
	node    topo.NodeID
	key     string
	wseq    uint32
	durable bool
}

// reqIDsLeft is how many request ids may still be minted under their current number. The last
// one is number<<reqSeqBits | reqSeqMask: one more would be the next number's first, which a
// later life mints too (reqSeqBits).
func (n *Node) reqIDsLeft() uint64 { return reqSeqMask - n.reqSeq&reqSeqMask }

// reqIDsLow reports whether request ids (or oracle request ids) should move to a new number
// before they run out.
func (n *Node) reqIDsLow() bool {
	return n.reqSeq&reqSeqMask >= reqRenewAt || n.oracleSeq&reqSeqMask >= reqRenewAt
}

// newReqID mints a request id; the caller has made sure reqIDsLeft is not 0.
func (n *Node) newReqID() uint64 {
	if n.reqIDsLeft() == 0 {
		panic("k2: request id minted past its number's last")
	}
	n.reqSeq++
	return n.reqSeq
}

// nextReqID mints t's commit or finalization request id; ok is false when none is left.
func (n *Node) nextReqID(t *ctxn) (id uint64, ok bool) {
	if n.reqIDsLeft() == 0 {
		return 0, false
	}
	t.reqID = n.newReqID()
	n.byReq[t.reqID] = t
	return t.reqID, true
}

// addFlight mints the request id of f, t's next operation out, and returns it.
func (n *Node) addFlight(t *ctxn, f flight) uint64 {
	id := n.newReqID()
	if len(t.flights) == 0 {
		// Ids are minted in increasing order, so appending keeps busy sorted.
		t.firstReq = id
		n.busy = append(n.busy, t)
	} else if id != t.firstReq+uint64(len(t.flights)) {
		panic("k2: a request's operations were not numbered in one run")
	}
	f.out = true
	t.flights = append(t.flights, f)
	t.flightsOut++
	return id
}

// flightOf finds the operation out with request id id, and the transaction it belongs to; nil
// for a stale id. Each transaction's ids are a range, minted without a gap, and the ranges of
// busy ascend: a binary search over the few hundred transactions a coordinator has out was a
// fifth of the cost of a map from every operation's id (at paper scale, the maps' upkeep was
// a tenth of the run's CPU).
func (n *Node) flightOf(id uint64) (*ctxn, *flight) {
	// The first transaction whose ids start past id; the one before it is the only one whose
	// range may hold id.
	i := sort.Search(len(n.busy), func(i int) bool { return n.busy[i].firstReq > id })
	if i == 0 {
		return nil, nil
	}
	t := n.busy[i-1]
	if j := id - t.firstReq; j < uint64(len(t.flights)) && t.flights[j].out {
		return t, &t.flights[j]
	}
	return nil, nil
}

// clearFlights forgets t's operations out: their answers are stale from now on.
func (n *Node) clearFlights(t *ctxn) {
	if len(t.flights) > 0 {
		i := sort.Search(len(n.busy), func(i int) bool { return n.busy[i].firstReq >= t.firstReq })
		if i == len(n.busy) || n.busy[i] != t {
			panic("k2: a transaction with operations out is not listed as busy")
		}
		n.busy = slices.Delete(n.busy, i, i+1)
	}
	t.flights, t.flightsOut = nil, 0
}

func (n *Node) clearReq(t *ctxn) {
	if t.reqID != 0 {
		delete(n.byReq, t.reqID)
		t.reqID = 0
	}
	n.clearFlights(t)
	n.env.Cancel(t.timer)
	t.timer = 0
	n.env.Cancel(t.probeTimer)
	t.probeTimer = 0
}

func (n *Node) reply(t *ctxn, r *wire.ClientReply) {
	txnkit.Reply(n.env, t.key.Client, &t.req, r)
}

func (n *Node) onClient(from node.ID, req *wire.ClientRequest) {
	if bad := txnkit.Validate(req); bad != nil {
		n.env.Send(from, bad)
		return
	}
	k := txnkit.ClientTxn{Client: from, Txn: req.Txn}
	now := n.env.Elapsed()
	t := n.txns[k]
	if t == nil {
		if n.ended.RefuseLateFirst(n.env, from, req) {
			// A copy of an ended transaction's first request, delivered late.
			n.m.Add("late-first-request", 1)
			return
		}
		// A later request of a transaction the tick dropped at its idle timeout (silently:
		// its client was not waiting for anything), or that an earlier life held, is refused:
		// begun afresh here, it would commit without the writes made before.
		if answered, refused := txnkit.AnswerUnheld(n.env, from, req); answered {
			if refused {
				n.m.Add("abort."+txnkit.CauseUnknownTxn, 1)
			}
			return
		}
		t = &ctxn{key: k, readOnly: req.ReadOnly, state: stWaitTS, arrivedLocal: now, lastClientLocal: now, req: *req, label: req.Label}
		n.txns[k] = t
		t.tsMissesBefore = n.tsMisses
		n.tsQueue = append(n.tsQueue, t)
		n.pumpTS()
		return
	}
	if req.Seq <= t.req.Seq {
		return // a duplicate of a request taken on already
	}
	if t.state != stIdle && req.Op == wire.OpAbort && t.req.Op != wire.OpCommit {
		// The client stopped waiting for its request (its timeout, a request lost on the
		// way, or the runtime aborting for a client that hung up) and abandons the
		// transaction, as spanner's and crdb's coordinators let it. Refused, the transaction
		// went on: one still waiting for its timestamp ran its first request and held its
		// intents until the idle timeout. The abort is the one a timeout of the request would
		// make (abort): the request in flight is answered aborted, its late answers are
		// dropped (finish), and the recorder and participants hear the abort. A commit in
		// flight has an outcome to learn instead, so its abort is refused below.
		n.abort(t, causeClientAbort, true)
		txnkit.OK(n.env, from, req)
		return
	}
	if t.state != stIdle {
		// A client that did not wait for its previous answer (a gRPC client pipelining its
		// requests). Dropped, the request was never answered, and a commit sent after the
		// answer it did get succeeded without it.
		txnkit.Reply(n.env, from, req, &wire.ClientReply{Code: wire.CodeBadArgument, Error: "request while another of the transaction is in flight"})
		return
	}
	t.lastClientLocal = now
	n.exec(t, *req)
}

// requestTimestamps asks the region's oracle for a batch (one timestamp without batching). It
// asks nothing, and says so, once the oracle request ids are used up (reqSeqBits); pumpTS
// renews them long before.
func (n *Node) requestTimestamps(now int64) bool {
	if n.oracleSeq&reqSeqMask == reqSeqMask {
		return false
	}
	n.oracleSeq++
	n.m.Add("ts.oracle-requests", 1)
	n.env.Send(n.oracle, n.batcher.StartRequest(now))
	return true
}

// pumpTS hands timestamps to queued transactions in arrival order and keeps exactly one oracle
// request in flight while any wait (K2-TB: one batch per coordinator).
func (n *Node) pumpTS() {
	if !n.ready {
		return
	}
	now := n.env.Elapsed()
	for len(n.tsQueue) > 0 {
		t := n.tsQueue[0]
		if t.state != stWaitTS {
			n.tsQueue = n.tsQueue[1:]
			continue
		}
		if n.inc.Spent() || n.reqIDsLow() {
			// The next transaction id would repeat this life's first, or the request ids
			// are half spent: take the next number first, and hand out nothing until it is
			// durable (request ids move to it then). Checked before Take, so that no
			// timestamp ages while the flush runs.
			if err := n.inc.Renew(); err != nil {
				n.tsQueue = n.tsQueue[1:]
				n.reply(t, &wire.ClientReply{Code: wire.CodeUnavailable, Error: "k2: " + err.Error()})
				n.finish(t)
				continue
			}
			n.idsNum++
			n.persistIncarnation()
			return
		}
		stamp, cw, ok := n.batcher.Take(t.arrivedLocal, now)
		if !ok {
			// Counted here rather than judged by the clock at Take: the real runtime's clock
			// moves between any two readings, so every timestamp would look waited for. Every
			// transaction queued now has waited; a count, not a mark on each, since marking
			// the whole queue at each miss cost O(queue) a miss (13% of a run's CPU with
			// 20,000 clients per coordinator).
			n.tsMisses++
			break
		}
		n.tsQueue = n.tsQueue[1:]
		t.id = n.inc.NextTxnID(n.self)
		t.ts = stamp
		n.byID[t.id] = t
		t.cwDeadlineLocal = now + int64(cw)
		t.state = stIdle
		n.m.Observe("phase.get-ts", now-t.arrivedLocal)
		// K2-TB's claim is the share of timestamps served from a batch without waiting.
		n.m.Add("ts.taken", 1)
		if n.tsMisses > t.tsMissesBefore {
			n.m.Add("ts.waited", 1)
		}
		t.getTSNanos = now - t.arrivedLocal
		n.exec(t, t.req)
	}
	if len(n.tsQueue) == 0 {
		n.tsQueue = nil
		if n.batcher.NeedPrefetch(now) {
			n.requestTimestamps(now)
		}
		return
	}
	for n.batcher.NeedRequest(now, len(n.tsQueue)) {
		if !n.requestTimestamps(now) {
			break
		}
	}
	if !n.tsTimer {
		n.tsTimer = true
		n.env.After(n.batcher.RequestTimeout(), func() {
			n.tsTimer = false
			n.pumpTS()
		})
	}
}

func (n *Node) exec(t *ctxn, req wire.ClientRequest) {
	t.req = req
	if !t.writeBytes.Admit(&req) {
		// Nothing is sent, so the transaction is as it was, idle, and goes on.
		n.reply(t, txnkit.TxnWritesRefused())
		return
	}
	switch req.Op {
	case wire.OpGet, wire.OpPut, wire.OpDelete:
		n.startOps(t, []wire.BatchOp{{Op: req.Op, Key: req.Key, Value: req.Value}})
	case wire.OpBatch:
		n.startOps(t, req.Batch)
	case wire.OpScan:
		n.startScan(t, req)
	case wire.OpCommit:
		n.commit(t)
	case wire.OpAbort:
		n.abort(t, "", false)
		txnkit.OK(n.env, t.key.Client, &req)
	default:
		n.reply(t, &wire.ClientReply{Code: wire.CodeBadArgument, Error: "unknown operation"})
	}
}

// startOps sends every read and write of a client request at once: the client sends together
// only operations on distinct keys that it does not order among themselves (OpBatch), as
// K2's TPC-C issues a New-Order's independent reads and writes concurrently. The request is
// answered when the last of them is; any refusal aborts the transaction.
func (n *Node) startOps(t *ctxn, ops []wire.BatchOp) {
	if n.reqIDsLeft() < uint64(len(ops)) {
		// The next number is not durable yet (pumpTS took it at reqRenewAt); nothing is sent.
		n.abort(t, reqIDsSpent, true)
		return
	}
	n.beginOps(t, len(ops))
	// One request per node, in order of first use (a deterministic send order), each sized
	// before it is filled: grown an operation at a time, they were a twentieth of a
	// paper-scale TPC-C run's CPU. A batch reaches a few nodes, so a scan finds a node's.
	share := make([]int, len(ops)) // ops[i] goes in out[share[i]], to dests[share[i]]
	var dests []topo.NodeID
	var reads, writes []int
	for i, op := range ops {
		to := n.tp.PrimaryOf(op.Key)
		j := slices.Index(dests, to)
		if j < 0 {
			j = len(dests)
			dests, reads, writes = append(dests, to), append(reads, 0), append(writes, 0)
		}
		share[i] = j
		if op.Op == wire.OpGet {
			reads[j]++
		} else {
			writes[j]++
		}
	}
	out := make([]OpsReq, len(dests))
	for j := range out {
		if reads[j] > 0 {
			out[j].Reads = make([]ReadReq, 0, reads[j])
		}
		if writes[j] > 0 {
			out[j].Writes = make([]WriteReq, 0, writes[j])
		}
	}
	for i, op := range ops {
		q, to := &out[share[i]], dests[share[i]]
		if op.Op == wire.OpGet {
			t.hasReads = true
			id := n.addFlight(t, flight{i: i, to: to, sentLocal: t.sentLocal, rto: n.rto(to)})
			q.Reads = append(q.Reads, ReadReq{ReqID: id, Txn: t.id, TS: t.ts, Key: op.Key})
			continue
		}
		t.hasWrs = true
		f := flight{i: i, kind: opWrite, to: to, sentLocal: t.sentLocal, rto: n.rto(to)}
		if !t.hasRecorder {
			// The recorder is the primary of the first written key, and the record is created
			// by that write (notes/k2.md §3.5, recommended placement).
			t.recorder, t.hasRecorder, f.creates = to, true, true
		}
		t.wseq++
		f.wseq = t.wseq
		t.writes = slices.DeleteFunc(t.writes, func(w twrite) bool { return w.key == op.Key })
		t.writes = append(t.writes, twrite{node: to, key: op.Key, wseq: t.wseq})
		// A participant from the moment its write is sent: an abort must reach every intent,
		// including one whose answer is still on its way.
		if j, found := slices.BinarySearch(t.participants, to); !found {
			t.participants = slices.Insert(t.participants, j, to)
		}
		id := n.addFlight(t, f)
		q.Writes = append(q.Writes, n.writeReq(t, id, f, op))
	}
	// One message per data node: a node's share of a batch costs it one request and one answer.
	for j, to := range dests {
		switch q := &out[j]; {
		case len(q.Reads)+len(q.Writes) > 1:
			n.env.Send(to, q)
		case len(q.Reads) == 1:
			n.env.Send(to, &q.Reads[0])
		default:
			n.env.Send(to, &q.Writes[0])
		}
	}
	n.armOpTimeout(t)
}

// beginOps makes t busy serving a client request of ops operations.
func (n *Node) beginOps(t *ctxn, ops int) {
	t.state = stBusy
	t.sentLocal = n.env.Elapsed()
	t.results = make([]wire.BatchResult, ops)
	n.clearFlights(t)
	t.flights = make([]flight, 0, ops)
	t.hasReads, t.hasWrs, t.maxPushNanos = false, false, 0
}

// armOpTimeout aborts t if the request it is serving is not answered within op-timeout, and
// arms the probe for lost operations (lostops.go).
func (n *Node) armOpTimeout(t *ctxn) {
	t.round++
	round := t.round
	t.timer = n.env.After(n.cfg.opTimeout, func() {
		if t.round == round && t.state == stBusy {
			n.abort(t, "timeout", true)
		}
	})
	n.armProbe(t)
}

// onRestarted hears that data node from restarted (Restarted). The operations this coordinator
// has out there were sent either to a life that is gone, which lost them, or to the new life,
// which holds them or has answered; one OpsProbe tells them apart. Links are FIFO, so the probe
// reaches the node after every operation it names, and its answer comes back after the answer
// of every operation the new life served: what it says it does not hold will never be answered.
// Without the notice the transaction would wait out op-timeout.
//
// A probe still out at from was sent to an earlier life: had that life answered, its answer
// would have come before this notice. The new probe names every operation the earlier one did
// that is still out, so it replaces it. The notice needs nothing else known of the node (no
// incarnation: a life that crashed before persisting its own may share the next one's), and a
// coordinator that is restarting itself has no operation of its previous life out (request ids
// are numbered per life), so it probes only for its own.
func (n *Node) onRestarted(from topo.NodeID) {
	var ops []uint64
	for _, t := range n.busy {
		for j, f := range t.flights {
			if f.out && f.to == from && t.state == stBusy {
				ops = append(ops, t.firstReq+uint64(j))
			}
		}
	}
	delete(n.probes, from)
	if len(ops) == 0 || n.reqIDsLeft() == 0 {
		return // without a probe, what the crash lost costs op-timeout
	}
	slices.Sort(ops) // map order must not reach the message
	id := n.newReqID()
	n.probes[from] = outProbe{id: id, ops: ops}
	n.m.Add("probe", 1)
	n.env.Send(from, &OpsProbe{ReqID: id, Ops: ops})
}

// onOpsProbeResp aborts (cause "op-lost") the transactions with an operation that the restarted
// node from does not hold and has not answered: it was lost with an earlier life of the node,
// or on the way. The abort retries nothing, so no write is applied twice, and whatever the
// lost operation left at the node (an intent, a read watermark) is cleaned up as after any
// abort. Only the answer to the probe out at from counts, and only for operations it named.
func (n *Node) onOpsProbeResp(from topo.NodeID, r *OpsProbeResp) {
	if n.onLossProbeResp(from, r) {
		return
	}
	p, ok := n.probes[from]
	if !ok || p.id != r.ReqID {
		return
	}
	delete(n.probes, from)
	for _, id := range r.Missing {
		if _, asked := slices.BinarySearch(p.ops, id); !asked {
			continue
		}
		t, f := n.flightOf(id)
		if t == nil || t.state != stBusy {
			continue
		}
		if f.to == from {
			n.abort(t, "op-lost", true)
		}
	}
}

// landed takes the answer to request id off t's flights; ok is false for a stale answer, or for
// an answer of the wrong kind (a write's to a read), which no correct data node sends.
func (n *Node) landed(id uint64, kind opKind) (*ctxn, flight, bool) {
	t, f := n.flightOf(id)
	if t == nil || t.state != stBusy || f.kind != kind {
		return nil, flight{}, false
	}
	f.out = false
	t.flightsOut--
	return t, *f, true
}

func (n *Node) onReadResp(r *ReadResp) {
	t, f, ok := n.landed(r.ReqID, opRead)
	if !ok {
		return
	}
	if r.Aborted {
		n.abort(t, r.Cause, true)
		return
	}
	t.readEndLocal = n.env.Elapsed()
	t.maxPushNanos = max(t.maxPushNanos, r.PushNanos)
	t.results[f.i] = wire.BatchResult{Found: r.Found, Value: r.Value}
	n.opsDone(t)
}

func (n *Node) onWriteResp(r *WriteResp) {
	t, f, ok := n.landed(r.ReqID, opWrite)
	if !ok {
		return
	}
	if r.Aborted {
		if f.creates && len(t.writes) == 1 {
			// The record was not created (the write was refused before it) and no other
			// write names the recorder, so no recorder holds anything of this transaction.
			t.hasRecorder = false
		}
		n.abort(t, r.Cause, true)
		return
	}
	t.writeEndLocal = n.env.Elapsed()
	n.noteIncarnation(t, f.to, r.Inc)
	if !r.Pending {
		n.markDurable(t, f.to, []uint32{f.wseq})
	}
	n.opsDone(t)
}

// opsDone answers the request once its last read or write is back. Its reads' time (less the
// longest PUSHWS wait among them) is the read phase, its writes' the write phase: operations
// that ran concurrently count once.
func (n *Node) opsDone(t *ctxn) {
	if t.flightsOut > 0 {
		return
	}
	n.clearReq(t)
	if t.hasReads {
		if t.maxPushNanos > 0 {
			n.m.Observe("phase.pushws", t.maxPushNanos)
			t.pushNanos += t.maxPushNanos
		}
		took := t.readEndLocal - t.sentLocal - t.maxPushNanos
		n.m.Observe("phase.read", took)
		t.readNanos += took
	}
	if t.hasWrs {
		took := t.writeEndLocal - t.sentLocal
		n.m.Observe("op.write", took)
		t.writeNanos += took
	}
	t.state = stIdle
	res := t.results
	t.results = nil
	if t.req.Op == wire.OpScan {
		rows := txnkit.MergeScanRows(t.rows, t.req.Limit)
		t.rows = nil
		if t.scanTooLarge || wire.RowsTooLarge(rows) {
			n.reply(t, &wire.ClientReply{Code: wire.CodeBadArgument, Error: wire.ScanTooLarge})
			return
		}
		n.reply(t, &wire.ClientReply{Code: wire.CodeOK, Rows: rows})
		return
	}
	if t.req.Op == wire.OpBatch {
		if txnkit.ResultsTooLarge(res) {
			// It would not fit a frame. Refusing loses nothing: the reads left their
			// watermarks and the writes their intents as they would have for single requests,
			// and the transaction, idle again, goes on.
			n.reply(t, txnkit.BatchAnswerRefused())
			return
		}
		n.reply(t, &wire.ClientReply{Code: wire.CodeOK, Results: res})
		return
	}
	n.reply(t, &wire.ClientReply{Code: wire.CodeOK, Found: res[0].Found, Value: res[0].Value})
}

// noteIncarnation flags t if a participant answers from another life than it first did: the
// writes the earlier life acknowledged may not have reached its disk.
func (n *Node) noteIncarnation(t *ctxn, p topo.NodeID, inc uint64) {
	if t.incs == nil {
		t.incs = map[topo.NodeID]uint64{}
	}
	if first, ok := t.incs[p]; !ok {
		t.incs[p] = inc
	} else if first != inc {
		t.lost = true
	}
}

func (n *Node) markDurable(t *ctxn, p topo.NodeID, wseqs []uint32) {
	for i := range t.writes {
		if w := &t.writes[i]; w.node == p && slices.Contains(wseqs, w.wseq) {
			w.durable = true
		}
	}
}

// onDurableNotes learns of writes that a participant's flush made durable.
func (n *Node) onDurableNotes(from node.ID, m *DurableNotes) {
	for _, note := range m.Notes {
		n.onWriteDurable(from, &WriteDurable{Txn: note.Txn, Inc: m.Inc, WSeqs: []uint32{note.WSeq}})
	}
}

// onWriteDurable learns that writes are durable, or lost. Once the commit is out at the
// recorder nothing can change: every write was durable before it was sent.
func (n *Node) onWriteDurable(from node.ID, m *WriteDurable) {
	t := n.byID[m.Txn]
	if t == nil || t.state >= stCommitWait {
		return
	}
	n.noteIncarnation(t, from, m.Inc)
	if m.Lost {
		t.lost = true
	}
	n.markDurable(t, from, m.WSeqs)
	if t.state == stWriteWait {
		n.checkWritesDurable(t)
	}
}

// commit first makes sure every write is durable (K2's first flush of a commit; with write
// pipelining the writes were acknowledged from memory), then waits out the commit wait and
// commits at the recorder (the second flush). Writes that a participant's crash may have lost
// abort the transaction: the recorder must never persist COMMITTED for a transaction one of
// whose intents is not on disk.
func (n *Node) commit(t *ctxn) {
	if t.lost {
		n.abort(t, "write-lost", true)
		return
	}
	if len(t.participants) == 0 {
		n.commitWait(t)
		return
	}
	if !n.cfg.pipelineWrites {
		n.m.Observe("phase.write", t.writeNanos)
		t.writePhaseNanos = t.writeNanos
		n.commitWait(t)
		return
	}
	t.state = stWriteWait
	t.writeWaitLocal = n.env.Elapsed()
	n.armWriteWait(t)
	n.checkWritesDurable(t)
}

func (n *Node) checkWritesDurable(t *ctxn) {
	if t.lost {
		n.abort(t, "write-lost", true)
		return
	}
	for _, w := range t.writes {
		if !w.durable {
			return
		}
	}
	n.env.Cancel(t.timer)
	t.timer = 0
	n.m.Observe("phase.write", n.env.Elapsed()-t.writeWaitLocal)
	// Table 2's write phase is all the time the transaction spent writing: its writes' round
	// trips (a remote one is a WAN round trip) and then the wait for their flush.
	t.writePhaseNanos = t.writeNanos + n.env.Elapsed() - t.writeWaitLocal
	n.commitWait(t)
}

// askDurable asks each participant holding writes not yet known durable to answer once they
// are (one question per participant per commit).
func (n *Node) askDurable(t *ctxn) {
	ask := map[topo.NodeID][]WriteRef{}
	for _, w := range t.writes {
		if !w.durable {
			ask[w.node] = append(ask[w.node], WriteRef{Key: w.key, WSeq: w.wseq})
		}
	}
	for _, p := range t.participants { // ascending: a deterministic send order
		if refs := ask[p]; len(refs) > 0 {
			n.env.Send(p, &DurableReq{Txn: t.id, Writes: refs})
		}
	}
}

// armWriteWait asks again, every op-timeout/8, the participants whose writes have not been
// reported durable (an answer may be lost, or the participant crashed), and gives up after
// op-timeout.
func (n *Node) armWriteWait(t *ctxn) {
	t.timer = n.env.After(n.cfg.opTimeout/8, func() {
		if t.state != stWriteWait {
			return
		}
		if n.env.Elapsed()-t.writeWaitLocal >= int64(n.cfg.opTimeout) {
			n.abort(t, "timeout", true)
			return
		}
		n.askDurable(t)
		n.armWriteWait(t)
	})
}

// commitWait waits out the commit wait, counted from the moment the timestamp was taken, and
// only then commits at the recorder: the commit point follows the wait, so any version a reader
// can see was committed after true time passed its timestamp (notes/k2.md §3.4).
func (n *Node) commitWait(t *ctxn) {
	t.state = stCommitWait
	wait := t.cwDeadlineLocal - n.env.Elapsed()
	if len(t.participants) == 0 && !n.cfg.roCommitWait {
		wait = 0
	}
	n.m.Observe("commit-wait", max(wait, 0))
	if wait <= 0 {
		n.commitNow(t)
		return
	}
	t.timer = n.env.After(time.Duration(wait), func() {
		if t.state == stCommitWait {
			n.commitNow(t)
		}
	})
}

func (n *Node) commitNow(t *ctxn) {
	if len(t.participants) == 0 {
		// Read-only (or nothing written): no recorder, no commit round.
		n.m.Add("commit.read-only", 1)
		n.reply(t, &wire.ClientReply{Code: wire.CodeOK, CommitTS: t.ts})
		n.finish(t)
		return
	}
	t.state = stCommitting
	t.commitSentLocal = n.env.Elapsed()
	n.sendCommit(t)
}

func (n *Node) sendCommit(t *ctxn) {
	n.clearReq(t)
	id, ok := n.nextReqID(t)
	if !ok {
		if t.tries == 0 {
			// No commit was sent: the recorder has decided nothing, and the abort settles it.
			n.abort(t, reqIDsSpent, true)
		} else {
			n.commitUnknown(t)
		}
		return
	}
	n.env.Send(t.recorder, &CommitReq{ReqID: id, Txn: t.id, TS: t.ts, Participants: t.participants})
	t.timer = n.env.After(n.cfg.opTimeout, func() {
		if t.reqID != id || t.state != stCommitting {
			return
		}
		// Commit is idempotent at the recorder: ask again. After a few tries the outcome is
		// unknown to us; the recorder's lease will settle it (abort unless already committed).
		if t.tries++; t.tries < 3 {
			n.sendCommit(t)
			return
		}
		n.commitUnknown(t)
	})
}

func (n *Node) commitUnknown(t *ctxn) {
	n.m.Add("commit.unknown", 1)
	n.reply(t, &wire.ClientReply{Code: wire.CodeUnknown, Error: "recorder did not answer the commit"})
	n.finish(t)
}

func (n *Node) onCommitResp(r *CommitResp) {
	t := n.byReq[r.ReqID]
	if t == nil || t.state != stCommitting {
		return
	}
	n.clearReq(t)
	if !r.Committed {
		n.abort(t, r.Cause, true)
		return
	}
	if n.cfg.asyncFinalize {
		n.observeTxnPhases(t)
		n.m.Add("commit", 1)
		n.reply(t, &wire.ClientReply{Code: wire.CodeOK, CommitTS: t.ts})
		n.finalize(t, true, 0)
		n.finish(t)
		return
	}
	// Ablation: the client hears of the commit only once every participant has installed it.
	t.state = stFinalizing
	id, ok := n.nextReqID(t)
	if !ok {
		// The decision is durable; the participants finalize without acknowledging.
		n.finalize(t, true, 0)
		n.finishCommit(t)
		return
	}
	n.finalize(t, true, id)
	t.timer = n.env.After(n.cfg.opTimeout, func() {
		if t.reqID == id && t.state == stFinalizing {
			n.finishCommit(t) // the decision is durable; finalization will happen lazily
		}
	})
}

func (n *Node) onFinalizeResp(from node.ID, r *FinalizeResp) {
	t := n.byReq[r.ReqID]
	if t == nil || t.state != stFinalizing {
		return
	}
	if !slices.Contains(t.acked, from) {
		t.acked = append(t.acked, from)
	}
	if len(t.acked) == len(t.participants) {
		n.finishCommit(t)
	}
}

// observeTxnPhases records a committed read-write transaction's phase totals, the form of K2's
// Table 2 (get-ts, read and PUSHWS summed over the transaction's reads; write and commit are
// already once per transaction).
func (n *Node) observeTxnPhases(t *ctxn) {
	commit := n.env.Elapsed() - t.commitSentLocal
	n.m.Observe("phase.commit", commit)
	n.m.Observe("txn.get-ts", t.getTSNanos)
	n.m.Observe("txn.read", t.readNanos)
	n.m.Observe("txn.pushws", t.pushNanos)
	n.m.Observe("txn.write", t.writePhaseNanos)
	if label := n.metricLabel(t.label); label != "" {
		for _, ph := range [...]struct {
			name string
			ns   int64
		}{{"get-ts", t.getTSNanos}, {"read", t.readNanos}, {"pushws", t.pushNanos}, {"write", t.writePhaseNanos}, {"commit", commit}} {
			n.m.Observe("txn."+ph.name+"/"+label, ph.ns)
		}
	}
}

// maxMetricLabels bounds the labels a coordinator keeps phase histograms for (five of some 170
// KB each per label): a client naming each transaction apart ("order-<id>") would otherwise
// grow a server's memory by almost a megabyte per transaction.
const maxMetricLabels = 32

// metricLabel is the label t's phases are kept under: its own among the first maxMetricLabels
// seen, "other" after that.
func (n *Node) metricLabel(label string) string {
	if label == "" || slices.Contains(n.labels, label) {
		return label
	}
	if len(n.labels) >= maxMetricLabels {
		return "other"
	}
	n.labels = append(n.labels, label)
	return label
}

func (n *Node) finishCommit(t *ctxn) {
	n.observeTxnPhases(t)
	n.m.Add("commit", 1)
	n.reply(t, &wire.ClientReply{Code: wire.CodeOK, CommitTS: t.ts})
	n.finish(t)
}

// finalize tells every participant the decision (Fig. 9, Phase 3), ascending by node id. Each
// participant tells the recorder once a commit is finalized, so the record can go.
func (n *Node) finalize(t *ctxn, commit bool, ackID uint64) {
	for _, p := range t.participants {
		n.env.Send(p, &FinalizeReq{ReqID: ackID, Txn: t.id, Commit: commit, TS: t.ts, Ack: ackID != 0, Recorder: t.recorder})
	}
}

// abort ends t as aborted. The client is told (with cause, counted by the driver) unless it
// asked for the abort itself or has gone away.
func (n *Node) abort(t *ctxn, cause string, tell bool) {
	if t.state == stDone {
		return
	}
	if t.hasRecorder {
		n.env.Send(t.recorder, &AbortReq{Txn: t.id})
	}
	n.finalize(t, false, 0)
	if cause != "" {
		n.m.Add("abort."+cause, 1)
	}
	if tell {
		n.reply(t, &wire.ClientReply{Code: wire.CodeAborted, Cause: cause})
	}
	n.finish(t)
}

func (n *Node) finish(t *ctxn) {
	n.clearReq(t)
	t.state = stDone
	delete(n.txns, t.key)
	n.ended.Ended(t.key, n.env.Elapsed(), n.cfg.idleTimeout)
	if t.id != 0 && n.byID[t.id] == t {
		delete(n.byID, t.id)
	}
}

// coordinatorTick renews the leases of live transactions at their recorders and aborts the
// transactions of clients that went silent.
func (n *Node) coordinatorTick() {
	keys := make([]txnkit.ClientTxn, 0, len(n.txns))
	for k := range n.txns {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].Client != keys[j].Client {
			return keys[i].Client < keys[j].Client
		}
		return keys[i].Txn < keys[j].Txn
	})
	now := n.env.Elapsed()
	n.ended.Expire(now, n.cfg.idleTimeout)
	beats := map[topo.NodeID][]storage.TxnID{}
	for _, k := range keys {
		t := n.txns[k]
		if t.state == stIdle && now-t.lastClientLocal > int64(n.cfg.idleTimeout) {
			n.abort(t, "idle-timeout", false)
			continue
		}
		if t.hasRecorder {
			beats[t.recorder] = append(beats[t.recorder], t.id)
		}
	}
	recorders := make([]topo.NodeID, 0, len(beats))
	for r := range beats {
		recorders = append(recorders, r)
	}
	slices.Sort(recorders)
	for _, r := range recorders {
		ids := beats[r]
		slices.Sort(ids)
		n.env.Send(r, &Heartbeat{Txns: ids})
	}
}
