package main

import (
	"strings"
	"testing"
)

// A crdb STAGING record whose coordinator went quiet is decided even when the record expiry is
// shorter than a round trip between regions: recovery waited only the expiry for its queries'
// answers, so with 10 ms heartbeats (a 50 ms expiry, against BJ–SG's 77.6 ms) no answer came in
// time, the record was never decided, and readers of its intents waited for good. These seeds'
// final reads then hung until their deadline (durability not checked).
func TestCrdbRecoveryOutwaitsTheRoundTrip(t *testing.T) {
	for _, seed := range []string{"95557", "95571"} {
		out, errs, code := run(t, "sim", "--protocol", "crdb", "--workload", "rw-register", "--read-back", "--keys", "19", "--zipf", "0.99",
			"--clients", "4", "--nodes-per-region", "2", "--loss", "0.01", "--duplicate", "0.01",
			"--opt", "write-pipelining=off", "--opt", "heartbeat-interval=10ms", "--duration", "20s", "--seed", seed)
		if code != 0 || !strings.Contains(out, "found every acknowledged write") {
			t.Errorf("seed %s: exit %d, want the final read to find every acknowledged write\n%s%s", seed, code, out, errs)
		}
	}
}
