package spanner

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/meridiandb/meridian/internal/node"
	"github.com/meridiandb/meridian/internal/protocol"
	"github.com/meridiandb/meridian/internal/protocol/txnkit"
	"github.com/meridiandb/meridian/internal/storage"
	"github.com/meridiandb/meridian/internal/storage/locks"
	"github.com/meridiandb/meridian/internal/storage/mvcc"
	"github.com/meridiandb/meridian/internal/ts"
	"github.com/meridiandb/meridian/internal/wire"
)

// partState is a transaction's lifecycle at one participant.
type partState uint8

const (
	partActive   partState = iota + 1 // holds read locks, may be waiting, not prepared
	partPrepared                      // voted yes (intents at prepTS, or read locks only); only the coordinator can abort it
	partAborted                       // aborted here (lock policy, wound, idle); a tombstone for late requests
)

// partTxn is what a participant knows about one transaction.
type partTxn struct {
	id      storage.TxnID
	coord   node.ID
	age     locks.Age
	state   partState
	cause   string // why it was aborted here
	granted uint32 // locks granted here, reads and eager writes (matched against the coordinator's Seen)
	// opSeq is the client request number of the newest read/write request admitted here (if
	// hasOp): the coordinator sends a participant one request per client request, numbered
	// upwards, so one numbered no higher is a copy the network duplicated or delayed.
	opSeq uint32
	hasOp bool
	// answered is the newest request answered (its locks held), kept to answer it again if
	// its coordinator still awaits it long after (the answer was lost); lastAnswer is when
	// the participant last answered the coordinator about t: an answer, a refusal, an abort.
	answered   *opsReq
	lastAnswer int64
	// askedAt is when the participant last asked the coordinator whether t, unprepared and
	// silent, still runs (askSilent).
	askedAt int64
	// writes are the eager writes (write-locks=eager) held under exclusive locks, pending until
	// prepare turns them into intents; only the transaction's own reads see them. Volatile: a
	// restart loses them with the locks, and Seen then no longer matches.
	writes map[string]Write

	// At most one request of a transaction waits here at a time: reads and eager writes taking
	// their locks one key at a time, or a prepare taking its exclusive locks.
	waitOps    *opsReq
	waitPrep   *PrepareReq
	prepNext   int   // next write of waitPrep to lock
	waitSince  int64 // local clock, for the lock-wait distribution
	prepTS     ts.Timestamp
	woundSent  bool
	readVote   bool // voted yes holding read locks here; their durable record goes at the decision
	rangeVote  bool // voted yes holding range locks here; likewise
	voteSent   bool // the yes vote is durable and sent, so a duplicate PrepareReq may have it again
	idleTimer  node.TimerID
	pollTimer  node.TimerID
	waitTimer  node.TimerID // lock-policy=timeout: fires when the current wait has lasted too long
	lastActive int64
}

// snapWaiter is a snapshot read of one or more keys, blocked behind a prepared transaction's
// intent on keys[next]; the keys before it are read. A snapshot scan reads in steps (scan.go):
// keys are its current step's, rows what its steps found so far.
type snapWaiter struct {
	from    node.ID
	req     *SnapReadReq
	keys    []string
	next    int
	results []ReadResult
	parked  bool // counted in Participant.snapParked

	scanNext  string // where a scan's next step starts
	scanToEnd bool   // the current step reaches the range's end
	rows      []wire.KV
}

// snapRef names a snapshot read: its coordinator, transaction and request number.
type snapRef struct {
	from node.ID
	txn  storage.TxnID
	seq  uint32
}

func (w *snapWaiter) ref() snapRef { return snapRef{from: w.from, txn: w.req.Txn, seq: w.req.Seq} }

// Participant is the lock-holding, data-owning half of a data node: it serves reads under shared
// locks, prepares (exclusive locks + durable intents at a prepare timestamp), applies decisions,
// and serves lock-free snapshot reads once no prepared transaction below the snapshot could still
// commit there.
type Participant struct {
	env     node.Env
	cfg     Config
	metrics *protocol.Metrics
	store   *mvcc.Store
	vgc     *txnkit.VersionGC // removes the versions no snapshot read young enough may need
	locks   *locks.Table
	txns    map[storage.TxnID]*partTxn
	grants  []locks.Grant // granted waiters not yet resumed (drained by drain)
	// maxTS is the largest timestamp this participant has used: commits applied, prepares
	// issued, snapshot reads served. Every new prepare timestamp exceeds it, so a transaction
	// serialized after another at this participant also gets a larger timestamp (Spanner's
	// monotonicity rule for leaders) and no snapshot read served here is invalidated.
	maxTS ts.Timestamp
	snapQ map[string][]*snapWaiter
	// snapParked counts the snapshot reads parked in snapQ, by read (a duplicated request may
	// park twice), so that a keep-alive for a snapshot read can tell whether it is still here.
	snapParked map[snapRef]int
	// decided are the transactions whose decision was applied here lately, whose requests
	// arriving late are copies (decidedTxns).
	decided decidedTxns
	// silentCheckAt is when askSilent last looked for silent transactions.
	silentCheckAt int64
	self          uint32
	// life is this participant's incarnation: its answers carry it, and a request, prepare or
	// keep-alive counting locks (Seen) that another life granted is refused, since a restart
	// lost them. A late copy of an earlier request admitted afresh by the new life takes as
	// many locks again, so Seen alone matched, and the transaction committed on values read
	// under the lost locks. Answers carrying it wait until it is durable (sendGrant).
	life uint64
	// lifePending says the node's incarnation is not durable yet (set by NewNode until
	// lifeDurable); heldGrants are the answers granting locks made meanwhile (sendGrant).
	lifePending bool
	heldGrants  []heldGrant
	pending     int // persists in flight (tests)
	// Deadlock detection (lock-policy=detect): the detector's node, this participant's
	// incarnation and the sequence number of its wait-for reports, whether the lock table
	// changed since the last report, and the last report's waits (sent again periodically while
	// not empty, so a lost message or a restarted detector cannot hide a deadlock for long).
	detector     node.ID
	incarnation  uint64
	reporting    bool // the incarnation is durable: reports beyond the life's first may go (lifeDurable)
	waitSeq      uint64
	waitsDirty   bool
	lastWaits    []Wait
	refreshTimer node.TimerID
}

// newParticipant serves store, which holds what the node recovered (its GC horizon included).
func newParticipant(env node.Env, c Config, m *protocol.Metrics, store *mvcc.Store) *Participant {
	p := &Participant{env: env, cfg: c, metrics: m, store: store, locks: locks.New(),
		txns: map[storage.TxnID]*partTxn{}, snapQ: map[string][]*snapWaiter{}, snapParked: map[snapRef]int{}, self: uint32(env.Self())}
	p.vgc = txnkit.NewVersionGC(env, store, c.gcTTL(), func() { p.persist(nil, nil) }, m)
	return p
}

// refuseBelowGCHorizon is turned off only by tests, which show that without it a snapshot read
// older than the GC horizon is answered wrongly (from what GC left).
var refuseBelowGCHorizon = true

// recover re-locks the intents of transactions prepared before a crash, and the read locks of
// every one that voted yes holding some, under the transactions' ages, and asks their
// coordinators for the decisions. Timestamps restart above anything served before the crash.
func (p *Participant) recover(d node.Durable) error {
	tt := p.env.TrueTime()
	// A snapshot read served before the crash used at most some coordinator's TT.latest, which
	// is below our TT.latest plus the interval width.
	p.maxTS = ts.Timestamp{Wall: tt.Latest + tt.Width()}
	ages, err := readPrepareAges(d)
	if err != nil {
		return err
	}
	for _, id := range p.store.PendingTxns() {
		t := &partTxn{id: id, coord: node.ID(id.Coordinator()), age: ages[id], state: partPrepared, voteSent: true}
		for _, k := range p.store.IntentKeys(id) {
			p.locks.Acquire(id, k, locks.Exclusive, locks.Wait, t.age)
			for _, v := range p.store.Versions(k) {
				if v.Txn == id && v.State == mvcc.Intent {
					t.prepTS = ts.MaxOf(t.prepTS, v.TS)
				}
			}
		}
		p.maxTS = ts.MaxOf(p.maxTS, t.prepTS)
		p.txns[id] = t
		p.armPoll(t, time.Millisecond)
	}
	var bad error
	err = d.Scan(readVotePrefix, readVoteEnd, func(k, v []byte) bool {
		id, ok := readVoteTxn(k)
		keys, err := decodeKeys(v)
		if !ok || err != nil {
			// Refuse to start rather than serve without read locks a transaction may commit on.
			bad = fmt.Errorf("spanner: corrupt read-vote record %q: %v", k, err)
			return false
		}
		t := p.txns[id]
		if t == nil { // voted with read locks only
			t = &partTxn{id: id, coord: node.ID(id.Coordinator()), age: ages[id], state: partPrepared, voteSent: true}
			p.txns[id] = t
			p.armPoll(t, time.Millisecond)
		}
		t.readVote = true
		for _, key := range keys {
			p.locks.Acquire(id, key, locks.Shared, locks.Wait, t.age)
		}
		return true
	})
	if err != nil {
		return err
	}
	if bad != nil {
		return bad
	}
	err = d.Scan(rangeVotePrefix, rangeVoteEnd, func(k, v []byte) bool {
		id, ok := recordTxn(rangeVotePrefix, k)
		ranges, err := decodeRanges(v)
		if !ok || err != nil {
			bad = fmt.Errorf("spanner: corrupt range-vote record %q: %v", k, err)
			return false
		}
		t := p.txns[id]
		if t == nil { // voted holding range locks only (a scan that found no key to lock)
			t = &partTxn{id: id, coord: node.ID(id.Coordinator()), age: ages[id], state: partPrepared, voteSent: true}
			p.txns[id] = t
			p.armPoll(t, time.Millisecond)
		}
		t.rangeVote = true
		for _, r := range ranges {
			p.locks.AcquireRange(id, r, locks.Wait, t.age)
		}
		return true
	})
	if err != nil {
		return err
	}
	// A restarted store queues every key that may hold garbage: collect it even if nothing is
	// written here again.
	p.vgc.Kick()
	return bad
}

func (p *Participant) now() int64 { return p.env.Now() }

// txn returns the state of id, creating an active one.
func (p *Participant) txn(id storage.TxnID, coord node.ID, age locks.Age) *partTxn {
	t := p.txns[id]
	if t == nil {
		t = &partTxn{id: id, coord: coord, age: age, state: partActive}
		p.txns[id] = t
	}
	t.lastActive = p.now()
	if t.state == partActive {
		p.armIdle(t)
	}
	return t
}

// armIdle aborts an unprepared transaction whose coordinator stopped talking to us (crashed, or
// the transaction is stuck): its locks must not be held forever.
func (p *Participant) armIdle(t *partTxn) {
	p.env.Cancel(t.idleTimer)
	t.idleTimer = p.env.After(p.cfg.IdleTimeout, func() {
		if p.txns[t.id] != t {
			return
		}
		switch t.state {
		case partActive:
			// Counted so tests can tell a stuck wait (a deadlock nobody broke) from progress.
			p.metrics.Add("idle-aborts", 1)
			p.abortLocal(t, causeIdle)
			p.drain()
			p.reportWaits()
		case partAborted:
			delete(p.txns, t.id) // tombstone expired
		}
	})
}

// armPoll asks the coordinator about a prepared transaction after d, and keeps asking.
func (p *Participant) armPoll(t *partTxn, d time.Duration) {
	p.env.Cancel(t.pollTimer)
	t.pollTimer = p.env.After(d, func() {
		if p.txns[t.id] != t || t.state != partPrepared {
			return
		}
		p.env.Send(t.coord, &StatusReq{Txn: t.id, Voted: t.voteSent, TS: t.prepTS, Wounded: t.woundSent})
		p.armPoll(t, p.cfg.DecisionTimeout)
	})
}

// admit finds (or creates) the transaction an operation belongs to and checks it may take another
// lock here: it must be active, idle, and hold exactly the locks its coordinator saw granted
// (seen); otherwise refuse is called with the cause and admit returns nil.
func (p *Participant) admit(from node.ID, txn storage.TxnID, seq, seen uint32, life uint64, age ts.Timestamp, refuse func(cause string)) *partTxn {
	t := p.txns[txn]
	if t == nil && p.isDecided(txn) {
		return nil // a late copy: see decidedTxns
	}
	if t != nil && t.state == partActive && t.hasOp && seq <= t.opSeq {
		// A copy of a request already admitted: its answer went, or goes once its locks are
		// held. Judged as a new request it would fail the checks below and abort the
		// transaction for nothing its coordinator did.
		return nil
	}
	if t == nil && seen > 0 {
		refuse(causeLostLocks)
		return nil
	}
	if seen > 0 && life != p.life {
		// The locks were granted by an earlier life: what this one holds for the transaction
		// was taken by a late copy of an earlier request.
		if t.state == partActive {
			p.abortLocal(t, causeLostLocks)
			p.drain()
		}
		refuse(causeLostLocks)
		return nil
	}
	t = p.txn(txn, from, age)
	switch {
	case t.state == partAborted:
		t.lastAnswer = p.now()
		refuse(t.cause)
		return nil
	case t.state != partActive || t.granted != seen || t.waiting():
		p.abortLocal(t, causeLostLocks)
		refuse(causeLostLocks)
		p.drain()
		return nil
	}
	t.opSeq, t.hasOp = seq, true
	return t
}

// opsKind is the message an operation request arrived as, and so the answer it gets.
type opsKind uint8

const (
	kindRead  opsKind = iota + 1 // ReadReq → ReadResp
	kindWrite                    // WriteReq → WriteResp
	kindOps                      // OpsReq → OpsResp
	kindScan                     // ScanReq → ScanResp (read-only: SnapReadReq with a Scan → SnapReadResp with Rows)
)

// opsReq is a transaction's read or eager-write request in progress here: its operations take
// their locks in order, next is the first not yet granted, and results collects the reads. A
// scan (ScanReq) is one operation, whose locks are range locks on the parts of scan's range its
// steps read (scan.go); its answer is rows, tooLarge and version.
type opsReq struct {
	kind    opsKind
	seq     uint32
	ops     []Op
	next    int
	results []ReadResult

	scan      *ScanRange
	scanNext  string      // where the scan's next step starts: its range is read and locked up to here
	step      locks.Range // the part of the range the current step locks and reads
	stepToEnd bool        // the current step reaches the range's end
	scanDone  bool        // the steps have found the rows the scan needs
	rows      []wire.KV
	tooLarge  bool
	version   ts.Timestamp
}

func (p *Participant) onRead(from node.ID, m *ReadReq) {
	p.startOps(from, m.Txn, m.Seen, m.Life, m.Age, &opsReq{kind: kindRead, seq: m.Seq, ops: []Op{{Key: m.Key}}})
}

// onWrite takes an eager write's exclusive lock (upgrading the transaction's shared lock, if
// any) under the lock policy and keeps the value pending; the answer goes out once it is held.
func (p *Participant) onWrite(from node.ID, m *WriteReq) {
	p.startOps(from, m.Txn, m.Seen, m.Life, m.Age, &opsReq{kind: kindWrite, seq: m.Seq,
		ops: []Op{{Key: m.Key, Write: true, Value: m.Value, Delete: m.Delete}}})
}

func (p *Participant) onOps(from node.ID, m *OpsReq) {
	p.startOps(from, m.Txn, m.Seen, m.Life, m.Age, &opsReq{kind: kindOps, seq: m.Seq, ops: m.Ops})
}

// onScan takes a read-write scan's range locks under the lock policy and reads the range, step
// by step as far as its limit needs (scan.go); the answer goes out once the last step is read.
func (p *Participant) onScan(from node.ID, m *ScanReq) {
	scan := m.Scan
	p.startOps(from, m.Txn, m.Seen, m.Life, m.Age, &opsReq{kind: kindScan, seq: m.Seq, ops: []Op{{Key: scan.Start}}, scan: &scan, scanNext: scan.Start})
}

// startOps admits a request of reads and eager writes and runs it as far as the locks allow.
func (p *Participant) startOps(from node.ID, txn storage.TxnID, seen uint32, life uint64, age ts.Timestamp, r *opsReq) {
	t := p.admit(from, txn, r.seq, seen, life, age, func(cause string) { p.refuseOps(from, txn, r, cause) })
	if t == nil {
		return
	}
	r.results = make([]ReadResult, len(r.ops))
	t.waitOps = r
	p.continueOps(t)
	p.drain()
}

// continueOps takes the locks of t's request from its next operation on, each granted one
// applied at once (a read's value taken, a write kept pending), and answers once all are held. A
// lock that must wait parks the request (drain resumes it); a refused one aborts t, which
// answers the request and releases the locks its earlier operations took.
func (p *Participant) continueOps(t *partTxn) {
	r := t.waitOps
	for ; r.next < len(r.ops); r.next++ {
		if r.scan != nil {
			if !p.scanSteps(t, r) {
				return
			}
			t.granted++ // however many steps it took, as the coordinator counts it
			continue
		}
		op := r.ops[r.next]
		mode, skip := locks.Shared, p.cfg.Mutant == MutantNoReadLock
		if op.Write {
			// mutant=eager-no-lock: broken on purpose, the write is pending with no exclusive
			// lock, and prepare takes none.
			mode, skip = locks.Exclusive, p.cfg.Mutant == MutantEagerNoLock
		}
		if !skip && !p.acquire(t, op.Key, mode) {
			return
		}
		p.applyOp(t, r)
	}
	t.waitOps = nil
	p.answerOps(t, r)
}

// applyOp performs r's next operation, whose lock t holds: a read takes the latest committed
// value, or the transaction's own pending write (read-your-writes); an eager write becomes
// pending, visible only to t's later reads here.
func (p *Participant) applyOp(t *partTxn, r *opsReq) {
	op := r.ops[r.next]
	t.granted++
	if op.Write {
		if t.writes == nil {
			t.writes = map[string]Write{}
		}
		t.writes[op.Key] = Write{Key: op.Key, Value: op.Value, Delete: op.Delete}
		return
	}
	var res ReadResult
	if v, ok := p.store.Latest(op.Key); ok {
		res.Version = v.TS
		if !v.Tombstone {
			res.Found, res.Value = true, v.Value
		}
	}
	if w, ok := t.writes[op.Key]; ok {
		// The transaction's own pending write hides the committed version.
		res.Found, res.Value = !w.Delete, w.Value
	}
	r.results[r.next] = res
}

// answerOps tells t's coordinator that every operation of r holds its lock, in the message
// kind r arrived as.
func (p *Participant) answerOps(t *partTxn, r *opsReq) {
	t.answered, t.lastAnswer = r, p.now()
	switch r.kind {
	case kindRead:
		res := r.results[0]
		p.sendGrant(t.coord, &ReadResp{Txn: t.id, Seq: r.seq, OK: true, Found: res.Found, Value: res.Value, Version: res.Version, Life: p.life})
	case kindWrite:
		p.sendGrant(t.coord, &WriteResp{Txn: t.id, Seq: r.seq, OK: true, Life: p.life})
	case kindOps:
		m := &OpsResp{Txn: t.id, Seq: r.seq, OK: true, Results: r.results, Life: p.life}
		if valuesTooLarge(r.results) {
			// It would not fit a frame between nodes. The locks stay held, and the versions
			// go, which the commit timestamp must exceed: the refusal leaves the transaction
			// as if the values had reached the coordinator.
			m.Results, m.TooLarge = withoutValues(r.results), true
		}
		p.sendGrant(t.coord, m)
	case kindScan:
		p.sendGrant(t.coord, &ScanResp{Txn: t.id, Seq: r.seq, OK: true, Rows: r.rows, TooLarge: r.tooLarge, Version: r.version, Life: p.life})
	}
}

type heldGrant struct {
	to node.ID
	m  wire.Msg
}

// sendGrant sends an answer granting locks, stamped with this life, once the life's number is
// durable: a crash before then would give the next life the same number, and a late copy of a
// request would let it pass for the one that granted the locks the crash lost.
func (p *Participant) sendGrant(to node.ID, m wire.Msg) {
	if p.lifePending {
		p.heldGrants = append(p.heldGrants, heldGrant{to, m})
		return
	}
	p.env.Send(to, m)
}

// valuesTooLarge reports whether a share of a batch's reads is over the bound of its answer.
func valuesTooLarge(res []ReadResult) bool {
	return txnkit.ValuesTooLarge(len(res), func(i int) []byte { return res[i].Value })
}

// withoutValues is res with every value left out, for an answer valuesTooLarge refuses.
func withoutValues(res []ReadResult) []ReadResult {
	out := slices.Clone(res)
	for i := range out {
		out[i].Value = nil
	}
	return out
}

// refuseOps answers r with an abort cause.
func (p *Participant) refuseOps(to node.ID, txn storage.TxnID, r *opsReq, cause string) {
	switch r.kind {
	case kindRead:
		p.env.Send(to, &ReadResp{Txn: txn, Seq: r.seq, Cause: cause})
	case kindWrite:
		p.env.Send(to, &WriteResp{Txn: txn, Seq: r.seq, Cause: cause})
	case kindOps:
		p.env.Send(to, &OpsResp{Txn: txn, Seq: r.seq, Cause: cause})
	case kindScan:
		p.env.Send(to, &ScanResp{Txn: txn, Seq: r.seq, Cause: cause})
	}
}

func (t *partTxn) waiting() bool { return t.waitOps != nil || t.waitPrep != nil }

// onKeepAlive keeps an unprepared transaction whose coordinator is alive from idling out, and
// settles what a lost message left the coordinator waiting for (Await). A
// transaction this participant does not know lost its state here (a restart), or its first
// request never came: its coordinator may be waiting for an answer that would never come — the
// client's request would hang, and the keep-alives would hold the transaction's locks at every
// other participant for good. If the coordinator saw locks granted here (Seen) they are lost,
// and it is told to abort the transaction, as for a wound; otherwise it sends its request
// again. (Keep-alives follow the transaction's first request on the same FIFO link, so a
// transaction unknown here is never one whose request is still on its way.)
//
// A keep-alive for a snapshot read (Snap) finds the read parked here behind a prepared intent,
// or it was lost (a restart: parked reads are volatile; or it never arrived): then it is refused
// (participant-lost-read), and the coordinator sends the read again rather than wait for an
// answer that will never come. A read answered before the keep-alive arrived
// had its answer sent first, which the coordinator takes; the refusal then finds the read done
// and changes nothing.
//
// A read-write transaction's coordinator may wait here for a message that was lost; until the
// client's timeout, a minute, its keep-alives would hold the transaction's locks here and at
// every other participant. A request or prepare the participant never got (it would have
// arrived before the keep-alive), or the first request of a transaction it does not know while
// the coordinator saw no lock granted here, is asked for again (ResendReq); a transaction it
// does not know whose coordinator saw locks granted here lost them (a restart), and is
// refused (participant-lost-locks). An answer that went long before is sent again, the same answer (its locks are still
// held, and the coordinator takes one answer per request). A refusal or wound lost on its way
// is repeated as a wound with its cause. A lost vote is left to the participant's poll, which
// repeats it.
func (p *Participant) onKeepAlive(from node.ID, m *KeepAlive) {
	if m.Snap {
		if p.snapParked[snapRef{from: from, txn: m.Txn, seq: m.Seq}] == 0 {
			p.env.Send(from, &SnapReadResp{Txn: m.Txn, Seq: m.Seq, Cause: causeLostRead})
		}
		return
	}
	t := p.txns[m.Txn]
	if t == nil && p.isDecided(m.Txn) {
		return // a late copy: the coordinator decided the transaction
	}
	if t == nil {
		if m.Seen == 0 && m.Await != awaitNothing {
			// Its first request, or a prepare of writes it buffered, never arrived (or this
			// node restarted before answering it): the coordinator holds nothing from here.
			p.metrics.Add("lost-requests", 1)
			p.env.Send(from, &ResendReq{Txn: m.Txn, Seq: m.Seq, Prepare: m.Await == awaitVote})
			return
		}
		p.env.Send(from, &WoundReq{Txn: m.Txn, Cause: causeLostLocks})
		return
	}
	// An answer went before the keep-alive arrived if it went within decision-timeout: it may
	// have crossed the keep-alive, so only one older than that is taken for lost (it would have
	// had to travel for longer than that, less the keep-alive's trip, to be on its way still).
	answerLost := p.now()-t.lastAnswer >= int64(p.cfg.DecisionTimeout)
	switch t.state {
	case partActive:
		if m.Seen > 0 && m.Life != p.life {
			// Begun afresh here by a late copy of an earlier request: the locks the
			// coordinator counts were granted by an earlier life, and are lost.
			p.abortLocal(t, causeLostLocks)
			p.env.Send(from, &WoundReq{Txn: t.id, Cause: causeLostLocks})
			p.drain()
			return
		}
		t.lastActive = p.now()
		p.armIdle(t)
		switch {
		case m.Await == awaitAnswer && (!t.hasOp || t.opSeq < m.Seq),
			m.Await == awaitVote && t.waitPrep == nil:
			// The request, or the prepare, never arrived: it would have come first on this
			// link. Without it the transaction cannot go on here, and nobody would ever answer
			// the coordinator, whose keep-alives hold the transaction's locks everywhere. It
			// used to be aborted; under heavy loss nearly every attempt of a transaction
			// touching several nodes was (10% loss: a final read of 5 keys aborted for 30 s).
			p.metrics.Add("lost-requests", 1)
			p.env.Send(from, &ResendReq{Txn: t.id, Seq: m.Seq, Prepare: m.Await == awaitVote})
		case m.Await == awaitAnswer && t.opSeq == m.Seq && t.waitOps == nil && t.answered != nil && answerLost:
			p.metrics.Add("answers-resent", 1)
			p.answerOps(t, t.answered)
		}
	case partAborted:
		if m.Await != awaitNothing && answerLost {
			// The refusal, or the wound, that told the coordinator was lost.
			p.env.Send(from, &WoundReq{Txn: t.id, Cause: t.cause})
		}
	}
	// A prepared participant's vote goes again with each poll (armPoll).
}

// askSilent asks the coordinator of each unprepared transaction that has been silent for longer
// than a keep-alive period and decision-timeout whether it still runs. A live coordinator keeps
// its executing transactions alive every period (Coordinator.armKeepAlive), so one that fell
// silent was most likely decided without this participant hearing of it: the abort decision
// was lost (presumed abort: nothing repeats it), or the coordinator crashed or was cut off.
// Until the idle timeout its locks held up every conflicting transaction: with 2% of messages
// lost, a list-append run stalled for three seconds behind one such lock on a hot key. The
// coordinator answers aborted (an unprepared transaction cannot have committed: it has no vote
// from here) or, if only keep-alives were lost, in progress.
//
// It runs at most once a decision-timeout, from the node's message handler (no timer of its
// own), and asks about each transaction at most once a decision-timeout. Without faults no
// transaction is that silent, so nothing is sent.
func (p *Participant) askSilent() {
	now := p.now()
	if now-p.silentCheckAt < int64(p.cfg.DecisionTimeout) {
		return
	}
	p.silentCheckAt = now
	for _, id := range slices.Sorted(maps.Keys(p.txns)) {
		t := p.txns[id]
		if t.state != partActive || now-t.lastActive <= int64(p.cfg.IdleTimeout/3+p.cfg.DecisionTimeout) ||
			(t.askedAt != 0 && now-t.askedAt < int64(p.cfg.DecisionTimeout)) {
			continue
		}
		t.askedAt = now
		p.metrics.Add("silent-txns-asked", 1)
		p.env.Send(t.coord, &StatusReq{Txn: id})
	}
}

// onRestarted aborts here every unprepared transaction that an earlier life of the restarted
// coordinator ran: that coordinator's transactions are volatile, so none of them will ever
// prepare or send anything again, and otherwise only the idle timeout (5 s) would free their
// locks, every transaction queued behind them stalled meanwhile. Transaction ids carry the incarnation that
// issued them, and every one an earlier life used is below life, so a transaction of the new
// life is never taken for a dead one whatever the order messages arrive in. A prepared one is
// left to its poll: the coordinator may have recorded a commit.
func (p *Participant) onRestarted(from node.ID, m *Restarted) {
	for _, id := range slices.Sorted(maps.Keys(p.txns)) {
		t := p.txns[id]
		if t.state == partActive && node.ID(id.Coordinator()) == from && txnkit.LifeOf(id) < m.Life {
			p.metrics.Add("restart-aborts", 1)
			p.abortLocal(t, causeRestarted)
		}
	}
	p.drain()
}

// startWait notes that t's current request waits for a lock: it wounds younger conflicting
// transactions under wound-wait; under detect the next wait-for report will include it; under
// timeout the wait is given lock-timeout to end.
func (p *Participant) startWait(t *partTxn, res locks.Result) {
	t.waitSince = p.now()
	p.wound(res.Wound)
	p.waitsDirty = true
	if p.cfg.LockTimeout > 0 {
		p.armWaitTimeout(t)
	}
}

// armWaitTimeout aborts t here if its current lock wait is still unanswered after lock-timeout:
// a wait that long is presumed to be a deadlock (or a queue so long that giving up is cheaper).
// Timeout detection is the policy notes/k2.md §4 names beside wound-wait for K2's d2PL-TTC,
// whose deadlock handling the paper leaves unstated. It needs no messages, but it cannot tell a
// deadlock from a long queue behind a slow cross-region commit, so it also aborts waits that
// would have ended. Only an unprepared transaction waits, so aborting it here is always allowed.
func (p *Participant) armWaitTimeout(t *partTxn) {
	p.env.Cancel(t.waitTimer)
	t.waitTimer = p.env.After(p.cfg.LockTimeout, func() {
		t.waitTimer = 0
		if p.txns[t.id] != t || t.state != partActive || !t.waiting() {
			return
		}
		p.metrics.Add("lock-timeouts", 1)
		p.abortLocal(t, causeLockTimeout)
		p.drain()
	})
}

// reportWaits sends the deadlock detector this participant's wait-for edges, read from the lock
// table, if they changed since the last report. The node calls it after every message it
// handles; timers that release locks call it too.
func (p *Participant) reportWaits() {
	if !p.cfg.DetectDeadlocks || !p.waitsDirty || !p.reporting {
		return
	}
	p.waitsDirty = false
	var waits []Wait
	p.locks.WaitsFor(func(waiter storage.TxnID, age locks.Age, blockers []storage.TxnID) {
		waits = append(waits, Wait{Waiter: waiter, Age: age, Blockers: blockers})
	})
	if slices.EqualFunc(waits, p.lastWaits, func(a, b Wait) bool {
		return a.Waiter == b.Waiter && slices.Equal(a.Blockers, b.Blockers)
	}) {
		return
	}
	p.lastWaits = waits
	p.sendWaits()
}

// lifeDurable runs once the incarnation this life reports under is durable, and sends the waits
// held back until then. The detector keeps a participant's newest report by (incarnation,
// sequence number), the sequence counted from 1 in each life, and a life that crashes before its
// incarnation is durable leaves the number to the next. Had such a lost life reported waits
// (reports 2, 3, ...), the detector would keep them, edges whose locks died with it, and drop
// the next life's reports until their sequence passed the lost life's: a deadlock through this
// participant would go unseen for as many decision-timeouts as the lost life sent reports, its
// transactions blocked meanwhile, and the dead edges could close false cycles and kill live
// transactions. A life therefore sends only its first report before the number is durable,
// empty (NewNode), the same for every life of that number; it replaces the reports of the
// lives before, whose locks are gone. The waits held back cost detection one flush.
func (p *Participant) lifeDurable() {
	p.reporting, p.lifePending = true, false
	for _, g := range p.heldGrants {
		p.env.Send(g.to, g.m)
	}
	p.heldGrants = nil
	p.waitsDirty = true
	p.reportWaits()
}

func (p *Participant) sendWaits() {
	p.waitSeq++
	p.env.Send(p.detector, &WaitGraph{Inc: p.incarnation, Seq: p.waitSeq, Waits: p.lastWaits})
	p.env.Cancel(p.refreshTimer)
	p.refreshTimer = 0
	if len(p.lastWaits) > 0 {
		p.refreshTimer = p.env.After(p.cfg.DecisionTimeout, p.sendWaits)
	}
}

// wound hands each wounded transaction to its fate: one that has not voted here is aborted at
// once (releasing its locks, which may grant the wounder) — its coordinator cannot commit without
// this participant's vote, and the vote will be no; every one is reported to its coordinator,
// which alone may abort a transaction that voted yes (prepared, read-only participants
// included), and does so only before it decides to commit.
func (p *Participant) wound(ids []storage.TxnID) {
	for _, id := range ids {
		w := p.txns[id]
		if w == nil || w.state == partAborted {
			continue
		}
		if !w.woundSent {
			w.woundSent = true
			p.env.Send(w.coord, &WoundReq{Txn: id})
		}
		if w.state == partActive {
			p.abortLocal(w, causeWoundWait)
		}
	}
}

// abortLocal aborts an unprepared transaction at this participant: its waiting request is
// answered, its locks are released, and a tombstone answers its later requests.
func (p *Participant) abortLocal(t *partTxn, cause string) {
	if t.state != partActive {
		return
	}
	t.state, t.cause = partAborted, cause
	t.lastAnswer = p.now() // the waiting request is refused, or the coordinator learns later
	p.waitsDirty = true
	if r := t.waitOps; r != nil {
		p.refuseOps(t.coord, t.id, r, cause)
	}
	if t.waitPrep != nil {
		p.env.Send(t.coord, &PrepareResp{Txn: t.id, Cause: cause})
	}
	t.waitOps, t.waitPrep, t.writes = nil, nil, nil
	p.env.Cancel(t.waitTimer)
	t.waitTimer = 0
	p.grants = append(p.grants, p.locks.Release(t.id)...)
	p.armIdle(t) // expires the tombstone
}

// drain resumes the waiters that releases granted, until none is left. Resuming can release
// more locks (a prepare that dies on its next key), so this is a loop, not a recursion.
func (p *Participant) drain() {
	for len(p.grants) > 0 {
		g := p.grants[0]
		p.grants = p.grants[1:]
		t := p.txns[g.Txn]
		if t == nil || t.state != partActive {
			continue
		}
		p.metrics.Observe("lock_wait", p.now()-t.waitSince)
		p.env.Cancel(t.waitTimer)
		t.waitTimer = 0
		p.waitsDirty = true
		switch {
		case t.waitOps != nil && t.waitOps.scan != nil && g.Range && g.Key == t.waitOps.step.Start:
			p.resumeScan(t, t.waitOps)
			p.continueOps(t)
		case t.waitOps != nil && t.waitOps.scan == nil && t.waitOps.ops[t.waitOps.next].Key == g.Key && !g.Range:
			p.applyOp(t, t.waitOps)
			t.waitOps.next++
			p.continueOps(t)
		case t.waitPrep != nil:
			t.prepNext++
			p.continuePrepare(t)
		}
	}
}

func (p *Participant) onPrepare(from node.ID, m *PrepareReq) {
	t := p.txns[m.Txn]
	if t == nil && p.isDecided(m.Txn) {
		// A late copy: prepared afresh, it would lay intents of a decided transaction and hold
		// their locks until a poll learned the decision again.
		return
	}
	if t == nil && m.Seen > 0 {
		p.env.Send(from, &PrepareResp{Txn: m.Txn, Cause: causeLostLocks})
		return
	}
	if t == nil && p.installed(m.Txn, m.Writes) {
		// A late copy whose transaction committed here in an earlier life: decidedTxns is
		// volatile, but the versions it installed are not.
		p.metrics.Add("late-copies", 1)
		return
	}
	if t != nil && t.state == partPrepared {
		// A duplicate: vote again, but not before the prepare is durable (its completion sends
		// the vote then). The coordinator may commit on the first vote it receives, and a
		// crash before the flush would forget the intents, or read locks, of a transaction
		// that commits.
		if t.voteSent {
			p.env.Send(from, &PrepareResp{Txn: m.Txn, OK: true, TS: t.prepTS})
		}
		return
	}
	if t != nil && t.state == partActive && t.waitPrep != nil {
		return // a copy of the prepare that waits here for a lock: it votes once they are held
	}
	t = p.txn(m.Txn, from, m.Age)
	switch {
	case t.state == partAborted:
		t.lastAnswer = p.now()
		p.env.Send(from, &PrepareResp{Txn: m.Txn, Cause: t.cause})
		return
	case t.granted != m.Seen || t.waiting() || (m.Seen > 0 && m.Life != p.life):
		p.abortLocal(t, causeLostLocks)
		p.env.Send(from, &PrepareResp{Txn: m.Txn, Cause: causeLostLocks})
		p.drain()
		return
	}
	t.waitPrep, t.prepNext = m, 0
	p.continuePrepare(t)
	p.drain()
}

// acquire takes t's lock on key under the lock policy. It returns false if t must wait (the
// wait is started; drain resumes t) or was refused (t is aborted).
func (p *Participant) acquire(t *partTxn, key string, mode locks.Mode) bool {
	return p.lockResult(t, p.locks.Acquire(t.id, key, mode, p.cfg.Policy, t.age))
}

// lockResult acts on the lock table's answer to t's request, as acquire describes.
func (p *Participant) lockResult(t *partTxn, res locks.Result) bool {
	switch res.Outcome {
	case locks.Waiting:
		p.startWait(t, res)
		return false
	case locks.Aborted:
		p.abortLocal(t, res.Reason)
		return false
	}
	return true
}

// continuePrepare takes the exclusive locks of t's prepare in key order from prepNext; once all
// are held it writes the intents at a fresh prepare timestamp and votes after they are durable.
func (p *Participant) continuePrepare(t *partTxn) {
	m := t.waitPrep
	for ; t.prepNext < len(m.Writes); t.prepNext++ {
		if !p.acquire(t, m.Writes[t.prepNext].Key, locks.Exclusive) {
			return
		}
	}
	t.waitPrep = nil
	// Eager writes are already locked; buffered ones were just locked above. In either mode
	// only one of the two lists is non-empty.
	writes := m.Writes
	if len(t.writes) > 0 {
		writes = slices.Clone(m.Writes)
		for _, k := range slices.Sorted(maps.Keys(t.writes)) {
			writes = append(writes, t.writes[k])
		}
	}
	if len(writes) == 0 {
		// A read-only participant: its shared locks are still held (Seen matched). Voting yes
		// makes it prepared like a writer: from now on only the decision releases the locks. A
		// wound must not abort it here — the coordinator may already hold every vote and decide
		// commit before the WoundReq arrives, and a writer granted the released lock would then
		// overwrite what the committing transaction read (a G2 cycle). For the same reason the
		// vote is durable first, as Spanner logs every participant's prepare record: a crash
		// between vote and decision must not forget the read locks (recover re-takes them).
		t.state, t.readVote = partPrepared, true
		p.env.Cancel(t.idleTimer)
		coord, id := t.coord, t.id
		p.persist(p.rangeVote(t, []node.Write{{Key: readVoteKey(id), Value: encodeKeys(p.locks.Held(id))}, prepareAgeWrite(t)}), func() {
			t.voteSent = true
			p.env.Send(coord, &PrepareResp{Txn: id, OK: true})
		})
		p.armPoll(t, p.cfg.DecisionTimeout)
		return
	}
	tt := p.env.TrueTime()
	t.prepTS = tsAfter(p.maxTS, tt.Latest, p.self)
	if p.vgc.TooOld(t.prepTS) {
		// Unreachable with sane clocks: the horizon is a local clock reading minus gc-ttl, and
		// prepTS is at least TT.now().latest. Only a local clock more than gc-ttl off TrueTime
		// (or below a horizon recovered from disk) gets here. Refused so that no intent is ever
		// laid below the horizon: its commit, above prepTS, then starts out above it too.
		t.waitPrep = m // abortLocal answers the prepare
		p.abortLocal(t, txnkit.AbortTooOld)
		return
	}
	p.maxTS = t.prepTS
	t.state = partPrepared
	p.env.Cancel(t.idleTimer)
	for _, w := range writes {
		err := p.store.PutIntent(w.Key, mvcc.Version{TS: t.prepTS, Txn: t.id, Value: w.Value, Tombstone: w.Delete})
		if err != nil {
			// Only size limits can fail here (the exclusive lock excludes other intents; only
			// mutant=eager-no-lock breaks that), and the client validated sizes: a broken
			// invariant, surfaced as a vote against.
			if p.cfg.Mutant == "" {
				slog.Error("spanner: writing an intent at prepare", "txn", t.id, "key", w.Key, "err", err)
			}
			p.store.AbortTxn(t.id)
			t.state, t.waitPrep = partActive, m // abortLocal answers the prepare
			p.abortLocal(t, causePrepareFailed)
			return
		}
	}
	t.writes = nil // now intents
	// The keys read here but not written keep shared locks, which a restart would lose while the
	// intents bring the exclusive ones back: they go to disk with the intents, as a read-only
	// vote's do, so that no writer can take them before the decision (its prepare timestamp
	// could fall below the commit timestamp this transaction is yet to get).
	record := []node.Write{prepareAgeWrite(t)}
	if reads := readOnlyKeys(p.locks.Held(t.id), writes); len(reads) > 0 {
		t.readVote = true
		record = append(record, node.Write{Key: readVoteKey(t.id), Value: encodeKeys(reads)})
	}
	record = p.rangeVote(t, record)
	coord, id, prepTS := t.coord, t.id, t.prepTS
	p.persist(record, func() {
		t.voteSent = true
		p.env.Send(coord, &PrepareResp{Txn: id, OK: true, TS: prepTS})
	})
	p.armPoll(t, p.cfg.DecisionTimeout)
}

// rangeVote appends to record, the batch that makes t's yes vote durable, the range locks t
// holds here, if any (s/rr/<txn>), so that a restart takes them back with its other locks. A
// prepared transaction's scan was validated by nothing but its range lock: lost, it would let
// another transaction commit a row into the range below the commit timestamp this one is yet to
// get, a phantom in a transaction that commits. What it holds is recorded, the parts its scans'
// steps locked (scan.go), not the ranges the scans asked for; a scan's steps lock adjacent
// parts, in order, which are recorded as the one range they make up.
func (p *Participant) rangeVote(t *partTxn, record []node.Write) []node.Write {
	var rs []locks.Range
	for _, r := range p.locks.HeldRanges(t.id) {
		if n := len(rs); n > 0 && rs[n-1].End != "" && rs[n-1].End == r.Start {
			rs[n-1].End = r.End
			continue
		}
		rs = append(rs, r)
	}
	if len(rs) == 0 {
		return record
	}
	t.rangeVote = true
	return append(record, node.Write{Key: recordKey(rangeVotePrefix, t.id), Value: encodeRanges(rs)})
}

// readOnlyKeys returns the keys of held that no write of writes is for.
func readOnlyKeys(held []string, writes []Write) []string {
	written := make(map[string]bool, len(writes))
	for _, w := range writes {
		written[w.Key] = true
	}
	return slices.DeleteFunc(held, func(k string) bool { return written[k] })
}

// persist makes the store's pending writes durable, with extra in the same batch, then calls done.
// With nothing to write, done still waits for the batches in flight: what it answers may rest on
// them (a duplicated commit finds its intents installed by the first copy, whose batch is not
// durable yet, and must not be acknowledged before it is).
func (p *Participant) persist(extra []node.Write, done func()) {
	w := append(p.store.TakeWrites(), extra...)
	// Every decision the store applied reaches the disk through here, so this is where garbage
	// gets queued: arm the collector (O(1); nothing if a pass is already scheduled).
	p.vgc.Kick()
	if len(w) == 0 && (done == nil || p.pending == 0) {
		if done != nil {
			done()
		}
		return
	}
	p.pending++
	p.env.Persist(w, func() {
		p.pending--
		if done != nil {
			done()
		}
	})
}

func (p *Participant) onDecide(from node.ID, m *DecideReq) {
	p.applyDecision(m.Txn, m.Commit, m.TS, from, m.Commit)
}

func (p *Participant) onStatusResp(from node.ID, m *StatusResp) {
	switch m.Status {
	case statusCommitted:
		// Acknowledged like a DecideReq: the coordinator keeps the record until every
		// participant has, and will not send this one the decision again.
		p.applyDecision(m.Txn, true, m.TS, from, true)
	case statusAborted:
		p.applyDecision(m.Txn, false, ts.Zero, 0, false)
	}
}

// applyDecision installs or drops txn's intents and releases its locks. A commit is acknowledged
// to ackTo once durable, when ack is set.
func (p *Participant) applyDecision(id storage.TxnID, commit bool, at ts.Timestamp, ackTo node.ID, ack bool) {
	t := p.txns[id]
	keys := p.store.IntentKeys(id)
	if commit {
		p.maxTS = ts.MaxOf(p.maxTS, at)
		for _, k := range keys {
			if p.installed(id, []Write{{Key: k}}) {
				// An intent a late copy of the prepare laid again over the version this
				// commit already installed: committing it would clash with that version.
				p.store.AbortIntent(k, id)
			}
		}
		keys = p.store.IntentKeys(id)
		if len(keys) > 0 && p.vgc.TooOld(at) {
			// The decision took longer than gc-ttl to arrive (its coordinator crashed or was
			// cut off while the transaction was prepared here). A decided commit cannot be
			// refused, and need not be: see "Version garbage collection" in doc.go.
			p.metrics.Add("gc/late-commits", 1)
		}
		if _, err := p.store.CommitTxn(id, at); err != nil {
			// Unreachable while the lock table excludes other intents; keep serving.
			slog.Error("spanner: installing a committed transaction", "txn", id, "err", err)
		}
	} else {
		p.store.AbortTxn(id)
	}
	var record []node.Write
	if t != nil && t.readVote {
		// In the batch that installs the intents: a crash must not leave the intents without
		// the read locks that went with them.
		record = []node.Write{{Key: readVoteKey(id), Delete: true}}
	}
	if t != nil && t.rangeVote {
		record = append(record, node.Write{Key: recordKey(rangeVotePrefix, id), Delete: true})
	}
	if t != nil && t.state == partPrepared {
		// Its batch is never empty otherwise (the intents, or the read-vote record), so this
		// costs no flush.
		record = append(record, node.Write{Key: recordKey(prepareAgePrefix, id), Delete: true})
	}
	if t != nil {
		p.env.Cancel(t.idleTimer)
		p.env.Cancel(t.pollTimer)
		if t.state == partActive {
			// Aborted by its coordinator while waiting here: nobody waits for an answer.
			t.waitOps, t.waitPrep = nil, nil
		}
		delete(p.txns, id)
		p.grants = append(p.grants, p.locks.Release(id)...)
		p.waitsDirty = true
	}
	// Remembered even if the transaction was not known here: its request may have been lost,
	// or be a copy still on its way.
	p.decided.add(id, p.now(), p.cfg.IdleTimeout)
	if ack {
		p.persist(record, func() { p.env.Send(ackTo, &DecideAck{Txn: id}) })
	} else {
		p.persist(record, nil)
	}
	for _, k := range keys {
		p.retrySnap(k)
	}
	p.drain()
}

func (p *Participant) onSnapRead(from node.ID, m *SnapReadReq) {
	// Every later prepare here gets a timestamp above m.At, so nothing can still commit at or
	// below it except the prepared transactions the read waits for below.
	p.maxTS = ts.MaxOf(p.maxTS, m.At)
	if m.Scan != nil {
		p.trySnap(&snapWaiter{from: from, req: m, scanNext: m.Scan.Start}) // its first step lists its keys
		return
	}
	keys := m.keys()
	p.trySnap(&snapWaiter{from: from, req: m, keys: keys, results: make([]ReadResult, len(keys))})
}

// trySnap reads w's keys from its next one on, and answers once all are read (a scan: once its
// steps found the rows it needs). A key below a
// prepared intent parks w on that key (retrySnap resumes it at the decision): what w read before
// stays valid, because nothing can commit at or below the snapshot here once onSnapRead raised
// maxTS except the transactions already prepared.
func (p *Participant) trySnap(w *snapWaiter) {
	if refuseBelowGCHorizon && p.vgc.TooOld(w.req.At) {
		// The versions the snapshot needs may be gone: GC keeps, per key, only the newest
		// committed version at or below the horizon. Checked on every attempt, since a read
		// parked behind a prepared intent may see the horizon pass it meanwhile; the keys it
		// read before were read while their versions were all still there.
		p.unparkSnap(w)
		p.env.Send(w.from, &SnapReadResp{Txn: w.req.Txn, Seq: w.req.Seq, Cause: txnkit.AbortTooOld})
		return
	}
	for {
		for ; w.next < len(w.keys); w.next++ {
			key := w.keys[w.next]
			vis := p.store.VisibleAt(key, w.req.At, 0)
			if len(vis.Pending) > 0 && (w.req.Scan == nil || p.cfg.Mutant != MutantScanNoWait) {
				// A prepared transaction at or below the snapshot may commit below it: Spanner's
				// safe time has not reached the snapshot for this key yet.
				p.snapQ[key] = append(p.snapQ[key], w)
				if !w.parked {
					w.parked = true
					p.snapParked[w.ref()]++
				}
				return
			}
			if !vis.Found || vis.Version.Tombstone {
				continue
			}
			if w.req.Scan != nil {
				w.rows = append(w.rows, wire.KV{Key: key, Value: vis.Version.Value})
			} else {
				w.results[w.next] = ReadResult{Found: true, Value: vis.Version.Value}
			}
		}
		if w.req.Scan == nil || !p.nextSnapStep(w) {
			break
		}
	}
	p.unparkSnap(w)
	r := &SnapReadResp{Txn: w.req.Txn, Seq: w.req.Seq}
	if w.req.Scan != nil {
		r.Scan, r.Rows = true, w.rows // a step lists no more keys than rows are wanted: never past the limit
		if wire.RowsTooLarge(r.Rows) {
			r.Rows, r.TooLarge = nil, true
		}
	} else if len(w.req.Keys) > 0 {
		r.Results = w.results
		if valuesTooLarge(r.Results) {
			r.Results, r.TooLarge = withoutValues(r.Results), true // as answerOps
		}
	} else {
		r.Found, r.Value = w.results[0].Found, w.results[0].Value
	}
	p.env.Send(w.from, r)
}

// unparkSnap uncounts w, answered or refused, if it was parked.
func (p *Participant) unparkSnap(w *snapWaiter) {
	if !w.parked {
		return
	}
	w.parked = false
	ref := w.ref()
	if p.snapParked[ref]--; p.snapParked[ref] <= 0 {
		delete(p.snapParked, ref)
	}
}

func (p *Participant) retrySnap(key string) {
	q := p.snapQ[key]
	if len(q) == 0 {
		return
	}
	delete(p.snapQ, key)
	for _, w := range slices.Clone(q) {
		p.trySnap(w)
	}
}

// isDecided reports whether id's decision was applied here lately, so that a request of it
// arriving now is a late copy (decidedTxns).
func (p *Participant) isDecided(id storage.TxnID) bool {
	if p.decided.has(id, p.now(), p.cfg.IdleTimeout) {
		p.metrics.Add("late-copies", 1)
		return true
	}
	return false
}

// Len returns the number of transactions this participant tracks (tests).
func (p *Participant) Len() int { return len(p.txns) }

// Store exposes the participant's versions (tests, Spanner-RLS).
func (p *Participant) Store() *mvcc.Store { return p.store }

// Durable read-vote records: "s/rv/" + the transaction id (8 bytes, big-endian) → the keys the
// participant holds read locks on, each as a uvarint length and the bytes.
var (
	readVotePrefix = []byte("s/rv/")
	readVoteEnd    = []byte("s/rv0") // '0' follows '/'
)

func readVoteKey(id storage.TxnID) []byte { return recordKey(readVotePrefix, id) }

func readVoteTxn(k []byte) (storage.TxnID, bool) { return recordTxn(readVotePrefix, k) }

// Durable range-vote records: "s/rr/" + the transaction id → the range locks the participant
// holds for it (Participant.rangeVote), each as its start and end keys, encoded as encodeKeys
// does. Written with the yes vote, deleted with the decision, like a read-vote record.
var (
	rangeVotePrefix = []byte("s/rr/")
	rangeVoteEnd    = []byte("s/rr0")
)

func encodeRanges(rs []locks.Range) []byte {
	keys := make([]string, 0, 2*len(rs))
	for _, r := range rs {
		keys = append(keys, r.Start, r.End)
	}
	return encodeKeys(keys)
}

func decodeRanges(b []byte) ([]locks.Range, error) {
	keys, err := decodeKeys(b)
	if err != nil {
		return nil, err
	}
	if len(keys)%2 != 0 {
		return nil, errors.New("odd number of range bounds")
	}
	rs := make([]locks.Range, 0, len(keys)/2)
	for i := 0; i < len(keys); i += 2 {
		rs = append(rs, locks.Range{Start: keys[i], End: keys[i+1]})
	}
	return rs, nil
}

// Durable prepare-age records: "s/pa/" + the transaction id → its lock age (ts.Timestamp.Encode),
// written with the vote and deleted with the decision, so that the locks a restarted
// participant takes back (recover) carry the transaction's age. At age zero they were older
// than every transaction, so no requester wounded them, and under wound-wait an older
// transaction waited here for a younger one that was still waiting for locks at another
// participant: the one wait the policy exists to rule out, and a deadlock for good once that
// chain of waits led back to the older one (doc.go, "Faults"). Under wait-die the zero age made
// every conflicting requester die until the decision. Without a record (a disk written before
// there were any) the age stays zero.
var (
	prepareAgePrefix = []byte("s/pa/")
	prepareAgeEnd    = []byte("s/pa0")
)

func prepareAgeWrite(t *partTxn) node.Write {
	return node.Write{Key: recordKey(prepareAgePrefix, t.id), Value: t.age.Encode(nil)}
}

// readPrepareAges returns the ages the prepare-age records hold, by transaction.
func readPrepareAges(d node.Durable) (map[storage.TxnID]locks.Age, error) {
	ages := map[storage.TxnID]locks.Age{}
	var bad error
	err := d.Scan(prepareAgePrefix, prepareAgeEnd, func(k, v []byte) bool {
		id, ok := recordTxn(prepareAgePrefix, k)
		age, err := ts.Decode(v)
		if !ok || err != nil || len(v) != ts.EncodedLen {
			bad = fmt.Errorf("spanner: corrupt prepare-age record %q (value %x)", k, v)
			return false
		}
		ages[id] = age
		return true
	})
	if err != nil {
		return nil, err
	}
	return ages, bad
}

// recordKey is prefix followed by id, 8 bytes big-endian.
func recordKey(prefix []byte, id storage.TxnID) []byte {
	return binary.BigEndian.AppendUint64(append([]byte{}, prefix...), uint64(id))
}

func recordTxn(prefix, k []byte) (storage.TxnID, bool) {
	if len(k) != len(prefix)+8 {
		return 0, false
	}
	return storage.TxnID(binary.BigEndian.Uint64(k[len(prefix):])), true
}

func encodeKeys(keys []string) []byte {
	var b []byte
	for _, k := range keys {
		b = binary.AppendUvarint(b, uint64(len(k)))
		b = append(b, k...)
	}
	return b
}

func decodeKeys(b []byte) ([]string, error) {
	var keys []string
	for len(b) > 0 {
		n, w := binary.Uvarint(b)
		if w <= 0 || uint64(len(b)-w) < n {
			return nil, errors.New("truncated key list")
		}
		keys = append(keys, string(b[w:w+int(n)]))
		b = b[w+int(n):]
	}
	return keys, nil
}

// installed reports whether a committed version of txn lies on one of writes' keys: txn's
// decision was applied here already, perhaps by an earlier life.
func (p *Participant) installed(txn storage.TxnID, writes []Write) bool {
	for _, w := range writes {
		for _, v := range p.store.Versions(w.Key) {
			if v.Txn == txn && v.State == mvcc.Committed {
				return true
			}
		}
	}
	return false
}
