package client

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/meridiandb/meridian/internal/runtime/frame"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/wire"
)

// NetTransport is a Transport over TCP to a coordinator node of a real cluster. It is one client
// endpoint: open one per concurrent client (a DB is single-threaded anyway). A lost connection
// fails the requests waiting on it; the next request dials again (as a new endpoint).
type NetTransport struct {
	addr     string
	cluster  string
	protocol string
	setup    []frame.Setting
	timeout  time.Duration

	mu      sync.Mutex
	conn    net.Conn
	w       *bufio.Writer
	coord   topo.NodeID
	self    topo.NodeID
	waiting map[replyKey]chan *wire.ClientReply
	closed  bool
}

type replyKey struct {
	txn uint64
	seq uint32
}

// DialOption configures Dial.
type DialOption func(*NetTransport)

// WithRequestTimeout bounds how long RoundTrip waits for a reply (default 10s). A commit that
// times out has an unknown outcome.
func WithRequestTimeout(d time.Duration) DialOption { return func(t *NetTransport) { t.timeout = d } }

// WithCluster names the cluster the client expects; a node of another cluster refuses it.
func WithCluster(name string) DialOption { return func(t *NetTransport) { t.cluster = name } }

// WithProtocol names the protocol the client expects the cluster to run; a node that runs
// another refuses the connection, naming both. Without it any protocol is accepted.
func WithProtocol(name string) DialOption { return func(t *NetTransport) { t.protocol = name } }

// WithSetup gives the cluster-wide settings the client expects, as the cluster's configuration
// lists them (runtime.Config.Setup; Config.DialOptions passes them with the cluster's name and
// protocol); a node whose settings differ refuses the connection, naming the first difference.
func WithSetup(s []frame.Setting) DialOption { return func(t *NetTransport) { t.setup = s } }

// Dial connects to the data node at addr (host:port of its transport).
func Dial(addr string, opts ...DialOption) (*NetTransport, error) {
	t := &NetTransport{addr: addr, timeout: 10 * time.Second, waiting: map[replyKey]chan *wire.ClientReply{}}
	for _, o := range opts {
		o(t)
	}
	if t.timeout <= 0 {
		return nil, fmt.Errorf("meridian: request timeout must be positive, got %v", t.timeout)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.connectLocked(); err != nil {
		return nil, fmt.Errorf("meridian: %w", err)
	}
	return t, nil
}

// Endpoint is the endpoint id the server gave this connection.
func (t *NetTransport) Endpoint() int32 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return int32(t.self)
}

// connectLocked dials and shakes hands. Its errors carry no "meridian:" prefix, as no error of
// a Transport does: the DB wraps them in its own (ErrUnavailable, UnknownError), and Dial adds
// one, so that each error says "meridian:" once.
func (t *NetTransport) connectLocked() error {
	c, err := net.DialTimeout("tcp", t.addr, t.timeout)
	if err != nil {
		return fmt.Errorf("dial %s: %w", t.addr, err)
	}
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	fail := func(err error) error {
		_ = c.Close()
		return fmt.Errorf("handshake with %s: %w", t.addr, err)
	}
	if err := frame.WriteMsg(c, 0, &frame.Hello{Client: true, Cluster: t.cluster, Protocol: t.protocol, Setup: t.setup}); err != nil {
		return fail(err)
	}
	r := bufio.NewReaderSize(c, 64<<10)
	_ = c.SetReadDeadline(time.Now().Add(t.timeout))
	// What the peer answered first, to name it if it is not a frame: a web server's "HTTP/1.1"
	// read as a length said "frame: length out of range: 1213486160 bytes".
	var head []byte
	if _, err := r.Peek(4); err == nil {
		head, _ = r.Peek(min(r.Buffered(), 16))
		head = append([]byte(nil), head...)
	}
	_, payload, err := frame.Read(r)
	if errors.Is(err, frame.ErrFrameLength) {
		return fail(fmt.Errorf("the peer is not a Meridian node (it answered %q)", head))
	}
	if err != nil {
		return fail(err)
	}
	m, err := wire.Decode(payload)
	if err != nil {
		return fail(err)
	}
	wel, ok := m.(*frame.Welcome)
	if !ok {
		return fail(fmt.Errorf("expected a welcome, got %s", wire.Name(m.Kind())))
	}
	if wel.Error != "" {
		return fail(errors.New(wel.Error))
	}
	_ = c.SetReadDeadline(time.Time{})
	t.conn, t.w, t.coord, t.self = c, bufio.NewWriter(c), wel.Node, wel.Endpoint
	go t.read(c, r)
	return nil
}

// read delivers replies until the connection fails, then fails everything still waiting.
func (t *NetTransport) read(c net.Conn, r *bufio.Reader) {
	for {
		_, payload, err := frame.Read(r)
		if err != nil {
			break
		}
		m, err := wire.Decode(payload)
		if err != nil {
			continue // a reply we cannot read is a lost reply: the request times out
		}
		rep, ok := m.(*wire.ClientReply)
		if !ok {
			continue
		}
		t.mu.Lock()
		ch := t.waiting[replyKey{rep.Txn, rep.Seq}]
		delete(t.waiting, replyKey{rep.Txn, rep.Seq})
		t.mu.Unlock()
		if ch != nil {
			ch <- rep
		}
	}
	t.mu.Lock()
	if t.conn == c {
		_ = c.Close()
		t.conn = nil
		for k, ch := range t.waiting {
			close(ch)
			delete(t.waiting, k)
		}
	}
	t.mu.Unlock()
}

// RoundTrip implements Transport.
func (t *NetTransport) RoundTrip(req *wire.ClientRequest) (*wire.ClientReply, error) {
	ch := make(chan *wire.ClientReply, 1)
	key := replyKey{req.Txn, req.Seq}
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil, errors.New("transport closed")
	}
	if t.conn == nil {
		if req.Seq > 0 {
			// The transaction began on the lost connection, as another endpoint: the server
			// would not know it under the new one.
			t.mu.Unlock()
			return nil, fmt.Errorf("connection to %s lost during the transaction", t.addr)
		}
		if err := t.connectLocked(); err != nil {
			t.mu.Unlock()
			return nil, err
		}
	}
	t.waiting[key] = ch
	err := frame.WriteMsg(t.w, t.coord, req)
	if err == nil {
		err = t.w.Flush()
	}
	if err != nil {
		delete(t.waiting, key)
		_ = t.conn.Close()
		t.mu.Unlock()
		return nil, fmt.Errorf("send to %s: %w", t.addr, err)
	}
	t.mu.Unlock()
	timer := time.NewTimer(t.timeout)
	defer timer.Stop()
	select {
	case rep, ok := <-ch:
		if !ok {
			return nil, fmt.Errorf("connection to %s lost", t.addr)
		}
		return rep, nil
	case <-timer.C:
		t.mu.Lock()
		delete(t.waiting, key)
		t.mu.Unlock()
		return nil, fmt.Errorf("no reply from %s within %v", t.addr, t.timeout)
	}
}

// Sleep implements Transport.
func (t *NetTransport) Sleep(d time.Duration) { time.Sleep(d) }

// processStart anchors Now: wall-clock nanoseconds at start plus Go's monotonic time since, so a
// wall-clock step never makes a completion precede its invocation in a history, and every client
// of a process reads the same clock.
var processStart = time.Now()

// Now implements Transport: nanoseconds on a monotonic clock anchored at the wall clock.
func (t *NetTransport) Now() int64 { return processStart.UnixNano() + int64(time.Since(processStart)) }

// Close closes the connection; requests waiting for a reply fail at once (as when the
// connection is lost: a commit among them has an unknown outcome), and later requests fail.
func (t *NetTransport) Close() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed = true
	// The reader fails the waiters only for the connection still in use, which this one no
	// longer is once conn is cleared: without this they waited out their timeout.
	for k, ch := range t.waiting {
		close(ch)
		delete(t.waiting, k)
	}
	if t.conn != nil {
		err := t.conn.Close()
		t.conn = nil
		return err
	}
	return nil
}
