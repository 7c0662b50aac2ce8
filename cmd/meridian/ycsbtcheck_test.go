package main

import (
	"strings"
	"testing"
)

// YCSB-T with read-modify-writes is checked after the run: serial without its lock loses
// updates, and its run prints the keys whose counters fell behind their acknowledged increments
// and exits 1 (it exited 0); serial itself passes.
func TestSimYCSBTCountersCatchMutant(t *testing.T) {
	args := []string{"sim", "--protocol", "serial", "--workload", "ycsbt", "--rmw", "--keys", "20", "--clients", "8", "--duration", "1s"}
	out, errs, code := run(t, append(args, "--opt", "mutant=no-lock")...)
	if want := "consistency: ycsbt: "; code != 1 || !strings.Contains(errs, want) || !strings.Contains(out, "acknowledged increments") {
		t.Fatalf("serial without its lock: exit %d, stderr %q, output\n%s\nwant exit 1 and %q", code, errs, out, want)
	}
	m := simJSON(t, args[1:]...)
	if m["consistency"] != "ok" {
		t.Fatalf("serial: consistency %v, want ok", m["consistency"])
	}
}
