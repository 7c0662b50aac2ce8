package runtime

import (
	"bufio"
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
// queue holds frames until their emulated delay has passed; the delay is the same for every
// frame of a link, so FIFO order is due order.
type link struct {
	s     *Server
	peer  topo.NodeID // node id, or the client's endpoint id
	addr  string      // peer address; empty for a client link
	delay time.Duration
	q     chan outFrame
	done  chan struct{}
	once  sync.Once
	conn  net.Conn // owned by the writer goroutine (a client link's is set at creation)
	// drops counts the frames dropped since the last connection, for the log: by the writer
	// goroutine and by every goroutine that enqueues (the event loop, connection readers
	// relaying replies) when the queue is full.
	drops  atomic.Int64
	client bool
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
	f := outFrame{dest: dest, payload: payload}
	if l.delay > 0 {
		f.due = time.Now().Add(l.delay)
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
	var (
		w        *bufio.Writer
		nextDial time.Time
		timer    = time.NewTimer(time.Hour)
		buf      []byte
	)
	if l.conn != nil {
		w = bufio.NewWriterSize(l.conn, writeBufBytes)
	}
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
			// Whatever is buffered is due already: send it before sleeping.
			if w != nil && w.Buffered() > 0 && w.Flush() != nil {
				l.lost()
				w = nil
			}
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
		if l.conn == nil {
			if l.client {
				l.drop("client gone")
				continue
			}
			if time.Now().Before(nextDial) {
				l.drop("peer unreachable")
				continue
			}
			c, err := l.dial()
			if err != nil {
				nextDial = time.Now().Add(redialBackoff)
				l.drop("dial: " + err.Error())
				continue
			}
			l.conn, w = c, bufio.NewWriterSize(c, writeBufBytes)
			l.drops.Store(0)
		}
		buf = frame.Append(buf[:0], f.dest, f.payload)
		_, err := w.Write(buf)
		if err == nil && len(l.q) == 0 {
			err = w.Flush()
		}
		if err != nil {
			l.lost()
			w = nil
			l.drop("write: " + err.Error())
			continue
		}
		l.s.sent.Add(1)
	}
}

func (l *link) lost() {
	if l.conn != nil {
		_ = l.conn.Close()
		if !l.client {
			l.conn = nil
		}
	}
	if l.client {
		l.close()
	}
}

// dial connects to the peer and introduces this node.
func (l *link) dial() (net.Conn, error) {
	c, err := net.DialTimeout("tcp", l.addr, dialTimeout)
	if err != nil {
		return nil, err
	}
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	if err := frame.WriteMsg(c, l.peer, &frame.Hello{From: l.s.id, Cluster: l.s.cfg.Name, Protocol: l.s.cfg.Protocol.Name(), Setup: l.s.setup}); err != nil {
		_ = c.Close()
		return nil, err
	}
	// The connection only sends; reading it notices the peer's close at once, so the next write
	// fails and redials instead of vanishing into a dead socket.
	go func() {
		_, _ = io.Copy(io.Discard, c)
		_ = c.Close()
	}()
	return c, nil
}
