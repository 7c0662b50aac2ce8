// Package wire defines the messages nodes and clients exchange, and their codec.
//
// Inside the simulator messages travel as Go values and are never encoded. Between real
// processes they are framed as [version byte][kind uint16][CBOR body]: compact, self-describing
// enough to survive added fields (CBOR maps keyed by field name), and versioned so that a node can
// refuse a frame from an incompatible peer instead of misreading it.
//
// Every message type has a Kind, registered once by the package that owns it (client messages
// here, protocol messages in their protocol package). Kind ranges: 1–99 client and runtime,
// 100–199 serial, 200–299 k2, 300–399 spanner, 400–499 crdb, 500–599 oracle/clock, 600+ others.
package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"sync"

	"github.com/fxamacker/cbor/v2"
)

// Version is the codec's frame version. Bump it when a change is not backward compatible.
const Version byte = 2

// MaxFrameBytes bounds a decoded frame so a corrupt length can never make a node allocate
// without limit.
const MaxFrameBytes = 16 << 20

// Kind identifies a message type on the wire.
type Kind uint16

// Msg is any message a node or client sends.
type Msg interface {
	Kind() Kind
}

type entry struct {
	name string
	typ  reflect.Type // the struct type (messages are always sent as pointers to it)
	dec  cbor.DecMode // nil: decMode
}

var (
	regMu    sync.RWMutex
	registry = map[Kind]entry{}
)

// Register records a message type so frames of its kind can be decoded. proto must be a pointer
// to a zero value of the message struct. Registering a kind twice with different types panics:
// it is a programming error found at init time.
func Register(proto Msg) { register(proto, nil) }

// RegisterBounded is Register for a message whose arrays never legitimately hold more than
// maxArrayElements items. The codec's general bound (2^20 per array) lets a 1 MiB frame of
// empty items decode into a million structs, tens of megabytes; a frame over this kind's
// bound is refused before anything is allocated for it.
func RegisterBounded(proto Msg, maxArrayElements int) {
	dm, err := cbor.DecOptions{MaxArrayElements: maxArrayElements, MaxMapPairs: 1 << 20, MaxNestedLevels: 32}.DecMode()
	if err != nil {
		panic(fmt.Sprintf("wire: RegisterBounded(%T, %d): %v", proto, maxArrayElements, err))
	}
	register(proto, dm)
}

func register(proto Msg, dec cbor.DecMode) {
	t := reflect.TypeOf(proto)
	if t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct {
		panic(fmt.Sprintf("wire: Register(%T): want a pointer to a struct", proto))
	}
	k := proto.Kind()
	regMu.Lock()
	defer regMu.Unlock()
	if e, ok := registry[k]; ok && e.typ != t.Elem() {
		panic(fmt.Sprintf("wire: kind %d registered as both %s and %s", k, e.name, t.Elem()))
	}
	registry[k] = entry{name: t.Elem().String(), typ: t.Elem(), dec: dec}
}

// Name returns the registered type name of a kind, for logs and metrics.
func Name(k Kind) string {
	regMu.RLock()
	defer regMu.RUnlock()
	if e, ok := registry[k]; ok {
		return e.name
	}
	return fmt.Sprintf("kind(%d)", k)
}

// Kinds lists registered kinds in ascending order.
func Kinds() []Kind {
	regMu.RLock()
	defer regMu.RUnlock()
	out := make([]Kind, 0, len(registry))
	for k := range registry {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

var (
	encMode cbor.EncMode
	decMode cbor.DecMode
)

func init() {
	var err error
	encMode, err = cbor.CoreDetEncOptions().EncMode()
	if err != nil {
		panic(err)
	}
	decMode, err = cbor.DecOptions{MaxArrayElements: 1 << 20, MaxMapPairs: 1 << 20, MaxNestedLevels: 32}.DecMode()
	if err != nil {
		panic(err)
	}
}

// Errors returned by Decode.
var (
	ErrShortFrame   = errors.New("wire: frame shorter than its header")
	ErrVersion      = errors.New("wire: unsupported frame version")
	ErrUnknownKind  = errors.New("wire: unknown message kind")
	ErrFrameTooLong = errors.New("wire: frame exceeds size limit")
)

// Encode frames m.
func Encode(m Msg) ([]byte, error) {
	body, err := encMode.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("wire: encode %s: %w", Name(m.Kind()), err)
	}
	out := make([]byte, 3, 3+len(body))
	out[0] = Version
	binary.BigEndian.PutUint16(out[1:3], uint16(m.Kind()))
	return append(out, body...), nil
}

// KindOf is the kind a frame written by Encode says it holds, without decoding it: a server
// refuses a kind a connection may not send before spending a decode on it.
func KindOf(frame []byte) (Kind, bool) {
	if len(frame) < 3 || frame[0] != Version {
		return 0, false
	}
	return Kind(binary.BigEndian.Uint16(frame[1:3])), true
}

// Decode parses a frame written by Encode. It never panics on malformed input.
func Decode(frame []byte) (Msg, error) {
	if len(frame) > MaxFrameBytes {
		return nil, ErrFrameTooLong
	}
	if len(frame) < 3 {
		return nil, ErrShortFrame
	}
	if frame[0] != Version {
		return nil, fmt.Errorf("%w: %d (this build speaks %d)", ErrVersion, frame[0], Version)
	}
	k := Kind(binary.BigEndian.Uint16(frame[1:3]))
	regMu.RLock()
	e, ok := registry[k]
	regMu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("%w: %d", ErrUnknownKind, k)
	}
	v := reflect.New(e.typ)
	dm := decMode
	if e.dec != nil {
		dm = e.dec
	}
	if err := dm.Unmarshal(frame[3:], v.Interface()); err != nil {
		return nil, fmt.Errorf("wire: decode %s: %w", e.name, err)
	}
	return v.Interface().(Msg), nil
}
