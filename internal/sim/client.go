package sim

import (
	"errors"
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
type Client struct {
	sim    *Sim
	id     int32 // endpoint id (after all node ids)
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
	timedOut  bool
	finished  bool
	timeout   time.Duration
}

// SetTimeout changes how long this client waits for a reply (default Config.ClientTimeout).
func (c *Client) SetTimeout(d time.Duration) { c.timeout = d }

// AddClient registers a client in a region, attached to coordinator coord, starting at virtual
// time start. body runs as a coroutine; it returns when its work is done.
func (s *Sim) AddClient(region topo.RegionID, coord topo.NodeID, start int64, body func(db *client.DB)) *Client {
	c := &Client{sim: s, id: int32(len(s.nodes) + len(s.cls)), region: region, coord: coord, body: body, timeout: s.cfg.ClientTimeout}
	c.db = client.Open(c)
	s.cls = append(s.cls, c)
	s.schedule(event{at: start, kind: evClientStart, to: c.id})
	return c
}

// ID returns the client's endpoint id.
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
		c.timedOut = true
	}
	c.resume()
}

func (c *Client) sleepToken(d time.Duration) uint64 {
	c.sim.seq++
	tok := c.sim.seq
	c.waitToken = tok
	c.sim.schedule(event{at: c.sim.now + int64(d), kind: evClientWake, to: c.id, token: tok})
	return tok
}

// RoundTrip implements client.Transport.
func (c *Client) RoundTrip(req *wire.ClientRequest) (*wire.ClientReply, error) {
	if c.sim.stopping {
		panic(errStopped)
	}
	c.want = req
	c.reply = nil
	c.timedOut = false
	c.sim.send(c.id, int32(c.coord), req, c.sim.now)
	c.sleepToken(c.timeout)
	c.block()
	if c.timedOut {
		return nil, errTimeout
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
