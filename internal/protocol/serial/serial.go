// Package serial is Meridian's reference protocol: every key lives on one node and transactions
// run one at a time, in the order their first requests arrive.
//
// It is strictly serializable by construction (a transaction holds the only lock from its first
// operation until its commit is durable), so it is the "ideal" line in comparisons and the
// protocol that exercises the substrate end to end. Other nodes are only coordinators: they
// check client requests (txnkit.Validate) and forward them to the serial node, which answers the
// client directly.
//
// A transaction lives only in the serial node's memory, and ends, its writes discarded, when its
// client sends nothing for idle-timeout (no one is told: the client waits for no answer) or when
// the node restarts. A later request of it (Seq > 0) then aborts (cause "unknown-transaction",
// retryable) rather than begin a fresh transaction under its name, which would commit only the
// writes from that request on while the client took the commit for all of them. Requests are
// numbered per transaction, and one numbered below the last taken, or any while the commit is
// being persisted, is a duplicate (the network may deliver a message twice) and is dropped:
// applied again, a stale write could overwrite a later one, and a second answer to a commit
// could reach the client before the first. A copy of a first request that arrives after its
// transaction ended would begin it again and hold the lock until the idle timeout; clients
// number their transactions increasingly, so one numbered at or below a transaction of the
// same client that ended is refused instead (txnkit.EndedTxns).
package serial

import (
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
}

// Kind implements wire.Msg.
func (*Forward) Kind() wire.Kind { return 100 }

func init() {
	wire.Register(&Forward{})
	protocol.Register(proto{})
}

type proto struct{}

func (proto) Name() string  { return "serial" }
func (proto) Model() string { return "strict-serializable" }
func (proto) Options() map[string]string {
	return map[string]string{
		"idle-timeout": "abort a transaction that sends nothing for this long (default 5s)",
		"mutant":       "break a rule on purpose so checkers can be shown to catch it: 'no-lock' lets transactions interleave",
	}
}
func (proto) Layout(l topo.Layout) topo.Layout { return l }

// CheckOptionValues implements protocol.OptionChecker.
func (proto) CheckOptionValues(opts map[string]string) error {
	_, _, err := parseOptions(opts)
	return err
}

func parseOptions(opts map[string]string) (idle time.Duration, mutant string, err error) {
	o := &txnkit.Options{Protocol: "serial", M: opts}
	// txnkit bounds durations (a transaction's timer must not overflow the clock); zero would
	// abort every transaction before its first operation, so it is refused here too.
	idle = o.Duration("idle-timeout", 5*time.Second)
	if o.Err == nil && idle == 0 {
		return 0, "", &protocol.OptionError{Protocol: "serial", Key: "idle-timeout", Value: opts["idle-timeout"], Want: "a positive duration"}
	}
	mutant = o.Enum("mutant", "", "", "no-lock") // "" (an empty --opt mutant=) is no mutant
	return idle, mutant, o.Err
}

func (proto) NewNode(cfg node.Config) (node.Handler, error) {
	idle, mutant, err := parseOptions(cfg.Options)
	if err != nil {
		return nil, err
	}
	env := cfg.Env
	server := env.Topology().DataNodes(0)[0]
	n := &Node{env: env, server: server, idle: idle, noLock: mutant == "no-lock", data: map[string][]byte{}, txns: map[txnKey]*txn{}}
	if env.Self() == server {
		if err := cfg.Durable.Scan([]byte(dataPrefix), []byte(dataPrefixEnd), func(k, v []byte) bool {
			n.data[string(k[len(dataPrefix):])] = append([]byte(nil), v...)
			return true
		}); err != nil {
			return nil, err
		}
	}
	return n, nil
}

const (
	dataPrefix    = "d/"
	dataPrefixEnd = "d0" // '0' follows '/'
)

type txnKey struct {
	client topo.NodeID
	id     uint64
}

type txn struct {
	key        txnKey
	writes     map[string][]byte // nil value: delete
	order      []string          // write keys in first-write order, for deterministic batches
	lastSeen   int64
	timer      node.TimerID
	nextSeq    uint32 // requests numbered below it were taken already
	committing bool   // the commit's writes are being persisted
}

type queued struct {
	client topo.NodeID
	req    wire.ClientRequest
}

// Node is the serial protocol's handler.
type Node struct {
	env    node.Env
	server topo.NodeID
	idle   time.Duration
	noLock bool

	data    map[string][]byte
	holder  *txn
	txns    map[txnKey]*txn
	ended   txnkit.EndedTxns // each client's highest transaction that ended, against late copies
	waiting []queued
	commits int
}

// Handle implements node.Handler.
func (n *Node) Handle(from node.ID, m wire.Msg) {
	switch m := m.(type) {
	case *wire.ClientRequest:
		if bad := txnkit.Validate(m); bad != nil {
			n.env.Send(from, bad)
			return
		}
		if n.env.Self() != n.server {
			n.env.Send(n.server, &Forward{Client: from, Req: *m})
			return
		}
		n.request(from, *m)
	case *Forward:
		if n.env.Self() != n.server {
			return
		}
		// Checked by the coordinator already, unless the frame was not from one.
		if bad := txnkit.Validate(&m.Req); bad != nil {
			n.env.Send(m.Client, bad)
			return
		}
		n.request(m.Client, m.Req)
	}
}

func (n *Node) reply(to topo.NodeID, req wire.ClientRequest, r *wire.ClientReply) {
	r.Txn, r.Seq = req.Txn, req.Seq
	n.env.Send(to, r)
}

func (n *Node) request(client topo.NodeID, req wire.ClientRequest) {
	k := txnKey{client, req.Txn}
	t := n.txns[k]
	if t == nil {
		// Refused at once, not queued for the lock: a late copy of an ended transaction's
		// first request, or a later request of a transaction that ended (idle timeout,
		// restart), must not begin one.
		if n.ended.RefuseLateFirst(n.env, client, &req) {
			return
		}
		if answered, _ := txnkit.AnswerUnheld(n.env, client, &req); answered {
			return
		}
		if n.holder != nil && !n.noLock {
			n.waiting = append(n.waiting, queued{client, req})
			return
		}
		t = &txn{key: k, writes: map[string][]byte{}}
		n.txns[k] = t
		if !n.noLock {
			n.holder = t
		}
	}
	if t.committing || req.Seq < t.nextSeq {
		return // a duplicate
	}
	t.nextSeq = req.Seq + 1
	t.lastSeen = n.env.Now()
	n.armIdle(t)
	switch req.Op {
	case wire.OpGet, wire.OpPut, wire.OpDelete:
		found, v := t.apply(n, req.Op, req.Key, req.Value)
		n.reply(client, req, &wire.ClientReply{Code: wire.CodeOK, Found: found, Value: v})
	case wire.OpBatch:
		// Everything is on this node: the batch's operations run one after another.
		res := make([]wire.BatchResult, len(req.Batch))
		for i, op := range req.Batch {
			res[i].Found, res[i].Value = t.apply(n, op.Op, op.Key, op.Value)
		}
		n.reply(client, req, &wire.ClientReply{Code: wire.CodeOK, Results: res})
	case wire.OpScan:
		n.reply(client, req, &wire.ClientReply{Code: wire.CodeOK, Rows: n.scan(t, req)})
	case wire.OpCommit:
		n.commit(client, req, t)
	case wire.OpAbort:
		n.finish(t)
		n.reply(client, req, &wire.ClientReply{Code: wire.CodeOK})
	default:
		n.reply(client, req, &wire.ClientReply{Code: wire.CodeBadArgument, Error: "unknown operation"})
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

func (n *Node) commit(client topo.NodeID, req wire.ClientRequest, t *txn) {
	n.env.Cancel(t.timer)
	if len(t.order) == 0 {
		n.finish(t)
		n.reply(client, req, &wire.ClientReply{Code: wire.CodeOK})
		return
	}
	batch := make([]node.Write, 0, len(t.order))
	for _, k := range t.order {
		v := t.writes[k]
		batch = append(batch, node.Write{Key: []byte(dataPrefix + k), Value: v, Delete: v == nil})
	}
	// The lock is held until the write is durable, so no one can read what might be lost. The
	// transaction stays known meanwhile, so that a duplicate of its commit is dropped instead of
	// answered "unknown" ahead of the commit's own answer.
	t.committing = true
	n.env.Persist(batch, func() {
		n.forget(t)
		for _, k := range t.order {
			if v := t.writes[k]; v != nil {
				n.data[k] = v
			} else {
				delete(n.data, k)
			}
		}
		n.commits++
		n.reply(client, req, &wire.ClientReply{Code: wire.CodeOK})
		n.release(t)
	})
}

func (n *Node) armIdle(t *txn) {
	n.env.Cancel(t.timer)
	t.timer = n.env.After(n.idle, func() {
		if n.txns[t.key] == t {
			n.finish(t)
		}
	})
}

func (n *Node) finish(t *txn) {
	n.env.Cancel(t.timer)
	n.forget(t)
	n.release(t)
}

// forget drops the ended t, remembering it against late copies of its first request.
func (n *Node) forget(t *txn) {
	delete(n.txns, t.key)
	n.ended.Ended(txnkit.ClientTxn{Client: t.key.client, Txn: t.key.id}, n.env.Now(), n.idle)
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
		n.request(q.client, q.req)
	}
}

// Len returns the number of committed keys (for tests).
func (n *Node) Len() int { return len(n.data) }

// Value returns a committed value (for tests).
func (n *Node) Value(k string) ([]byte, bool) { v, ok := n.data[k]; return v, ok }
