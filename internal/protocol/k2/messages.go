package k2

import (
	"github.com/meridiandb/meridian/internal/storage"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/ts"
	"github.com/meridiandb/meridian/internal/wire"
)

// ReadReq asks a key's primary for the value a transaction at TS sees (Fig. 10, READ).
type ReadReq struct {
	ReqID uint64
	Txn   storage.TxnID
	TS    ts.Timestamp
	Key   string
}

// ReadResp answers a ReadReq. PushNanos is how long the read waited on PUSHWS at the data node
// (its local clock), so the coordinator can report K2 Table 2's PushWS phase apart from Read.
type ReadResp struct {
	ReqID     uint64
	Aborted   bool
	Cause     string `cbor:",omitempty"`
	Found     bool
	Value     []byte `cbor:",omitempty"`
	PushNanos int64  `cbor:",omitempty"`
}

// WriteReq lays down an intent of Txn at TS on Key (Fig. 10, WRITE). Recorder names the node
// holding the transaction's record; CreateRecord asks this node (the recorder) to create it,
// piggybacked on the transaction's first write. WSeq numbers the transaction's writes (from 1)
// so that durability reports name one write, not merely a key the transaction may write twice.
type WriteReq struct {
	ReqID        uint64
	Txn          storage.TxnID
	TS           ts.Timestamp
	Key          string
	Value        []byte `cbor:",omitempty"`
	Tombstone    bool   `cbor:",omitempty"`
	Recorder     topo.NodeID
	CreateRecord bool `cbor:",omitempty"`
	WSeq         uint32
}

// WriteResp answers a WriteReq. With write pipelining the intent is only installed in memory
// (Pending) and the coordinator learns of its durability at commit (DurableReq); otherwise it
// (and the record, if created) is durable.
// Inc is the data node's incarnation: a write acknowledged by an earlier life of the node may
// have died with it.
type WriteResp struct {
	ReqID   uint64
	Aborted bool
	Cause   string `cbor:",omitempty"`
	Pending bool   `cbor:",omitempty"`
	Inc     uint64
}

// DurableReq asks a data node to answer, once they are durable, which of Txn's pipelined writes
// are; the coordinator sends it when it commits, and again while it has no answer (a lost
// message, or a node that crashed). It is idempotent.
type DurableReq struct {
	Txn    storage.TxnID
	Writes []WriteRef
}

// WriteRef names one write of a transaction.
type WriteRef struct {
	Key  string
	WSeq uint32
}

// DurableNote names one write that became durable.
type DurableNote struct {
	Txn  storage.TxnID
	WSeq uint32
}

// DurableNotes tells a coordinator which of its transactions' pipelined writes one flush of the
// sending node made durable (one message per coordinator per flush, not one per write).
type DurableNotes struct {
	Inc   uint64
	Notes []DurableNote
}

// WriteDurable tells a coordinator that the writes WSeqs of Txn are durable on the sending node
// (of incarnation Inc), or, with Lost, that one of the writes it asked about is not there: the
// node lost it in a crash (or the transaction was aborted there), and the transaction must not
// commit. It is sent unasked when a pipelined write's batch is flushed, and in answer to a
// DurableReq.
type WriteDurable struct {
	Txn   storage.TxnID
	Inc   uint64
	WSeqs []uint32 `cbor:",omitempty"`
	Lost  bool     `cbor:",omitempty"`
}

// CommitReq is K2's one-phase commit, sent to the recorder after the commit wait. Participants
// are the nodes the transaction sent writes to (ascending): the recorder keeps the record until
// each has acknowledged the finalization (Finalized).
type CommitReq struct {
	ReqID        uint64
	Txn          storage.TxnID
	TS           ts.Timestamp
	Participants []topo.NodeID `cbor:",omitempty"`
}

// CommitResp carries the recorder's durable decision.
type CommitResp struct {
	ReqID     uint64
	Committed bool
	Cause     string `cbor:",omitempty"`
}

// AbortReq asks the recorder to record an abort (no answer: an abort is never waited for).
type AbortReq struct {
	Txn storage.TxnID
}

// PushReq is PUSHWS: a data node whose reader met Txn's undecided intent asks Txn's recorder for
// the decision; the recorder answers only once the decision is durable.
type PushReq struct {
	Txn storage.TxnID
}

// PushResp carries a decision to a PUSHWS sender. TS is the transaction's timestamp (its
// version) when it committed.
type PushResp struct {
	Txn       storage.TxnID
	Committed bool
	TS        ts.Timestamp
}

// FinalizeReq installs (Commit) or discards a decided transaction's intents on a participant.
// Ack asks for a FinalizeResp once durable (the synchronous-finalization ablation). Recorder is
// the transaction's recorder, which a participant tells (Finalized) once a commit's
// finalization is durable. The coordinator sends it, and so does the recorder when a
// participant's acknowledgement is late.
type FinalizeReq struct {
	ReqID    uint64
	Txn      storage.TxnID
	Commit   bool
	TS       ts.Timestamp
	Ack      bool `cbor:",omitempty"`
	Recorder topo.NodeID
}

// FinalizeResp acknowledges a FinalizeReq with Ack set.
type FinalizeResp struct {
	ReqID uint64
}

// Finalized tells a recorder that the sender's finalization of these committed transactions is
// durable: it holds no intent of them and never will again (one message per recorder per
// flush). Once every participant has said so, the recorder forgets the record.
type Finalized struct {
	Txns []storage.TxnID
}

// EndedQuery asks a coordinator which of these transactions of its own it no longer runs. A
// recorder asks about a transaction it aborted without hearing from the coordinator (lease
// expiry) and about one it does not know that a PUSHWS names.
type EndedQuery struct {
	Txns []storage.TxnID
}

// Ended answers an EndedQuery: the coordinator no longer runs these transactions, so it will
// never send anything about them again (links are FIFO: what it sent before came first).
type Ended struct {
	Txns []storage.TxnID
}

// Heartbeat tells a recorder that the sending coordinator still runs these transactions, which
// renews their leases (notes/k2.md §3.5: heartbeats detect coordinator failure).
type Heartbeat struct {
	Txns []storage.TxnID
}

// OpsReq carries the reads and writes of one client request that go to one data node, so a
// batch costs a node one message in and, usually, one out, whatever its size. Each sub-request
// keeps its own ReqID and is served as if it had come alone.
type OpsReq struct {
	Reads  []ReadReq  `cbor:",omitempty"`
	Writes []WriteReq `cbor:",omitempty"`
}

// OpsResp answers some of an OpsReq's operations, each answer naming its request by ReqID: those
// done while the request was served, then, in a second OpsResp, those that had to wait (PUSHWS,
// a flush); either is cut into several when its values pass wire.MaxScanBytes, so each fits a
// frame. A refusal is sent alone, at once, and ends the answers to its request.
type OpsResp struct {
	Reads  []ReadResp  `cbor:",omitempty"`
	Writes []WriteResp `cbor:",omitempty"`
}

// Restarted tells the other data nodes that the sender has just restarted after a crash, as its
// Life-th life. A coordinator with operations out at the sender answers it with one OpsProbe; a
// recorder ends the leases of the transactions the sender's earlier lives coordinated. It is
// sent once per restart, so a run without crashes never sends it.
type Restarted struct{ Life uint64 }

// OpsProbe asks a restarted data node which of the operations the sender sent it and has not
// had answered (the reads and writes named by their ReqIDs) it still holds. Links are FIFO, so
// the probe arrives after each of them: one the node does not hold was lost with its earlier
// life, or on the way, or has been answered, and then its answer arrived before the probe's.
type OpsProbe struct {
	ReqID uint64
	Ops   []uint64
}

// OpsProbeResp answers an OpsProbe at once, also while the node recovers. Missing are the named
// operations the node does not hold: those it answered, whose answers left before this one so
// the coordinator no longer waits for them, and those it never received, which will never be
// answered.
type OpsProbeResp struct {
	ReqID   uint64
	Missing []uint64 `cbor:",omitempty"`
}

func (*ReadReq) Kind() wire.Kind      { return 200 }
func (*ReadResp) Kind() wire.Kind     { return 201 }
func (*WriteReq) Kind() wire.Kind     { return 202 }
func (*WriteResp) Kind() wire.Kind    { return 203 }
func (*CommitReq) Kind() wire.Kind    { return 204 }
func (*CommitResp) Kind() wire.Kind   { return 205 }
func (*AbortReq) Kind() wire.Kind     { return 206 }
func (*PushReq) Kind() wire.Kind      { return 207 }
func (*PushResp) Kind() wire.Kind     { return 208 }
func (*FinalizeReq) Kind() wire.Kind  { return 209 }
func (*FinalizeResp) Kind() wire.Kind { return 210 }
func (*Heartbeat) Kind() wire.Kind    { return 211 }
func (*DurableReq) Kind() wire.Kind   { return 212 }
func (*WriteDurable) Kind() wire.Kind { return 213 }
func (*DurableNotes) Kind() wire.Kind { return 214 }
func (*OpsReq) Kind() wire.Kind       { return 215 }
func (*OpsResp) Kind() wire.Kind      { return 216 }
func (*OpsProbe) Kind() wire.Kind     { return 217 }
func (*OpsProbeResp) Kind() wire.Kind { return 218 }
func (*Restarted) Kind() wire.Kind    { return 219 }
func (*Finalized) Kind() wire.Kind    { return 220 }
func (*EndedQuery) Kind() wire.Kind   { return 221 }
func (*Ended) Kind() wire.Kind        { return 222 }

func init() {
	for _, m := range []wire.Msg{&ReadReq{}, &ReadResp{}, &WriteReq{}, &WriteResp{}, &CommitReq{}, &CommitResp{},
		&AbortReq{}, &PushReq{}, &PushResp{}, &FinalizeReq{}, &FinalizeResp{}, &Heartbeat{}, &DurableReq{}, &WriteDurable{}, &DurableNotes{}, &OpsReq{}, &OpsResp{},
		&OpsProbe{}, &OpsProbeResp{}, &Restarted{}, &Finalized{}, &EndedQuery{}, &Ended{}} {
		wire.Register(m)
	}
}
