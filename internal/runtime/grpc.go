package runtime

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/meridiandb/meridian/internal/runtime/frame"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/ts"
	"github.com/meridiandb/meridian/internal/wire"
	"github.com/meridiandb/meridian/proto/meridianpb"
)

// grpcServer serves proto/meridian.proto on a data node: each Session stream is a client
// endpoint whose requests enter the event loop exactly like those of a TCP client.
type grpcServer struct {
	meridianpb.UnimplementedMeridianServer
	s   *Server
	srv *grpc.Server
	ln  net.Listener
}

func startGRPC(s *Server, addr string) (*grpcServer, error) {
	if s.me.Roles&topo.RoleData == 0 {
		return nil, fmt.Errorf("node %s: grpc_addr is set but only data nodes serve clients", s.me.Name)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("node %s: grpc: %w", s.me.Name, err)
	}
	g := &grpcServer{s: s, srv: grpc.NewServer(grpc.MaxRecvMsgSize(wire.MaxFrameBytes), grpc.ForceServerCodecV2(newLenientCodec())), ln: ln}
	meridianpb.RegisterMeridianServer(g.srv, g)
	go func() { _ = g.srv.Serve(ln) }()
	return g, nil
}

func (g *grpcServer) stop() { g.srv.Stop() }

// streamSink queues replies for a stream's sending goroutine.
type streamSink struct {
	q        chan []byte
	done     chan struct{}
	once     sync.Once
	overflow chan struct{} // closed when a reply found the queue full
	overOnce sync.Once
}

func (k *streamSink) enqueue(_ topo.NodeID, payload []byte) {
	select {
	case k.q <- payload:
	case <-k.done:
	default:
		// A TCP link drops the frame here and its client times out; a gRPC client has no
		// timeout of ours, so a dropped reply (a commit's) would leave it waiting on a live
		// stream for good. The session ends instead, and its client knows that what it has
		// not heard of is unknown. Session holds each stream to maxPendingRequests answers
		// owed, so only a protocol that answers one request twice gets here.
		k.overOnce.Do(func() { close(k.overflow) })
	}
}

func (k *streamSink) close() { k.once.Do(func() { close(k.done) }) }

// maxPendingRequests bounds the requests of a stream whose answers are owed: a client that
// sends faster than it reads is held back by gRPC's flow control rather than have its answers
// queued without bound or dropped.
const maxPendingRequests = linkQueueLen

// The metadata keys by which a gRPC client names what it expects, like the Hello of a TCP
// client: a session whose cluster or protocol differs from this node's is refused before its
// first request, not run against a database it did not mean (and then checked against the
// wrong model). Either may be left out.
const (
	grpcClusterKey  = "meridian-cluster"
	grpcProtocolKey = "meridian-protocol"
)

// sessionDiffers says how a session's metadata differs from this node, or "" if it does not.
func (s *Server) sessionDiffers(md metadata.MD) string {
	if v := md.Get(grpcClusterKey); len(v) > 0 && v[0] != s.cfg.Name {
		return fmt.Sprintf("this is cluster %q, not %q", s.cfg.Name, v[0])
	}
	if v := md.Get(grpcProtocolKey); len(v) > 0 {
		return s.helloDiffers(&frame.Hello{Client: true, Protocol: v[0]})
	}
	return ""
}

// Session implements meridianpb.MeridianServer.
func (g *grpcServer) Session(stream meridianpb.Meridian_SessionServer) error {
	s := g.s
	md, _ := metadata.FromIncomingContext(stream.Context())
	if differs := s.sessionDiffers(md); differs != "" {
		s.log.Warn("gRPC client expecting another cluster refused", "differs", differs)
		return status.Error(codes.FailedPrecondition, differs)
	}
	id, err := s.newClientID()
	if err != nil {
		s.log.Error("gRPC session refused", "err", err)
		return status.Error(codes.Unavailable, err.Error())
	}
	sink := &streamSink{q: make(chan []byte, linkQueueLen), done: make(chan struct{}), overflow: make(chan struct{})}
	open := newOpenTxns(forgetSilentAfter(s.cfg)) // the stream's transactions not finished (abortOpen)
	watched := watchedSink{sink, open}
	s.addClient(id, watched)
	defer s.removeClient(id, watched)
	// A hang-up waits for commits still out to be answered (abortOpen), but not after drain
	// has already waited for them a client timeout.
	hangUpWait := s.cfg.ClientTimeout
	defer func() { s.abortOpen(id, open, hangUpWait) }()
	ctx := stream.Context()
	// pending counts the requests posted whose answers are not sent yet; answered wakes the
	// receiving side when one is.
	var pending atomic.Int64
	answered := make(chan struct{}, 1)
	sendErr := make(chan error, 1)
	go func() {
		for {
			select {
			case payload := <-sink.q:
				m, err := wire.Decode(payload)
				rep, ok := m.(*wire.ClientReply)
				if err != nil || !ok {
					continue // only client replies are addressed to a client
				}
				if err := stream.Send(replyToPB(rep)); err != nil {
					sendErr <- err
					return
				}
				pending.Add(-1)
				select {
				case answered <- struct{}{}:
				default:
				}
			case <-sink.done:
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	// Recv runs on its own goroutine so that the session can end while it waits: a client
	// waiting for an answer sends nothing.
	reqs := make(chan *meridianpb.Request)
	recvErr := make(chan error, 1)
	go func() {
		for {
			req, err := stream.Recv()
			if err != nil {
				recvErr <- err
				return
			}
			select {
			case reqs <- req:
			case <-ctx.Done():
				return
			}
		}
	}()
	lost := func() error {
		return status.Errorf(codes.ResourceExhausted, "an answer was dropped (the client did not read its answers): the outcome of the %d requests not answered is unknown", pending.Load())
	}
	for {
		var req *meridianpb.Request
		select {
		case req = <-reqs:
		case err := <-recvErr:
			if !errors.Is(err, io.EOF) {
				return err
			}
			err = g.drain(ctx, &pending, answered, sendErr, sink)
			if status.Code(err) == codes.DeadlineExceeded {
				hangUpWait = 0
			}
			return err
		case err := <-sendErr:
			return err
		case <-sink.overflow:
			return lost()
		}
		for pending.Load() >= maxPendingRequests {
			select {
			case <-answered:
			case err := <-sendErr:
				return err
			case <-sink.overflow:
				return lost()
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		pending.Add(1)
		if req.Op < meridianpb.Op_OP_GET || req.Op > meridianpb.Op_OP_BATCH {
			// Answered like any bad request, not by ending the stream: that would lose the
			// answers of the stream's other transactions, a commit's among them.
			if w, err := wire.Encode(&wire.ClientReply{Txn: req.Txn, Seq: req.Seq, Code: wire.CodeBadArgument,
				Error: fmt.Sprintf("unknown operation %v", req.Op)}); err == nil {
				sink.enqueue(id, w)
			}
			continue
		}
		s.received.Add(1)
		m := &wire.ClientRequest{Txn: req.Txn, Seq: req.Seq, Op: wire.Op(req.Op), Key: req.Key,
			EndKey: req.EndKey, Limit: req.Limit, Value: req.Value, ReadOnly: req.ReadOnly, Attempt: req.Attempt, Label: req.Label}
		for _, op := range req.Batch {
			// An unknown operation inside a batch reaches the protocol as it is and is refused
			// there with the rest of the batch's validation.
			m.Batch = append(m.Batch, wire.BatchOp{Op: wire.Op(op.Op), Key: op.Key, Value: op.Value})
		}
		if open.repeats(m) {
			// The coordinator drops a copy unanswered. Posted, it would hold one of the
			// stream's maxPendingRequests for good, and that many repeats stalled the stream:
			// a commit sent after them was never answered (review). Answered here instead.
			if w, err := wire.Encode(&wire.ClientReply{Txn: req.Txn, Seq: req.Seq, Code: wire.CodeBadArgument,
				Error: fmt.Sprintf("duplicate request: transaction %d already sent a request numbered %d or higher on this stream", req.Txn, req.Seq)}); err == nil {
				sink.enqueue(id, w)
			}
			continue
		}
		open.saw(m)
		s.post(event{from: id, msg: m})
	}
}

// drain keeps a stream whose client has closed its side open until every answer owed is sent:
// closing a stream after its last request (a commit) and then reading the answers is how a
// bidirectional stream is ended, and returning at once lost the commit's answer (the stream
// ended OK with no answer, though the commit applied). It waits a client timeout at most, for
// an answer the protocol never sends (a duplicate's).
func (g *grpcServer) drain(ctx context.Context, pending *atomic.Int64, answered <-chan struct{}, sendErr <-chan error, sink *streamSink) error {
	timer := time.NewTimer(g.s.cfg.ClientTimeout)
	defer timer.Stop()
	for pending.Load() > 0 {
		select {
		case <-answered:
		case err := <-sendErr:
			return err
		case <-sink.overflow:
			return status.Errorf(codes.ResourceExhausted, "an answer was dropped: the outcome of the %d requests not answered is unknown", pending.Load())
		case <-ctx.Done():
			return ctx.Err()
		case <-timer.C:
			return status.Errorf(codes.DeadlineExceeded, "%d requests not answered within %v of the client closing its side: their outcome is unknown", pending.Load(), g.s.cfg.ClientTimeout)
		}
	}
	return nil
}

func replyToPB(r *wire.ClientReply) *meridianpb.Reply {
	out := &meridianpb.Reply{Txn: r.Txn, Seq: r.Seq, Code: meridianpb.Code(r.Code), Found: r.Found, Value: r.Value,
		Cause: r.Cause, Error: r.Error}
	for _, kv := range r.Rows {
		out.Rows = append(out.Rows, &meridianpb.KV{Key: kv.Key, Value: kv.Value})
	}
	for _, res := range r.Results {
		out.Results = append(out.Results, &meridianpb.BatchResult{Found: res.Found, Value: res.Value})
	}
	if r.CommitTS != (ts.Timestamp{}) {
		out.CommitTs = &meridianpb.Timestamp{Wall: r.CommitTS.Wall, Logical: r.CommitTS.Logical, Origin: r.CommitTS.Origin}
	}
	return out
}
