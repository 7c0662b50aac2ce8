package client

import (
	"bufio"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
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
