package spanner

import (
	"fmt"
	"time"

	"github.com/meridiandb/meridian/internal/clock"
	"github.com/meridiandb/meridian/internal/node"
	"github.com/meridiandb/meridian/internal/protocol"
	"github.com/meridiandb/meridian/internal/protocol/txnkit"
	"github.com/meridiandb/meridian/internal/storage/locks"
	"github.com/meridiandb/meridian/internal/storage/mvcc"
	"github.com/meridiandb/meridian/internal/storage/txnrec"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/ts"
	"github.com/meridiandb/meridian/internal/wire"
)

// Name is the protocol id.
const Name = "spanner"

// Mutants: deliberately broken variants the checkers must catch.
const (
	MutantEarlyRelease = "early-release"
	MutantNoReadLock   = "no-read-lock"
	MutantEagerNoLock  = "eager-no-lock"
	// MutantScanNoWait: a snapshot scan reads past a prepared transaction's intents instead of
	// waiting for its decision, so it misses rows that commit below its snapshot.
	MutantScanNoWait = "scan-no-wait"
	// MutantScanNoRangeLock: a scan in a read-write transaction takes no range lock, so rows
	// can be inserted into or deleted from its range before it commits (phantoms).
	MutantScanNoRangeLock = "scan-no-range-lock"
)

func init() { protocol.Register(proto{}) }

type proto struct{}

func (proto) Name() string  { return Name }
func (proto) Model() string { return "strict-serializable" }

// SerializesByCommitTimestamp implements protocol.TimestampOrdered.
func (proto) SerializesByCommitTimestamp() {}

// ModelFor implements protocol.OptionModel: without commit wait (K2's d2PL-TTC configuration)
// commit timestamps may run ahead of true time, so real-time order is not promised.
func (proto) ModelFor(opts map[string]string) string {
	if v := opts["commit-wait"]; v == "off" || v == "false" || v == "0" || v == "no" {
		return "serializable"
	}
	return "strict-serializable"
}
func (proto) Options() map[string]string {
	return map[string]string{
		"lock-policy":      "deadlock handling: no-wait, wait-die or wound-wait (default wound-wait, Spanner's) prevent deadlocks by aborting on conflict; detect blocks on every conflict and aborts the youngest transaction of each deadlock a global wait-for graph finds; timeout blocks on every conflict and aborts a request that waited lock-timeout",
		"lock-timeout":     "with lock-policy=timeout: how long a request may wait for a lock before its transaction aborts as a presumed deadlock (default 500ms)",
		"commit-wait":      "on (default): wait until TT.now().earliest > commit ts before releasing locks and replying (strict serializability); off as in K2's d2PL-TTC runs (serializable)",
		"idle-timeout":     "abort a transaction whose client or coordinator is silent this long (default 5s)",
		"decision-timeout": "a participant holding a prepared transaction asks its coordinator for the decision after this long, and again every period (default 500ms)",
		"write-locks":      "buffered (default, Spanner's): writes wait at the coordinator and take exclusive locks at prepare; eager (K2's d2PL-TTC): each write goes to its participant and takes its exclusive lock when issued",
		txnkit.GCTTLOption: "a participant keeps superseded versions this long (10ms to 1000h, default 10s) and refuses a snapshot read older than that (cause too-old), so a read-only transaction has gc-ttl to finish",
		"mutant":           "break a rule on purpose: 'early-release' releases locks and replies at the decision, before it is durable and before commit wait; 'no-read-lock' reads without shared locks; 'eager-no-lock' (with write-locks=eager) writes without exclusive locks; 'scan-no-wait' lets a snapshot scan read past prepared intents; 'scan-no-range-lock' lets a read-write scan take no range lock",
	}
}
func (proto) Layout(l topo.Layout) topo.Layout { return l }

// Config is the parsed option set shared by a node's coordinator and participant.
type Config struct {
	Policy          locks.Policy
	CommitWait      bool
	IdleTimeout     time.Duration
	DecisionTimeout time.Duration
	Mutant          string
	// EagerWrites sends each write to its participant when issued, which locks it then
	// (write-locks=eager); otherwise writes are buffered until prepare.
	EagerWrites bool
	// DetectDeadlocks (lock-policy=detect): conflicts always wait (Policy is locks.Wait) and
	// the detector breaks deadlocks (deadlock.go).
	DetectDeadlocks bool
	// LockTimeout (lock-policy=timeout): conflicts always wait (Policy is locks.Wait) and a
	// request still waiting after this long aborts its transaction; zero for other policies.
	LockTimeout time.Duration
	// GCTTL (gc-ttl) is how long a participant keeps versions that a newer committed one
	// superseded; zero means txnkit.DefaultGCTTL (Configs built by hand in tests).
	GCTTL time.Duration
}

// gcTTL is c's gc-ttl, its default if unset.
func (c Config) gcTTL() time.Duration {
	if c.GCTTL <= 0 {
		return txnkit.DefaultGCTTL
	}
	return c.GCTTL
}

// CheckOptionValues implements protocol.OptionChecker.
func (proto) CheckOptionValues(m map[string]string) error {
	_, err := ParseOptions(m)
	return err
}

// ParseOptions validates protocol options.
func ParseOptions(m map[string]string) (Config, error) {
	o := &txnkit.Options{Protocol: Name, M: m}
	var c Config
	policy := o.Enum("lock-policy", "wound-wait", "no-wait", "wait-die", "wound-wait", "detect", "timeout")
	switch policy {
	case "detect":
		c.Policy, c.DetectDeadlocks = locks.Wait, true
	case "timeout":
		c.Policy = locks.Wait
	case "no-wait":
		c.Policy = locks.NoWait
	case "wait-die":
		c.Policy = locks.WaitDie
	default:
		c.Policy = locks.WoundWait
	}
	lockTimeout := o.Duration("lock-timeout", 500*time.Millisecond)
	c.CommitWait = o.Bool("commit-wait", true)
	c.IdleTimeout = o.Duration("idle-timeout", 5*time.Second)
	c.DecisionTimeout = o.Duration("decision-timeout", 500*time.Millisecond)
	c.Mutant = o.Enum("mutant", "", "", MutantEarlyRelease, MutantNoReadLock, MutantEagerNoLock, MutantScanNoWait, MutantScanNoRangeLock)
	c.EagerWrites = o.Enum("write-locks", "buffered", "buffered", "eager") == "eager"
	c.GCTTL = o.GCTTL()
	if o.Err != nil {
		return Config{}, o.Err
	}
	// Each refusal names the option and value it refuses (protocol.OptionError), as the
	// parsers' own do: "idle-timeout and decision-timeout must be positive" named neither the
	// one that was not nor its value.
	if c.Mutant == MutantEagerNoLock && !c.EagerWrites {
		return Config{}, &protocol.OptionError{Protocol: Name, Key: "mutant", Value: c.Mutant, Want: "write-locks=eager with it"}
	}
	for _, d := range []struct {
		key string
		v   time.Duration
	}{{"idle-timeout", c.IdleTimeout}, {"decision-timeout", c.DecisionTimeout}} {
		if d.v <= 0 {
			return Config{}, &protocol.OptionError{Protocol: Name, Key: d.key, Value: m[d.key], Want: "a positive duration"}
		}
	}
	if v, set := m["lock-timeout"]; set && policy != "timeout" {
		return Config{}, &protocol.OptionError{Protocol: Name, Key: "lock-timeout", Value: v,
			Want: fmt.Sprintf("lock-policy=timeout with it (lock-policy is %s)", policy)}
	}
	if policy == "timeout" {
		if lockTimeout <= 0 {
			return Config{}, &protocol.OptionError{Protocol: Name, Key: "lock-timeout", Value: m["lock-timeout"], Want: "a positive duration"}
		}
		c.LockTimeout = lockTimeout
	}
	return c, nil
}

func (proto) NewNode(cfg node.Config) (node.Handler, error) {
	c, err := ParseOptions(cfg.Options)
	if err != nil {
		return nil, err
	}
	env := cfg.Env
	self := env.Topology().Nodes[env.Self()]
	if self.Roles&topo.RoleData == 0 {
		// Spanner reads TrueTime locally (env.TrueTime); oracle nodes only answer K2-style
		// timestamp requests so a mixed deployment still works.
		tt := env.TrueTime()
		return clock.NewOracleHandler(env, clock.Oracle{ID: uint32(env.Self()), Epsilon: time.Duration(tt.Width() / 2)}), nil
	}
	return NewNode(env, cfg.Durable, c)
}

// Node is a data node: a coordinator for the clients attached to it and a participant for the
// shards whose primary it is. The two halves share only the environment, the metrics and the
// incarnation-based transaction ids; they talk to each other through messages, even on one node,
// so that Spanner-RLS can reuse either half alone.
type Node struct {
	env     node.Env
	cfg     Config
	metrics *protocol.Metrics
	Coord   *Coordinator
	Part    *Participant
	// Detector is the deadlock detector, on one node only (lock-policy=detect).
	Detector *Detector
}

// Durable key of the node's incarnation counter (outside mvcc's 'v' and txnrec's 't').
var incarnationKey = []byte("s/incarnation")

// NewNode builds a data node and recovers it from d.
func NewNode(env node.Env, d node.Durable, c Config) (*Node, error) {
	store, err := mvcc.Recover(d, mvcc.Options{SingleIntent: true})
	if err != nil {
		return nil, err
	}
	recs, err := txnrec.Recover(d)
	if err != nil {
		return nil, err
	}
	inc, err := txnkit.StartIncarnation(d, incarnationKey)
	if err != nil {
		return nil, fmt.Errorf("spanner: node %d: %w", env.Self(), err)
	}
	n := &Node{env: env, cfg: c, metrics: protocol.NewMetrics()}
	n.Part = newParticipant(env, c, n.metrics, store)
	n.Part.life, n.Part.lifePending = inc.N, true
	if c.DetectDeadlocks {
		n.Part.detector, n.Part.incarnation = detectorOf(env.Topology()), inc.N
		if n.Part.detector == env.Self() {
			n.Detector = newDetector(env.Send, env.Now, c.IdleTimeout/3, n.metrics)
		}
	}
	n.Coord = newCoordinator(env, c, n.metrics, recs, inc)
	// Transaction ids embed the incarnation, so ids never repeat across restarts; until the new
	// incarnation is durable the coordinator queues client requests, and the participant sends
	// the deadlock detector no waits and holds its lock grants (Participant.lifeDurable).
	env.Persist([]node.Write{inc.Write()}, func() {
		n.Coord.ready()
		n.Part.lifeDurable()
	})
	if err := n.Part.recover(d); err != nil {
		return nil, err
	}
	if c.DetectDeadlocks {
		// A first, empty report under the new incarnation replaces whatever the detector still
		// holds from this participant's previous life. It goes before the incarnation is
		// durable: a later life that takes the same number sends the same report.
		n.Part.sendWaits()
	}
	n.Coord.recover()
	n.announceRestart(inc.N)
	return n, nil
}

// announceRestart tells every other data node that this one restarted (life > 1), before this
// life handles any message: what its earlier lives held for unprepared transactions, as a
// participant and as a coordinator, is gone, and nothing else would tell the peers. A live
// coordinator's transaction whose lock or request was lost here waited for its next keep-alive
// round (up to a third of the idle timeout) to learn it, and a dead coordinator's transaction
// held its locks at live participants for the whole idle timeout (5 s), everything behind them
// queued: three 300 ms crashes in a list-append run cut its commits from 786 to 188.
func (n *Node) announceRestart(life uint64) {
	tp := n.env.Topology()
	if life <= 1 || tp == nil { // nil: a hand-driven environment (nodetest.ScriptEnv) with no peers
		return
	}
	for _, nd := range tp.Nodes {
		if nd.ID != n.env.Self() && nd.Roles&topo.RoleData != 0 {
			n.env.Send(nd.ID, &Restarted{Life: life})
		}
	}
}

// Metrics implements protocol.MetricsSource.
func (n *Node) Metrics() *protocol.Metrics { return n.metrics }

// Handle implements node.Handler.
func (n *Node) Handle(from node.ID, m wire.Msg) {
	switch m := m.(type) {
	case *wire.ClientRequest:
		n.Coord.Request(from, m)
	case *ReadResp:
		n.Coord.onReadResp(from, m)
	case *WriteResp:
		n.Coord.onWriteResp(from, m)
	case *OpsResp:
		n.Coord.onOpsResp(from, m)
	case *ScanResp:
		n.Coord.onScanResp(from, m)
	case *SnapReadResp:
		n.Coord.onSnapReadResp(from, m)
	case *PrepareResp:
		n.Coord.onPrepareResp(from, m)
	case *DecideAck:
		n.Coord.onDecideAck(from, m)
	case *WoundReq:
		n.Coord.onWound(m)
	case *StatusReq:
		n.Coord.onStatusReq(from, m)
	case *ReadReq:
		n.Part.onRead(from, m)
	case *WriteReq:
		n.Part.onWrite(from, m)
	case *OpsReq:
		n.Part.onOps(from, m)
	case *ScanReq:
		n.Part.onScan(from, m)
	case *SnapReadReq:
		n.Part.onSnapRead(from, m)
	case *PrepareReq:
		n.Part.onPrepare(from, m)
	case *DecideReq:
		n.Part.onDecide(from, m)
	case *StatusResp:
		n.Part.onStatusResp(from, m)
	case *KeepAlive:
		n.Part.onKeepAlive(from, m)
	case *ResendReq:
		n.Coord.onResend(from, m)
	case *Restarted:
		n.Part.onRestarted(from, m)
		n.Coord.onRestarted(from)
	case *WaitGraph:
		if n.Detector != nil {
			n.Detector.onWaitGraph(from, m)
		}
	}
	n.Part.reportWaits()
	n.Part.askSilent()
}

// lockCauses are the abort causes the lock policy produces; each such abort is a "deadlock" in
// K2's Fig. 17d sense (see the package comment).
func isLockPolicyCause(c string) bool {
	return c == locks.ReasonNoWait || c == locks.ReasonWaitDie || c == causeWoundWait || c == causeDeadlock ||
		c == causeLockTimeout
}

const (
	causeWoundWait     = "wound-wait"
	causeDeadlock      = "deadlock"
	causeLockTimeout   = "lock-timeout"
	causeLostLocks     = "participant-lost-locks"
	causeLostRead      = "participant-lost-read"
	causeIdle          = "idle-timeout"
	causeRestarted     = "coordinator-restarted"
	causeUnknownTxn    = txnkit.CauseUnknownTxn
	causeClientAbort   = "client-abort"
	causePrepareFailed = "prepare-failed"
	causeBadAnswer     = "bad-participant-answer"
)

// tsAfter returns the smallest timestamp issued by origin that is greater than t and not below
// wall.
func tsAfter(t ts.Timestamp, wall int64, origin uint32) ts.Timestamp {
	c := ts.Timestamp{Wall: wall, Origin: origin}
	if c.LessEq(t) {
		c = ts.Timestamp{Wall: t.Wall, Logical: t.Logical + 1, Origin: origin}
	}
	return c
}

// Preload implements protocol.Preloader: rows become committed versions older than every
// timestamp.
func (n *Node) Preload(rows []wire.KV) error {
	if n.Part == nil {
		return nil
	}
	st := n.Part.Store()
	st.Reserve(len(rows))
	for _, r := range rows {
		if err := st.Preload(r.Key, r.Value); err != nil {
			return err
		}
	}
	// Rows installed again under a restarted node's recovered versions are garbage, and the
	// kick at recovery came before them.
	n.Part.vgc.Kick()
	return nil
}
