package k2

import (
	"slices"
	"time"

	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/wire"
)

// Lost operations. The network may lose a read, write or scan share, or its answer (the node
// contract), and a coordinator used to wait out op-timeout (2 s) and abort. Now a flight
// unanswered for its retransmission timeout — the round trip to its node plus the larger of
// op-timeout/8 and twice that round trip (RFC 6298's first timeout, as crdb's), doubling on
// every probe — is asked about with an OpsProbe, the message that already tells a restarted
// node's missing operations apart. Links are FIFO, so the probe's answer comes after the
// answer of every operation the node had answered: an operation the node says it does not
// hold, while the coordinator still waits for it, was lost on the way there or its answer on
// the way back, and is sent again. Sending one again is safe: a read at the same timestamp
// reads the same version (the key's watermark already holds writes below it off), a write
// with the same WSeq is answered as its first copy was while its intent is undecided
// (staleWrite) and refused once it is decided (the version's slot is taken; an aborted
// transaction's refusal then reads "storage"), and a scan share only reads. A probe costs two small messages, and only for operations that waited longer than
// the timeout (a read parked on PUSHWS, or a loss); the probe timer is cancelled when the
// request is answered, so most requests never arm one that fires.

// lossProbe is an OpsProbe out at a node about operations that may be lost.
type lossProbe struct {
	to        topo.NodeID
	ops       []uint64 // ascending
	sentLocal int64
}

// opMessage rebuilds the message that carries t's operation id alone, as it was first sent:
// the request being served holds the operation, the flight what the coordinator decided of it.
func (n *Node) opMessage(t *ctxn, id uint64, f flight) wire.Msg {
	if f.kind == opScan {
		return scanReq(t, id)
	}
	op := wire.BatchOp{Op: t.req.Op, Key: t.req.Key, Value: t.req.Value}
	if t.req.Op == wire.OpBatch {
		op = t.req.Batch[f.i]
	}
	if f.kind == opRead {
		return &ReadReq{ReqID: id, Txn: t.id, TS: t.ts, Key: op.Key}
	}
	w := n.writeReq(t, id, f, op)
	return &w
}

// writeReq is the write of op that flight f of t carries.
func (n *Node) writeReq(t *ctxn, id uint64, f flight, op wire.BatchOp) WriteReq {
	w := WriteReq{ReqID: id, Txn: t.id, TS: t.ts, Key: op.Key, Tombstone: op.Op == wire.OpDelete,
		Recorder: t.recorder, CreateRecord: f.creates, WSeq: f.wseq}
	if op.Op == wire.OpPut {
		w.Value = slices.Clone(op.Value)
		if w.Value == nil {
			w.Value = []byte{}
		}
	}
	return w
}

// rto is an operation's first retransmission timeout at node to.
func (n *Node) rto(to topo.NodeID) time.Duration {
	rtt := 2 * n.tp.OneWay(n.tp.RegionOf(n.self), n.tp.RegionOf(to))
	return rtt + max(n.cfg.opTimeout/8, 2*rtt)
}

// armProbe sets t's probe timer for its earliest flight due for a probe.
func (n *Node) armProbe(t *ctxn) {
	n.env.Cancel(t.probeTimer)
	t.probeTimer = 0
	due := int64(-1)
	for _, f := range t.flights {
		if at := f.sentLocal + int64(f.rto); f.out && (due < 0 || at < due) {
			due = at
		}
	}
	if due < 0 {
		return
	}
	round := t.round
	t.probeTimer = n.env.After(time.Duration(max(due-n.env.Elapsed(), 0)), func() {
		t.probeTimer = 0
		if t.round == round && t.state == stBusy {
			n.probeLost(t)
		}
	})
}

// probeLost asks each node holding a flight of t that is past its timeout whether it still
// holds it, doubling the flight's timeout (up to op-timeout, after which t aborts anyway).
func (n *Node) probeLost(t *ctxn) {
	now := n.env.Elapsed()
	n.expireLossProbes(now)
	byNode := map[topo.NodeID][]uint64{}
	var nodes []topo.NodeID
	for j := range t.flights {
		f := &t.flights[j]
		if !f.out || now-f.sentLocal < int64(f.rto) {
			continue
		}
		f.sentLocal, f.rto = now, min(2*f.rto, n.cfg.opTimeout)
		id := t.firstReq + uint64(j)
		if _, ok := byNode[f.to]; !ok {
			nodes = append(nodes, f.to)
		}
		byNode[f.to] = append(byNode[f.to], id)
	}
	slices.Sort(nodes) // map order must not reach the messages
	for _, to := range nodes {
		if n.reqIDsLeft() == 0 {
			break // op-timeout settles it
		}
		ops := byNode[to]
		slices.Sort(ops)
		id := n.newReqID()
		n.lossProbes[id] = lossProbe{to: to, ops: ops, sentLocal: now}
		n.lossProbeOrder = append(n.lossProbeOrder, id)
		n.m.Add("probe.loss", 1)
		n.env.Send(to, &OpsProbe{ReqID: id, Ops: ops})
	}
	n.armProbe(t)
}

// expireLossProbes forgets probes unanswered for op-timeout (the probe or its answer was lost:
// their operations are probed again, or aborted at op-timeout).
func (n *Node) expireLossProbes(now int64) {
	for len(n.lossProbeOrder) > 0 {
		id := n.lossProbeOrder[0]
		if p, ok := n.lossProbes[id]; ok {
			// A probe stamped after now (the runtime's wall clock stepped back) counts as due:
			// waiting for the clock to pass it again would keep every later probe too.
			if age := now - p.sentLocal; age >= 0 && age < int64(n.cfg.opTimeout) {
				return // the oldest still out is not due, nor is any sent after it
			}
			delete(n.lossProbes, id)
		}
		n.lossProbeOrder = n.lossProbeOrder[1:]
	}
}

// onLossProbeResp sends again the operations the probed node does not hold that are still
// awaited; it reports whether r answered a loss probe.
func (n *Node) onLossProbeResp(from topo.NodeID, r *OpsProbeResp) bool {
	p, ok := n.lossProbes[r.ReqID]
	if !ok || p.to != from {
		return ok
	}
	delete(n.lossProbes, r.ReqID)
	for _, id := range r.Missing {
		if _, asked := slices.BinarySearch(p.ops, id); !asked {
			continue
		}
		t, f := n.flightOf(id)
		if t == nil || t.state != stBusy {
			continue
		}
		if f.to == from {
			n.m.Add("op.resent", 1)
			n.env.Send(from, n.opMessage(t, id, *f))
		}
	}
	return true
}
