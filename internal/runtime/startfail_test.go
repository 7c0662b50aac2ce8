package runtime

import (
	"net"
	"testing"
	"time"
)

// A node whose gRPC address is taken must fail to start with an error, not hang: Start's error
// path closed the server, and Close waited for an event loop Start had not started yet.
func TestStartFailsWhenGRPCAddressTaken(t *testing.T) {
	cfg := testConfig(t, nil)
	id := -1
	for i, n := range cfg.Nodes {
		if n.GRPCAddr != "" {
			id = i
			break
		}
	}
	if id < 0 {
		t.Skip("the default configuration gives no node a gRPC address")
	}
	ln, err := net.Listen("tcp", cfg.Nodes[id].GRPCAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan error, 1)
	go func() {
		s, err := Start(cfg, cfg.Nodes[id].ID, Options{})
		if err == nil {
			s.Close()
		}
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("the node started although its gRPC address is taken")
		}
		t.Logf("refused: %v", err)
	case <-time.After(30 * time.Second): // a hang, not a slow start: Start does no waiting
		t.Fatal("Start did not return: Close waits for an event loop that never ran")
	}
}
