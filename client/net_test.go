package client

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/meridiandb/meridian/internal/runtime/frame"
	"github.com/meridiandb/meridian/internal/wire"
)

// A peer that is not a Meridian node (here a web server, answering the Hello with "HTTP/1.1
// 400 …") is named as such in one line: its first bytes read as a frame length said only
// "frame: length out of range: 1213486160 bytes".
func TestDialNonMeridianPeer(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	addr := srv.Listener.Addr().String()
	_, err := Dial(addr, WithRequestTimeout(time.Minute))
	want := "meridian: handshake with " + addr + `: the peer is not a Meridian node (it answered "HTTP`
	if err == nil || !strings.HasPrefix(err.Error(), want) || strings.Contains(err.Error(), "\n") {
		t.Fatalf("got %v, want one line starting %q", err, want)
	}
}

// Each error says "meridian:" once. A transport's errors carried their own prefix under the
// DB's, so kv exec answered "meridian: unavailable: meridian: dial …".
func TestErrorsSayMeridianOnce(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	// A node that welcomes one client, then goes away: its connection and its port close.
	go func() {
		c, err := ln.Accept()
		_ = ln.Close()
		if err != nil {
			return
		}
		defer c.Close()
		if _, _, err := frame.Read(bufio.NewReader(c)); err != nil {
			return
		}
		_ = frame.WriteMsg(c, 0, &frame.Welcome{Endpoint: frame.ClientID(0, 1)})
	}()
	tr, err := Dial(addr, WithRequestTimeout(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	for lost := false; !lost; { // until the reader has seen the connection close
		time.Sleep(time.Millisecond)
		tr.mu.Lock()
		lost = tr.conn == nil
		tr.mu.Unlock()
	}
	db := Open(tr)
	// The next transaction dials again, and the port refuses it.
	_, err = db.Begin(TxnOptions{}).Get("k")
	want := "meridian: unavailable: dial " + addr + ": "
	if err == nil || !strings.HasPrefix(err.Error(), want) || strings.Count(err.Error(), "meridian:") != 1 {
		t.Fatalf("got %v, want %q with one \"meridian:\"", err, want+"…")
	}
	if !errors.Is(err, ErrUnavailable) || !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("%v: want it to be ErrUnavailable and to keep its cause (connection refused)", err)
	}
	// So does Dial's own error.
	_, err = Dial(addr, WithRequestTimeout(time.Minute))
	if want := "meridian: dial " + addr + ": "; err == nil || !strings.HasPrefix(err.Error(), want) ||
		strings.Count(err.Error(), "meridian:") != 1 || !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("got %v, want %q with one \"meridian:\" (connection refused)", err, want+"…")
	}
	// And an unknown outcome: a commit whose redial fails.
	tx := db.Begin(TxnOptions{})
	_, err = tx.send(&wire.ClientRequest{Op: wire.OpCommit})
	var u *UnknownError
	if !errors.As(err, &u) || strings.Count(err.Error(), "meridian:") != 1 {
		t.Fatalf("commit: got %v, want an unknown outcome with one \"meridian:\"", err)
	}
}

// TestCloseFailsWaitingRequests: closing a transport fails the requests waiting for a reply at
// once; they waited out the request timeout (a minute here) for a reply the closed connection
// could no longer bring.
func TestCloseFailsWaitingRequests(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	// A node that welcomes the client and then never answers.
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		r := bufio.NewReader(c)
		if _, _, err := frame.Read(r); err != nil {
			return
		}
		_ = frame.WriteMsg(c, 0, &frame.Welcome{Endpoint: frame.ClientID(0, 1)})
		for {
			if _, _, err := frame.Read(r); err != nil {
				return
			}
		}
	}()
	tr, err := Dial(ln.Addr().String(), WithRequestTimeout(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := tr.RoundTrip(&wire.ClientRequest{Txn: 1, Op: wire.OpGet, Key: "k"})
		done <- err
	}()
	for waiting := false; !waiting; { // until the request is on its way
		time.Sleep(time.Millisecond)
		tr.mu.Lock()
		waiting = len(tr.waiting) == 1
		tr.mu.Unlock()
	}
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a request cut off by Close succeeded")
		}
	case <-time.After(30 * time.Second): // far below the minute's timeout, far above any scheduling delay
		t.Fatal("a request waiting when the transport closed still waits")
	}
}

// fakeNode listens on loopback and, for each connection, answers the client's Hello with a
// Welcome and then hands the connection to serve. The listener and every connection close when
// the test ends, which also frees a client write a failing test left blocked.
func fakeNode(t *testing.T, serve func(c net.Conn, r *bufio.Reader)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	go func() {
		for n := uint32(1); ; n++ {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			go func() {
				r := bufio.NewReader(c)
				if _, _, err := frame.Read(r); err != nil {
					return
				}
				if frame.WriteMsg(c, 0, &frame.Welcome{Endpoint: frame.ClientID(0, n)}) == nil {
					serve(c, r)
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// within runs f in a goroutine and fails the test if it has not returned after a generous
// bound, far above any scheduling delay; it only fires when f is blocked.
func within(t *testing.T, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatalf("%s still blocked after 20s", what)
	}
}

// shrinkSendBuffer makes the client's socket buffer small, so that a stalled peer blocks a
// send after a few KiB rather than after the megabytes the kernel may grant.
func shrinkSendBuffer(t *testing.T, tr *NetTransport) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if err := tr.conn.(*net.TCPConn).SetWriteBuffer(4 << 10); err != nil {
		t.Fatal(err)
	}
}

// TestStalledNodeCannotBlockCalls: a node that stops reading (SIGSTOP, a black-holed link)
// fills the socket buffers, and a call then blocked in its send forever, past the request
// timeout: the timer only started after the send (review: 2s timeout, 1 MiB puts, the fourth
// blocked 38s, until SIGCONT). Close blocked too, on the lock the send held.
func TestStalledNodeCannotBlockCalls(t *testing.T) {
	stalled := func(c net.Conn, _ *bufio.Reader) {
		_ = c.(*net.TCPConn).SetReadBuffer(4 << 10)
		<-t.Context().Done() // never reads
	}
	t.Run("calls time out", func(t *testing.T) {
		const timeout = 300 * time.Millisecond
		tr, err := Dial(fakeNode(t, stalled), WithRequestTimeout(timeout))
		if err != nil {
			t.Fatal(err)
		}
		// Not deferred: without the fix, a failing test's Close would wait on the blocked send,
		// which only the node's closing (at cleanup, after deferred calls) releases.
		shrinkSendBuffer(t, tr)
		value := make([]byte, MaxValueBytes)
		sendBlocked := false
		for txn := uint64(1); txn <= 32 && !sendBlocked; txn++ {
			var err error
			within(t, fmt.Sprintf("put %d (request timeout %v)", txn, timeout), func() {
				_, err = tr.RoundTrip(&wire.ClientRequest{Txn: txn, Op: wire.OpPut, Key: "k", Value: value})
			})
			if err == nil {
				t.Fatalf("put %d to a node that reads nothing succeeded", txn)
			}
			sendBlocked = strings.HasPrefix(err.Error(), "send to ")
		}
		if !sendBlocked {
			t.Fatal("32 puts of 1 MiB never blocked on a full socket: the test did not exercise a stalled send")
		}
		_ = tr.Close()
	})
	t.Run("close", func(t *testing.T) {
		arrived := make(chan struct{}, 1)
		addr := fakeNode(t, func(c net.Conn, r *bufio.Reader) {
			// The start of the request tells the test its send is under way.
			if _, err := r.Peek(1); err == nil {
				arrived <- struct{}{}
			}
			stalled(c, r)
		})
		tr, err := Dial(addr, WithRequestTimeout(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		shrinkSendBuffer(t, tr)
		done := make(chan error, 1)
		go func() {
			// Far more than the socket buffers hold (4 KiB each way), and than the kernel's
			// defaults would.
			_, err := tr.RoundTrip(&wire.ClientRequest{Txn: 1, Op: wire.OpPut, Key: "k", Value: make([]byte, 12<<20)})
			done <- err
		}()
		<-arrived
		within(t, "Close while a send is blocked", func() { _ = tr.Close() })
		var callErr error
		within(t, "the blocked send after Close", func() { callErr = <-done })
		if callErr == nil || !strings.Contains(callErr.Error(), "transport closed by Close") {
			t.Fatalf("the send cut off by Close returned %v, want it to say the transport was closed by Close", callErr)
		}
	})
}

// TestSharedTransportRefusesSameNumbers: every DB numbers its transactions from 1, so two DBs
// on one transport send requests with the same numbers, and the second's waiter replaced the
// first's: the reply went to the wrong caller (review: 40 of 2000 transactions aborted, one
// timed out). The second is refused before anything is sent, and the first gets its reply.
func TestSharedTransportRefusesSameNumbers(t *testing.T) {
	got := make(chan *wire.ClientRequest, 8)
	node := make(chan net.Conn, 1)
	addr := fakeNode(t, func(c net.Conn, r *bufio.Reader) {
		node <- c
		for {
			_, payload, err := frame.Read(r)
			if err != nil {
				return
			}
			m, err := wire.Decode(payload)
			if err != nil {
				return
			}
			got <- m.(*wire.ClientRequest)
		}
	})
	tr, err := Dial(addr, WithRequestTimeout(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	c := <-node
	db1, db2 := Open(tr), Open(tr)
	// The second DB on the transport is refused at every call, before anything is sent.
	if _, err := db2.Begin(TxnOptions{}).Get("b"); !errors.Is(err, ErrBadArgument) || !strings.Contains(err.Error(), "already serves another DB") {
		t.Fatalf("a second DB's get: %v, want ErrBadArgument saying the transport serves another DB", err)
	}
	first := make(chan error, 1)
	var firstValue []byte
	go func() {
		var err error
		firstValue, err = db1.Begin(TxnOptions{}).Get("a")
		first <- err
	}()
	if req := <-got; req.Txn != 1 || req.Key != "a" {
		t.Fatalf("the node got %+v, want db1's get of a as transaction 1", req)
	}
	// A request with the numbers of one in flight (as from a DB of a transport that does not
	// tell Open it is taken) is refused without being sent.
	var err2 error
	within(t, "a request with db1's numbers while db1's is in flight", func() {
		_, err2 = tr.RoundTrip(&wire.ClientRequest{Op: wire.OpGet, Txn: 1, Seq: 0, Key: "b"})
	})
	if !errors.Is(err2, ErrBadArgument) || !strings.Contains(err2.Error(), "serves one DB") {
		t.Fatalf("a request with db1's numbers in flight: %v, want ErrBadArgument saying a transport serves one DB", err2)
	}
	if err := frame.WriteMsg(c, 0, &wire.ClientReply{Txn: 1, Seq: 0, Code: wire.CodeOK, Found: true, Value: []byte("A")}); err != nil {
		t.Fatal(err)
	}
	within(t, "db1's get after its reply came", func() { err = <-first })
	if err != nil || string(firstValue) != "A" {
		t.Fatalf("db1's get: %q, %v; want its own reply, \"A\"", firstValue, err)
	}
	// Nothing of db2's refused request reached the node: the next request it reads is this one.
	go func() { _, _ = db1.Begin(TxnOptions{}).Get("c") }()
	if req := <-got; req.Txn != 2 || req.Key != "c" {
		t.Fatalf("the node got %+v after the refusal, want db1's get of c as transaction 2", req)
	}
}

// TestUseAfterClose: a request on a closed transport says that its owner closed it, so that a
// user sees the failure is for good; "unavailable: transport closed" read as a passing outage.
func TestUseAfterClose(t *testing.T) {
	tr, err := Dial(fakeNode(t, func(net.Conn, *bufio.Reader) {}), WithRequestTimeout(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = Open(tr).Begin(TxnOptions{}).Get("k")
	if want := "meridian: unavailable: transport closed by Close"; err == nil || err.Error() != want || !errors.Is(err, ErrUnavailable) {
		t.Fatalf("get after Close: %v, want %q (ErrUnavailable)", err, want)
	}
}

// A node that accepts and closes before welcoming (starting or stopping) is named as such: the
// error said only "handshake with ...: EOF".
func TestHandshakeClosedSaysWhy(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	_, err = Dial(ln.Addr().String(), WithRequestTimeout(10*time.Second))
	if err == nil || !strings.Contains(err.Error(), "closed the connection before welcoming") {
		t.Fatalf("dial of a node that hangs up: %v, want it to say the node closed the connection", err)
	}
}

// A context cuts a round trip short: cancelled while the node holds the request unanswered, or
// past a deadline sooner than the request timeout, the call returns at once with ctx's error.
func TestRoundTripContext(t *testing.T) {
	addr := fakeNode(t, func(_ net.Conn, r *bufio.Reader) {
		for {
			if _, _, err := frame.Read(r); err != nil {
				return
			}
		}
	})
	tr, err := Dial(addr, WithRequestTimeout(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	var rtErr error
	within(t, "a round trip whose context is cancelled", func() {
		_, rtErr = tr.RoundTripContext(ctx, &wire.ClientRequest{Op: wire.OpGet, Txn: 1, Key: "a"})
	})
	if !errors.Is(rtErr, context.Canceled) {
		t.Errorf("cancelled: %v, want context.Canceled", rtErr)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	within(t, "a round trip past its context's deadline", func() {
		_, rtErr = tr.RoundTripContext(ctx, &wire.ClientRequest{Op: wire.OpGet, Txn: 2, Key: "a"})
	})
	if !errors.Is(rtErr, context.DeadlineExceeded) {
		t.Errorf("past the deadline: %v, want context.DeadlineExceeded", rtErr)
	}
}

// A round trip whose context is already done sends nothing (the send slot and the context were
// both ready, and the slot won about half the time), and a redial under a cancelled context
// stops at once instead of at the request timeout.
func TestDoneContextSendsNothing(t *testing.T) {
	got := make(chan struct{}, 1000)
	addr := fakeNode(t, func(_ net.Conn, r *bufio.Reader) {
		for {
			if _, _, err := frame.Read(r); err != nil {
				return
			}
			got <- struct{}{}
		}
	})
	tr, err := Dial(addr, WithRequestTimeout(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	done, cancel := context.WithCancel(context.Background())
	cancel()
	for i := range 200 {
		if _, err := tr.RoundTripContext(done, &wire.ClientRequest{Op: wire.OpGet, Txn: uint64(i + 1), Key: "a"}); !errors.Is(err, context.Canceled) {
			t.Fatalf("round trip %d with a done context: %v", i, err)
		}
	}
	// One request that is sent, to be sure the node reads what it is given.
	go func() { _, _ = tr.RoundTrip(&wire.ClientRequest{Op: wire.OpGet, Txn: 1000, Key: "b"}) }()
	within(t, "the node's read of a request sent without a context", func() { <-got })
	if n := len(got); n != 0 {
		t.Errorf("the node got %d more requests: done contexts sent some", n)
	}
}

func TestRedialStopsAtCancel(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var held []net.Conn
	defer func() {
		for _, c := range held {
			_ = c.Close()
		}
	}()
	accepted := make(chan net.Conn, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	tr := &NetTransport{addr: ln.Addr().String(), timeout: time.Hour, waiting: map[replyKey]chan *wire.ClientReply{}, sending: make(chan struct{}, 1)}
	tr.ctx, tr.cancel = context.WithCancel(context.Background())
	defer tr.Close()
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	var rtErr error
	within(t, "a redial to a node that never welcomes, cancelled", func() {
		_, rtErr = tr.RoundTripContext(ctx, &wire.ClientRequest{Op: wire.OpGet, Txn: 1, Key: "a"})
	})
	held = append(held, <-accepted)
	if !errors.Is(rtErr, context.Canceled) {
		t.Errorf("redial cancelled: %v, want context.Canceled", rtErr)
	}
}
