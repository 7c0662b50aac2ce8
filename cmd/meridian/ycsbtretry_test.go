package main

import (
	"strings"
	"testing"
)

// YCSB-T's read-modify-write check tries each read as hard as list-append's final read does. It
// starts while messages slowed by up to 10 s may still be on their way and old locks still held,
// and with the client's default 10 attempts a no-wait spanner aborted every one at this seed
// ("gave up after 10 attempts: transaction aborted: no-wait").
func TestYCSBTCheckOutlastsSlowedLocks(t *testing.T) {
	out, errs, code := run(t, "sim", "--protocol", "spanner", "--topology", "wren-3dc", "--workload", "ycsbt", "--rmw", "--keys", "20",
		"--zipf", "0.62", "--clients", "8", "--jitter", "200us", "--scan-ratio", "0.2", "--scan-length", "10", "--ops", "8",
		"--random-slowdowns", "300ms-600ms/1s", "--slow-by", "10s", "--loss", "0.01", "--duplicate", "0.01",
		"--random-skews", "200ms-1s/1s", "--skew-by", "20us", "--opt", "lock-policy=no-wait", "--opt", "gc-ttl=100ms",
		"--duration", "20s", "--seed", "94989")
	if code != 0 || !strings.Contains(out, "consistency") || strings.Contains(out, "gave up") {
		t.Errorf("exit %d, want the check to have run and passed\n%s%s", code, out, errs)
	}
}
