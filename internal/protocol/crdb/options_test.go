package crdb

import (
	"strings"
	"testing"
)

// TestGCTTLAtLeastTwiceMaxOffset: a gateway's clock may lag a leaseholder's by max-offset, and
// its transactions' timestamps never go below their begin, so with gc-ttl under 2×max-offset
// such a gateway's transactions have less than max-offset before a leaseholder's GC horizon
// passes them (checkGCTTL says why not max-offset alone). Such a pair is refused with one line
// naming the option given (gc-ttl, or max-offset when gc-ttl is its default) and the other;
// equal or longer, and the defaults, are accepted.
func TestGCTTLAtLeastTwiceMaxOffset(t *testing.T) {
	for _, c := range []struct {
		opts map[string]string
		bad  string // the option the error names; "" if accepted
	}{
		{map[string]string{}, ""},
		{map[string]string{"gc-ttl": "1s"}, ""}, // twice max-offset's default, 500ms
		{map[string]string{"gc-ttl": "999ms"}, "gc-ttl"},
		{map[string]string{"gc-ttl": "500ms"}, "gc-ttl"}, // max-offset alone is not enough
		{map[string]string{"gc-ttl": "100ms"}, "gc-ttl"},
		{map[string]string{"gc-ttl": "10ms", "max-offset": "5ms"}, ""},
		{map[string]string{"gc-ttl": "10ms", "max-offset": "6ms"}, "gc-ttl"},
		{map[string]string{"gc-ttl": "50ms", "max-offset": "0s"}, ""},
		{map[string]string{"max-offset": "5s"}, ""},              // gc-ttl's default, 10s
		{map[string]string{"max-offset": "6s"}, "max-offset"},    // gc-ttl's default, 10s
		{map[string]string{"max-offset": "1000h"}, "max-offset"}, // no overflow at the largest
	} {
		err := proto{}.CheckOptionValues(c.opts)
		switch {
		case c.bad == "" && err != nil:
			t.Errorf("%v refused: %v", c.opts, err)
		case c.bad != "" && err == nil:
			t.Errorf("%v accepted: a lagging gateway's transactions would have less than max-offset before the GC horizon passes them", c.opts)
		case c.bad != "" && (!strings.Contains(err.Error(), "option "+c.bad+"=") || !strings.Contains(err.Error(), "max-offset") ||
			!strings.Contains(err.Error(), "gc-ttl") && c.bad == "max-offset" || strings.Contains(err.Error(), "\n")):
			t.Errorf("%v: error %q, want one line naming %s and max-offset", c.opts, err, c.bad)
		}
	}
}
