package client

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/meridiandb/meridian/internal/runtime/frame"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/wire"
)

// NetTransport is a Transport over TCP to a coordinator node of a real cluster. It is one client
// endpoint and serves one DB: open one per DB. The node knows a transaction by the endpoint and
// the DB's number for it, and every DB numbers its transactions from 1, so two DBs on one
// transport mix their transactions up at the node (one's request taken as a duplicate of the
// other's, or as its next request, or aborted as unknown-transaction). A request whose numbers
// are those of one in flight is refused before it is sent (ErrBadArgument); the others cannot
// be told from one DB's. A lost connection fails the requests waiting on it; the next request
// dials again (as a new endpoint).
type NetTransport struct {
	addr     string
	cluster  string
	protocol string
	setup    []frame.Setting
	timeout  time.Duration

	// ctx is cancelled by Close, to stop a dial or handshake under way (which holds mu) and a
	// request waiting to send.
	ctx    context.Context
	cancel context.CancelFunc
	// sending is held by the request writing to the connection, so that frames stay whole; a
	// write holds it no longer than its request's timeout (its write deadline).
	sending chan struct{}

	// mu guards what follows. Only a dial holds it across network I/O, and Close stops a dial
	// first: a write blocked on a stalled peer held it, and Close waited on that write.
	mu      sync.Mutex
	conn    net.Conn
	coord   topo.NodeID
	self    topo.NodeID
	waiting map[replyKey]chan *wire.ClientReply
	closed  bool

	// opened is set by the first Open of a DB on the transport: every DB numbers its
	// transactions from 1, so a second DB's requests would be taken for the first's.
	opened atomic.Bool
}

// claimForDB implements the claim Open makes: true for the first DB only.
func (t *NetTransport) claimForDB() bool { return t.opened.CompareAndSwap(false, true) }

// errClosed is the error of a request on a transport its owner closed: no later request will
// succeed, unlike the transient failures that ErrUnavailable otherwise reports.
var errClosed = errors.New("transport closed by Close")

// inFlightError refuses a request whose transaction and sequence numbers are those of one
// already in flight: another DB shares the transport. It is ErrBadArgument, and is returned
// before anything is sent; its text has no "meridian:", as no error of a Transport does.
type inFlightError struct{ key replyKey }

func (e *inFlightError) Error() string {
	return fmt.Sprintf("request %d of transaction %d is already in flight on this transport: a NetTransport serves one DB (each DB numbers its transactions from 1); open one per DB",
		e.key.seq, e.key.txn)
}

func (e *inFlightError) Is(target error) bool { return target == ErrBadArgument }

type replyKey struct {
	txn uint64
	seq uint32
}

// DialOption configures Dial.
type DialOption func(*NetTransport)

// WithRequestTimeout bounds a RoundTrip from its call to its reply (default 10s): dialing again
// if need be, sending, and waiting. A send still blocked then (a stalled node, a black-holed
// link, its socket buffers full) is cut off, and the connection closed. A commit that times out
// has an unknown outcome.
func WithRequestTimeout(d time.Duration) DialOption { return func(t *NetTransport) { t.timeout = d } }

// WithCluster names the cluster the client expects; a node of another cluster refuses it.
// Without it any cluster is accepted.
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
	t := &NetTransport{addr: addr, timeout: 10 * time.Second, waiting: map[replyKey]chan *wire.ClientReply{},
		sending: make(chan struct{}, 1)}
	for _, o := range opts {
		o(t)
	}
	if t.timeout <= 0 {
		return nil, fmt.Errorf("meridian: request timeout must be positive, got %v", t.timeout)
	}
	t.ctx, t.cancel = context.WithCancel(context.Background())
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.connectLocked(context.Background(), time.Now().Add(t.timeout)); err != nil {
		t.cancel()
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

// connectLocked dials and shakes hands, giving up at deadline, at Close, or once reqCtx (the
// request's context) is done. Its errors carry no
// "meridian:" prefix, as no error of a Transport does: the DB wraps them in its own
// (ErrUnavailable, UnknownError), and Dial adds one, so that each error says "meridian:" once.
func (t *NetTransport) connectLocked(reqCtx context.Context, deadline time.Time) error {
	ctx, cancel := context.WithDeadline(reqCtx, deadline)
	defer cancel()
	stopOnClose := context.AfterFunc(t.ctx, cancel)
	defer stopOnClose()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", t.addr)
	if err != nil {
		return fmt.Errorf("dial %s: %w", t.addr, err)
	}
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	fail := func(err error) error {
		_ = c.Close()
		if t.ctx.Err() == nil && reqCtx.Err() != nil && !errors.Is(err, reqCtx.Err()) {
			// The request's context closed the connection under the handshake: say so.
			return fmt.Errorf("handshake with %s: %w (%v)", t.addr, reqCtx.Err(), err)
		}
		return fmt.Errorf("handshake with %s: %w", t.addr, err)
	}
	// A peer that stalls mid-handshake is cut off at the deadline; Close cuts it off at once.
	_ = c.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { _ = c.Close() })
	defer stop()
	// A node that is starting or stopping accepts and closes before it welcomes; a bare "EOF"
	// said nothing a user could act on.
	hungUp := func(err error) error {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) {
			return fmt.Errorf("the node closed the connection before welcoming it (is it starting or stopping?): %w", err)
		}
		return err
	}
	if err := frame.WriteMsg(c, 0, &frame.Hello{Client: true, Cluster: t.cluster, Protocol: t.protocol, Setup: t.setup}); err != nil {
		return fail(hungUp(err))
	}
	r := bufio.NewReaderSize(c, 64<<10)
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
		return fail(hungUp(err))
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
	if !stop() {
		switch {
		case t.ctx.Err() != nil:
			return fail(errClosed)
		case reqCtx.Err() != nil:
			return fail(reqCtx.Err())
		}
		return fail(errors.New("handshake not finished by the request's deadline"))
	}
	_ = c.SetDeadline(time.Time{})
	t.conn, t.coord, t.self = c, wel.Node, wel.Endpoint
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

// RoundTrip implements Transport. It returns within the request timeout whatever the peer does.
func (t *NetTransport) RoundTrip(req *wire.ClientRequest) (*wire.ClientReply, error) {
	return t.RoundTripContext(context.Background(), req)
}

// RoundTripContext implements ContextTransport: RoundTrip that also returns once ctx is done
// (or its deadline, if sooner than the request timeout, passes), with an error wrapping
// ctx.Err(). A send that ctx cuts off closes the connection, as any failed send does.
func (t *NetTransport) RoundTripContext(ctx context.Context, req *wire.ClientRequest) (*wire.ClientReply, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("no send to %s: %w", t.addr, err)
	}
	// The timer runs from the call, not from the end of the send: a send blocked on a stalled
	// peer is cut off by the same deadline.
	deadline := time.Now().Add(t.timeout)
	ctxDeadline := false // the deadline is ctx's: when the timer fires, ctx may not yet know
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline, ctxDeadline = d, true
	}
	ctxErr := func() error {
		if err := ctx.Err(); err != nil || !ctxDeadline || time.Now().Before(deadline) {
			return err
		}
		return context.DeadlineExceeded
	}
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	payload, err := wire.Encode(req)
	if err != nil {
		return nil, err
	}
	ch := make(chan *wire.ClientReply, 1)
	key := replyKey{req.Txn, req.Seq}
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil, errClosed
	}
	if t.waiting[key] != nil {
		// A reply is matched by these numbers alone: registering a second waiter took the
		// first's reply.
		t.mu.Unlock()
		return nil, &inFlightError{key}
	}
	if t.conn == nil {
		if req.Seq > 0 {
			// The transaction began on the lost connection, as another endpoint: the server
			// would not know it under the new one.
			t.mu.Unlock()
			return nil, fmt.Errorf("connection to %s lost during the transaction", t.addr)
		}
		if err := t.connectLocked(ctx, deadline); err != nil {
			t.mu.Unlock()
			if t.ctx.Err() != nil {
				return nil, errClosed
			}
			return nil, err
		}
	}
	c, coord := t.conn, t.coord
	t.waiting[key] = ch
	t.mu.Unlock()

	select {
	case t.sending <- struct{}{}:
	case <-timer.C:
		t.forget(key, ch)
		if err := ctxErr(); err != nil {
			return nil, fmt.Errorf("no send to %s: %w", t.addr, err)
		}
		return nil, fmt.Errorf("no send to %s within %v: another request's send held the connection", t.addr, t.timeout)
	case <-t.ctx.Done():
		t.forget(key, ch)
		return nil, errClosed
	case <-ctx.Done():
		t.forget(key, ch)
		return nil, fmt.Errorf("no send to %s: %w", t.addr, ctx.Err())
	}
	if err := ctx.Err(); err != nil {
		// Done as the slot came free (select picks among ready cases at random): send nothing.
		<-t.sending
		t.forget(key, ch)
		return nil, fmt.Errorf("no send to %s: %w", t.addr, err)
	}
	_ = c.SetWriteDeadline(deadline)
	// ctx cuts a blocked write off through its deadline. The cut must be over before the slot
	// is given up, or it could land on the next request's write.
	cutDone := make(chan struct{})
	stopCut := context.AfterFunc(ctx, func() {
		_ = c.SetWriteDeadline(time.Unix(1, 0))
		close(cutDone)
	})
	err = frame.Write(c, coord, payload)
	if !stopCut() {
		<-cutDone
	}
	if err != nil {
		// Part of the frame may have gone: the stream is out of step, so it is closed before
		// the send slot is given up (another request's frame would follow the partial one), and
		// the reader fails the requests waiting on it.
		_ = c.Close()
	}
	<-t.sending
	if err != nil {
		t.forget(key, ch)
		if t.ctx.Err() != nil {
			return nil, fmt.Errorf("send to %s: %w", t.addr, errClosed)
		}
		if err := ctxErr(); err != nil {
			return nil, fmt.Errorf("send to %s cut off: %w", t.addr, err)
		}
		return nil, fmt.Errorf("send to %s: %w", t.addr, err)
	}
	select {
	case rep, ok := <-ch:
		if !ok {
			if t.ctx.Err() != nil {
				return nil, fmt.Errorf("connection to %s: %w", t.addr, errClosed)
			}
			return nil, fmt.Errorf("connection to %s lost", t.addr)
		}
		return rep, nil
	case <-timer.C:
		t.forget(key, ch)
		if err := ctxErr(); err != nil {
			return nil, fmt.Errorf("no reply from %s: %w", t.addr, err)
		}
		return nil, fmt.Errorf("no reply from %s within %v", t.addr, t.timeout)
	case <-ctx.Done():
		t.forget(key, ch)
		return nil, fmt.Errorf("no reply from %s: %w", t.addr, ctx.Err())
	}
}

// forget drops the request waiting on ch for key, unless the reader or Close already did (and
// another request may have taken key since).
func (t *NetTransport) forget(key replyKey, ch chan *wire.ClientReply) {
	t.mu.Lock()
	if t.waiting[key] == ch {
		delete(t.waiting, key)
	}
	t.mu.Unlock()
}

// Sleep implements Transport.
func (t *NetTransport) Sleep(d time.Duration) { time.Sleep(d) }

// processStart anchors Now: wall-clock nanoseconds at start plus Go's monotonic time since, so a
// wall-clock step never makes a completion precede its invocation in a history, and every client
// of a process reads the same clock.
var processStart = time.Now()

// Now implements Transport: nanoseconds on a monotonic clock anchored at the wall clock.
func (t *NetTransport) Now() int64 { return processStart.UnixNano() + int64(time.Since(processStart)) }

// Close closes the connection; requests waiting for a reply or blocked sending fail at once (as
// when the connection is lost: a commit among them has an unknown outcome), and later requests
// fail. It never waits on the network.
func (t *NetTransport) Close() error {
	t.cancel() // a dial under way holds mu until it fails
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
