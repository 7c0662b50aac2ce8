package runtime

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/meridiandb/meridian/internal/runtime/frame"
	"github.com/meridiandb/meridian/internal/topo"
)

// outFrame is a frame waiting in a link's delay queue.
type outFrame struct {
	due     time.Time
	dest    topo.NodeID
	payload []byte
}

// preciseSleepMax is the longest wait a link sleeps precisely (blocking its thread) rather than
// on a Go timer: longer than the timers' ~1ms lateness, short enough that a closing link is not
// held up noticeably.
const preciseSleepMax = 2 * time.Millisecond

// link is the sending half of a connection to one destination: a peer node (dialled on demand,
// redialled after a loss) or a client (the accepted connection; gone when it closes). Its FIFO
// queue holds frames until their emulated delay has passed. The delay is the same for every
// frame of a link unless a slowdown (slowdown.go) adds to it for a while; a frame due before
// the one ahead of it leaves right behind it, so the link stays FIFO either way.
//
// The writer goroutine batches the frames it takes while more are queued and writes them
// together. A link manufactures no loss of its own: it does not write to a connection its
// reader has seen the peer close (what that accepts goes nowhere), and when a write fails, the
// frames it did not write wholly, which the peer cannot have read (it reads whole frames only),
// go once more on a fresh connection, ahead of everything queued after them. Frames written
// wholly before a connection dies are not sent again: they may have been delivered, and
// whether they were is the protocol's business, as for any message in flight when a peer
// fails.
type link struct {
	s     *Server
	peer  topo.NodeID // node id, or the client's endpoint id
	addr  string      // peer address; empty for a client link
	delay time.Duration
	q     chan outFrame
	done  chan struct{}
	once  sync.Once

	// Owned by the writer goroutine.
	conn net.Conn // a client link's is set at creation; nil once lost
	// dead is closed by a dialled connection's reader once the peer has closed it; nil for a
	// client link, whose connection serveConn reads and closes itself.
	dead <-chan struct{}
	// pend holds the frames taken from the queue and not yet written wholly, back to back;
	// ends[i] is where the i-th of them ends in pend.
	pend     []byte
	ends     []int
	nextDial time.Time // no dial before it: one failed just now

	// drops counts the frames dropped since the last connection, for the log: by the writer
	// goroutine and by every goroutine that enqueues (the event loop, connection readers
	// relaying replies) when the queue is full.
	drops  atomic.Int64
	client bool
	// unreachable is set while the peer's last dial failed and none has succeeded since, for
	// senders that can wait for the peer to come back rather than have a dial tried (and a drop
	// logged) for each frame: the clock monitor.
	unreachable atomic.Bool
}

func (s *Server) newLink(peer topo.NodeID, addr string, delay time.Duration, conn net.Conn) *link {
	l := &link{s: s, peer: peer, addr: addr, delay: delay, q: make(chan outFrame, linkQueueLen),
		done: make(chan struct{}), conn: conn, client: conn != nil}
	go l.run()
	return l
}

// enqueue queues a frame without blocking: the event loop must never wait on a socket. A full
// queue drops the frame, as a congested network would.
func (l *link) enqueue(dest topo.NodeID, payload []byte) {
	if !l.client && l.s.cutFrom(l.peer) {
		l.drop("partitioned") // lost, even if the cut heals before its emulated delay has passed
		return
	}
	f := outFrame{dest: dest, payload: payload}
	delay := l.delay
	if !l.client {
		delay += l.s.slowTo(int(l.peer))
	}
	if delay > 0 {
		f.due = time.Now().Add(delay)
	}
	select {
	case l.q <- f:
	default:
		l.drop("queue full")
	}
}

func (l *link) close() { l.once.Do(func() { close(l.done) }) }

func (l *link) drop(why string) {
	l.s.dropped.Add(1)
	if l.drops.Add(1) <= maxLoggedDrops {
		l.s.log.Warn("frame dropped", "to", l.peer, "why", why)
	}
}

func (l *link) run() {
	timer := time.NewTimer(time.Hour)
	defer func() {
		timer.Stop()
		if l.conn != nil {
			_ = l.conn.Close()
		}
	}()
	for {
		var f outFrame
		select {
		case f = <-l.q:
		case <-l.done:
			return
		case <-l.s.stop:
			return
		}
		if wait := time.Until(f.due); wait > 0 {
			// Whatever is pending is due already: send it before sleeping.
			l.flush()
			// A timer for all but the last preciseSleepMax (it may fire a millisecond late),
			// then a precise sleep for the rest, so every emulated delay is kept to within
			// about a tenth of a millisecond, sub-millisecond hops inside a region included.
			if wait > preciseSleepMax {
				timer.Reset(wait - preciseSleepMax)
				select {
				case <-timer.C:
				case <-l.done:
					return
				case <-l.s.stop:
					return
				}
			}
			if wait = time.Until(f.due); wait > 0 {
				sleepPrecisely(wait)
			}
		}
		l.pend = frame.Append(l.pend, f.dest, f.payload)
		l.ends = append(l.ends, len(l.pend))
		if len(l.q) == 0 || len(l.pend) >= writeBufBytes {
			l.flush()
		}
	}
}

// flush writes the pending frames, connecting first if the link has no live connection. The
// frames a write leaves unwritten get one fresh connection: if they fail on the one this flush
// dialled, or no connection can be had, they are dropped.
func (l *link) flush() {
	if !l.client && l.s.cutFrom(l.peer) {
		if l.conn != nil {
			l.lost()
		}
		l.dropPending("partitioned")
		return
	}
	dialled := false
	for len(l.pend) > 0 {
		if l.conn != nil && l.peerClosed() {
			l.lost()
		}
		if l.conn == nil {
			if why := l.connect(); why != "" {
				l.dropPending(why)
				return
			}
			dialled = true
		}
		n, err := l.conn.Write(l.pend)
		l.s.sent.Add(l.written(n))
		if err == nil {
			return
		}
		l.lost()
		if dialled || l.client {
			l.dropPending("write: " + err.Error())
			return
		}
	}
}

// peerClosed reports whether the connection's reader has seen the peer close it.
func (l *link) peerClosed() bool {
	select {
	case <-l.dead:
		return true
	default:
		return false
	}
}

// connect gives a peer link a new connection, or returns why it has none: a client link's is
// gone for good, and a peer is not redialled within redialBackoff of a failed dial.
func (l *link) connect() (why string) {
	if l.client {
		return "client gone"
	}
	if time.Now().Before(l.nextDial) {
		return "peer unreachable"
	}
	c, dead, err := l.dial()
	if err != nil {
		l.nextDial = time.Now().Add(redialBackoff)
		l.unreachable.Store(true)
		return "dial: " + err.Error()
	}
	l.conn, l.dead = c, dead
	l.drops.Store(0)
	l.unreachable.Store(false)
	return ""
}

// written removes from pend the frames wholly inside its first n bytes, which a write has just
// written, and returns how many there were.
func (l *link) written(n int) uint64 {
	k := 0
	for k < len(l.ends) && l.ends[k] <= n {
		k++
	}
	if k == 0 {
		return 0
	}
	start := l.ends[k-1]
	l.pend = l.pend[:copy(l.pend, l.pend[start:])]
	for i := k; i < len(l.ends); i++ {
		l.ends[i-k] = l.ends[i] - start
	}
	l.ends = l.ends[:len(l.ends)-k]
	return uint64(k)
}

func (l *link) dropPending(why string) {
	for range l.ends {
		l.drop(why)
	}
	l.pend, l.ends = l.pend[:0], l.ends[:0]
}

// lost closes the link's connection. A peer link dials another for its next frame; a client
// link is done.
func (l *link) lost() {
	if l.conn != nil {
		_ = l.conn.Close()
		l.conn, l.dead = nil, nil
	}
	if l.client {
		l.close()
	}
}

// dial connects to the peer and introduces this node. It also returns a channel that the
// connection's reader closes once the peer has closed it.
func (l *link) dial() (net.Conn, <-chan struct{}, error) {
	c, err := net.DialTimeout("tcp", l.addr, dialTimeout)
	if err != nil {
		return nil, nil, err
	}
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	if err := frame.WriteMsg(c, l.peer, &frame.Hello{From: l.s.id, Cluster: l.s.cfg.Name, Protocol: l.s.cfg.Protocol.Name(), Setup: l.s.setup}); err != nil {
		_ = c.Close()
		return nil, nil, err
	}
	// The connection only sends; reading it notices the peer's close (its crash, say) at once,
	// however long before the next frame. The writer checks dead before every write, so that
	// the next frame goes on a new connection instead of into a socket whose peer is gone,
	// where it would vanish or fail. A write that races with this close and fails is resent
	// by flush.
	dead := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, c)
		close(dead)
		_ = c.Close()
	}()
	return c, dead, nil
}
