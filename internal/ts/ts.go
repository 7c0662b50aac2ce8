// Package ts defines Meridian's timestamps and time intervals: the one total order every protocol
// uses to name versions and transactions.
//
// A Timestamp is (Wall, Logical, Origin). Wall is physical time in nanoseconds (true time as a
// clock reported it), Logical is a counter for hybrid logical clocks and for breaking ties between
// timestamps issued from the same wall value, and Origin names the issuer (oracle, coordinator)
// so that two issuers never produce the same timestamp (notes/k2.md §3.2: the oracle id alone does
// not make K2-TB timestamps unique, so the issuer is part of the key).
package ts

import (
	"encoding/binary"
	"fmt"
	"math"
)

// Timestamp is a point in Meridian's total order. The zero value is the bottom of the order.
type Timestamp struct {
	Wall    int64  // nanoseconds since the Unix epoch (or since simulation start)
	Logical uint32 // HLC logical counter / intra-issuer tie-breaker
	Origin  uint32 // issuer id: makes timestamps from different issuers distinct
}

// Zero is the smallest timestamp.
var Zero = Timestamp{}

// Max is the largest timestamp.
var Max = Timestamp{Wall: math.MaxInt64, Logical: math.MaxUint32, Origin: math.MaxUint32}

// New returns a timestamp with only the wall part set.
func New(wall int64) Timestamp { return Timestamp{Wall: wall} }

// Compare returns -1, 0 or +1 as t is before, equal to, or after u.
func (t Timestamp) Compare(u Timestamp) int {
	switch {
	case t.Wall < u.Wall:
		return -1
	case t.Wall > u.Wall:
		return 1
	case t.Logical < u.Logical:
		return -1
	case t.Logical > u.Logical:
		return 1
	case t.Origin < u.Origin:
		return -1
	case t.Origin > u.Origin:
		return 1
	}
	return 0
}

// Less reports whether t is strictly before u.
func (t Timestamp) Less(u Timestamp) bool { return t.Compare(u) < 0 }

// LessEq reports whether t is before or equal to u.
func (t Timestamp) LessEq(u Timestamp) bool { return t.Compare(u) <= 0 }

// IsZero reports whether t is the zero timestamp.
func (t Timestamp) IsZero() bool { return t == Zero }

// Next returns the smallest timestamp strictly after t with the same origin ordering rules:
// the logical counter is bumped, carrying into the wall part on overflow.
func (t Timestamp) Next() Timestamp {
	if t.Logical == math.MaxUint32 {
		return Timestamp{Wall: t.Wall + 1, Origin: t.Origin}
	}
	return Timestamp{Wall: t.Wall, Logical: t.Logical + 1, Origin: t.Origin}
}

// Prev returns a timestamp strictly before t (used to read "just below" a timestamp).
func (t Timestamp) Prev() Timestamp {
	switch {
	case t.Origin > 0:
		return Timestamp{Wall: t.Wall, Logical: t.Logical, Origin: t.Origin - 1}
	case t.Logical > 0:
		return Timestamp{Wall: t.Wall, Logical: t.Logical - 1, Origin: math.MaxUint32}
	default:
		return Timestamp{Wall: t.Wall - 1, Logical: math.MaxUint32, Origin: math.MaxUint32}
	}
}

// Max returns the later of t and u.
func MaxOf(t, u Timestamp) Timestamp {
	if t.Less(u) {
		return u
	}
	return t
}

// MinOf returns the earlier of t and u.
func MinOf(t, u Timestamp) Timestamp {
	if u.Less(t) {
		return u
	}
	return t
}

func (t Timestamp) String() string {
	if t.Logical == 0 && t.Origin == 0 {
		return fmt.Sprintf("%d", t.Wall)
	}
	return fmt.Sprintf("%d.%d@%d", t.Wall, t.Logical, t.Origin)
}

// EncodedLen is the size of Encode's output.
const EncodedLen = 16

// Encode writes t in a byte order that sorts like Compare (for use inside storage keys).
// Wall is offset by 2^63 so negative walls sort before positive ones.
func (t Timestamp) Encode(dst []byte) []byte {
	var b [EncodedLen]byte
	binary.BigEndian.PutUint64(b[0:8], uint64(t.Wall)^(1<<63))
	binary.BigEndian.PutUint32(b[8:12], t.Logical)
	binary.BigEndian.PutUint32(b[12:16], t.Origin)
	return append(dst, b[:]...)
}

// Decode reads a timestamp written by Encode.
func Decode(b []byte) (Timestamp, error) {
	if len(b) < EncodedLen {
		return Zero, fmt.Errorf("ts: decode: need %d bytes, have %d", EncodedLen, len(b))
	}
	return Timestamp{
		Wall:    int64(binary.BigEndian.Uint64(b[0:8]) ^ (1 << 63)),
		Logical: binary.BigEndian.Uint32(b[8:12]),
		Origin:  binary.BigEndian.Uint32(b[12:16]),
	}, nil
}

// Interval is an uncertainty interval [Earliest, Latest] of wall-clock nanoseconds that is
// promised to contain true time (TrueTime's TT.now(), FaRMv2's [L, U]).
type Interval struct {
	Earliest int64
	Latest   int64
}

// Width returns Latest − Earliest.
func (i Interval) Width() int64 { return i.Latest - i.Earliest }

// Contains reports whether wall lies inside the interval (inclusive).
func (i Interval) Contains(wall int64) bool { return i.Earliest <= wall && wall <= i.Latest }

func (i Interval) String() string { return fmt.Sprintf("[%d, %d]", i.Earliest, i.Latest) }
