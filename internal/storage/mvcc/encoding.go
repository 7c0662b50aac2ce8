package mvcc

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/meridiandb/meridian/internal/node"
	"github.com/meridiandb/meridian/internal/storage"
	"github.com/meridiandb/meridian/internal/ts"
)

// Persistence encoding of a version.
//
// Key:   'v' | escaped user key | 0x00 0x01 | ts.Encode (16 bytes) | txn id (8 bytes, big endian)
//
// The user key is escaped by writing each 0x00 byte as 0x00 0xFF, so encoded keys sort by user
// key, then timestamp, then transaction, and a durable scan returns each key's versions in order.
//
// Value: format (1) | state (1) | flags (1) | uvarint len(value) | value | uvarint len(meta) | meta
//        | CRC-32C (4, big endian) over the encoded key followed by everything before the CRC.
//
// The checksum covers the key so that a value landing under the wrong key is detected too.
// Recover refuses to build a store from a record whose checksum or structure is wrong.

const (
	formatV1      byte = 1
	flagTombstone byte = 1 << 0
	keyTrailer         = ts.EncodedLen + 8
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrCorrupt is wrapped by every decoding error: the durable state cannot be trusted.
var ErrCorrupt = errors.New("mvcc: corrupt record")

// EncodeVersionKey appends the durable key of version (t, txn) of key to dst.
func EncodeVersionKey(dst []byte, key string, t ts.Timestamp, txn storage.TxnID) []byte {
	dst = append(dst, storage.PrefixVersion)
	for i := 0; i < len(key); i++ {
		dst = append(dst, key[i])
		if key[i] == 0 {
			dst = append(dst, 0xFF)
		}
	}
	dst = append(dst, 0x00, 0x01)
	dst = t.Encode(dst)
	return storage.EncodeTxnID(dst, txn)
}

// encodeVersionKey is EncodeVersionKey into a buffer of its own, sized for a key without zero
// bytes: grown from nil it was reallocated four times for a typical key, on every persisted
// version.
func encodeVersionKey(key string, t ts.Timestamp, txn storage.TxnID) []byte {
	return EncodeVersionKey(make([]byte, 0, 1+len(key)+2+keyTrailer), key, t, txn)
}

// DecodeVersionKey reverses EncodeVersionKey.
func DecodeVersionKey(b []byte) (key string, t ts.Timestamp, txn storage.TxnID, err error) {
	if len(b) < 1+2+keyTrailer || b[0] != storage.PrefixVersion {
		return "", ts.Zero, 0, fmt.Errorf("%w: version key %x: bad prefix or length", ErrCorrupt, b)
	}
	body := b[1 : len(b)-keyTrailer]
	user := make([]byte, 0, len(body))
	i := 0
	for ; i < len(body); i++ {
		if body[i] != 0 {
			user = append(user, body[i])
			continue
		}
		if i+1 >= len(body) {
			break
		}
		switch body[i+1] {
		case 0xFF:
			user = append(user, 0)
			i++
			continue
		case 0x01:
			if i+2 != len(body) {
				return "", ts.Zero, 0, fmt.Errorf("%w: version key %x: terminator inside key", ErrCorrupt, b)
			}
			t, _ = ts.Decode(b[len(b)-keyTrailer:])
			txn, _ = storage.DecodeTxnID(b[len(b)-8:])
			return string(user), t, txn, nil
		}
		break
	}
	return "", ts.Zero, 0, fmt.Errorf("%w: version key %x: bad escaping", ErrCorrupt, b)
}

// EncodeVersionValue returns the durable value of v stored under key.
func EncodeVersionValue(key string, v *Version) []byte {
	var kb [64]byte
	return encodeVersionValue(EncodeVersionKey(kb[:0], key, v.TS, v.Txn), v)
}

// encodeVersionValue is EncodeVersionValue given the version's durable key, which the caller
// has just encoded for the write anyway.
func encodeVersionValue(dk []byte, v *Version) []byte {
	n := 3 + 2*binary.MaxVarintLen32 + len(v.Value) + len(v.Meta) + 4
	b := make([]byte, 0, n)
	flags := byte(0)
	if v.Tombstone {
		flags |= flagTombstone
	}
	b = append(b, formatV1, byte(v.State), flags)
	b = binary.AppendUvarint(b, uint64(len(v.Value)))
	b = append(b, v.Value...)
	b = binary.AppendUvarint(b, uint64(len(v.Meta)))
	b = append(b, v.Meta...)
	return binary.BigEndian.AppendUint32(b, crc32.Update(crc32.Update(0, castagnoli, dk), castagnoli, b))
}

// checksum is CRC-32C over the durable key and the value body, the key rebuilt from its parts:
// what a reader checks a record against. A writer sums the very key it stores.
func checksum(key string, at ts.Timestamp, txn storage.TxnID, body []byte) uint32 {
	var kb [64]byte
	c := crc32.Update(0, castagnoli, EncodeVersionKey(kb[:0], key, at, txn))
	return crc32.Update(c, castagnoli, body)
}

// DecodeVersion decodes a durable version record (key and value as persisted).
func DecodeVersion(dk, dv []byte) (string, Version, error) {
	key, at, txn, err := DecodeVersionKey(dk)
	if err != nil {
		return "", Version{}, err
	}
	bad := func(why string) (string, Version, error) {
		return "", Version{}, fmt.Errorf("%w: version %q at %v by %v: %s", ErrCorrupt, key, at, txn, why)
	}
	if len(dv) < 3+1+1+4 {
		return bad(fmt.Sprintf("value truncated to %d bytes", len(dv)))
	}
	body, sum := dv[:len(dv)-4], binary.BigEndian.Uint32(dv[len(dv)-4:])
	if got := checksum(key, at, txn, body); got != sum {
		return bad(fmt.Sprintf("checksum mismatch (stored %08x, computed %08x)", sum, got))
	}
	if body[0] != formatV1 {
		return bad(fmt.Sprintf("unknown format %d", body[0]))
	}
	v := Version{TS: at, Txn: txn, State: State(body[1]), Tombstone: body[2]&flagTombstone != 0}
	if v.State < Intent || v.State > Aborted || body[2]&^flagTombstone != 0 {
		return bad(fmt.Sprintf("bad state %d or flags %d", body[1], body[2]))
	}
	rest := body[3:]
	field := func(limit int) ([]byte, bool) {
		n, w := binary.Uvarint(rest)
		if w <= 0 || n > uint64(limit) || n > uint64(len(rest)-w) {
			return nil, false
		}
		f := rest[w : w+int(n)]
		rest = rest[w+int(n):]
		if n == 0 {
			return nil, true
		}
		return append([]byte(nil), f...), true
	}
	var ok bool
	if v.Value, ok = field(storage.MaxValueBytes); !ok {
		return bad("bad value length")
	}
	if v.Meta, ok = field(storage.MaxMetaBytes); !ok {
		return bad("bad metadata length")
	}
	if len(rest) != 0 {
		return bad(fmt.Sprintf("%d trailing bytes", len(rest)))
	}
	if len(key) > storage.MaxKeyBytes {
		return bad("key too long")
	}
	return key, v, nil
}

// Recover rebuilds a Store from the versions persisted in d (as written by TakeWrites batches).
// It fails on the first corrupt record, or if the records break the store's invariants (two
// undecided intents on a key in SingleIntent mode): a node must not serve from state it cannot
// trust. Read watermarks are not persisted; raise the floor after recovering (RaiseReadFloor).
func Recover(d node.Durable, opts Options) (*Store, error) {
	s := New(opts)
	var derr error
	var last *entry
	err := d.Scan([]byte{storage.PrefixVersion}, []byte{storage.PrefixVersion + 1}, func(k, val []byte) bool {
		key, v, err := DecodeVersion(k, val)
		if err != nil {
			derr = err
			return false
		}
		e := last
		if e == nil || e.key != key {
			e = s.getOrCreate(key)
			last = e
		}
		if n := len(e.versions); n > 0 && versionCmp(e.versions[n-1], v.TS, v.Txn) >= 0 {
			derr = fmt.Errorf("%w: versions of %q out of order at %v", ErrCorrupt, key, v.TS)
			return false
		}
		e.versions = append(e.versions, v)
		if v.State == Intent {
			e.intents++
			if opts.SingleIntent && e.intents > 1 {
				derr = fmt.Errorf("%w: key %q has %d intents in single-intent mode", ErrCorrupt, key, e.intents)
				return false
			}
			s.addTxnKey(v.Txn, key)
		}
		return true
	})
	if err != nil {
		return nil, fmt.Errorf("mvcc: recover: scan: %w", err)
	}
	if derr != nil {
		return nil, fmt.Errorf("mvcc: recover: %w", derr)
	}
	if err := s.recoverGC(d); err != nil {
		return nil, err
	}
	return s, nil
}

// WritesFor returns the persist writes that recreate the whole store (used to seed a durable
// backend, e.g. after a bulk load into a Volatile store).
func (s *Store) WritesFor() []node.Write {
	var out []node.Write
	s.ordered().Ascend(func(e *entry) bool {
		for i := range e.versions {
			v := &e.versions[i]
			out = append(out, node.Write{Key: EncodeVersionKey(nil, e.key, v.TS, v.Txn), Value: EncodeVersionValue(e.key, v)})
		}
		return true
	})
	return out
}
