package runtime

import (
	"encoding/binary"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/wire"
)

// openTxns are the transactions of one client endpoint (a TCP connection, a gRPC stream) that
// are not finished: their last request was neither a commit nor an abort, or their commit or
// abort was refused (answered bad-argument or unavailable: sent before the previous request's
// answer, or failing validation), which leaves the transaction open at its coordinator. When
// the endpoint goes, each is aborted at once (abortOpen): a client that hangs up cannot finish
// them, and they would otherwise hold their locks, intents and records until the coordinator's
// idle timeout. A transaction whose commit or abort was answered otherwise, or that the protocol
// aborted, is over and forgotten: its outcome is the protocol's to settle.
//
// saw runs on the endpoint's reading goroutine, answered on whichever goroutine hands the
// endpoint its replies, so the state is behind a mutex.
type openTxns struct {
	mu sync.Mutex
	// next is each unfinished transaction's number for its next request.
	next map[uint64]uint32
	// ending holds, per transaction, the numbers of its commits and aborts that are out, not
	// answered: either may still be refused (a bad argument), which leaves it open.
	ending map[uint64][]uint32
	// settled is signalled when the answer to a commit or abort goes by (abortOpen waits).
	settled chan struct{}
	// last is when each transaction last sent a request. A transaction its client abandoned
	// (neither committed nor aborted) ends at its coordinator's idle timeout without a word, so
	// entries silent for forget (well past any idle timeout) are dropped, checked whenever the
	// table has doubled since: else they stayed for the connection's life.
	last      map[uint64]time.Time
	forget    time.Duration
	sweepSize int
}

// newOpenTxns tracks an endpoint's transactions; forget is how long one may stay silent and
// still be aborted at a hang-up (see last).
func newOpenTxns(forget time.Duration) *openTxns {
	return &openTxns{next: map[uint64]uint32{}, ending: map[uint64][]uint32{}, settled: make(chan struct{}, 1),
		last: map[uint64]time.Time{}, forget: forget, sweepSize: 64}
}

// forgetSilentAfter is how long a transaction tracked for a hang-up may stay silent before it is
// forgotten: twice the longest of the protocol's idle timeout (its "idle-timeout" option, 5 s by
// default in every protocol) and the client timeout.
func forgetSilentAfter(cfg *Config) time.Duration {
	idle := 5 * time.Second
	if d, err := time.ParseDuration(cfg.Options["idle-timeout"]); err == nil {
		idle = d
	}
	return 2 * max(idle, cfg.ClientTimeout)
}

// saw notes a request the endpoint sent.
// repeats reports whether m numbers a request of its transaction below one already seen: a copy,
// which the coordinator drops without an answer.
func (o *openTxns) repeats(m *wire.ClientRequest) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return m.Seq < o.next[m.Txn]
}

func (o *openTxns) saw(m *wire.ClientRequest) {
	if m.Seq == math.MaxUint32 {
		return // no number can follow it: nothing the runtime could send for the transaction
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	// A commit or abort numbered below a request already seen is a copy the coordinator drops:
	// tracked, the answer to the request it repeats a number of would have been taken for its.
	fresh := m.Seq >= o.next[m.Txn]
	if next := m.Seq + 1; next > o.next[m.Txn] {
		o.next[m.Txn] = next
	}
	if fresh && (m.Op == wire.OpCommit || m.Op == wire.OpAbort) {
		o.ending[m.Txn] = append(o.ending[m.Txn], m.Seq)
	}
	now := time.Now()
	o.last[m.Txn] = now
	if len(o.next) >= o.sweepSize {
		for txn := range o.next {
			if _, out := o.ending[txn]; !out && now.Sub(o.last[txn]) > o.forget {
				delete(o.next, txn)
				delete(o.last, txn)
			}
		}
		o.sweepSize = max(64, 2*len(o.next))
	}
}

// forgetLocked drops txn; o.mu is held.
func (o *openTxns) forgetLocked(txn uint64) {
	delete(o.next, txn)
	delete(o.ending, txn)
	delete(o.last, txn)
}

// answered notes a reply on its way to the endpoint. An aborted answer ends its transaction
// (the client sends nothing more for it); so does the answer to a commit or an abort, unless
// it refused it.
func (o *openTxns) answered(payload []byte) {
	txn, seq, code, ok := replyIDs(payload)
	if !ok {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, open := o.next[txn]; !open {
		return
	}
	out := o.ending[txn]
	if i := slices.Index(out, seq); i >= 0 {
		if out = slices.Delete(out, i, i+1); len(out) > 0 {
			o.ending[txn] = out
		} else {
			delete(o.ending, txn)
		}
		select {
		case o.settled <- struct{}{}:
		default:
		}
		if code == wire.CodeBadArgument || code == wire.CodeUnavailable {
			return // refused: still open, and the client may send it again
		}
		o.forgetLocked(txn)
		return
	}
	if code == wire.CodeAborted {
		// Every protocol answers aborted only once it has dropped the transaction, so whatever
		// else of it is out can only be refused now.
		o.forgetLocked(txn)
		select {
		case o.settled <- struct{}{}:
		default:
		}
	}
}

// replyIDs reads a client reply's transaction, number and code without decoding the rest (a
// batch's answer may carry megabytes of values, and this runs for every reply).
func replyIDs(payload []byte) (txn uint64, seq uint32, code wire.Code, ok bool) {
	// A wire frame is a version byte, a two-byte kind and a CBOR body (package wire).
	if len(payload) < 3 || payload[0] != wire.Version || wire.Kind(binary.BigEndian.Uint16(payload[1:3])) != (*wire.ClientReply)(nil).Kind() {
		return 0, 0, 0, false
	}
	var ids struct {
		Txn  uint64
		Seq  uint32
		Code wire.Code
	}
	if lenientIDs.Unmarshal(payload[3:], &ids) != nil {
		return 0, 0, 0, false
	}
	return ids.Txn, ids.Seq, ids.Code, true
}

// abortOpen asks the coordinator to abort every transaction endpoint id left open, as the
// client would have (its answers go nowhere: the endpoint is gone). Those with no commit or abort
// out go at once: a commit out may be waiting for one of their locks. A commit or abort the
// client sent just before it hung up may not be handled yet, and may still be refused: abortOpen
// then waits, for wait at most, until each is answered (the endpoint's sink stays registered
// until it returns, so the answers still go by answered), and aborts those refused meanwhile.
func (s *Server) abortOpen(id topo.NodeID, o *openTxns, wait time.Duration) {
	sent := map[uint64]bool{}
	abortUnsent := func() {
		o.mu.Lock()
		var txns []uint64
		for txn := range o.next {
			if _, out := o.ending[txn]; !out && !sent[txn] {
				txns = append(txns, txn)
			}
		}
		slices.Sort(txns)
		aborts := make([]*wire.ClientRequest, len(txns))
		for i, txn := range txns {
			sent[txn] = true
			aborts[i] = &wire.ClientRequest{Txn: txn, Seq: o.next[txn], Op: wire.OpAbort}
		}
		o.mu.Unlock()
		for _, m := range aborts {
			s.post(event{from: id, msg: m})
		}
	}
	abortUnsent()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for waiting := true; waiting; {
		o.mu.Lock()
		out := len(o.ending)
		o.mu.Unlock()
		if out == 0 {
			break
		}
		select {
		case <-o.settled:
		case <-timer.C:
			waiting = false
		case <-s.stop:
			waiting = false
		}
	}
	abortUnsent()
}

// watchedSink hands an endpoint's replies to its openTxns on their way.
type watchedSink struct {
	clientSink
	open *openTxns
}

func (w watchedSink) enqueue(dest topo.NodeID, payload []byte) {
	w.open.answered(payload)
	w.clientSink.enqueue(dest, payload)
}
