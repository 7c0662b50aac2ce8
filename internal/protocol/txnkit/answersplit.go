package txnkit

import "github.com/meridiandb/meridian/internal/wire"

// ValuesThatFit is how many of n values, from the first, fit one answer of wire.MaxScanBytes
// (with a few bytes of framing each, as ValuesTooLarge counts them): at least one, since a
// single value is within client.MaxValueBytes. A node that answers many reads at once sends
// them in as many messages as this cuts them into, so that none exceeds a frame.
func ValuesThatFit(n int, value func(i int) []byte) int {
	size := 0
	for i := range n {
		if size += len(value(i)) + 8; size > wire.MaxScanBytes && i > 0 {
			return i
		}
	}
	return n
}
