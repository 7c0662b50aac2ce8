// Package serial is Meridian's reference protocol: every key lives on one node and transactions
// run one at a time, in the order their first requests arrive.
//
// It is strictly serializable by construction (a transaction holds the only lock from its first
// operation until its commit is durable), so it is the "ideal" line in comparisons and the
// protocol that exercises the substrate end to end. Other nodes are only coordinators: they
// check client requests (txnkit.Validate) and forward them to the serial node, whose answers
// come back through them (Answer), as the real runtime routes any reply to a client through the
// node that hosts its connection.
//
// A transaction lives only in the serial node's memory, and ends, its writes discarded, when its
// client sends nothing for idle-timeout (no one is told: the client waits for no answer), when
// the node restarts, or when the coordinator its client is attached to does. A later request
// of it (Seq > 0) then aborts (cause "unknown-transaction", retryable) rather than begin a
// fresh transaction under its name, which would commit only the writes from that request on
// while the client took the commit for all of them. A copy of a first request that arrives
// after its transaction ended would begin it again and hold the lock until the idle timeout;
// clients number their transactions increasingly, so one numbered at or below a transaction of
// the same client that ended is refused instead (txnkit.EndedTxns).
//
// Messages between nodes may be lost or delivered twice, and a lost forward or answer must cost
// a bounded delay, not the client's timeout; for the lock holder, not every other client's time
// either, while the lock waits for a request that never comes. So a coordinator forwards a
// request again (Forward.Resent) until it is answered: after resend-after, then at doubling
// intervals up to idle-timeout. A request that waits for the lock gets its copy acknowledged
// (Queued), and is then forwarded again only every idle-timeout, in case the serial node
// restarts and loses it. The serial node, for its part, sends the lock holder's last answer
// again, at the same intervals, while the client's next request does not come: that answer may
// be lost after a wait that has doubled the coordinator's intervals already.
//
// A request may thus reach the serial node more than once, and each copy gets the first one's
// answer; nothing is applied twice. Requests are numbered per transaction: the last one taken
// is answered again from the answer kept for it (a write applied again could overwrite a later
// one, and a read could see the transaction's own later writes), an earlier one is a stale copy
// and dropped, as is a copy of the commit while its writes are being persisted (its answer
// follows once they are durable). A transaction that ended at its client's commit or abort is
// remembered for twice idle-timeout, and a copy of that last request is answered OK again. A
// commit forwarded again of a transaction the node no longer remembers (the answer could not
// get through for that long) may have committed with its answer lost: the node cannot tell,
// and answers unknown.
//
// All that is remembered against copies is in memory, and a restart of the serial node does
// not end the connections of clients attached to other nodes: their endpoints, and the
// forwards and copies on their way, outlive it. A late copy of a committed transaction's first
// request would begin it again in the next life, and its commit's copy commit it a second
// time, over later writes. So every node numbers its lives (txnkit.Incarnation, durable before
// the life handles anything: one that crashed sooner leaves its number to the next, and must
// not have answered or forwarded under it) and a coordinator forwards each request under the
// latest life of the serial node it heard of (Forward.Life; 1 until it hears otherwise), every
// copy under the same. A life refuses a request forwarded under an earlier one, beginning
// nothing: its transaction began there, or its first request was sent before the coordinator
// heard of this life (a retry, and a needless abort only for transactions caught in the
// restart). Such a commit may have been made durable by the earlier life, its answer lost with
// it, and is answered unknown, whether it is forwarded again or the network's copy of the
// first. A restarted serial node announces its life to the other data nodes (Life), and every
// answer carries it, so a coordinator that missed the announcement learns it from the first
// refusal; either way the requests it still awaits from an earlier life are forwarded again at
// once, for their refusal, instead of at their resend timers.
//
// A coordinator's restart, for its part, ends its clients' connections, and with them their
// transactions, which the serial node would otherwise hold (the holder the lock, until its
// idle timeout) or begin when their turn came, each holding the lock for the idle timeout:
// one coordinator down for 300 ms stalled every other client for tens of seconds. A restarted
// coordinator tells the serial node its life (Life), and every forward carries it
// (Forward.HostLife): the serial node ends at once what an earlier life of that coordinator
// forwarded, held or waiting, answering no one, and drops a late copy from such a life. A
// forward of the new life that arrives first, its announcement lost, stands in for it. The
// serial node answers the announcement with its own life if it restarted too, since the
// coordinator's new life knows nothing of it.
package serial

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/meridiandb/meridian/internal/node"
	"github.com/meridiandb/meridian/internal/protocol"
	"github.com/meridiandb/meridian/internal/protocol/txnkit"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/wire"
)

// Forward carries a client request from a coordinator to the serial node.
type Forward struct {
	Client topo.NodeID
	Req    wire.ClientRequest
	// Resent marks a forwarding again of a request not answered in time: the earlier one, or its
	// answer, may have been lost after the serial node acted on it.
	Resent bool `cbor:",omitempty"`
	// Life is the serial node's life the coordinator knew of when it first forwarded the
	// request; every copy carries the same. A life refuses a request forwarded under an
	// earlier one: what became of it there is lost with that life.
	Life uint64
	// HostLife is the coordinator's own life. Its clients' connections die with it, and the
	// serial node ends the transactions an earlier life forwarded once it hears of a later one.
	HostLife uint64
}

// Answer carries the serial node's reply to a forwarded request back to the coordinator that
// forwarded it, which hands it to the client.
type Answer struct {
	Client topo.NodeID
	Reply  wire.ClientReply
	Life   uint64 // the serial node's life, for the coordinator to stamp its next forwards with
}

// Queued tells a coordinator that a request it forwarded again waits for the lock at the serial
// node, which will answer it (and send the answer again while the next request is late), so that
// the coordinator need not forward it every few round trips while it waits.
type Queued struct {
	Client topo.NodeID
	Txn    uint64
	Seq    uint32
	Life   uint64 // as in Answer
}

// Life tells the other data nodes that the sender restarted and is in its N-th life (N > 1):
// the serial node tells every coordinator, a coordinator tells the serial node, which answers
// with its own life if it restarted too.
type Life struct {
	N uint64
}

// Kind implements wire.Msg.
func (*Forward) Kind() wire.Kind { return 100 }

// Kind implements wire.Msg.
func (*Answer) Kind() wire.Kind { return 101 }

// Kind implements wire.Msg.
func (*Queued) Kind() wire.Kind { return 102 }

// Kind implements wire.Msg.
func (*Life) Kind() wire.Kind { return 103 }

func init() {
	wire.Register(&Forward{})
	wire.Register(&Answer{})
	wire.Register(&Queued{})
	wire.Register(&Life{})
	protocol.Register(proto{})
}

type proto struct{}

func (proto) Name() string  { return "serial" }
func (proto) Model() string { return "strict-serializable" }
func (proto) Options() map[string]string {
	return map[string]string{
		"idle-timeout": "abort a transaction that sends nothing for this long (default 5s)",
		"resend-after": "forward a request to the serial node again, or send its answer again, if nothing comes back within this long, then at doubling intervals up to idle-timeout (default two round trips between the regions plus 50ms)",
		"mutant":       "break a rule on purpose so checkers can be shown to catch it: 'no-lock' lets transactions interleave",
	}
}
func (proto) Layout(l topo.Layout) topo.Layout { return l }

// CheckOptionValues implements protocol.OptionChecker.
func (proto) CheckOptionValues(opts map[string]string) error {
	_, err := parseOptions(opts)
	return err
}

type options struct {
	idle        time.Duration
	resendAfter time.Duration // 0: derived from the round trip to the serial node
	mutant      string
}

func parseOptions(opts map[string]string) (options, error) {
	o := &txnkit.Options{Protocol: "serial", M: opts}
	// txnkit bounds durations (a transaction's timer must not overflow the clock); zero would
	// abort every transaction before its first operation, or forward every request again
	// without pause, so it is refused here too.
	var p options
	p.idle = o.Duration("idle-timeout", 5*time.Second)
	p.resendAfter = o.Duration("resend-after", 0)
	for _, d := range []struct {
		key string
		v   time.Duration
	}{{"idle-timeout", p.idle}, {"resend-after", p.resendAfter}} {
		if _, set := opts[d.key]; o.Err == nil && set && d.v == 0 {
			return options{}, &protocol.OptionError{Protocol: "serial", Key: d.key, Value: opts[d.key], Want: "a positive duration"}
		}
	}
	p.mutant = o.Enum("mutant", "", "", "no-lock") // "" (an empty --opt mutant=) is no mutant
	return p, o.Err
}

func (proto) NewNode(cfg node.Config) (node.Handler, error) {
	opts, err := parseOptions(cfg.Options)
	if err != nil {
		return nil, err
	}
	env := cfg.Env
	server := env.Topology().DataNodes(0)[0]
	n := &Node{env: env, server: server, idle: opts.idle, resendAfterOpt: opts.resendAfter, noLock: opts.mutant == "no-lock",
		data: map[string][]byte{}, txns: map[txnKey]*txn{}, queued: map[txnKey]bool{},
		finished: map[txnKey]finishedTxn{}, hostLives: map[topo.NodeID]uint64{},
		pending: map[txnkit.ClientTxn]*outstanding{}, serialLife: 1}
	if env.Self() == server {
		if err := cfg.Durable.Scan([]byte(dataPrefix), []byte(dataPrefixEnd), func(k, v []byte) bool {
			n.data[string(k[len(dataPrefix):])] = append([]byte(nil), v...)
			return true
		}); err != nil {
			return nil, err
		}
	}
	inc, err := txnkit.StartIncarnation(cfg.Durable, incarnationKey)
	if err != nil {
		return nil, fmt.Errorf("serial: node %d: %w", env.Self(), err)
	}
	n.life = inc.N
	env.Persist([]node.Write{inc.Write()}, n.becomeReady)
	return n, nil
}

const (
	dataPrefix    = "d/"
	dataPrefixEnd = "d0" // '0' follows '/'
)

// incarnationKey holds the number of the node's last life.
var incarnationKey = []byte("serial/incarnation")

// maxHeld bounds the messages a node holds while its life's number is being persisted.
const maxHeld = 10000

type heldMsg struct {
	from node.ID
	m    wire.Msg
}

type txnKey struct {
	client topo.NodeID
	id     uint64
}

type txn struct {
	key        txnKey
	host       topo.NodeID       // the node its client is attached to
	hostLife   uint64            // that node's life
	writes     map[string][]byte // nil value: delete
	order      []string          // write keys in first-write order, for deterministic batches
	lastSeen   int64
	timer      node.TimerID
	resendIn   time.Duration     // until last is sent again, if the client's next request is late
	nextSeq    uint32            // requests numbered below it were taken already
	last       *wire.ClientReply // the answer to request nextSeq-1, for a copy of it
	committing bool              // the commit's writes are being persisted
	// writeBytes holds the writes to wire.MaxTxnWriteBytes. No message here carries them
	// (they wait in this node's memory and commit in one local persist), but the bound is the
	// client's, the same under every protocol: a transaction the reference protocol commits
	// must fit the others' commit messages too.
	writeBytes txnkit.TxnWrites
}

// finishedTxn is a transaction that ended, kept for copies of its last request.
type finishedTxn struct {
	lastSeq uint32
	dropped bool  // ended by the idle timeout, not by its client's commit or abort
	at      int64 // local clock at the end
}

type queued struct {
	client, host topo.NodeID
	hostLife     uint64
	req          wire.ClientRequest
}

// outstanding is a request a coordinator forwarded and has no answer to yet.
type outstanding struct {
	req      wire.ClientRequest
	life     uint64        // the serial node's life it was forwarded under (Forward.Life)
	interval time.Duration // until the next forwarding
	timer    node.TimerID
}

// Node is the serial protocol's handler.
type Node struct {
	env            node.Env
	server         topo.NodeID
	idle           time.Duration
	resendAfterOpt time.Duration // 0: derived from the round trip
	noLock         bool

	life  uint64 // this life's number (txnkit.Incarnation), durable before it is used
	ready bool   // the life's number is durable: messages are handled, not held
	held  []heldMsg

	// The serial node's state.
	data     map[string][]byte
	holder   *txn
	txns     map[txnKey]*txn
	ended    txnkit.EndedTxns // each client's highest transaction that ended, against late copies
	finished map[txnKey]finishedTxn
	sweepAt  int // len(finished) at which ended records are expired next
	waiting  []queued
	queued   map[txnKey]bool // the transactions in waiting
	commits  int
	// hostLives is each coordinator's latest life heard of: what its earlier lives forwarded
	// is ended, or refused.
	hostLives map[topo.NodeID]uint64

	// A coordinator's state: the requests it forwarded and has no answer to, and the serial
	// node's latest life it heard of (1 until it hears otherwise).
	pending    map[txnkit.ClientTxn]*outstanding
	serialLife uint64
}

// becomeReady runs once the node's life number is durable. Until then the node handles
// nothing: a life that crashed earlier leaves its number to the next one, which could not be
// told from it, had it answered or forwarded a request under that number (the serial node's
// first life's is taken for granted). A restart is announced. The serial node's tells the
// coordinators, whose requests forwarded under an earlier life are refused from now on, so
// that they learn it at once (learnSerialLife) rather than from a refusal. A coordinator's
// tells the serial node that its earlier lives' clients are gone (hostRestarted).
func (n *Node) becomeReady() {
	n.ready = true
	switch {
	case n.life <= 1:
	case n.env.Self() == n.server:
		for _, nd := range n.env.Topology().Nodes {
			if nd.ID != n.env.Self() && nd.Roles&topo.RoleData != 0 {
				n.env.Send(nd.ID, &Life{N: n.life})
			}
		}
	default:
		n.env.Send(n.server, &Life{N: n.life})
	}
	held := n.held
	n.held = nil
	for _, h := range held {
		n.Handle(h.from, h.m)
	}
}

// Handle implements node.Handler.
func (n *Node) Handle(from node.ID, m wire.Msg) {
	if !n.ready {
		if len(n.held) < maxHeld {
			n.held = append(n.held, heldMsg{from, m})
		} else if req, ok := m.(*wire.ClientRequest); ok {
			// A forward is sent again by its coordinator; a client is told to retry.
			txnkit.Reply(n.env, from, req, &wire.ClientReply{Code: wire.CodeUnavailable, Error: "serial: the serial node is starting"})
		}
		return
	}
	switch m := m.(type) {
	case *wire.ClientRequest:
		if bad := txnkit.Validate(m); bad != nil {
			n.env.Send(from, bad)
			return
		}
		if n.env.Self() != n.server {
			n.forward(from, *m)
			return
		}
		n.request(from, n.server, n.life, *m, false)
	case *Forward:
		if n.env.Self() != n.server {
			return
		}
		switch last := n.hostLives[from]; {
		case m.HostLife < last:
			return // from a coordinator's dead life: its client is gone
		case m.HostLife > last:
			n.hostRestarted(from, m.HostLife) // its Life notice was lost, or is still on its way
		}
		// Checked by the coordinator already, unless the frame was not from one.
		if bad := txnkit.Validate(&m.Req); bad != nil {
			n.via(from).Send(m.Client, bad)
			return
		}
		if m.Life < n.life {
			n.refuseEarlierLife(m.Client, from, m.Req)
			return
		}
		n.request(m.Client, from, m.HostLife, m.Req, m.Resent)
	case *Answer:
		if n.env.Self() == n.server || from != n.server {
			return
		}
		n.answered(m)
		n.learnSerialLife(m.Life)
	case *Queued:
		if n.env.Self() == n.server || from != n.server {
			return
		}
		k := txnkit.ClientTxn{Client: m.Client, Txn: m.Txn}
		if o := n.pending[k]; o != nil && o.req.Seq == m.Seq {
			// Forwarded again only in case the serial node restarts meanwhile and loses it.
			o.interval = n.idle
			n.env.Cancel(o.timer)
			n.armResend(k, o)
		}
		n.learnSerialLife(m.Life)
	case *Life:
		switch {
		case n.env.Self() != n.server:
			if from == n.server {
				n.learnSerialLife(m.N)
			}
		case from != n.server:
			if m.N > n.hostLives[from] {
				n.hostRestarted(from, m.N)
			}
			if n.life > 1 {
				// The coordinator's new life knows nothing of this node's restarts.
				n.env.Send(from, &Life{N: n.life})
			}
		}
	}
}

// hostRestarted notes that coordinator host is in its life-th life. The transactions its
// earlier lives forwarded belong to clients whose connections died with them; no one will
// commit or abort them, and each would hold the global lock for the idle timeout when its turn
// came, every other transaction queued behind (a 300 ms crash of one coordinator stalled a run
// for the drain's 30 s). They end now, their waiting requests dropped, none answered: no one
// waits for the answer. A commit being persisted completes.
func (n *Node) hostRestarted(host topo.NodeID, life uint64) {
	n.hostLives[host] = life
	dead := func(h topo.NodeID, l uint64) bool { return h == host && l < life }
	n.waiting = slices.DeleteFunc(n.waiting, func(q queued) bool {
		if dead(q.host, q.hostLife) {
			delete(n.queued, txnKey{q.client, q.req.Txn})
			return true
		}
		return false
	})
	var ended []*txn
	for _, t := range n.txns {
		if dead(t.host, t.hostLife) && !t.committing {
			ended = append(ended, t)
		}
	}
	slices.SortFunc(ended, func(a, b *txn) int {
		return cmp.Or(cmp.Compare(a.key.client, b.key.client), cmp.Compare(a.key.id, b.key.id))
	})
	for _, t := range ended {
		n.finish(t, true)
	}
}

// forward sends a client's request to the serial node, and again while it is not answered.
func (n *Node) forward(client topo.NodeID, req wire.ClientRequest) {
	k := txnkit.ClientTxn{Client: client, Txn: req.Txn}
	if o := n.pending[k]; o != nil {
		// The client has given up on its previous request of the transaction: no more copies.
		n.env.Cancel(o.timer)
	}
	o := &outstanding{req: req, life: n.serialLife, interval: n.resendAfter(n.env.Self())}
	n.pending[k] = o
	n.env.Send(n.server, &Forward{Client: client, Req: req, Life: o.life, HostLife: n.life})
	n.armResend(k, o)
}

func (n *Node) armResend(k txnkit.ClientTxn, o *outstanding) {
	o.timer = n.env.After(o.interval, func() {
		if n.pending[k] != o {
			return
		}
		n.env.Send(n.server, &Forward{Client: k.Client, Req: o.req, Resent: true, Life: o.life, HostLife: n.life})
		o.interval = min(2*o.interval, n.idle)
		n.armResend(k, o)
	})
}

// learnSerialLife notes that the serial node is in its life-th life, which refuses every
// request forwarded under an earlier one. The serial node's messages come in order, so an
// earlier life's answers to them came before this news or never will: they are forwarded
// again now for the refusal, not at their resend timers (up to idle-timeout away for a
// request that waited for the lock).
func (n *Node) learnSerialLife(life uint64) {
	if life <= n.serialLife {
		return
	}
	n.serialLife = life
	var stale []txnkit.ClientTxn
	for k, o := range n.pending {
		if o.life < life {
			stale = append(stale, k)
		}
	}
	slices.SortFunc(stale, func(a, b txnkit.ClientTxn) int {
		return cmp.Or(cmp.Compare(a.Client, b.Client), cmp.Compare(a.Txn, b.Txn))
	})
	for _, k := range stale {
		o := n.pending[k]
		n.env.Cancel(o.timer)
		n.env.Send(n.server, &Forward{Client: k.Client, Req: o.req, Resent: true, Life: o.life, HostLife: n.life})
		o.interval = n.resendAfter(n.env.Self())
		n.armResend(k, o)
	}
}

// answered hands the serial node's answer to the client, once: a copy of an answer, or the
// answer to a copy of a request, is dropped.
func (n *Node) answered(a *Answer) {
	k := txnkit.ClientTxn{Client: a.Client, Txn: a.Reply.Txn}
	o := n.pending[k]
	if o == nil || o.req.Seq != a.Reply.Seq {
		return
	}
	n.env.Cancel(o.timer)
	delete(n.pending, k)
	r := a.Reply
	n.env.Send(a.Client, &r)
}

// resendAfter is how long a request forwarded from host, or the answer to it, may take before
// it is taken for lost. An answer takes a round trip and the serial node's work; one not back
// within two, and a margin for the node's queue and disk, most likely never comes. A request
// that waits for the lock longer is forwarded again needlessly, until its copy is acknowledged
// (Queued).
func (n *Node) resendAfter(host topo.NodeID) time.Duration {
	if n.resendAfterOpt > 0 {
		return n.resendAfterOpt
	}
	tp := n.env.Topology()
	return 4*tp.OneWay(tp.RegionOf(host), tp.RegionOf(n.server)) + 50*time.Millisecond
}

// via sends replies to a client through host, the node the client is attached to: the serial
// node itself, or a coordinator that forwarded the request.
func (n *Node) via(host topo.NodeID) node.Env { return hostEnv{n.env, host, n.life} }

type hostEnv struct {
	node.Env
	host topo.NodeID
	life uint64
}

// Send implements node.Env, wrapping a reply to a forwarded request in an Answer.
func (e hostEnv) Send(to node.ID, m wire.Msg) {
	if r, ok := m.(*wire.ClientReply); ok && e.host != e.Self() {
		e.Env.Send(e.host, &Answer{Client: to, Reply: *r, Life: e.life})
		return
	}
	e.Env.Send(to, m)
}

func (n *Node) reply(client, host topo.NodeID, req wire.ClientRequest, r *wire.ClientReply) {
	r.Txn, r.Seq = req.Txn, req.Seq
	n.via(host).Send(client, r)
}

// answer replies to t's request req and keeps the reply for a copy of req.
func (n *Node) answer(t *txn, client, host topo.NodeID, req wire.ClientRequest, r *wire.ClientReply) {
	n.reply(client, host, req, r)
	t.last = r
}

func (n *Node) request(client, host topo.NodeID, hostLife uint64, req wire.ClientRequest, resent bool) {
	k := txnKey{client, req.Txn}
	t := n.txns[k]
	if t == nil {
		if n.queued[k] && req.Seq > 0 {
			n.laterWhileQueued(client, host, k, req)
			return
		}
		if n.answerFinished(client, host, req, resent) {
			return
		}
		// Refused at once, not queued for the lock: a late copy of an ended transaction's
		// first request, or a later request of a transaction that ended (idle timeout,
		// restart), must not begin one.
		env := n.via(host)
		if n.ended.RefuseLateFirst(env, client, &req) {
			return
		}
		if answered, _ := txnkit.AnswerUnheld(env, client, &req); answered {
			return
		}
		if n.holder != nil && !n.noLock {
			switch {
			case !n.queued[k]:
				n.queued[k] = true
				n.waiting = append(n.waiting, queued{client, host, hostLife, req})
			case resent && host != n.server:
				n.env.Send(host, &Queued{Client: client, Txn: req.Txn, Seq: req.Seq, Life: n.life})
			}
			return
		}
		t = &txn{key: k, host: host, hostLife: hostLife, writes: map[string][]byte{}}
		n.txns[k] = t
		if !n.noLock {
			n.holder = t
		}
	}
	switch {
	case t.committing:
		return // a copy of the commit: its answer follows once the writes are durable
	case req.Seq+1 == t.nextSeq && t.last != nil:
		n.reply(client, host, req, t.last) // a copy of the last request: its answer was lost, or is late
		return
	case req.Seq < t.nextSeq:
		return // a stale copy, whose answer the client has had
	}
	t.nextSeq = req.Seq + 1
	t.lastSeen = n.env.Now()
	t.resendIn = 0
	if host != n.server {
		t.resendIn = n.resendAfter(host)
	}
	n.armTimer(t)
	if !t.writeBytes.Admit(&req) {
		// Nothing of it applied; a copy of the request gets the same refusal (t.last).
		n.answer(t, client, host, req, txnkit.TxnWritesRefused())
		return
	}
	switch req.Op {
	case wire.OpGet, wire.OpPut, wire.OpDelete:
		found, v := t.apply(n, req.Op, req.Key, req.Value)
		n.answer(t, client, host, req, &wire.ClientReply{Code: wire.CodeOK, Found: found, Value: v})
	case wire.OpBatch:
		// Everything is on this node: the batch's operations run one after another.
		res := make([]wire.BatchResult, len(req.Batch))
		for i, op := range req.Batch {
			res[i].Found, res[i].Value = t.apply(n, op.Op, op.Key, op.Value)
		}
		if txnkit.ResultsTooLarge(res) {
			// Neither this answer nor its Answer to a coordinator would fit a frame. The
			// writes stay applied; a copy of the request gets the same refusal (t.last).
			n.answer(t, client, host, req, txnkit.BatchAnswerRefused())
			break
		}
		n.answer(t, client, host, req, &wire.ClientReply{Code: wire.CodeOK, Results: res})
	case wire.OpScan:
		rows := n.scan(t, req)
		if wire.RowsTooLarge(rows) {
			n.answer(t, client, host, req, &wire.ClientReply{Code: wire.CodeBadArgument, Error: wire.ScanTooLarge})
			break
		}
		n.answer(t, client, host, req, &wire.ClientReply{Code: wire.CodeOK, Rows: rows})
	case wire.OpCommit:
		n.commit(client, host, req, t)
	case wire.OpAbort:
		n.finish(t, false)
		n.reply(client, host, req, &wire.ClientReply{Code: wire.CodeOK})
	default:
		n.answer(t, client, host, req, &wire.ClientReply{Code: wire.CodeBadArgument, Error: "unknown operation"})
	}
}

// laterWhileQueued handles a later request of a transaction whose first waits for the lock. An
// abort (its client gave up waiting, or hung up and the runtime aborts for it) takes the first
// out of the queue: answered as unknown and left there, it began the transaction when its turn
// came, and that transaction, which no client drives, held the lock until the idle timeout,
// every other client waiting behind it. Any other request is one sent without waiting for the
// first's answer, refused as the other protocols refuse it.
func (n *Node) laterWhileQueued(client, host topo.NodeID, k txnKey, req wire.ClientRequest) {
	if req.Op != wire.OpAbort {
		n.reply(client, host, req, &wire.ClientReply{Code: wire.CodeBadArgument, Error: "request while another of the transaction is in flight"})
		return
	}
	n.waiting = slices.DeleteFunc(n.waiting, func(q queued) bool {
		if q.client != client || q.req.Txn != req.Txn {
			return false
		}
		// Answered, as k2 and crdb answer a request its client's abort overtook: a client
		// that sent the abort without waiting would wait for this answer for ever.
		n.reply(q.client, q.host, q.req, &wire.ClientReply{Code: wire.CodeAborted, Cause: "client-abort"})
		return true
	})
	delete(n.queued, k)
	// A copy of the first request still on its way must not begin the transaction.
	n.ended.Ended(txnkit.ClientTxn{Client: client, Txn: req.Txn}, n.env.Now(), n.idle)
	n.reply(client, host, req, &wire.ClientReply{Code: wire.CodeOK})
}

// answerFinished answers req, a request of a transaction the node does not hold, from what it
// remembers of the transaction's end, and reports whether it did. The last request of a
// transaction its client committed or aborted is answered OK again: the commit is durable, and
// applying it again could undo what later transactions wrote. A commit forwarded again of a
// transaction the node no longer remembers may have committed long ago, its answers lost: the
// node cannot tell, and answers unknown. The rest is the caller's.
func (n *Node) answerFinished(client, host topo.NodeID, req wire.ClientRequest, resent bool) bool {
	f, ok := n.finished[txnKey{client, req.Txn}]
	switch {
	case ok && !f.dropped && req.Seq == f.lastSeq:
		n.reply(client, host, req, &wire.ClientReply{Code: wire.CodeOK})
	case !ok && resent && req.Seq > 0 && req.Op == wire.OpCommit:
		n.reply(client, host, req, &wire.ClientReply{Code: wire.CodeUnknown,
			Error: "the serial node does not remember the transaction: its commit may have been applied before a restart"})
	default:
		return false
	}
	return true
}

// refuseEarlierLife answers req, forwarded under an earlier life of the serial node, without
// beginning anything: its transaction began in that life, or its first request was forwarded
// before the coordinator heard of this one. Whatever that life did with it is lost, but a copy
// of one of its requests may still come (the network delivers them late, and coordinators
// forward again what was not answered): begun again, the transaction would apply its writes a
// second time, over later ones, or commit without the writes that life took. A first request
// that reads or writes aborts (retryably, a client that sent the original no longer waits for
// it), as does a later one. A commit after the first request may have been made durable by
// that life, its answer lost with it, so its outcome is unknown: the first copy to arrive may
// well be the network's, not forwarded again, and an abort would report a committed
// transaction aborted. A first request that commits or aborts did nothing, and is answered OK.
func (n *Node) refuseEarlierLife(client, host topo.NodeID, req wire.ClientRequest) {
	env := n.via(host)
	switch {
	case req.Op == wire.OpCommit && req.Seq > 0:
		n.reply(client, host, req, &wire.ClientReply{Code: wire.CodeUnknown,
			Error: "the serial node restarted: the commit may have been applied before"})
	case req.Seq == 0 && req.Op != wire.OpCommit && req.Op != wire.OpAbort:
		txnkit.Aborted(env, client, &req, txnkit.CauseUnknownTxn)
	default:
		txnkit.AnswerUnheld(env, client, &req)
	}
}

// apply runs one read or write of t; a read returns what it found (t's own writes first).
func (t *txn) apply(n *Node, op wire.Op, key string, value []byte) (bool, []byte) {
	switch op {
	case wire.OpGet:
		v, ok := t.writes[key]
		if !ok {
			v, ok = n.data[key]
		} else {
			ok = v != nil
		}
		return ok, v
	case wire.OpPut, wire.OpDelete:
		if _, seen := t.writes[key]; !seen {
			t.order = append(t.order, key)
		}
		if op == wire.OpPut {
			t.writes[key] = append([]byte{}, value...)
		} else {
			t.writes[key] = nil
		}
	}
	return false, nil
}

func (n *Node) scan(t *txn, req wire.ClientRequest) []wire.KV {
	merged := map[string][]byte{}
	for k, v := range n.data {
		if k >= req.Key && (req.EndKey == "" || k < req.EndKey) {
			merged[k] = v
		}
	}
	for k, v := range t.writes {
		if k >= req.Key && (req.EndKey == "" || k < req.EndKey) {
			merged[k] = v
		}
	}
	keys := make([]string, 0, len(merged))
	for k, v := range merged {
		if v != nil {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	if req.Limit > 0 && len(keys) > int(req.Limit) {
		keys = keys[:req.Limit]
	}
	rows := make([]wire.KV, len(keys))
	for i, k := range keys {
		rows[i] = wire.KV{Key: k, Value: merged[k]}
	}
	n.env.Charge(time.Duration(len(merged)) * 50 * time.Nanosecond)
	return rows
}

func (n *Node) commit(client, host topo.NodeID, req wire.ClientRequest, t *txn) {
	n.env.Cancel(t.timer)
	if len(t.order) == 0 {
		n.finish(t, false)
		n.reply(client, host, req, &wire.ClientReply{Code: wire.CodeOK})
		return
	}
	batch := make([]node.Write, 0, len(t.order))
	for _, k := range t.order {
		v := t.writes[k]
		batch = append(batch, node.Write{Key: []byte(dataPrefix + k), Value: v, Delete: v == nil})
	}
	// The lock is held until the write is durable, so no one can read what might be lost. The
	// transaction stays known meanwhile, so that a copy of its commit is dropped instead of
	// answered before the commit's own answer.
	t.committing = true
	n.env.Persist(batch, func() {
		n.forget(t, false)
		for _, k := range t.order {
			if v := t.writes[k]; v != nil {
				n.data[k] = v
			} else {
				delete(n.data, k)
			}
		}
		n.commits++
		n.reply(client, host, req, &wire.ClientReply{Code: wire.CodeOK})
		n.release(t)
	})
}

// armTimer sets t's timer for its client's silence: the transaction ends at idle-timeout.
// Before that, the answer to its last request is sent again, at doubling intervals, to a client
// attached to another node: while it is lost, the client sends nothing and the lock waits
// (the coordinator forwards the request again too, but at intervals doubled already if the
// request waited long for the lock). A client that only takes its time gets copies it drops.
func (n *Node) armTimer(t *txn) {
	n.env.Cancel(t.timer)
	left := time.Duration(t.lastSeen + int64(n.idle) - n.env.Now())
	d := left
	if t.resendIn > 0 {
		d = min(d, t.resendIn)
	}
	t.timer = n.env.After(d, func() {
		if n.txns[t.key] != t {
			return
		}
		if d == left {
			n.finish(t, true)
			return
		}
		n.via(t.host).Send(t.key.client, t.last)
		t.resendIn = min(2*t.resendIn, n.idle)
		n.armTimer(t)
	})
}

func (n *Node) finish(t *txn, dropped bool) {
	n.env.Cancel(t.timer)
	n.forget(t, dropped)
	n.release(t)
}

// forget drops the ended t, remembering it against copies of its requests.
func (n *Node) forget(t *txn, dropped bool) {
	delete(n.txns, t.key)
	now := n.env.Now()
	n.ended.Ended(txnkit.ClientTxn{Client: t.key.client, Txn: t.key.id}, now, n.idle)
	// Kept while a coordinator may still forward the last request again (for twice the idle
	// timeout after its first forwarding, which came before the end). The node has no tick, so
	// old records are expired as they grow.
	n.finished[t.key] = finishedTxn{lastSeq: t.nextSeq - 1, dropped: dropped, at: now}
	if len(n.finished) >= max(n.sweepAt, 64) {
		for k, f := range n.finished { // each record is judged alone: the order is moot
			if now-f.at > int64(2*n.idle) {
				delete(n.finished, k)
			}
		}
		n.sweepAt = 2 * len(n.finished)
	}
}

// release hands the lock to waiting transactions in arrival order.
func (n *Node) release(t *txn) {
	if n.holder != t {
		return
	}
	n.holder = nil
	for len(n.waiting) > 0 && n.holder == nil {
		q := n.waiting[0]
		n.waiting = n.waiting[1:]
		delete(n.queued, txnKey{q.client, q.req.Txn})
		n.request(q.client, q.host, q.hostLife, q.req, false)
	}
}

// Len returns the number of committed keys (for tests).
func (n *Node) Len() int { return len(n.data) }

// Value returns a committed value (for tests).
func (n *Node) Value(k string) ([]byte, bool) { v, ok := n.data[k]; return v, ok }
