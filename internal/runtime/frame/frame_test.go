package frame

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"runtime"
	"testing"
)

// A length prefix alone must not make Read allocate what it claims: 8 bytes saying 16 MiB, then
// nothing, made a node allocate the 16 MiB and hold it until the connection's deadline, so a few
// dozen silent connections took gigabytes (review). Memory now follows the bytes that arrive.
func TestReadAllocatesAsBytesArrive(t *testing.T) {
	var hdr bytes.Buffer
	_ = binary.Write(&hdr, binary.BigEndian, uint32(MaxFrameBytes))
	_ = binary.Write(&hdr, binary.BigEndian, uint32(7))
	hdr.Write(make([]byte, 1000)) // a little of the body, then the connection goes quiet
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, _, err := Read(bytes.NewReader(hdr.Bytes()))
	runtime.ReadMemStats(&after)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("a truncated frame: %v, want io.ErrUnexpectedEOF", err)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 1<<20 {
		t.Errorf("reading 1,008 bytes of a frame that claims %d allocated %d bytes", MaxFrameBytes, grew)
	}
}

// Frames of every size come back whole, across the growth steps, and ReadMax refuses a frame
// over its bound before reading its body.
func TestReadSizes(t *testing.T) {
	for _, n := range []int{0, 1, readChunk - 1, readChunk, readChunk + 1, 5*readChunk + 3, MaxFrameBytes - destBytes} {
		body := bytes.Repeat([]byte{0xa5}, n)
		if n > 0 {
			body[n-1] = 0x5a
		}
		var b bytes.Buffer
		if err := Write(&b, 9, body); err != nil {
			t.Fatal(err)
		}
		dest, got, err := Read(&b)
		if err != nil || dest != 9 || !bytes.Equal(got, body) {
			t.Fatalf("%d bytes: dest %d, %d bytes back, %v", n, dest, len(got), err)
		}
	}
	var b bytes.Buffer
	_ = Write(&b, 1, make([]byte, 100))
	if _, _, err := ReadMax(&b, 64); !errors.Is(err, ErrFrameLength) {
		t.Errorf("a 104-byte frame under a 64-byte bound: %v, want ErrFrameLength", err)
	}
}
