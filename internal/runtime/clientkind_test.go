package runtime

import (
	"bufio"
	"encoding/binary"
	"net"
	"testing"
	"time"

	"github.com/meridiandb/meridian/internal/runtime/frame"
	"github.com/meridiandb/meridian/internal/wire"
)

// A client connection may send client requests only, and a frame of any other kind is dropped
// before it is decoded: decoded first, a small frame could take a large allocation (a 1 MiB
// array of empty items decodes to tens of MiB: review). The frame here is of a node's kind with
// a body that does not decode; the node must drop it without trying, and go on serving.
func TestClientFrameOfOtherKindNotDecoded(t *testing.T) {
	cfg := testConfig(t, nil)
	servers := startCluster(t, cfg)
	c, r, welcome := rawClient(t, cfg.Nodes[0].Addr, cfg.Name)
	defer c.Close()
	other := binary.BigEndian.AppendUint16([]byte{wire.Version}, uint16((&frame.Welcome{}).Kind()))
	other = append(other, 0xff, 0xff, 0xff) // not CBOR
	if err := frame.Write(c, welcome.Node, other); err != nil {
		t.Fatal(err)
	}
	// A request after it is answered: the node read the frame before and goes on.
	if err := frame.WriteMsg(c, welcome.Node, &wire.ClientRequest{Txn: 1, Op: wire.OpGet, Key: "k", ReadOnly: true}); err != nil {
		t.Fatal(err)
	}
	_, payload, err := frame.Read(r)
	if err != nil {
		t.Fatal(err)
	}
	if m, err := wire.Decode(payload); err != nil {
		t.Fatalf("the answer: %v", err)
	} else if _, ok := m.(*wire.ClientReply); !ok {
		t.Fatalf("the answer is a %T", m)
	}
	if n := servers[0].Stats().DecodeErrors; n != 0 {
		t.Errorf("%d decode errors: the node decoded a client's frame of another kind", n)
	}
}

// rawClient opens a client connection to addr by hand, as the client library would: a Hello,
// then the node's Welcome (read within 10 s). The caller closes the connection.
func rawClient(t *testing.T, addr, cluster string) (net.Conn, *bufio.Reader, *frame.Welcome) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(c)
	if err := frame.WriteMsg(c, 0, &frame.Hello{Client: true, Cluster: cluster}); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, payload, err := frame.Read(r)
	if err != nil {
		t.Fatal(err)
	}
	m, err := wire.Decode(payload)
	welcome, ok := m.(*frame.Welcome)
	if err != nil || !ok || welcome.Error != "" {
		t.Fatalf("welcome: %+v, %v", m, err)
	}
	return c, r, welcome
}
