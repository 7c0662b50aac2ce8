package sim

import (
	"errors"
	"fmt"
	"iter"
	"time"

	"github.com/meridiandb/meridian/client"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/wire"
)

// errStopped unwinds a client coroutine when the simulation is torn down.
var errStopped = errors.New("sim: stopped")

// errTimeout is what a client sees when its coordinator does not answer in time.
var errTimeout = errors.New("sim: request timed out")

// Client is one simulated client endpoint: a coroutine running ordinary blocking Go code
// against a coordinator node of its region.
//
// It holds a connection to its coordinator as client.NetTransport holds a TCP connection, and
// loses it the same way: when the coordinator crashes, the request waiting on it fails as soon
// as the reset reaches the client (client.DB reports a commit's outcome unknown and any other
// request unavailable), later requests of the same transaction fail at once without being sent,
// and the first request of a new transaction dials again. A dial costs a round trip to the
// node's host, refused if the node is down, and then the handshake's round trip. Clients start
// connected (a run without crashes never dials), unless added while their coordinator is down.
//
// Each connection is a new endpoint, as each of client.NetTransport's gets a new id from the
// server's welcome: nodes key a client's transactions, its retries' age and their duplicate
// checks by endpoint, and a node must never take a request on the new connection for one of
// the old. A message addressed to an earlier endpoint is dropped, as a real server drops what
// it would send on a closed connection.
type Client struct {
	sim    *Sim
	id     int32 // endpoint id of the current connection (after all node ids)
	region topo.RegionID
	coord  topo.NodeID
	body   func(db *client.DB)
	db     *client.DB

	next  func() (struct{}, bool)
	stop  func()
	yield func(struct{}) bool

	waitToken uint64 // the wake-up this client is blocked on (0: none)
	want      *wire.ClientRequest
	reply     *wire.ClientReply
	failure   error // why the request in flight got no reply (nil: it got one)
	// cause is the failure the wake-up ending the request in flight reports: errTimeout, or
	// the reset of a crashed coordinator's connection.
	cause     error
	connected bool // the connection to coord is up (it may still be dead and not know it)
	finished  bool
	timeout   time.Duration
}

// SetTimeout changes how long this client waits for a reply (default Config.ClientTimeout).
func (c *Client) SetTimeout(d time.Duration) { c.timeout = d }

// AddClient registers a client in a region, attached to coordinator coord, starting at virtual
// time start. body runs as a coroutine; it returns when its work is done.
func (s *Sim) AddClient(region topo.RegionID, coord topo.NodeID, start int64, body func(db *client.DB)) *Client {
	c := &Client{sim: s, region: region, coord: coord, body: body, timeout: s.cfg.ClientTimeout}
	c.id = s.newEndpoint(c)
	// A client added while its coordinator is down dials when it first sends.
	c.connected = int(coord) >= len(s.nodes) || !s.nodes[coord].down
	c.db = client.Open(c)
	s.cls = append(s.cls, c)
	s.schedule(event{at: start, kind: evClientStart, to: c.id})
	return c
}

// newEndpoint hands out the next client endpoint id, for c's next connection.
func (s *Sim) newEndpoint(c *Client) int32 {
	s.eps = append(s.eps, c)
	return int32(len(s.nodes) + len(s.eps) - 1)
}

// ID returns the endpoint id of the client's current connection (it changes when the client
// connects again, see Client).
func (c *Client) ID() int32 { return c.id }

// Region returns the client's region.
func (c *Client) Region() topo.RegionID { return c.region }

// Finished reports whether the client's body has returned.
func (c *Client) Finished() bool { return c.finished }

func (c *Client) begin() {
	seq := func(yield func(struct{}) bool) {
		c.yield = yield
		defer func() {
			c.finished = true
			if r := recover(); r != nil && r != errStopped { //nolint:errorlint // sentinel identity
				panic(r)
			}
		}()
		c.body(c.db)
	}
	c.next, c.stop = iter.Pull(seq)
	c.resume()
}

func (c *Client) resume() {
	if c.finished {
		return
	}
	c.next()
}

// block suspends the coroutine until the scheduler resumes it.
func (c *Client) block() {
	if !c.yield(struct{}{}) {
		panic(errStopped)
	}
}

// Stop tears down every client coroutine that has not finished (call after the run).
func (s *Sim) Stop() {
	s.stopping = true
	for _, c := range s.cls {
		if c.stop != nil && !c.finished {
			c.stop()
		}
	}
}

func (c *Client) deliver(m wire.Msg) {
	r, ok := m.(*wire.ClientReply)
	if !ok || c.want == nil || r.Txn != c.want.Txn || r.Seq != c.want.Seq {
		return // stale or duplicate reply
	}
	c.want = nil
	c.reply = r
	c.waitToken = 0 // the pending timeout is now dead
	c.sim.noteStale()
	c.resume()
}

func (c *Client) wake(token uint64) {
	if token != c.waitToken || token == 0 {
		return
	}
	c.waitToken = 0
	if c.want != nil {
		c.want = nil
		c.failure = c.cause
	}
	c.resume()
}

func (c *Client) sleepToken(d time.Duration) uint64 { return c.wakeAt(c.sim.now + int64(d)) }

// wakeAt makes the client's next wake-up the one at virtual time at.
func (c *Client) wakeAt(at int64) uint64 {
	c.sim.seq++
	tok := c.sim.seq
	c.waitToken = tok
	c.sim.schedule(event{at: at, kind: evClientWake, to: c.id, token: tok})
	return tok
}

// coordCrashed drops the client's connection to its crashed coordinator. A request in flight
// fails when the reset arrives: one way from the node, after whatever the node sent before it
// died (TCP delivers in order). A partition keeps the reset from arriving, and the request
// then waits out its timeout.
func (c *Client) coordCrashed() {
	c.connected = false
	if c.want == nil {
		return
	}
	s, from := c.sim, int32(c.coord)
	if s.blocked(from, c.id) {
		return
	}
	at := s.now + int64(s.cfg.Topology.OneWay(s.nodes[c.coord].region, c.region))
	at = max(at, s.linkLast[linkKey(from, c.id)])
	c.cause = fmt.Errorf("connection to node %d lost: node crashed", c.coord)
	s.noteStale() // the request's timeout
	c.wakeAt(at)
}

// dial connects to the coordinator again, as client.NetTransport does for the first request
// after it lost its connection.
func (c *Client) dial() error {
	s := c.sim
	n := s.nodes[c.coord]
	if s.blocked(c.id, int32(c.coord)) || s.blocked(int32(c.coord), c.id) {
		c.Sleep(c.timeout)
		return fmt.Errorf("dial node %d: no answer within %v", c.coord, c.timeout)
	}
	// At least a microsecond even without network delay: a client that retries refused dials
	// without pausing must still let virtual time reach the node's restart.
	rtt := max(2*s.cfg.Topology.OneWay(c.region, n.region), time.Microsecond)
	c.Sleep(rtt)
	if n.down {
		return fmt.Errorf("dial node %d: connection refused", c.coord)
	}
	inc := n.inc
	c.Sleep(rtt) // hello and welcome
	if n.down || n.inc != inc {
		return fmt.Errorf("handshake with node %d: connection lost: node crashed", c.coord)
	}
	c.id = s.newEndpoint(c)
	c.connected = true
	return nil
}

// RoundTrip implements client.Transport.
func (c *Client) RoundTrip(req *wire.ClientRequest) (*wire.ClientReply, error) {
	if c.sim.stopping {
		panic(errStopped)
	}
	if !c.connected {
		if req.Seq > 0 {
			// The transaction began on the lost connection: the node's new life never knew it.
			return nil, fmt.Errorf("connection to node %d lost during the transaction", c.coord)
		}
		if err := c.dial(); err != nil {
			return nil, err
		}
	}
	c.want = req
	c.reply = nil
	c.failure = nil
	c.cause = errTimeout
	c.sim.send(c.id, int32(c.coord), req, c.sim.now)
	c.sleepToken(c.timeout)
	c.block()
	if c.failure != nil {
		return nil, c.failure
	}
	return c.reply, nil
}

// Sleep implements client.Transport.
func (c *Client) Sleep(d time.Duration) {
	if d <= 0 {
		return
	}
	c.sleepToken(d)
	c.block()
}

// Now implements client.Transport: virtual true time.
func (c *Client) Now() int64 { return c.sim.now }
