package crdb

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/meridiandb/meridian/internal/clock"
	"github.com/meridiandb/meridian/internal/node"
	"github.com/meridiandb/meridian/internal/protocol"
	"github.com/meridiandb/meridian/internal/protocol/txnkit"
	"github.com/meridiandb/meridian/internal/storage"
	"github.com/meridiandb/meridian/internal/storage/mvcc"
	"github.com/meridiandb/meridian/internal/storage/txnrec"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/ts"
	"github.com/meridiandb/meridian/internal/wire"
)

const name = "crdb"

func init() { protocol.Register(proto{}) }

type proto struct{}

func (proto) Name() string  { return name }
func (proto) Model() string { return "serializable-no-stale-reads" }

// SerializesByCommitTimestamp implements protocol.TimestampOrdered.
func (proto) SerializesByCommitTimestamp() {}
func (proto) Options() map[string]string {
	return map[string]string{
		"max-offset":         "maximum clock offset the uncertainty interval covers (default 500ms, CockroachDB's); a real node whose clock is off by more than 80% of it from most of its peers stops",
		"heartbeat-interval": "coordinator heartbeat period; a record unheard of for 5 periods may be aborted by a pusher (default 200ms)",
		"idle-timeout":       "abort a transaction whose client sends nothing (or whose operation hangs) this long (default 5s)",
		"write-pipelining":   "acknowledge writes before their intents are durable, proving them at commit (default on)",
		"parallel-commits":   "persist a STAGING record in parallel with proving the writes (default on)",
		"read-refresh":       "off: a transaction whose timestamp must move past its reads (pushed by a later read, a newer value, or an uncertain one) aborts instead of refreshing them, as MVTO without refresh does (default on)",
		txnkit.GCTTLOption:   "a leaseholder keeps superseded versions this long, and refuses a transaction older than that (cause too-old) (default 10s, from 10ms to 1000h, and at least twice max-offset)",
		"mutant":             "break a rule on purpose: 'no-refresh' commits at a pushed timestamp without read refresh; 'no-span-tscache' lets writes land under a finished scan (phantoms); 'early-stage' has a record holder answer a STAGING record before it is durable (a crash then loses acknowledged commits)",
	}
}

// Layout drops the per-region TrueTime oracles: CockroachDB orders transactions with HLCs only.
func (proto) Layout(l topo.Layout) topo.Layout {
	l.OraclePerRegion = false
	return l
}

// settings are the parsed options.
type settings struct {
	maxOffset  time.Duration
	heartbeat  time.Duration
	expiry     time.Duration // 5 heartbeats, as CockroachDB's TxnLivenessThreshold
	idle       time.Duration
	pipelining bool
	parallel   bool
	gcTTL      time.Duration // versions superseded longer ago than this are collected
	noRefresh  bool
	// refreshOff (read-refresh=off) aborts where a refresh would run: safe, only more aborts.
	refreshOff bool
	// noSpanTSCache is a mutant: scans leave no timestamp-cache entry, so a write may land
	// under a finished scan (a phantom).
	noSpanTSCache bool
	// earlyStage is a mutant (with parallel commits): a record holder answers a STAGING record
	// before it is durable, so a commit can be acknowledged that a crash then undoes.
	earlyStage  bool
	pollPeriod  time.Duration // how often a blocked request re-pushes a transaction it waits for
	abortMemory int           // how many aborted transactions a leaseholder remembers
	// forgetAtDecision breaks record garbage collection on purpose (tests only, no option): a
	// record is forgotten as soon as its decision is durable, before the leaseholders
	// acknowledge the resolution, so a late push finds the transaction unknown.
	forgetAtDecision bool
}

// CheckOptionValues implements protocol.OptionChecker.
func (proto) CheckOptionValues(opts map[string]string) error {
	_, err := parseSettings(opts)
	return err
}

func parseSettings(opts map[string]string) (settings, error) {
	o := txnkit.Options{Protocol: name, M: opts}
	s := settings{
		maxOffset:   o.Duration("max-offset", 500*time.Millisecond),
		heartbeat:   o.Duration("heartbeat-interval", 200*time.Millisecond),
		idle:        o.Duration("idle-timeout", 5*time.Second),
		pipelining:  o.Bool("write-pipelining", true),
		parallel:    o.Bool("parallel-commits", true),
		refreshOff:  !o.Bool("read-refresh", true),
		gcTTL:       o.GCTTL(),
		abortMemory: 1 << 16,
	}
	switch o.Enum("mutant", "", "no-refresh", "no-span-tscache", "early-stage") {
	case "no-refresh":
		s.noRefresh = true
	case "no-span-tscache":
		s.noSpanTSCache = true
	case "early-stage":
		s.earlyStage = true
	}
	if o.Err != nil {
		return s, o.Err
	}
	if s.heartbeat <= 0 {
		return s, &protocol.OptionError{Protocol: name, Key: "heartbeat-interval", Value: opts["heartbeat-interval"], Want: "a positive duration"}
	}
	if s.idle <= 0 {
		return s, &protocol.OptionError{Protocol: name, Key: "idle-timeout", Value: opts["idle-timeout"], Want: "a positive duration"}
	}
	if err := checkGCTTL(s, opts); err != nil {
		return s, err
	}
	s.expiry = 5 * s.heartbeat
	s.pollPeriod = s.heartbeat
	return s, nil
}

// CheckDeployment implements protocol.DeploymentChecker. max-offset is, as in CockroachDB, the
// most two nodes' clocks may be apart: the uncertainty interval, ts + max-offset, covers a value
// written by a clock that far ahead of the reader's gateway. Simulated clocks each start within
// MaxClockOffset of true time, so two may be twice that apart, and a configuration whose clocks
// exceed max-offset so has honest runs read stale values (review: --max-offset 100ms with
// --opt max-offset=100ms gave a stale single-key read at seed 8). Drift adds up to twice the
// drift rate per second of run on top; that margin is the user's.
func (proto) CheckDeployment(opts map[string]string, d protocol.DeploymentFacts) error {
	s, err := parseSettings(opts)
	if err != nil {
		return err
	}
	if spread := 2 * d.MaxClockOffset; spread > s.maxOffset {
		return fmt.Errorf("protocol crdb: max-offset %v is below the %v two clocks may be apart (twice the simulated clocks' offset bound %v): its uncertainty interval would not cover them, and honest runs could read stale values; raise max-offset or lower --max-offset",
			s.maxOffset, spread, d.MaxClockOffset)
	}
	return nil
}

// ClockBound implements protocol.ClockBounded: max-offset is the most two clocks may be apart
// before an uncertainty interval misses a write and a read goes stale.
func (proto) ClockBound(opts map[string]string) time.Duration {
	s, err := parseSettings(opts)
	if err != nil {
		return 0
	}
	return s.maxOffset
}

// checkGCTTL refuses a gc-ttl below 2×max-offset.
//
// A leaseholder's GC horizon is its physical clock minus gc-ttl. A transaction's timestamps
// start at its gateway's HLC reading at begin, at least the gateway's clock, and never go
// lower: an uncertain value moves readTS up to it (to the top of the interval at most), a push
// or the timestamp cache moves writeTS up, and a refresh is refused only when its target, above
// readTS, is below the horizon. So uncertainty and pushes cost nothing here, and a transaction
// has gc-ttl, less however far its gateway's clock lags the leaseholder's, before everything it
// sends there is refused (cause too-old), however fast it runs. max-offset bounds that lag (the
// uncertainty interval is sized for clocks max-offset apart), but gc-ttl = max-offset is not
// enough: the most lagging gateway would start its transactions at the horizon, and every one
// that needs a message to that leaseholder would abort. 2×max-offset leaves it max-offset, the
// margin the uncertainty interval grants clock error; and if clocks are only within max-offset
// of true time, as recover assumes for the timestamp-cache floor (two of them then up to
// 2×max-offset apart), no transaction starts below a horizon.
func checkGCTTL(s settings, opts map[string]string) error {
	if s.gcTTL >= 2*s.maxOffset {
		return nil
	}
	const why = "a gateway whose clock lags by max-offset must leave its transactions max-offset before they fall below a leaseholder's GC horizon (cause too-old)"
	if _, set := opts[txnkit.GCTTLOption]; !set {
		// Only max-offset was given: name the option the user set.
		return &protocol.OptionError{Protocol: name, Key: "max-offset", Value: opts["max-offset"],
			Want: fmt.Sprintf("at most half of gc-ttl (default %v): %s", s.gcTTL, why)}
	}
	return &protocol.OptionError{Protocol: name, Key: txnkit.GCTTLOption, Value: opts[txnkit.GCTTLOption],
		Want: fmt.Sprintf("at least twice max-offset (%v): %s", s.maxOffset, why)}
}

func (proto) NewNode(cfg node.Config) (node.Handler, error) {
	s, err := parseSettings(cfg.Options)
	if err != nil {
		return nil, err
	}
	env := cfg.Env
	n := &Node{
		env:          env,
		tp:           env.Topology(),
		self:         env.Self(),
		set:          s,
		hlc:          clock.NewHLC(uint32(env.Self()) + 1),
		m:            protocol.NewMetrics(),
		lastReader:   map[string]readMark{},
		intentGen:    map[string]uint64{},
		rewritten:    map[string]bool{},
		blocked:      map[string][]*blockedOp{},
		scansWaiting: map[scanRef]bool{},
		aborted:      map[storage.TxnID]bool{},
		recState:     map[storage.TxnID]*recState{},
		txns:         map[txnkit.ClientTxn]*coordTxn{},
		byID:         map[storage.TxnID]*coordTxn{},
		pending:      map[uint64]*call{},
	}
	n.resNotes = txnkit.NewOutbox(env, func(txns []storage.TxnID) wire.Msg { return &Resolved{Txns: txns} })
	if err := n.recover(cfg.Durable); err != nil {
		return nil, fmt.Errorf("crdb: node %d: %w", n.self, err)
	}
	// The store exists now, with the horizon its previous life persisted (versiongc.go).
	n.vgc = txnkit.NewVersionGC(env, n.store, s.gcTTL, func() { n.flush(nil, nil) }, n.m)
	// Transaction ids are (node, incarnation, counter): records, intents, push floors and
	// timestamp-cache entries outlive the coordinator's memory, and an id of an earlier life
	// taken again would inherit them (a holder would apply the old record's decision to the new
	// transaction; a leaseholder would take the old transaction's read for the new one's own).
	// Numbering from the clock repeated ids after a restart whose clock read no later than the
	// last id handed out. No id is handed out before the incarnation is durable: a life that
	// crashed earlier leaves its number to the next.
	n.persistIncarnation()
	n.vgc.Kick() // a recovered store may hold garbage already
	n.armGCTick()
	return n, nil
}

type earlyMsg struct {
	from node.ID
	m    wire.Msg
}

// Node is one CockroachDB-style node: a gateway (transaction coordinator) for its region's
// clients, the leaseholder of its primary shards, and the holder of the transaction records
// anchored on those shards.
type Node struct {
	env  node.Env
	tp   *topo.Topology
	self topo.NodeID
	set  settings
	hlc  *clock.HLC
	m    *protocol.Metrics

	// Leaseholder state.
	store      *mvcc.Store
	vgc        *txnkit.VersionGC   // collects the versions no transaction young enough may read
	lastReader map[string]readMark // which transaction set each key's timestamp-cache entry
	intentGen  map[string]uint64   // persist generation of the latest write of the key's intent
	// rewritten marks keys whose intent replaced an earlier intent of the same transaction:
	// answers about it, a copy's included, wait until it is durable (evalWrite, writeDone).
	rewritten  map[string]bool
	issuedGen  uint64
	doneGen    uint64
	genWaiters []genWaiter // ascending gen
	writeGroup *writeGroup // set while an OpsReq is evaluated: its intents share one flush
	blocked    map[string][]*blockedOp
	// spanMarks are the timestamp-cache entries of scanned spans (scan.go), volatile like the
	// per-key ones: after a crash the read floor covers them. scansWaiting holds the scans
	// parked on an intent, so that a copy of one is dropped.
	spanMarks    txnkit.RangeMarks
	scansWaiting map[scanRef]bool
	aborted      map[storage.TxnID]bool // transactions whose intents were resolved as aborted here
	abortedLog   []storage.TxnID        // FIFO bound on aborted

	// Record holder state.
	recs     *txnrec.Table
	recState map[storage.TxnID]*recState
	gcWrites []node.Write // deletions of forgotten records' push floors, for the next flush
	// gcPending: a record was forgotten since the last flush, whose deletion is not on disk.
	gcPending bool
	// resNotes batches, per record holder, the commits whose resolution a flush made durable.
	resNotes *txnkit.Outbox[storage.TxnID]

	// Coordinator state.
	txns      map[txnkit.ClientTxn]*coordTxn
	byID      map[storage.TxnID]*coordTxn
	clientAge txnkit.RetryAges   // age (priority) an aborted client's retry takes (begin)
	ended     txnkit.EndedTxns   // each client's highest transaction that ended, against late copies
	inc       txnkit.Incarnation // this life's number, and its transaction ids
	ready     bool               // inc is durable: transaction ids may be handed out
	waiting   []queuedReq        // client requests that came before ready
	// started is set once this life's first incarnation write is durable; node-to-node
	// messages that came earlier wait in early (recover: a first life serves nothing before).
	started bool
	early   []earlyMsg

	pending map[uint64]*call // outstanding requests this node sent, by request id
	nextReq uint64
	// announced: this life has told its peers that it restarted (onRestarted).
	announced bool
}

// call is an outstanding request: where it went and what it said, so that it can be sent
// again if it goes unanswered for its retransmission timeout (retransmit) or its destination
// restarts before answering (onRestarted).
type call struct {
	to   topo.NodeID
	msg  wire.Msg
	then func(wire.Msg)
	sent int64         // local clock at the last sending
	rto  time.Duration // how long after sent it is sent again
	held bool          // not sent yet: made before the life's number was durable (sendHeld)
	// superseded: a newer request asks the same (a push sent again by its own timer), so this
	// one is no longer sent again by retransmit, though its answer is still taken.
	superseded bool
}

// Metrics implements protocol.MetricsSource.
func (n *Node) Metrics() *protocol.Metrics { return n.m }

// Durable key space of the protocol's own state (storage owns 'v', 't' and 'g').
const prefixPushFloor byte = 'p' // p | txn id -> timestamp the record was pushed to

// incarnationKey holds the number of the node's latest life (big-endian uint64).
var incarnationKey = []byte("crdb/incarnation")

// recover rebuilds the node's state from d and starts its next life (n.inc).
func (n *Node) recover(d node.Durable) error {
	opts := mvcc.Options{SingleIntent: true, ReadWatermarkLimit: 1 << 20}
	var err error
	if n.inc, err = txnkit.StartIncarnation(d, incarnationKey); err != nil {
		return err
	}
	if d == nil {
		n.store = mvcc.New(opts)
		n.recs = txnrec.New()
		return nil
	}
	st, err := mvcc.Recover(d, opts)
	if err != nil {
		return err
	}
	n.store = st
	// The timestamp cache was volatile: no write may land below a read served before the
	// crash. The last life served a read only at or below its clock + max-offset (Handle), and
	// that clock was at most max-offset ahead of ours now: the clocks are within max-offset of
	// each other, so one that steps back across a crash goes from the top of their band to the
	// bottom at most. CockroachDB does the same
	// with a new lease's start timestamp. A write pushed there has a timestamp no clock has
	// reached, which its gateway waits out before acknowledging the commit (committed). A first
	// life (no incarnation durable yet) served nothing before: it serves nothing until its
	// incarnation is durable (Handle), so it needs no floor, and a new cluster's commits no wait.
	if n.inc.N > 1 {
		n.store.RaiseReadFloor(ts.Timestamp{Wall: n.env.Now() + 2*int64(n.set.maxOffset)})
	}
	if n.recs, err = txnrec.Recover(d); err != nil {
		return err
	}
	now := n.env.Now()
	n.recs.Records(func(r txnrec.Record) bool {
		rs := &recState{lastHB: now, status: r.Status, nudged: now, written: true}
		if !r.Status.Final() && topo.NodeID(r.Txn.Coordinator()) == n.self {
			// Its coordinator was this node's earlier life, which crashed with everything it
			// kept of the transaction: no heartbeat, stage or commit of it can come any more
			// (a later request of it is refused: txnkit.AnswerUnheld), and whatever that life
			// sent itself was lost with it. Counted alive from now, the record kept every
			// request on the transaction's keys waiting a full expiry after the restart, on
			// top of the downtime (simulated crash runs with 400 ms flushes: two such holders
			// in a row on a hot key made a waiter's operation outlast the idle timeout,
			// coordinator-timeout). Silent since before the restart, a PENDING record is
			// aborted by the first push and a STAGING one recovered at once.
			rs.lastHB = now - int64(n.set.expiry) - 1
		}
		switch {
		case r.Status == txnrec.Staging:
			rs.stageTS = r.CommitTS
			rs.inFlight, err = decodeKeys(r.Meta)
		case r.Status == txnrec.Committed && len(r.Meta) > 0:
			// The leaseholders that must acknowledge its resolution before it may go.
			rs.inFlight, err = decodeKeys(r.Meta)
		case r.Status == txnrec.Committed:
			rs.keep = true // no key list: nothing says when its intents are all resolved
		}
		n.recState[r.Txn] = rs
		return err == nil
	})
	if err != nil {
		return err
	}
	if scanErr := d.Scan([]byte{prefixPushFloor}, []byte{prefixPushFloor + 1}, func(k, v []byte) bool {
		var txn storage.TxnID
		txn, err = storage.DecodeTxnID(k[1:])
		if err != nil {
			return false
		}
		var f ts.Timestamp
		if f, err = ts.Decode(v); err != nil {
			return false
		}
		n.rec(txn).floor = f
		return true
	}); scanErr != nil {
		return scanErr
	}
	if err != nil {
		return fmt.Errorf("bad push floor: %w", err)
	}
	return nil
}

// Handle implements node.Handler.
func (n *Node) Handle(from node.ID, m wire.Msg) {
	if _, client := m.(*wire.ClientRequest); !client && !n.started {
		// Served before the incarnation is durable, a read would be lost to a crash that left
		// none, and the next life, seeing no earlier one, would take no floor above it.
		n.early = append(n.early, earlyMsg{from, m})
		return
	}
	if at := readAt(m); !at.IsZero() {
		if wait := at.Wall - (n.env.Now() + int64(n.set.maxOffset)); wait > 0 {
			// The next life's read floor, its clock then + 2×max-offset, must lie above every
			// read served now, and its clock may then be max-offset behind ours now (a clock
			// stepped back across the crash). A read at or below some clock is at most
			// max-offset ahead of ours, and never waits here. Not every read is: a write pushed
			// to a restarted node's floor carries that floor into the HLCs of the nodes its
			// commit talks to, and on into their answers' clock readings, so a transaction
			// begun at a gateway that heard of it reads up to 2×max-offset ahead of the fastest
			// clock. Served at once by a node whose clock is behind, such a read was forgotten
			// by a crash right after, and a write landed under it: the reader saw one write of
			// a transaction and not the other (TestRestartFloorAboveFutureReads); so it was
			// when served up to our clock + 2×max-offset, by a clock stepped back before the
			// crash (its stepped-back case). Held until the clock is close enough; a crash
			// meanwhile loses it as any request, and its sender sends it again.
			n.m.Add("read/future-hold", 1)
			n.env.After(time.Duration(wait), func() { n.Handle(from, m) })
			return
		}
	}
	switch m := m.(type) {
	case *wire.ClientRequest:
		n.onClient(from, m)
	case *ReadReq:
		n.onRead(from, m)
	case *WriteReq:
		n.onWrite(from, m)
	case *OpsReq:
		n.onOps(from, m)
	case *RefreshReq:
		n.onRefresh(from, m)
	case *ScanReq:
		n.onScan(from, m)
	case *QueryIntentReq:
		n.onQueryIntent(from, m)
	case *ResolveReq:
		n.onResolve(from, m)
	case *PushReq:
		n.onPush(from, m)
	case *HeartbeatReq:
		n.onHeartbeat(from, m)
	case *EndTxnReq:
		n.onEndTxn(from, m)
	case *Resolved:
		n.onResolved(from, m)
	case *EndedQuery:
		n.onEndedQuery(from, m)
	case *Ended:
		n.onEnded(from, m)
	case *Restarted:
		n.onRestarted(from, m)
	case *HeartbeatResp:
		n.onHeartbeatResp(m)
	case *ReadResp:
		n.complete(m.Req, m.Clock, m)
	case *WriteResp:
		n.complete(m.Req, m.Clock, m)
	case *OpsResp:
		n.onOpsResp(m)
	case *RefreshResp:
		n.complete(m.Req, m.Clock, m)
	case *ScanResp:
		n.complete(m.Req, m.Clock, m)
	case *QueryIntentResp:
		n.complete(m.Req, m.Clock, m)
	case *PushResp:
		n.complete(m.Req, m.Clock, m)
	case *EndTxnResp:
		n.complete(m.Req, m.Clock, m)
	}
}

// readAt is the highest timestamp at which m would enter the timestamp cache (zero if none).
func readAt(m wire.Msg) ts.Timestamp {
	switch m := m.(type) {
	case *ReadReq:
		return m.ReadTS
	case *ScanReq:
		return m.ReadTS
	case *RefreshReq:
		return m.To
	case *QueryIntentReq:
		if m.Prevent {
			return m.TS
		}
	case *OpsReq:
		var at ts.Timestamp
		for _, op := range m.Ops {
			if op.Read != nil {
				at = ts.MaxOf(at, op.Read.ReadTS)
			}
		}
		return at
	}
	return ts.Zero
}

// observe merges a timestamp carried by a message into the HLC. The unchecked update is
// deliberate: a pushed write timestamp may be ahead of every physical clock, and CockroachDB
// too accepts such "synthetic" timestamps in its HLC.
func (n *Node) observe(t ts.Timestamp) {
	if !t.IsZero() {
		n.hlc.Update(n.env.Now(), t)
	}
}

func (n *Node) now() ts.Timestamp { return n.hlc.Now(n.env.Now()) }

// floorAbove is the read floor when it lies above the clock's last reading, else zero: what a
// read's reply carries in Floor (ReadResp.Floor).
func (n *Node) floorAbove() ts.Timestamp {
	if f := n.store.ReadFloor(); n.hlc.Last().Less(f) {
		return f
	}
	return ts.Zero
}

// call sends a request and registers what to do with its answer.
func (n *Node) call(to topo.NodeID, build func(req uint64) wire.Msg, then func(wire.Msg)) uint64 {
	return n.callVia(nil, to, build, then)
}

// callVia is call, except that with an outbox the request waits there to travel with the
// other requests for the same node.
//
// Request ids carry the life's number in their top 16 bits (txnkit.MaxIncarnation), and a life
// sends no request before its number is durable (sendHeld): an answer to a request of an earlier
// life, which a peer sends to the node's new life (a read that waited on an intent until after
// the restart), must not be taken for the answer to a request of this one. Counting from 1 in
// every life, such an answer completed whatever request of the new life had the same id: a
// read's value was taken for another read's (TestStaleAnswerAfterRestart), a push's outcome
// applied to another transaction, a ReadResp handed to a refresh crashed the node. A life that
// crashes before its number is durable leaves it to the next, but it sent nothing under it.
func (n *Node) callVia(ob *outbox, to topo.NodeID, build func(req uint64) wire.Msg, then func(wire.Msg)) uint64 {
	n.nextReq++
	id := n.inc.N<<48 | n.nextReq
	m := build(id)
	c := &call{to: to, msg: m, then: then, sent: n.env.Now(), rto: n.rto(to)}
	n.pending[id] = c
	switch {
	case !n.ready:
		c.held = true
	case ob == nil:
		n.env.Send(to, m)
	default:
		ob.add(to, m)
	}
	return id
}

// sendHeld sends, in request order, the requests made before this life's number was durable.
func (n *Node) sendHeld() {
	var ids []uint64
	for id, c := range n.pending {
		if c.held {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids) // map order must not decide the sending order
	for _, id := range ids {
		c := n.pending[id]
		c.held = false
		n.resend(c, c.rto)
	}
}

func (n *Node) complete(req uint64, clk ts.Timestamp, m wire.Msg) {
	n.observe(clk)
	c, ok := n.pending[req]
	if !ok {
		return // a late answer to a request given up on
	}
	if m.Kind() != c.msg.Kind()+1 {
		return // not an answer to that request (each request kind is answered by the next kind)
	}
	delete(n.pending, req)
	c.then(m)
}

// announceRestart tells every other data node that this node restarted, once per life after
// the first. Nothing else would: a request lost with the previous life (or dropped while the
// node was down) was awaited until its transaction's idle timeout (5 s), its intents blocking
// every transaction behind them all the while (onRestarted).
func (n *Node) announceRestart() {
	if n.announced || n.inc.N <= 1 {
		return
	}
	n.announced = true
	for id := range n.tp.Nodes {
		if to := topo.NodeID(id); to != n.self && n.isDataNode(to) {
			n.env.Send(to, &Restarted{Life: n.inc.N})
		}
	}
}

// onRestarted sends again every request still awaiting an answer from a node that restarted:
// its previous life lost what it had not answered, and requests that arrived while it was down
// were dropped. CockroachDB's DistSender retries on the broken connection in the same way, once
// the range is back. Links are FIFO, so every answer of the previous life came before the
// notice; a request still unanswered either is lost or reached the new life, and evaluating it
// twice is harmless: reads, refreshes and intent queries change nothing the first evaluation
// did not, a write that laid its intent is answered from it (writeDone), staging again stages
// the same record, and the first answer wins (complete drops the second).
func (n *Node) onRestarted(from topo.NodeID, m *Restarted) {
	n.expireDeadLives(from, m.Life)
	var ids []uint64
	for id, c := range n.pending {
		if c.to == from && !c.held {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids) // map order must not decide the sending order
	for _, id := range ids {
		n.m.Add("rpc/resent", 1)
		n.resend(n.pending[id], n.rto(from))
	}
}

// expireDeadLives counts as silent since before now every undecided record held here whose
// coordinator was an earlier life of node from, which restarted as its life-th: that life
// crashed with everything it kept of its transactions, so no heartbeat, stage or commit of them
// can come. Counted alive until their expiry ran out, their records kept every request on
// their keys waiting up to a further second after the coordinator was back (the restarted
// node's own records are expired as it recovers, recover). The next push aborts a PENDING one
// and recovers a STAGING one.
func (n *Node) expireDeadLives(from topo.NodeID, life uint64) {
	silent := n.env.Now() - int64(n.set.expiry) - 1
	for txn, rs := range n.recState {
		if !rs.status.Final() && topo.NodeID(txn.Coordinator()) == from && txnkit.LifeOf(txn) < life && rs.lastHB > silent {
			n.m.Add("record/coordinator-restarted", 1)
			rs.lastHB = silent
		}
	}
}

// rto is how long a request to node to may go unanswered before it is sent again: RFC 6298's
// retransmission timeout after one round-trip sample R, SRTT + max(G, 4·RTTVAR) with SRTT = R
// and RTTVAR = R/2, that is R + max(G, 2R). R is the topology's round trip to that node, which
// is all a node knows of it before an answer; G, the granularity of the clock that checks, is
// the heartbeat interval, since retransmit runs from the heartbeat tick (gcTick). A request
// answered without waiting on anything but the network, a CPU and a disk is answered well
// within it, so on a network that loses nothing only a request that waits on another
// transaction's intent (or a push waiting for a decision) is ever sent again.
func (n *Node) rto(to topo.NodeID) time.Duration {
	rtt := 2 * n.tp.OneWay(n.tp.RegionOf(n.self), n.tp.RegionOf(to))
	return rtt + max(n.set.heartbeat, 2*rtt)
}

// retransmit sends again, in request order, every request to another node unanswered for its
// retransmission timeout, and doubles that timeout (RFC 6298's back-off) up to the record
// expiry. The network may lose a request or its answer (the node contract), and nothing else
// sent it again: a transaction whose request or answer was lost waited for its idle timeout
// (5 s), its intents and live record blocking every transaction behind them on its keys (list-
// append under 2% loss: 11 commits in 5 s for 234 without), and a lost push or recovery query
// cost an expiry. A request sent again is evaluated again or found still waiting (onRead,
// onWrite, onOps), and evaluating one twice is harmless (onRestarted says why); the first answer
// wins. Requests to this node itself never cross the network and are not sent again.
//
// Nothing is armed for this (the heartbeat tick runs anyway), so a network that loses nothing
// sees no timer or CPU cost of it, but a request may wait at its leaseholder on another
// transaction's intent for longer than its timeout, and a sender cannot tell that from a loss:
// such requests are sent again on any network, and runs where they occur change (about one
// message in a hundred under list-append's contention). The back-off bounds what one costs: a
// message per doubling, then one per expiry, a fifth of what the wait costs in pushes already
// (a waiting request pushes every poll period, a heartbeat interval).
func (n *Node) retransmit() {
	now := n.env.Now()
	var due []uint64
	for id, c := range n.pending {
		if c.to != n.self && !c.held && !c.superseded && now-c.sent >= int64(c.rto) {
			due = append(due, id)
		}
	}
	slices.Sort(due) // map order must not decide the sending order
	for _, id := range due {
		c := n.pending[id]
		n.m.Add("rpc/retransmitted", 1)
		n.resend(c, min(2*c.rto, max(n.set.expiry, c.rto)))
	}
}

// resend sends c's request again and waits rto before the next.
func (n *Node) resend(c *call, rto time.Duration) {
	c.sent, c.rto = n.env.Now(), rto
	n.env.Send(c.to, c.msg)
}

// flush persists everything the store and the record table recorded, plus extra, and returns
// the batch's generation; done runs once it is durable.
func (n *Node) flush(extra []node.Write, done func()) uint64 {
	batch := append(n.store.TakeWrites(), n.recs.TakeWrites()...)
	batch = append(append(batch, n.gcWrites...), extra...)
	n.gcWrites, n.gcPending = nil, false
	n.issuedGen++
	gen := n.issuedGen
	n.env.Persist(batch, func() {
		n.doneGen = gen
		if done != nil {
			done()
		}
		for len(n.genWaiters) > 0 && n.genWaiters[0].gen <= gen {
			w := n.genWaiters[0]
			n.genWaiters = n.genWaiters[1:]
			w.fn()
		}
	})
	n.vgc.Kick() // the versions this batch decided may leave garbage for a later pass
	return gen
}

type genWaiter struct {
	gen uint64
	fn  func()
}

// afterGen runs fn once persist generation gen is durable.
func (n *Node) afterGen(gen uint64, fn func()) {
	if gen <= n.doneGen {
		fn()
		return
	}
	n.genWaiters = append(n.genWaiters, genWaiter{gen, fn})
}

// older reports whether transaction a has priority over b: the earlier first-attempt begin
// timestamp, ties broken by id.
func older(aAge ts.Timestamp, a storage.TxnID, bAge ts.Timestamp, b storage.TxnID) bool {
	if c := aAge.Compare(bAge); c != 0 {
		return c < 0
	}
	return a < b
}

// Intent metadata: what a pusher needs, kept with the intent so it survives restarts, and the
// request id of the write that laid it (intentReq).
func encodeIntentMeta(t TxnMeta, req uint64) []byte {
	b := binary.AppendVarint(nil, int64(t.RecordNode))
	return binary.AppendUvarint(t.Age.Encode(b), req)
}

func decodeIntentMeta(b []byte) (topo.NodeID, ts.Timestamp) {
	rn, w := binary.Varint(b)
	if w <= 0 {
		return -1, ts.Zero
	}
	age, err := ts.Decode(b[w:])
	if err != nil {
		return topo.NodeID(rn), ts.Zero
	}
	return topo.NodeID(rn), age
}

// intentReq returns the request id of the write that laid an intent with metadata b: a
// transaction's coordinator numbers its requests increasingly (one life per transaction id),
// so a write numbered at or below it was evaluated here already. 0 if the metadata predates it.
func intentReq(b []byte) uint64 {
	_, w := binary.Varint(b)
	if w <= 0 || len(b) < w+ts.EncodedLen {
		return 0
	}
	req, w2 := binary.Uvarint(b[w+ts.EncodedLen:])
	if w2 <= 0 {
		return 0
	}
	return req
}

func encodeKeys(keys []string) []byte {
	b := binary.AppendUvarint(nil, uint64(len(keys)))
	for _, k := range keys {
		b = binary.AppendUvarint(b, uint64(len(k)))
		b = append(b, k...)
	}
	return b
}

func decodeKeys(b []byte) ([]string, error) {
	cnt, w := binary.Uvarint(b)
	if w <= 0 || cnt > math.MaxInt32 {
		return nil, fmt.Errorf("crdb: bad in-flight write list")
	}
	b = b[w:]
	out := make([]string, 0, min(cnt, 1024))
	for i := uint64(0); i < cnt; i++ {
		l, w := binary.Uvarint(b)
		if w <= 0 || l > uint64(len(b)-w) {
			return nil, fmt.Errorf("crdb: bad in-flight write list")
		}
		out = append(out, string(b[w:w+int(l)]))
		b = b[w+int(l):]
	}
	return out, nil
}

// Preload implements protocol.Preloader: rows become committed versions older than every
// timestamp.
func (n *Node) Preload(rows []wire.KV) error {
	n.store.Reserve(len(rows))
	for _, r := range rows {
		if err := n.store.Preload(r.Key, r.Value); err != nil {
			return err
		}
	}
	// Rows installed again under a restarted node's recovered versions are garbage.
	n.vgc.Kick()
	return nil
}
