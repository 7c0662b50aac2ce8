package k2

import (
	"fmt"
	"strconv"
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

func init() { protocol.Register(proto{}) }

type proto struct{}

func (proto) Name() string  { return "k2" }
func (proto) Model() string { return "strict-serializable" }

// SerializesByCommitTimestamp implements protocol.TimestampOrdered.
func (proto) SerializesByCommitTimestamp() {}

func (proto) Options() map[string]string {
	return map[string]string{
		"ttl":                "K2-TB batch life and span, counted from the request's send (default 500µs, or 2.5 times the round trip inside a region where that is longer; must exceed the oracle round trip)",
		"step":               "K2-TB TBNanoSecStep, gap between a batch's timestamps (default 10ns)",
		"epsilon":            "declared TrueTime uncertainty ε of the oracles (default: the runtime's TrueTime half-width, else 100µs)",
		"max-drift":          "declared maximum clock drift D (default 200e-6)",
		"ts-batching":        "on: K2-TB batches; off: the strawman, one oracle request per transaction (default on)",
		"ro-commit-wait":     "read-only transactions also wait out the commit wait before answering (default on)",
		"mv-reads":           "off: ablation, readers block on any write stream of the key (default on)",
		"read-mark":          "when a read raises its key's read watermark: arrival (before it may wait on PUSHWS) or value (once it takes its value, so a write below it can still land while it waits) (default value)",
		"mv-writes":          "off: ablation, at most one write intent per key; a second writer aborts (default on)",
		"async-finalize":     "off: ablation, intents are finalized before the client hears the commit (default on)",
		"write-pipelining":   "on: a write is acknowledged once its intent is in memory, and commit first waits until every write is durable (the paper's two flushes per commit); off: each write is acknowledged only once durable (default on)",
		"lease":              "a recorder aborts an undecided transaction whose coordinator is silent this long (default 1s)",
		"op-timeout":         "a coordinator gives up on a read or write after this long and aborts (default 2s); a data node that restarts says so, and an operation its crash lost aborts at once (op-lost), but one out at a node that stays down or is cut off costs the whole op-timeout: nothing guesses that a silent node is dead",
		"idle-timeout":       "a coordinator aborts a transaction whose client sends nothing for this long (default 5s)",
		"read-block-timeout": "with mv-reads=off, a read blocked on a higher-timestamp intent aborts after this long (default 100ms)",
		txnkit.GCTTLOption:   "a data node keeps superseded versions this long, and refuses a transaction older than that (cause too-old) (default 10s)",
		"mutant":             "break a rule on purpose so checkers can be shown to catch it: no-commit-wait (on k2-5region seen only with a skewed clock, sim --clock-skew; with honest clocks on one datacenter of fast nodes: see sim --help), ttl-wrong-drift (its error, drift times TTL, is below what a history shows: internal/clock's K2-TB scenario tests catch it), no-scan-watermark (scans leave no range watermark: phantoms), early-commit (a recorder answers a commit before it is durable: a crash then loses acknowledged commits)",
	}
}

// Layout keeps the caller's layout: K2-VCR's replicas are not implemented, so only primaries
// matter.
func (proto) Layout(l topo.Layout) topo.Layout { return l }

// config is the parsed options.
type config struct {
	ttl, step        time.Duration
	epsilon          time.Duration
	maxDrift         float64
	batching         bool
	roCommitWait     bool
	mvReads          bool
	mvWrites         bool
	markAtValue      bool // read-mark=value: a read raises its key's watermark when it takes its value
	asyncFinalize    bool
	pipelineWrites   bool
	lease            time.Duration
	opTimeout        time.Duration
	idleTimeout      time.Duration
	readBlockTimeout time.Duration
	gcTTL            time.Duration
	mutation         clock.BatcherMutation
	noScanWatermark  bool // mutant: scans leave no range watermark, so phantoms can appear
	earlyCommit      bool // mutant: a recorder answers a commit before the decision is durable
	// forgetAtDecision breaks record garbage collection on purpose (tests only, no option):
	// a record is forgotten as soon as its decision is durable, before the participants
	// acknowledge, so a late PUSHWS finds the transaction unknown.
	forgetAtDecision bool
}

// CheckOptionValues implements protocol.OptionChecker.
func (proto) CheckOptionValues(m map[string]string) error {
	c, err := parseConfig(clock.K2TrueTime.Epsilon, 0, m)
	if err != nil {
		return err
	}
	if err := c.batcherConfig(0).Validate(); err != nil {
		return fmt.Errorf("protocol k2: %w", err)
	}
	return nil
}

// CheckDeployment implements protocol.DeploymentChecker: a batch lives ttl from the request's
// send, so a ttl no longer than the request's round trip and the oracle's service time has every
// batch arrive expired, and no transaction ever starts (the run reports 0 txn/s, not why).
//
// It also refuses a declared epsilon or max-drift below the deployment's own bounds. K2's proof
// takes both on trust: an oracle's reading within epsilon of true time, and local clocks, on
// which commit waits and batch lives are measured, drifting no faster than max-drift. Declared
// below what the clocks do, honest runs could break strict serializability, and nothing would
// say why. Clocks moved past the bounds on purpose (sim --clock-skew, --random-skews) are how the
// mutants are caught, and stay allowed.
func (proto) CheckDeployment(m map[string]string, d protocol.DeploymentFacts) error {
	eps := d.Epsilon
	if eps <= 0 {
		eps = clock.K2TrueTime.Epsilon
	}
	c, err := parseConfig(eps, d.IntraRTT, m)
	if err != nil {
		return err
	}
	if fetch := d.IntraRTT + d.OracleServiceTime; c.batching && c.ttl <= fetch {
		return fmt.Errorf("protocol k2: ttl %v does not outlast a timestamp request to the region's oracle (%v round trip + %v service): every batch would arrive expired; raise ttl", c.ttl, d.IntraRTT, d.OracleServiceTime)
	}
	// Jitter adds up to twice its bound to a request's round trip, its mean once: a ttl below
	// that has most batches arrive expired (at 2 ms of jitter on a 0.2 ms round trip, with the
	// default 500µs, no transaction ever started).
	if fetch := d.IntraRTT + d.OracleServiceTime + d.Jitter; c.batching && d.Jitter > 0 && c.ttl <= fetch {
		return fmt.Errorf("protocol k2: ttl %v does not outlast a timestamp request to the region's oracle with its jitter (%v round trip + %v service + %v, the mean jitter of request and reply): most batches would arrive expired; raise ttl (--opt ttl=) above %v", c.ttl, d.IntraRTT, d.OracleServiceTime, d.Jitter, fetch+d.Jitter)
	}
	if c.epsilon < d.Epsilon {
		return fmt.Errorf("protocol k2: epsilon %v is below the oracles' TrueTime uncertainty %v (--epsilon): a reading could stray further from true time than k2 assumes, and honest runs could break strict serializability; raise it (--opt epsilon=%v) or lower --epsilon", c.epsilon, d.Epsilon, d.Epsilon)
	}
	if c.maxDrift < d.MaxDrift {
		return fmt.Errorf("protocol k2: max-drift %g is below the local clocks' drift bound %g (--max-drift): commit waits and batch lives measured on them could fall short, and honest runs could break strict serializability; raise it (--opt max-drift=%g) or lower --max-drift", c.maxDrift, d.MaxDrift, d.MaxDrift)
	}
	return nil
}

// defaultTTL is K2-TB's batch life where the "ttl" option does not set it: 500µs, or 2.5 times
// the round trip to the region's oracle where that is longer, the ratio of 500µs to the
// 0.2 ms of K2's Table 1. A batch lives ttl from the request's send, so a fixed 500µs had every
// batch arrive expired inside a region whose round trip is 0.7 ms (Wren's data centers).
func defaultTTL(intraRTT time.Duration) time.Duration {
	return max(500*time.Microsecond, intraRTT*5/2)
}

// parseConfig reads the options; eps is ε where the "epsilon" option does not set it, and
// intraRTT the round trip inside a region (0 if unknown), from which ttl's default follows.
func parseConfig(eps, intraRTT time.Duration, m map[string]string) (config, error) {
	o := txnkit.Options{Protocol: "k2", M: m}
	c := config{
		ttl:              o.Duration("ttl", defaultTTL(intraRTT)),
		step:             o.Duration("step", 10*time.Nanosecond),
		epsilon:          o.Duration("epsilon", eps),
		batching:         o.Bool("ts-batching", true),
		roCommitWait:     o.Bool("ro-commit-wait", true),
		mvReads:          o.Bool("mv-reads", true),
		mvWrites:         o.Bool("mv-writes", true),
		markAtValue:      o.Enum("read-mark", "value", "arrival", "value") == "value",
		asyncFinalize:    o.Bool("async-finalize", true),
		pipelineWrites:   o.Bool("write-pipelining", true),
		lease:            o.Duration("lease", time.Second),
		opTimeout:        o.Duration("op-timeout", 2*time.Second),
		idleTimeout:      o.Duration("idle-timeout", 5*time.Second),
		readBlockTimeout: o.Duration("read-block-timeout", 100*time.Millisecond),
		gcTTL:            o.GCTTL(),
		maxDrift:         clock.K2TrueTime.MaxDrift,
	}
	switch o.Enum("mutant", "", "", "no-commit-wait", "ttl-wrong-drift", "no-scan-watermark", "early-commit") {
	case "no-scan-watermark":
		c.noScanWatermark = true
	case "early-commit":
		c.earlyCommit = true
	case "no-commit-wait":
		c.mutation = clock.MutationNoCommitWait
	case "ttl-wrong-drift":
		c.mutation = clock.MutationTTLWrongDrift
	}
	if v, ok := m["max-drift"]; ok {
		d, err := strconv.ParseFloat(v, 64)
		// Written so that NaN, which fails every comparison, fails the range too: d < 0 ||
		// d > 0.01 let it through to the clock, which refused it with another bound.
		if err != nil || !(d >= 0 && d <= 0.01) {
			return c, &protocol.OptionError{Protocol: "k2", Key: "max-drift", Value: v, Want: "a rate in [0, 0.01] such as 200e-6"}
		}
		c.maxDrift = d
	}
	if o.Err != nil {
		return c, o.Err
	}
	for _, d := range []struct {
		key string
		v   time.Duration
	}{{"ttl", c.ttl}, {"step", c.step}, {"lease", c.lease}, {"op-timeout", c.opTimeout}, {"idle-timeout", c.idleTimeout}, {"read-block-timeout", c.readBlockTimeout}} {
		if d.v <= 0 {
			return c, &protocol.OptionError{Protocol: "k2", Key: d.key, Value: m[d.key], Want: "a positive duration"}
		}
	}
	// A batch's timestamps are step apart within its ttl (the batcher refuses a step above it,
	// in its own terms): name the option given.
	if c.step > c.ttl {
		if _, set := m["step"]; set {
			return c, &protocol.OptionError{Protocol: "k2", Key: "step", Value: m["step"], Want: fmt.Sprintf("a duration no longer than ttl (%v)", c.ttl)}
		}
		return c, &protocol.OptionError{Protocol: "k2", Key: "ttl", Value: m["ttl"], Want: fmt.Sprintf("a duration no shorter than step (%v)", c.step)}
	}
	return c, nil
}

func (c config) batcherConfig(issuer uint32) clock.BatcherConfig {
	return clock.BatcherConfig{TTL: c.ttl, Step: c.step, Epsilon: c.epsilon, MaxDrift: c.maxDrift,
		CoordinatorID: issuer, Batching: c.batching, Mutation: c.mutation}
}

// issuerID is the Origin of the timestamps a coordinator hands out in its life number life: each
// life is an issuer of its own. One life's timestamps strictly increase, but a restarted
// coordinator starts that count afresh, and the oracle it then asks (another one after a
// failover, or one whose clock stepped back within ε) may read below what it read for the earlier
// life, so a new timestamp could repeat an old one exactly. Two transactions at one timestamp
// would each see the other's writes (a reader at t sees versions at t), which no serial order
// allows. The node id stays in the high bits, so timestamps tied on (Wall, Logical) keep ordering
// by node as before; a life's number is below txnkit.MaxIncarnation (2^16), and node ids fit 16
// bits too (storage.TxnID), so the pair fits Origin's 32 bits and never wraps.
func issuerID(self topo.NodeID, life uint64) uint32 {
	return uint32(self)<<16 | uint32(life)
}

func (proto) NewNode(cfg node.Config) (node.Handler, error) {
	env := cfg.Env
	eps := time.Duration(env.TrueTime().Width() / 2)
	if eps <= 0 {
		eps = clock.K2TrueTime.Epsilon
	}
	c, err := parseConfig(eps, env.Topology().IntraRTT, cfg.Options)
	if err != nil {
		return nil, err
	}
	self := env.Self()
	tp := env.Topology()
	roles := tp.Nodes[self].Roles
	if roles&topo.RoleData == 0 {
		if roles&topo.RoleOracle != 0 {
			return clock.NewOracleHandler(env, clock.Oracle{ID: uint32(self), Epsilon: c.epsilon}), nil
		}
		return nil, fmt.Errorf("k2: node %d has neither the data nor the oracle role", self)
	}
	return newNode(env, cfg.Durable, c)
}

// Durable key of the node's incarnation counter. The first byte must differ from the storage
// engine's prefixes ('v', 't').
var incarnationKey = []byte("k2/incarnation")

// A request id is (number, counter): reqSeqBits low bits count the requests minted under a
// number taken from the incarnation record. Replies are matched to requests by id alone, so an
// id must never name two requests that can both be answered: a data node may answer a request
// of an earlier life after the restart (a read parked on PUSHWS across the crash), and an
// oracle may answer an earlier life's timestamp request. Ids therefore carry a number the
// incarnation record holds durably, which every later life starts above (txnkit.Incarnation),
// and the counter never runs into the next number: at reqRenewAt the coordinator takes a new
// one (txnkit's Renew, durable before it is used, as for transaction ids) and, should the
// counter still reach its end before that is durable, refuses to mint (cause reqIDsSpent)
// rather than count on into ids a later life will mint too.
const (
	reqSeqBits = 40
	reqSeqMask = 1<<reqSeqBits - 1
	// reqRenewAt leaves half the counter for the requests minted while the renewal flushes:
	// transactions already running go on sending.
	reqRenewAt = 1 << (reqSeqBits - 1)
)

// reqIDsSpent is the abort cause of a transaction that needed a request id when its number had
// none left and the next was not yet durable.
const reqIDsSpent = "request-ids-spent"

// causeClientAbort is the abort cause of a request in flight whose client aborted the
// transaction meanwhile (onClient).
const causeClientAbort = "client-abort"

// recoverReqID marks the oracle requests a restarted data node makes to raise its read floor,
// above the Batcher's ids (whose numbers stay below 2^16, so below 2^56). The low bits carry the
// life's number: an answer to an earlier life's request, held up on the way (a slow link, resent
// requests) and arriving after a later crash, was read before that life served its readers, so
// it bounds none of their timestamps. A life that crashed before its number was durable served
// nothing, so the next life, which takes the same number, may use its answers.
const recoverReqID = 1 << 63

// Node is a K2 data node: coordinator of its clients' transactions, primary of its shards, and
// recorder of the transactions whose first write it received.
type Node struct {
	env  node.Env
	self topo.NodeID
	tp   *topo.Topology
	cfg  config
	m    *protocol.Metrics

	// Coordinator.
	batcher *clock.Batcher
	oracle  topo.NodeID
	inc     txnkit.Incarnation // this life's number (inc.N), and its transaction ids
	ready   bool               // the incarnation is durable: transaction ids may be handed out
	// idsNum is the number inc's transaction ids carry now: inc.N plus one per Renew. Request
	// ids take it once it is durable.
	idsNum uint64
	// reqSeq is the last request id minted, oracleSeq the last oracle request's (the Batcher
	// numbers them; k2 keeps count to know when its counter runs low). Both carry the same
	// number in their high bits.
	reqSeq, oracleSeq uint64

	txns  map[txnkit.ClientTxn]*ctxn
	ended txnkit.EndedTxns        // each client's highest transaction that ended, against late copies
	byID  map[storage.TxnID]*ctxn // transactions that hold an id, for WriteDurable
	byReq map[uint64]*ctxn        // commit and finalization requests out
	// busy are the transactions with operations out (flightOf), ascending by their first
	// operation's request id.
	busy    []*ctxn
	tsQueue []*ctxn
	// tsMisses counts the times K2-TB had no timestamp for the head of tsQueue (see ctxn.tsMissesBefore).
	tsMisses int64
	tsTimer  bool
	// probes holds the OpsProbe out at each data node that said it restarted, until answered
	// (at most one per node: a later notice replaces it).
	probes map[topo.NodeID]outProbe
	// lossProbes are the OpsProbes out about operations that may be lost, by request id
	// (lostops.go).
	lossProbes map[uint64]lossProbe
	// lossProbeOrder holds the request ids of lossProbes in the order they were sent, answered
	// ones included, so that expiry looks at the oldest only: scanning the whole map at every
	// probe cost 9% of a run's CPU with 20,000 clients per coordinator.
	lossProbeOrder []uint64

	// Data node and recorder.
	store  *mvcc.Store
	vgc    *txnkit.VersionGC // removes the versions no transaction young enough may read
	recs   *txnrec.Table
	leases map[storage.TxnID]int64 // undecided records: local time their coordinator was last heard of
	// gc holds the decided records not forgotten yet, and what each still waits for (gc.go).
	gc map[storage.TxnID]*gcRec
	// finNotes batches, per recorder, the commits whose finalization a flush made durable.
	finNotes *txnkit.Outbox[storage.TxnID]
	pushes   map[storage.TxnID]*push
	// unflushed holds the pipelined writes acknowledged but not yet durable: the write
	// sequence number of the latest such write of a transaction on a key. It is volatile on
	// purpose: after a restart every intent in the store came from disk.
	unflushed  map[intentRef]uint32
	durWaiters map[storage.TxnID]durWaiter // durability questions waiting for a flush
	// durNotes batches the durability reports of one flush per coordinator.
	durNotes *txnkit.Outbox[DurableNote]
	// waitedReads is, per key, the newest timestamp of a read that waited by PUSHWS behind a
	// write stream (whether it still waits or has taken its value since): a diagnostic, so
	// that the writes refused at its watermark can be counted apart
	// (write-refused.read-watermark/waiting-reader, "a reader that had waited"). It holds one
	// timestamp per key that ever had such a read, and is volatile.
	waitedReads map[string]ts.Timestamp
	recovering  bool   // waiting for the oracle before serving reads and writes (read floor)
	recoverID   uint64 // id of this life's read-floor requests to the oracle (recoverReqID)
	held        []heldMsg
	// serving holds the reads and writes received and not answered yet because they wait (a
	// read parked on PUSHWS, a write waiting for its flush, an OpsReq's answers held for its
	// last operation), so that an OpsProbe hears they are still here. It is volatile on
	// purpose: what a crash lost, a probe must hear is missing.
	serving map[opRef]struct{}
	labels  []string // the labels phases are kept under (metricLabel), in the order first seen
	// scanMarks are the read watermarks of scanned ranges (scan.go), volatile like the
	// per-key ones: after a crash the recovery read floor covers them.
	scanMarks txnkit.RangeMarks
}

// outProbe is an OpsProbe out at a restarted data node: its request id and the operations it
// names, ascending.
type outProbe struct {
	id  uint64
	ops []uint64
}

// opRef names an operation a coordinator sent to this node.
type opRef struct {
	from topo.NodeID
	id   uint64
}

type heldMsg struct {
	from topo.NodeID
	m    wire.Msg
}

func newNode(env node.Env, d node.Durable, c config) (*Node, error) {
	self := env.Self()
	tp := env.Topology()
	n := &Node{env: env, self: self, tp: tp, cfg: c, m: protocol.NewMetrics(),
		oracle: tp.Oracle(tp.RegionOf(self)),
		txns:   map[txnkit.ClientTxn]*ctxn{}, byReq: map[uint64]*ctxn{}, byID: map[storage.TxnID]*ctxn{}, probes: map[topo.NodeID]outProbe{}, lossProbes: map[uint64]lossProbe{},
		leases: map[storage.TxnID]int64{}, gc: map[storage.TxnID]*gcRec{}, pushes: map[storage.TxnID]*push{}, unflushed: map[intentRef]uint32{}, durWaiters: map[storage.TxnID]durWaiter{},
		waitedReads: map[string]ts.Timestamp{}, serving: map[opRef]struct{}{}}
	n.finNotes = txnkit.NewOutbox(env, func(txns []storage.TxnID) wire.Msg { return &Finalized{Txns: txns} })
	n.durNotes = txnkit.NewOutbox(env, func(notes []DurableNote) wire.Msg { return &DurableNotes{Inc: n.inc.N, Notes: notes} })
	if n.oracle < 0 {
		return nil, fmt.Errorf("k2: region of node %d has no oracle (use a layout with OraclePerRegion)", self)
	}
	var err error
	n.store, err = mvcc.Recover(d, mvcc.Options{SingleIntent: !c.mvWrites, ReadWatermarkLimit: 1 << 20})
	if err != nil {
		return nil, fmt.Errorf("k2: node %d: %w", self, err)
	}
	n.vgc = txnkit.NewVersionGC(env, n.store, c.gcTTL, func() { n.persist(n.dataWrites(), nil) }, n.m)
	n.recs, err = txnrec.Recover(d)
	if err != nil {
		return nil, fmt.Errorf("k2: node %d: %w", self, err)
	}
	// Transaction ids are (node, incarnation, counter): a restarted coordinator must never reuse
	// an id a transaction of its previous life may still hold in some write stream.
	n.inc, err = txnkit.StartIncarnation(d, incarnationKey)
	if err != nil {
		return nil, fmt.Errorf("k2: node %d: %w", self, err)
	}
	n.batcher, err = clock.NewBatcher(c.batcherConfig(issuerID(self, n.inc.N)))
	if err != nil {
		return nil, fmt.Errorf("k2: %w", err)
	}
	// Request ids, too, are numbered per life (reqSeqBits says why). None is minted before the
	// incarnation is durable: a coordinator has no operation out before it hands out a
	// transaction id, and asks its oracle only then.
	n.idsNum = n.inc.N
	n.reqSeq = n.inc.N << reqSeqBits
	n.oracleSeq = n.reqSeq
	n.batcher.NumberRequestsFrom(n.oracleSeq)
	now := env.Elapsed()
	n.recs.Records(func(r txnrec.Record) bool {
		if !r.Status.Final() {
			// Its coordinator gets one lease from our restart to show it is alive, unless it
			// was this node's earlier life, which crashed with everything it kept of the
			// transaction: nothing more can come from it (this life has minted no id yet, and
			// mints none of that life's), so the lease is out and the first tick aborts it.
			// Leased from now, its PUSHWS readers waited a full lease after the restart.
			n.leases[r.Txn] = now
			if topo.NodeID(r.Txn.Coordinator()) == self {
				n.leases[r.Txn] = now - int64(c.lease) - 1
			}
			return true
		}
		// Decided and not forgotten: who acknowledged, and which coordinators said they
		// ended it, died with the previous life; a lease from now it is followed up.
		n.trackDecided(r.Txn, r, false)
		return true
	})
	n.recoverID = recoverReqID | n.inc.N
	if n.inc.N > 1 { // a restart
		// Read watermarks are not persisted; until a fresh oracle reading bounds every timestamp
		// a pre-crash reader could have used, no read or write is served (notes/k2.md §3.5).
		n.recovering = true
		n.askRecoverFloor()
		n.announceRestart()
	}
	n.persistIncarnation()
	// A recovered store may hold garbage already, and nothing else arms the collector until
	// the next write: the incarnation's persist and an idle tick's empty one do not.
	n.vgc.Kick()
	n.armTick()
	return n, nil
}

// persistIncarnation makes n.inc durable, at a start or after a Renew, and until then hands out
// no transaction id and serves no read or write.
func (n *Node) persistIncarnation() {
	n.ready = false
	num := n.idsNum
	n.env.Persist([]node.Write{n.inc.Write()}, func() {
		n.ready = true
		if num > n.reqSeq>>reqSeqBits {
			// Durable now, so every later life starts above it: request ids may carry it.
			// Requests out under the earlier number keep their ids, all below these. Request
			// ids must never move back: a coordinator's busy transactions are kept in order
			// of their first id and searched (flightOf), and an id below one already out would
			// find another transaction's operation.
			n.reqSeq = num << reqSeqBits
			n.oracleSeq = n.reqSeq
			n.batcher.NumberRequestsFrom(n.oracleSeq)
		}
		n.serveHeld()
		n.pumpTS()
	})
}

// Metrics implements protocol.MetricsSource.
func (n *Node) Metrics() *protocol.Metrics { return n.m }

// Handle implements node.Handler.
func (n *Node) Handle(from node.ID, m wire.Msg) {
	switch m := m.(type) {
	case *wire.ClientRequest:
		n.onClient(from, m)
	case *clock.TSBatchReply:
		if m.ReqID&recoverReqID != 0 {
			if m.ReqID == n.recoverID {
				n.onRecoverFloor(m)
			}
			return
		}
		n.batcher.OnReply(n.env.Elapsed(), m)
		n.pumpTS()
	case *ReadResp:
		n.onReadResp(m)
	case *WriteResp:
		n.onWriteResp(m)
	case *CommitResp:
		n.onCommitResp(m)
	case *FinalizeResp:
		n.onFinalizeResp(from, m)
	case *PushResp:
		n.onPushResp(m)
	case *WriteDurable:
		n.onWriteDurable(from, m)
	case *DurableNotes:
		n.onDurableNotes(from, m)
	case *ScanResp:
		n.onScanResp(m)
	case *OpsResp:
		for i := range m.Writes {
			n.onWriteResp(&m.Writes[i])
		}
		for i := range m.Reads {
			n.onReadResp(&m.Reads[i])
		}
	case *Restarted:
		n.expireDeadLives(from, m.Life)
		n.onRestarted(from)
	case *OpsProbeResp:
		n.onOpsProbeResp(from, m)
	case *OpsProbe:
		// Answered even while recovering: the operations held until then are still here.
		n.onOpsProbe(from, m)
	case *EndedQuery:
		// A coordinator's answer needs nothing recovered: a restarted one runs nothing of its
		// earlier lives, and hands out no transaction id before its incarnation is durable.
		n.onEndedQuery(from, m)
	case *ReadReq, *WriteReq, *OpsReq, *ScanReq, *CommitReq, *AbortReq, *PushReq, *FinalizeReq, *Heartbeat, *DurableReq, *Finalized, *Ended:
		// Nothing is served before this life's incarnation is durable either: a node that
		// crashed before that restarts as new, without the recovery read floor, which is only
		// safe if its lost life had set no read watermark.
		if n.recovering || !n.ready {
			n.held = append(n.held, heldMsg{from, m})
			return
		}
		n.onData(from, m)
	}
}

func (n *Node) onData(from node.ID, m wire.Msg) {
	switch m := m.(type) {
	case *ReadReq:
		read, _, served := n.replyTo(from, m.ReqID)
		n.onRead(m, read)
		served()
	case *WriteReq:
		_, write, served := n.replyTo(from, m.ReqID)
		n.onWrite(from, m, write)
		served()
	case *OpsReq:
		n.onOps(from, m)
	case *ScanReq:
		n.onScan(from, m)
	case *CommitReq:
		n.onCommit(from, m)
	case *AbortReq:
		n.onAbort(m)
	case *PushReq:
		n.onPush(from, m)
	case *FinalizeReq:
		n.onFinalize(from, m)
	case *Heartbeat:
		n.onHeartbeat(m)
	case *DurableReq:
		n.onDurableReq(from, m)
	case *Finalized:
		n.onFinalized(from, m)
	case *Ended:
		n.onEnded(from, m)
	}
}

// announceRestart tells every other data node that this one restarted (Restarted), so that a
// coordinator with operations out here learns at once, by an OpsProbe, which of them the crash
// lost. It is sent as the new life starts rather than once it recovers: a probe is answered
// while recovering (the operations held until then count as held), and the recovery may wait
// long for the oracle. Restarts are rare, so one message per peer costs nothing; a run without
// crashes never sends one. A notice lost on the way (a partition) leaves the coordinator its
// op-timeout.
//
// A node that crashed before its first incarnation was durable (within a flush of its first
// start) restarts as if new and sends no notice: what it lost then costs op-timeout.
func (n *Node) announceRestart() {
	for id := range n.tp.Nodes {
		peer := topo.NodeID(id)
		if peer != n.self && n.tp.Nodes[id].Roles&topo.RoleData != 0 {
			n.env.Send(peer, &Restarted{Life: n.inc.N})
		}
	}
}

func (n *Node) askRecoverFloor() {
	n.env.Send(n.oracle, &clock.TSBatchRequest{ReqID: n.recoverID})
	n.env.After(10*time.Millisecond, func() {
		if n.recovering {
			n.askRecoverFloor()
		}
	})
}

// onRecoverFloor raises the read floor above any timestamp a reader before the crash could have
// used: such a timestamp is at most T_up(its batch) + 2·TTL, and its batch's T_up is at most
// abs(now) + 2ε ≤ this reply's T_up + 2ε.
func (n *Node) onRecoverFloor(r *clock.TSBatchReply) {
	if !n.recovering {
		return
	}
	floor := ts.Timestamp{Wall: r.Up + int64(2*n.cfg.ttl+2*n.cfg.epsilon) + 1}
	n.store.RaiseReadFloor(floor)
	n.recovering = false
	n.serveHeld()
}

// serveHeld serves the data-node requests that arrived before the node could serve them, once it
// can: its incarnation is durable and, after a crash, its read floor is raised.
func (n *Node) serveHeld() {
	if n.recovering || !n.ready {
		return
	}
	held := n.held
	n.held = nil
	for _, h := range held {
		n.onData(h.from, h.m)
	}
}

// tick runs every lease/4: coordinators heartbeat their live transactions and drop idle ones,
// recorders abort transactions whose lease ran out.
func (n *Node) armTick() {
	n.env.After(n.cfg.lease/4, func() {
		n.coordinatorTick()
		n.recorderTick()
		n.gcTick()
		n.armTick()
	})
}

// persist hands a batch to the runtime. A batch with a callback always goes through Persist,
// even when empty, because completions run in issue order and callers rely on that.
func (n *Node) persist(batch []node.Write, done func()) {
	if len(batch) == 0 && done == nil {
		return
	}
	n.env.Persist(batch, done)
	n.vgc.Kick()
}

func (n *Node) dataWrites() []node.Write {
	return append(n.store.TakeWrites(), n.recs.TakeWrites()...)
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
