// Package frame is the byte layout of Meridian's TCP connections, shared by servers
// (internal/runtime) and the network client (client.Dial).
//
// A connection carries frames: a 4-byte big-endian length n, then n bytes made of a 4-byte
// big-endian destination endpoint id and a wire frame (internal/wire.Encode: version, kind, CBOR
// body). The length prefix is what lets a reader skip a frame whose body it cannot decode and
// stay in step with the stream; the destination lets a node relay a reply to a client connected
// to another node (the serial protocol's server answers clients directly, for instance).
//
// Every connection opens with a Hello frame from the dialer. A node dialing a peer names itself;
// a client asks for an endpoint id, which the server returns in a Welcome. Client endpoint ids
// encode the node that hosts the connection (ClientID, HostOf), so any node can route a reply
// to any client without a lookup.
package frame

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/wire"
)

// headerBytes is the length prefix; destBytes the destination id inside the frame.
const (
	headerBytes = 4
	destBytes   = 4
)

// MaxFrameBytes bounds a frame's length field: anything longer is a corrupt or hostile stream,
// and the connection is closed rather than an allocation of that size attempted.
const MaxFrameBytes = wire.MaxFrameBytes + destBytes

// ErrFrameLength reports a length prefix outside (destBytes, MaxFrameBytes].
var ErrFrameLength = errors.New("frame: length out of range")

// Append appends a frame carrying payload (a wire frame) for endpoint dest to buf.
func Append(buf []byte, dest topo.NodeID, payload []byte) []byte {
	buf = binary.BigEndian.AppendUint32(buf, uint32(destBytes+len(payload)))
	buf = binary.BigEndian.AppendUint32(buf, uint32(dest))
	return append(buf, payload...)
}

// Write writes one frame.
func Write(w io.Writer, dest topo.NodeID, payload []byte) error {
	_, err := w.Write(Append(make([]byte, 0, headerBytes+destBytes+len(payload)), dest, payload))
	return err
}

// Read reads one frame and returns its destination and payload (a fresh slice). An error other
// than io.EOF leaves the stream unusable: the caller closes the connection.
func Read(r io.Reader) (dest topo.NodeID, payload []byte, err error) {
	return ReadMax(r, MaxFrameBytes)
}

// ReadMax is Read refusing frames longer than max bytes (at most MaxFrameBytes): a server reads
// a connection's Hello, sent before it knows who is there, with a small max.
func ReadMax(r io.Reader, max uint32) (dest topo.NodeID, payload []byte, err error) {
	var hdr [headerBytes + destBytes]byte
	if _, err := io.ReadFull(r, hdr[:headerBytes]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:headerBytes])
	if n < destBytes || n > min(max, MaxFrameBytes) {
		return 0, nil, fmt.Errorf("%w: %d bytes", ErrFrameLength, n)
	}
	if _, err := io.ReadFull(r, hdr[headerBytes:]); err != nil {
		return 0, nil, unexpected(err)
	}
	dest = topo.NodeID(binary.BigEndian.Uint32(hdr[headerBytes:]))
	if payload, err = readPayload(r, int(n-destBytes)); err != nil {
		return 0, nil, unexpected(err)
	}
	return dest, payload, nil
}

// readChunk is the most readPayload allocates ahead of the bytes it has received.
const readChunk = 64 << 10

// readPayload reads size bytes, growing its buffer as they arrive rather than all at once: a
// length prefix alone, 8 bytes saying 16 MiB, made a node allocate the 16 MiB and hold it
// until the connection's deadline, so a few dozen silent connections took gigabytes (review).
func readPayload(r io.Reader, size int) ([]byte, error) {
	buf := make([]byte, 0, min(size, readChunk))
	for len(buf) < size {
		if len(buf) == cap(buf) {
			buf = slices.Grow(buf, min(size-len(buf), max(len(buf), readChunk)))
		}
		k, err := io.ReadFull(r, buf[len(buf):min(cap(buf), size)])
		buf = buf[:len(buf)+k]
		if err != nil {
			return nil, err
		}
	}
	return buf, nil
}

// unexpected turns a clean EOF inside a frame into io.ErrUnexpectedEOF: only an EOF between
// frames is a clean close.
func unexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// WriteMsg encodes m and writes it as one frame.
func WriteMsg(w io.Writer, dest topo.NodeID, m wire.Msg) error {
	payload, err := wire.Encode(m)
	if err != nil {
		return err
	}
	return Write(w, dest, payload)
}

// Client endpoint ids live above every node id: bit 30 set, the hosting node in the next
// hostBits bits, and a per-host counter in the low counterBits bits. The host numbers its
// connections over all its lives (internal/runtime's endpoint sequence), so a counter comes back
// only after every other one has been handed out since, and never to two open connections.
const (
	clientFlag  = 1 << 30
	counterBits = 18
	hostBits    = 12
	// MaxHostNodes is the largest node count whose nodes can host clients.
	MaxHostNodes = 1 << hostBits
	// ClientCounters is how many distinct client endpoint ids one host has.
	ClientCounters = 1 << counterBits
)

// ClientID returns the endpoint id of the n-th client connection hosted by node host (n modulo
// ClientCounters).
func ClientID(host topo.NodeID, n uint32) topo.NodeID {
	return topo.NodeID(clientFlag | (int32(host)&(MaxHostNodes-1))<<counterBits | int32(n&(1<<counterBits-1)))
}

// HostOf returns the node hosting client endpoint id, or false if id is not a client id.
func HostOf(id topo.NodeID) (topo.NodeID, bool) {
	if id&clientFlag == 0 || id < 0 {
		return 0, false
	}
	return (id >> counterBits) & (MaxHostNodes - 1), true
}

// Hello opens every connection. A node sets From to its id; a client sets Client and leaves From
// zero. Cluster must match the server's cluster name, so a client of one local cluster cannot
// talk to another one that reuses its ports; a client may leave it empty to skip that check (as
// over gRPC), a node may not.
//
// A name is not enough: two configurations may share it and differ in protocol, options or
// layout, and a client that reads its results under the wrong protocol checks them against the
// wrong consistency model. So the dialer also says what it runs (a node) or expects (a client),
// and the server refuses a difference. A node sends both Protocol and Setup and must match
// exactly; a client that leaves either empty accepts any.
type Hello struct {
	From     topo.NodeID
	Client   bool      `cbor:",omitempty"`
	Cluster  string    `cbor:",omitempty"`
	Protocol string    `cbor:",omitempty"`
	Setup    []Setting `cbor:",omitempty"`
}

// Setting is one cluster-wide setting a connection's two ends must agree on (runtime's
// Config.Setup lists them).
type Setting struct {
	Name  string
	Value string
}

// Welcome answers a client's Hello with its endpoint id, or with Error if refused.
type Welcome struct {
	Endpoint topo.NodeID
	Node     topo.NodeID
	Error    string `cbor:",omitempty"`
}

// Kind implements wire.Msg (the 1–99 range is for client and runtime messages).
func (*Hello) Kind() wire.Kind { return 10 }

// Kind implements wire.Msg.
func (*Welcome) Kind() wire.Kind { return 11 }

// ClockPing asks a peer node for its clock reading. Nodes exchange them to measure how far
// their clocks are apart (internal/runtime's clock monitor); they never reach a protocol.
type ClockPing struct {
	Sent int64 // the sender's monotonic reading at sending, echoed in the pong
}

// ClockPong answers a ClockPing with the answering node's clock reading (env.Now).
type ClockPong struct {
	Sent  int64 // the ping's Sent
	Clock int64
}

// Kind implements wire.Msg.
func (*ClockPing) Kind() wire.Kind { return 12 }

// Kind implements wire.Msg.
func (*ClockPong) Kind() wire.Kind { return 13 }

func init() {
	wire.Register(&Hello{})
	wire.Register(&Welcome{})
	wire.Register(&ClockPing{})
	wire.Register(&ClockPong{})
}
