package runtime

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fxamacker/cbor/v2"

	"github.com/meridiandb/meridian/internal/clock"
	"github.com/meridiandb/meridian/internal/node"
	"github.com/meridiandb/meridian/internal/runtime/frame"
	"github.com/meridiandb/meridian/internal/storage/durable"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/ts"
	"github.com/meridiandb/meridian/internal/wire"
)

// Options tune a Server beyond what the cluster configuration says.
type Options struct {
	Logger *slog.Logger // default slog.Default()
	// Seed seeds the node's Env.Rand; 0 derives one from the clock and the node id.
	Seed uint64
	// InMemory keeps the node's state in memory instead of Pebble: nothing survives the process.
	// For benchmarks and tests that measure the transport, never for a real node.
	InMemory bool
	// NoGRPC skips the node's gRPC listener even if the configuration gives it an address.
	NoGRPC bool
	// Cut names regions the node starts cut off from, as Server.SetCut would cut it: a node
	// restarted during a partition comes back on its side of it.
	Cut []string
	// ClockStep moves the node's clocks from the start, as SetClockStep would: a node restarted
	// while its clock is stepped comes back with it stepped.
	ClockStep time.Duration
	// Slowdown slows the node's frames to the named regions from the start, as SetSlowdown
	// would: a node restarted during a slowdown comes back slowed.
	Slowdown map[string]time.Duration
	// MaxSyncDuration is how long an operation on the node's disk may stay under way before
	// its store takes the disk for stalled and fails its writes, which stops the node
	// (fail-stop); 0: durable.DefaultMaxSyncDuration (20s).
	MaxSyncDuration time.Duration
	// store, when set, is the node's store (tests: one that fails).
	store durable.Backend
}

// Limits on queues, so that a slow or dead peer costs bounded memory.
const (
	inboxLen       = 8192  // events waiting for the event loop
	linkQueueLen   = 16384 // frames waiting for one destination
	helloTimeout   = 5 * time.Second
	dialTimeout    = time.Second
	redialBackoff  = 100 * time.Millisecond
	writeBufBytes  = 64 << 10
	readBufBytes   = 64 << 10
	maxLoggedDrops = 20 // per link, so a dead peer does not flood the log
)

// storeFailAfter is how long a store's background writes may keep failing (a full disk)
// before the node stops: a store that cannot flush soon takes no commit at all.
var storeFailAfter = 10 * time.Second

// Stats counts what a server's transport did.
type Stats struct {
	Received     uint64 // messages delivered to the handler from the network
	Sent         uint64 // frames written to sockets
	DecodeErrors uint64 // frames that failed to decode (dropped)
	Dropped      uint64 // frames dropped for want of a connection or queue space
	Clients      int64  // client connections open now
}

type event struct {
	from topo.NodeID
	msg  wire.Msg
	fn   func()
}

// Server hosts one node: its protocol handler, event loop, transport and store.
type Server struct {
	cfg  *Config
	id   topo.NodeID
	me   NodeConfig
	log  *slog.Logger
	h    node.Handler
	rng  *rand.Rand
	ln   net.Listener
	grpc *grpcServer
	mets *metricsServer
	// snapFlight is the read of the protocol's metrics queued for scrapes, if any (metrics.go).
	snapMu     sync.Mutex
	snapFlight *snapshotFlight

	store     durable.Backend
	committer *durable.Committer

	inbox  chan event
	selfQ  []event // messages a node sends itself, run after the current event
	timers map[node.TimerID]*time.Timer
	nextTm node.TimerID

	setup []frame.Setting // cfg.Setup(), which every peer's and client's Hello is held to
	// maxHello bounds the frame a connection's Hello may take, read before the node knows who
	// is there: twice our own Hello's (a peer's carries the same settings), and 64 KiB at least.
	maxHello  uint32
	peers     []*link // by node id; nil for self
	clientsMu sync.Mutex
	clients   map[topo.NodeID]clientSink
	endpoints endpointSeq // numbers client connections over all the node's lives (endpoint.go)
	connsMu   sync.Mutex
	conns     map[net.Conn]struct{}
	inbound   []peerInbound // by node id: which of a peer's connections to this node is current

	received, sent, decodeErrs, dropped atomic.Uint64
	clientCount                         atomic.Int64
	cut                                 atomic.Pointer[cutSet]          // regions a partition cuts this node off from (partition.go)
	clockStep                           atomic.Int64                    // nanoseconds SetClockStep moved the clocks by (clockstep.go)
	slow                                atomic.Pointer[[]time.Duration] // extra delay of frames to each region (slowdown.go); nil for none
	// startWall and startMono are the wall and monotonic readings at start, Elapsed's origin.
	startWall int64
	startMono time.Time

	stop      chan struct{}
	stopOnce  sync.Once
	loopDone  chan struct{}
	errMu     sync.Mutex
	err       error
	closeOnce sync.Once
	// storeFailed is set when the node stopped because its store failed: Close then leaves the
	// store as a crash would, since closing it waits on writes that will not finish.
	storeFailed atomic.Bool
	// clocks measures the peers' clocks against this node's (clockmonitor.go); nil when the
	// protocol puts no bound on them, or the node holds no data.
	clocks *clockMonitor
	wg     sync.WaitGroup
}

// Start opens node id's store, starts its protocol handler, and listens on its address.
func Start(cfg *Config, id topo.NodeID, opts Options) (*Server, error) {
	if int(id) < 0 || int(id) >= len(cfg.Nodes) {
		return nil, fmt.Errorf("runtime: no node %d in %s", id, cfg.Source)
	}
	me := cfg.Nodes[id]
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	log = log.With("node", me.Name)
	seed := opts.Seed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	setup := cfg.Setup()
	startMono := time.Now()
	s := &Server{
		startWall: startMono.UnixNano(), startMono: startMono,
		cfg: cfg, id: id, me: me, log: log, setup: setup, maxHello: helloBound(cfg, id, setup),
		rng:      rand.New(rand.NewPCG(seed, uint64(id))),
		inbox:    make(chan event, inboxLen),
		timers:   map[node.TimerID]*time.Timer{},
		clients:  map[topo.NodeID]clientSink{},
		conns:    map[net.Conn]struct{}{},
		inbound:  make([]peerInbound, len(cfg.Nodes)),
		stop:     make(chan struct{}),
		loopDone: make(chan struct{}),
	}
	if len(opts.Cut) > 0 {
		set, err := cfg.cutSet(me, opts.Cut)
		if err != nil {
			return nil, err
		}
		s.cut.Store(&set)
		log.Warn("starting cut off from regions by a partition", "regions", strings.Join(opts.Cut, ","))
	}
	if opts.ClockStep != 0 {
		if err := s.SetClockStep(opts.ClockStep); err != nil {
			return nil, err
		}
	}
	if len(opts.Slowdown) > 0 {
		if err := s.SetSlowdown(opts.Slowdown); err != nil {
			return nil, err
		}
	}
	var err error
	if opts.store != nil {
		s.store = opts.store
	} else if opts.InMemory {
		s.store = durable.NewMem()
	} else if s.store, err = durable.OpenPebbleWith(me.DataDir, durable.PebbleOptions{MaxSyncDuration: opts.MaxSyncDuration, Logger: log}); err != nil {
		return nil, fmt.Errorf("node %s: %w", me.Name, err)
	}
	if s.endpoints.next, err = loadEndpointSeq(s.store); err != nil {
		s.closeEarly()
		return nil, fmt.Errorf("node %s: %w", me.Name, err)
	}
	s.endpoints.limit = s.endpoints.next
	// A handler may persist, send and set timers while it is being built (k2 persists its
	// incarnation), so the committer and the links to peers exist first.
	s.committer = durable.NewCommitter(durable.WithApplyDelay(s.store, cfg.FlushDelay), 0)
	s.peers = make([]*link, len(cfg.Nodes))
	for _, n := range cfg.Nodes {
		if n.ID != id {
			s.peers[n.ID] = s.newLink(n.ID, n.Addr, cfg.delay(me.Region, n.Region), nil)
		}
	}
	h, err := cfg.Protocol.NewNode(node.Config{Env: (*env)(s), Durable: s.store, Options: cfg.Options})
	if err != nil {
		s.closeEarly()
		return nil, fmt.Errorf("node %s: %w", me.Name, err)
	}
	if me.Roles&topo.RoleOracle != 0 {
		if _, own := h.(*clock.OracleHandler); !own {
			h = &oracleMux{oracle: clock.NewOracleHandler((*env)(s), clock.Oracle{ID: uint32(id), Epsilon: cfg.Epsilon}), proto: h}
		}
	}
	s.h = h
	// Before the metrics endpoint serves (its Collect reads s.clocks) and before connections
	// are accepted (serveConn reads it).
	if bound := clockBound(cfg); bound > 0 && me.Roles&topo.RoleData != 0 {
		s.clocks = newClockMonitor(bound, dataPeers(cfg, id), func(n topo.NodeID) string { return cfg.Nodes[n].Name })
	}
	if s.ln, err = net.Listen("tcp", me.Addr); err != nil {
		s.closeEarly()
		return nil, fmt.Errorf("node %s: %w", me.Name, err)
	}
	if me.GRPCAddr != "" && !opts.NoGRPC {
		if s.grpc, err = startGRPC(s, me.GRPCAddr); err != nil {
			// Not Close: it waits for the event loop, which has not started.
			_ = s.ln.Close()
			s.closeEarly()
			return nil, err
		}
	}
	if me.MetricsAddr != "" {
		if s.mets, err = startMetrics(s, me.MetricsAddr); err != nil {
			if s.grpc != nil {
				s.grpc.stop()
			}
			_ = s.ln.Close()
			s.closeEarly()
			return nil, err
		}
	}
	if s.clocks != nil {
		s.wg.Add(1)
		go s.monitorClock()
	}
	go s.loop()
	s.wg.Add(1)
	go s.accept()
	if st, ok := s.store.(failingStore); ok {
		s.wg.Add(1)
		go s.watchStore(st)
	}
	log.Info("node started", "addr", s.ln.Addr().String(), "roles", me.Roles.String(), "protocol", cfg.Protocol.Name())
	switch off := me.ClockOffset; {
	case off > cfg.Epsilon || off < -cfg.Epsilon:
		log.Warn("this node's clocks are moved on purpose (clock_offset) past epsilon: protocols that trust TrueTime may break their promises",
			"offset", off, "epsilon", cfg.Epsilon)
	case off != 0:
		log.Warn("this node's clocks are moved on purpose (clock_offset)", "offset", off, "epsilon", cfg.Epsilon)
	}
	return s, nil
}

// Addr is the address the node listens on.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// ID is the node's topology id.
func (s *Server) ID() topo.NodeID { return s.id }

// Handler is the node's protocol handler (for tests and metrics; touch it only when the node is
// idle or closed, since it belongs to the event loop).
func (s *Server) Handler() node.Handler { return s.h }

// Stats returns the transport's counters.
func (s *Server) Stats() Stats {
	return Stats{Received: s.received.Load(), Sent: s.sent.Load(), DecodeErrors: s.decodeErrs.Load(),
		Dropped: s.dropped.Load(), Clients: s.clientCount.Load()}
}

// Done is closed when the node stops, by Close or by a fatal error (see Err).
func (s *Server) Done() <-chan struct{} { return s.loopDone }

// Err returns the fatal error that stopped the node, if any.
func (s *Server) Err() error {
	s.errMu.Lock()
	defer s.errMu.Unlock()
	return s.err
}

func (s *Server) fail(err error) {
	s.errMu.Lock()
	if s.err == nil {
		s.err = err
	}
	s.errMu.Unlock()
	// The log may be a file on the disk that just failed (cluster start puts a node's log in
	// its data directory), and a write to a hung disk never returns: the node stops whether or
	// not the line gets out.
	logged := make(chan struct{})
	go func() {
		s.log.Error("node stopping", "err", err)
		close(logged)
	}()
	select {
	case <-logged:
	case <-time.After(failLogWait):
	}
	s.stopOnce.Do(func() { close(s.stop) })
}

// failLogWait bounds how long a failing node waits for its "node stopping" line to be written
// before it stops anyway.
var failLogWait = 2 * time.Second

// failingStore is a store that can tell that its writes have been failing for a while.
type failingStore interface {
	Failing(after time.Duration) error
}

// watchStore stops the node once its store has been failing for storeFailAfter (fail-stop):
// with the disk full a node answered nothing, its commits waiting on a store that retried its
// flushes without end, while it looked alive to its peers and to cluster status.
func (s *Server) watchStore(st failingStore) {
	s.every(time.Second, func() bool {
		err := st.Failing(storeFailAfter)
		if err == nil {
			return true
		}
		// A store whose disk stalled fails its writes at once, the one under way too, and its
		// Close returns at once: Close may finish the committer and close it.
		if !errors.Is(err, durable.ErrDiskStalled) {
			s.storeFailed.Store(true)
		}
		s.fail(fmt.Errorf("store: %w", err))
		return false
	})
}

// every calls f each period, from a goroutine counted in s.wg, until the node stops or f
// returns false.
func (s *Server) every(period time.Duration, f func() bool) {
	defer s.wg.Done()
	tick := time.NewTicker(period)
	defer tick.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-tick.C:
			if !f() {
				return
			}
		}
	}
}

// Close stops the node: no new connections or messages, queued persists are finished, the store
// is closed. It is safe to call more than once.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		s.stopOnce.Do(func() { close(s.stop) })
		if s.grpc != nil {
			s.grpc.stop()
		}
		if s.mets != nil {
			s.mets.stop()
		}
		_ = s.ln.Close()
		s.connsMu.Lock()
		for c := range s.conns {
			_ = c.Close()
		}
		s.connsMu.Unlock()
		s.wg.Wait()
		if s.storeFailed.Load() {
			// What the committer still holds was never acknowledged; what was is in the
			// synced log, which the next start recovers, as after kill -9.
			s.log.Info("node stopped; its store was left as a crash leaves it")
			return
		}
		if s.committer != nil {
			s.committer.Close()
		}
		select {
		case <-s.loopDone:
		default:
			// Start failed before the loop ran.
			if s.committer == nil || s.h == nil {
				close(s.loopDone)
			} else {
				<-s.loopDone
			}
		}
		_ = s.store.Close()
		s.log.Info("node stopped")
	})
}

// post hands an event to the loop; it gives up once the node is stopping.
func (s *Server) post(e event) {
	if s.stopping() {
		return // a select with both ready picks at random
	}
	select {
	case s.inbox <- e:
	case <-s.stop:
	}
}

// stopping reports whether the node is stopping. The loop asks before every event: once a
// persist has failed (fail), nothing more may run, and a select with an event and the stop
// both ready picks either (review: a few events could still run after a failure).
func (s *Server) stopping() bool {
	select {
	case <-s.stop:
		return true
	default:
		return false
	}
}

func (s *Server) loop() {
	defer close(s.loopDone)
	for {
		select {
		case e := <-s.inbox:
			if s.stopping() {
				continue // the stop case ends the loop
			}
			s.run(e)
			for len(s.selfQ) > 0 && !s.stopping() {
				q := s.selfQ[0]
				s.selfQ[0] = event{}
				s.selfQ = s.selfQ[1:]
				s.run(q)
			}
		case <-s.stop:
			for _, t := range s.timers {
				t.Stop()
			}
			return
		}
	}
}

// run executes one event. A handler that panics on a message drops that message instead of
// taking the node down: a hostile or buggy peer must not be able to crash a server.
func (s *Server) run(e event) {
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("handler panicked; event dropped", "from", e.from, "msg", fmt.Sprintf("%T", e.msg), "panic", r)
		}
	}()
	if e.fn != nil {
		e.fn()
		return
	}
	s.h.Handle(e.from, e.msg)
}

// route sends an encoded message (m is the same message, for self-delivery).
func (s *Server) route(to topo.NodeID, payload []byte, m wire.Msg) {
	switch {
	case to == s.id:
		s.selfQ = append(s.selfQ, event{from: s.id, msg: m})
	case int(to) >= 0 && int(to) < len(s.peers):
		s.peers[to].enqueue(to, payload)
	default:
		s.relay(to, payload)
	}
}

// relay forwards a frame to a client endpoint, through the node that hosts it.
func (s *Server) relay(to topo.NodeID, payload []byte) {
	host, ok := frame.HostOf(to)
	if !ok || int(host) >= len(s.peers) {
		s.dropped.Add(1)
		s.log.Warn("message for unknown endpoint dropped", "to", to)
		return
	}
	if host != s.id {
		s.peers[host].enqueue(to, payload)
		return
	}
	s.clientsMu.Lock()
	l := s.clients[to]
	s.clientsMu.Unlock()
	if l == nil {
		// The client hung up; its transaction's reply has nowhere to go.
		s.dropped.Add(1)
		return
	}
	l.enqueue(to, payload)
}

func (s *Server) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			select {
			case <-s.stop:
			default:
				s.log.Error("accept failed; node stops listening", "err", err)
			}
			return
		}
		s.connsMu.Lock()
		s.conns[c] = struct{}{}
		s.connsMu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.serveConn(c)
			s.connsMu.Lock()
			delete(s.conns, c)
			s.connsMu.Unlock()
			_ = c.Close()
		}()
	}
}

// clientRequestKind is the one kind a client connection may send.
var clientRequestKind = (&wire.ClientRequest{}).Kind()

// helloBound is Server.maxHello: twice the frame of the Hello this node sends its peers, and
// 64 KiB at least. A length prefix alone, before any Hello, made a node allocate what it claimed
// (16 MiB) and hold it for helloTimeout (review).
func helloBound(cfg *Config, id topo.NodeID, setup []frame.Setting) uint32 {
	own, err := wire.Encode(&frame.Hello{From: id, Cluster: cfg.Name, Protocol: cfg.Protocol.Name(), Setup: setup})
	if err != nil {
		return frame.MaxFrameBytes
	}
	return uint32(min(max(2*len(own), 64<<10), frame.MaxFrameBytes))
}

// serveConn reads one inbound connection: a Hello, then frames until it closes.
func (s *Server) serveConn(c net.Conn) {
	open := newOpenTxns(forgetSilentAfter(s.cfg)) // a client connection's transactions not finished (abortOpen)
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetNoDelay(true)
	}
	r := bufio.NewReaderSize(c, readBufBytes)
	_ = c.SetReadDeadline(time.Now().Add(helloTimeout))
	_, payload, err := frame.ReadMax(r, s.maxHello)
	if err != nil {
		s.log.Debug("connection closed before its hello", "remote", c.RemoteAddr().String(), "err", err)
		return
	}
	m, err := wire.Decode(payload)
	hello, ok := m.(*frame.Hello)
	if err != nil || !ok {
		s.decodeErrs.Add(1)
		s.log.Error("connection did not open with a hello; closed", "remote", c.RemoteAddr().String(), "err", err)
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	from := hello.From
	differs := s.helloDiffers(hello)
	var cl *link
	switch {
	// A client that names no cluster accepts any, as over gRPC (sessionDiffers) and as one that
	// names no protocol: client.WithCluster is a check the caller opts into. A node always names
	// its cluster, so a peer that does not is refused.
	case hello.Cluster != s.cfg.Name && (hello.Cluster != "" || !hello.Client):
		s.log.Error("connection from another cluster refused", "remote", c.RemoteAddr().String(), "cluster", hello.Cluster)
		if hello.Client {
			_ = frame.WriteMsg(c, 0, &frame.Welcome{Node: s.id, Error: fmt.Sprintf("this is cluster %q, not %q", s.cfg.Name, hello.Cluster)})
		}
		return
	case differs != "":
		if hello.Client {
			s.log.Warn("client expecting another configuration refused", "remote", c.RemoteAddr().String(), "differs", differs)
			_ = frame.WriteMsg(c, 0, &frame.Welcome{Node: s.id, Error: differs})
		} else {
			s.log.Error("connection from a node configured otherwise refused", "remote", c.RemoteAddr().String(), "from", from, "differs", differs)
		}
		return
	case hello.Client:
		if s.me.Roles&topo.RoleData == 0 {
			_ = frame.WriteMsg(c, 0, &frame.Welcome{Node: s.id, Error: "node " + s.me.Name + " is not a data node; clients connect to data nodes"})
			return
		}
		if from, err = s.newClientID(); err != nil {
			s.log.Error("client connection refused", "remote", c.RemoteAddr().String(), "err", err)
			_ = frame.WriteMsg(c, 0, &frame.Welcome{Node: s.id, Error: err.Error()})
			return
		}
		cl = s.newLink(from, "", s.cfg.delay(s.me.Region, s.me.Region), c)
		watched := watchedSink{cl, open}
		s.addClient(from, watched)
		defer s.removeClient(from, watched)
		defer s.abortOpen(from, open, s.cfg.ClientTimeout)
		w, _ := wire.Encode(&frame.Welcome{Endpoint: from, Node: s.id})
		cl.enqueue(from, w)
	case int(from) < 0 || int(from) >= len(s.cfg.Nodes) || from == s.id:
		s.log.Error("hello from an unknown node; closed", "remote", c.RemoteAddr().String(), "from", from)
		return
	case s.cutFrom(from):
		return // across a partition: before it supersedes the peer's current connection
	}
	var gen uint64 // this connection's place among the peer's (peerInbound)
	if cl == nil {
		gen = s.inbound[from].open()
	}
	for {
		dest, payload, err := frame.Read(r)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				s.log.Warn("connection lost", "from", from, "err", err)
			}
			return
		}
		if cl == nil && s.cutFrom(from) {
			s.dropped.Add(1)
			return // the peer's link sees its connection die, as across a real partition
		}
		if cl == nil && dest != s.id {
			// A peer relays a reply to one of our clients.
			if !s.inbound[from].deliver(gen, func() { s.relay(dest, payload) }) {
				s.supersededConn(from)
				return
			}
			continue
		}
		if k, ok := wire.KindOf(payload); cl != nil && ok && k != clientRequestKind {
			// Decoded first, a small frame of another kind could take a large allocation (a
			// 1 MiB array of empty items decodes to tens of MiB: review); a client may send
			// client requests only.
			s.log.Error("client sent a non-client message; dropped", "from", from, "type", wire.Name(k))
			continue
		}
		m, err := wire.Decode(payload)
		if err != nil {
			s.decodeErrs.Add(1)
			if cl != nil {
				if rep := refusal(payload, err); rep != nil {
					s.log.Warn("undecodable client request refused", "from", from, "txn", rep.Txn, "seq", rep.Seq, "err", err)
					if w, err := wire.Encode(rep); err == nil {
						cl.enqueue(from, w)
					}
					continue
				}
			}
			s.log.Error("undecodable message dropped", "from", from, "bytes", len(payload), "err", err)
			continue
		}
		if cl != nil {
			req, ok := m.(*wire.ClientRequest)
			if !ok {
				s.log.Error("client sent a non-client message; dropped", "from", from, "type", wire.Name(m.Kind()))
				continue
			}
			open.saw(req)
		}
		if cl != nil {
			s.received.Add(1)
			s.post(event{from: from, msg: m})
			continue
		}
		switch m := m.(type) {
		case *frame.ClockPing:
			s.onClockPing(from, m)
			continue
		case *frame.ClockPong:
			s.onClockPong(from, m)
			continue
		}
		if !s.inbound[from].deliver(gen, func() { s.received.Add(1); s.post(event{from: from, msg: m}) }) {
			s.supersededConn(from)
			return
		}
	}
}

// peerInbound keeps a peer's links FIFO across its reconnections. A peer sends on one
// connection at a time and dials a new one only once it has given the last up, but this node
// may still be reading frames the last one holds while the new one's arrive: taken, an old
// frame would land after newer ones (the protocols count on links that lose messages but do not
// reorder them). So only the newest connection's frames are delivered; one that finds itself
// superseded drops what it still holds, a loss, and closes.
type peerInbound struct {
	mu  sync.Mutex
	gen uint64
}

// open makes a newly accepted connection the peer's current one and returns its generation.
func (p *peerInbound) open() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.gen++
	return p.gen
}

// deliver runs deliver if connection gen is still the peer's current one, and reports whether
// it was. The lock spans the delivery, so no frame of an older connection can follow the first
// of a newer one into the inbox.
func (p *peerInbound) deliver(gen uint64, deliver func()) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.gen != gen {
		return false
	}
	deliver()
	return true
}

func (s *Server) supersededConn(from topo.NodeID) {
	s.dropped.Add(1)
	s.log.Info("a peer's older connection still held frames after it reconnected; dropped, so its messages stay in order", "from", from)
}

// helloDiffers says how what a Hello's sender runs or expects differs from this node, or "" if
// it does not. A client's empty protocol or setup accepts any; a node must send both.
func (s *Server) helloDiffers(h *frame.Hello) string {
	who := "the client's configuration"
	if !h.Client {
		who = fmt.Sprintf("the configuration of node %d", h.From)
		if int(h.From) >= 0 && int(h.From) < len(s.cfg.Nodes) {
			who = "the configuration of node " + s.cfg.Nodes[h.From].Name
		}
	}
	const advice = "start every node and client from the configuration the cluster was started with"
	if mine := s.cfg.Protocol.Name(); (h.Protocol != "" || !h.Client) && h.Protocol != mine {
		return fmt.Sprintf("node %s runs protocol %s but %s has %s: %s", s.me.Name, mine, who, orUnset(h.Protocol), advice)
	}
	if h.Setup == nil && h.Client {
		return ""
	}
	theirs := make(map[string]string, len(h.Setup))
	for _, st := range h.Setup {
		theirs[st.Name] = st.Value
	}
	mine := make(map[string]bool, len(s.setup))
	differ := func(name, mv, tv string) string {
		return fmt.Sprintf("node %s has %s %s but %s has %s: %s", s.me.Name, name, orUnset(mv), who, orUnset(tv), advice)
	}
	for _, st := range s.setup {
		mine[st.Name] = true
		if v := theirs[st.Name]; v != st.Value {
			return differ(st.Name, st.Value, v)
		}
	}
	for _, st := range h.Setup {
		if !mine[st.Name] {
			return differ(st.Name, "", st.Value)
		}
	}
	return ""
}

func orUnset(v string) string {
	if v == "" {
		return "(unset)"
	}
	return v
}

// lenientIDs reads only a client request's ids, accepting text that is not UTF-8.
var lenientIDs = func() cbor.DecMode {
	dm, err := cbor.DecOptions{UTF8: cbor.UTF8DecodeInvalid, MaxArrayElements: 1 << 20, MaxMapPairs: 1 << 20, MaxNestedLevels: 32}.DecMode()
	if err != nil {
		panic(err)
	}
	return dm
}()

// refusal answers a client request the codec refused (one holding a key that is not UTF-8,
// say) with a bad-argument reply, so that the client hears why at once instead of waiting out
// its timeout and reporting the outcome unknown. The request never reached the protocol, so the
// refusal is its whole outcome. It returns nil for a frame that is not a client request or
// whose ids cannot be read: that frame is dropped, and its sender, if any, times out.
func refusal(payload []byte, err error) *wire.ClientReply {
	// A wire frame is a version byte, a two-byte kind and a CBOR body (package wire).
	if len(payload) < 3 || payload[0] != wire.Version || wire.Kind(binary.BigEndian.Uint16(payload[1:3])) != (*wire.ClientRequest)(nil).Kind() {
		return nil
	}
	var ids struct {
		Txn uint64
		Seq uint32
	}
	if lenientIDs.Unmarshal(payload[3:], &ids) != nil {
		return nil
	}
	return &wire.ClientReply{Txn: ids.Txn, Seq: ids.Seq, Code: wire.CodeBadArgument,
		Error: strings.ToValidUTF8("the node could not decode the request: "+err.Error(), "?")}
}

// clientSink is where replies to a client endpoint go: a TCP connection's link or a gRPC stream.
type clientSink interface {
	enqueue(dest topo.NodeID, payload []byte)
	close()
}

func (s *Server) addClient(id topo.NodeID, c clientSink) {
	s.clientsMu.Lock()
	if old := s.clients[id]; old != nil {
		old.close()
	}
	s.clients[id] = c
	s.clientsMu.Unlock()
	s.clientCount.Add(1)
}

func (s *Server) removeClient(id topo.NodeID, c clientSink) {
	s.clientsMu.Lock()
	if s.clients[id] == c {
		delete(s.clients, id)
	}
	s.clientsMu.Unlock()
	s.clientCount.Add(-1)
	c.close()
}

// oracleMux serves TrueTime requests on an oracle node whose protocol has no oracle logic of
// its own, and hands everything else to the protocol.
type oracleMux struct {
	oracle *clock.OracleHandler
	proto  node.Handler
}

func (m *oracleMux) Handle(from node.ID, msg wire.Msg) {
	if _, ok := msg.(*clock.TSBatchRequest); ok {
		m.oracle.Handle(from, msg)
		return
	}
	m.proto.Handle(from, msg)
}

// env is the real node.Env. Its methods are called only from the event loop.
type env Server

func (e *env) Self() topo.NodeID        { return e.id }
func (e *env) Topology() *topo.Topology { return e.cfg.Topology }
func (e *env) Now() int64 {
	return time.Now().UnixNano() + int64(e.me.ClockOffset) + e.clockStep.Load()
}

// Elapsed is Now without the clock steps: Go's monotonic clock since the server started, which
// NTP slews but never steps, from the wall reading (and the configured offset) at that start.
func (e *env) Elapsed() int64 {
	return e.startWall + int64(time.Since(e.startMono)) + int64(e.me.ClockOffset)
}
func (e *env) Rand() *rand.Rand { return e.rng }

// Charge is a no-op: real handlers spend real CPU.
func (e *env) Charge(time.Duration) {}

func (e *env) TrueTime() ts.Interval {
	now := e.Now()
	return ts.Interval{Earliest: now - int64(e.cfg.Epsilon), Latest: now + int64(e.cfg.Epsilon)}
}

func (e *env) Send(to node.ID, m wire.Msg) {
	s := (*Server)(e)
	payload, err := wire.Encode(m)
	if err != nil {
		s.log.Error("message could not be encoded; dropped", "to", to, "err", err)
		return
	}
	s.route(to, payload, m)
}

func (e *env) After(d time.Duration, fn func()) node.TimerID {
	s := (*Server)(e)
	s.nextTm++
	id := s.nextTm
	s.timers[id] = time.AfterFunc(d, func() {
		s.post(event{fn: func() {
			if _, live := s.timers[id]; live {
				delete(s.timers, id)
				fn()
			}
		}})
	})
	return id
}

func (e *env) Cancel(id node.TimerID) {
	if t, ok := e.timers[id]; ok {
		t.Stop()
		delete(e.timers, id)
	}
}

func (e *env) Persist(batch []node.Write, done func()) {
	s := (*Server)(e)
	s.committer.Submit(batch, func(err error) {
		if err != nil {
			// Durability is gone: stop rather than acknowledge what may be lost.
			s.fail(fmt.Errorf("persist: %w", err))
			return
		}
		if done != nil {
			s.post(event{fn: done})
		}
	})
}

// closeEarly releases what Start acquired when it fails before the node runs.
func (s *Server) closeEarly() {
	s.stopOnce.Do(func() { close(s.stop) })
	for _, l := range s.peers {
		if l != nil {
			l.close()
		}
	}
	if s.committer != nil {
		s.committer.Close()
	}
	_ = s.store.Close()
}
