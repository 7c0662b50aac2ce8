package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/meridiandb/meridian/configs"
	mrt "github.com/meridiandb/meridian/internal/runtime"
)

// writeFiles writes name → text under dir and returns dir.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// freeClusterConfig writes the default cluster configuration with every port replaced by one
// nobody listens on, so that a client finds no cluster whatever else runs on this machine, and
// a node started from it can listen.
func freeClusterConfig(t *testing.T, dir string) string {
	t.Helper()
	// Chosen with every port held until all are: ports freed one by one were handed out
	// again, and a node's transport and gRPC API got the same one.
	text, err := mrt.WithFreePorts(configs.Default)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "cluster.toml")
	writeFiles(t, dir, map[string]string{"cluster.toml": text})
	return path
}

// badCase is a command line that must fail with an error line mentioning want, and with exit
// status code (0: any non-zero status).
type badCase struct {
	args []string
	want string
	code int
}

// TestBadInputTable runs each command with input a user might get wrong. Every case must fail
// at once with one line that names what is wrong, never a stack trace, a usage dump or a run.
func TestBadInputTable(t *testing.T) {
	dir := t.TempDir()
	two := "[[region]]\nname = \"A\"\nrtt_ms = { B = 3 }\n[[region]]\nname = \"B\"\n"
	writeFiles(t, dir, map[string]string{
		"huge.toml":       two + "[layout]\nnodes_per_region = 1000\nshards_per_node = 100000\n",
		"product.toml":    two + "[layout]\nnodes_per_region = 1000\nshards_per_node = 1024\n",
		"negshards.toml":  two + "[layout]\nshards_per_node = -3\n",
		"negbackups.toml": two + "[layout]\nreplication = \"backups\"\nbackups = -2\n",
		"nanrtt.toml":     "[[region]]\nname = \"A\"\nrtt_ms = { B = nan }\n[[region]]\nname = \"B\"\n",
		"hugeintra.toml":  "intra_rtt_ms = 1e30\n[[region]]\nname = \"A\"\n",
		"syntax.toml":     "name = \"x\"\n[[region]\nname = \"A\"\n",
		"empty.toml":      "",
		"badtype.toml":    "[[region]]\nname = \"A\"\nrtt_ms = { B = \"fast\" }\n[[region]]\nname = \"B\"\n",
		"layout.toml":     two + "[layout]\nnodes_per_region = 2\n",
		"empty.jsonl":     "",
		"long.jsonl":      `{"index":0,"type":"invoke","process":0,"value":[["append",1,` + strings.Repeat("9", 100000) + "]]}\n",
		"backups.toml":    "[[region]]\nname = \"A\"\n[layout]\nnodes_per_region = 4\nbackups = 3\n",
		// Two transactions under one index: every cycle through them read "T0 < T0".
		"dupindex.jsonl": `{"index":0,"type":"invoke","process":0,"time":1,"value":[["append",1,1]]}` + "\n" +
			`{"index":0,"type":"invoke","process":1,"time":1,"value":[["append",1,2]]}` + "\n" +
			`{"index":1,"type":"ok","process":0,"time":2,"value":[["append",1,1]]}` + "\n" +
			`{"index":2,"type":"ok","process":1,"time":2,"value":[["append",1,2]]}` + "\n",
		// A missing time read as 0: T2 "completed at 0, before T0 was invoked at 100".
		"mixtime.jsonl": `{"index":0,"type":"invoke","process":0,"time":100,"value":[["append",1,1]]}` + "\n" +
			`{"index":1,"type":"ok","process":0,"time":200,"value":[["append",1,1]]}` + "\n" +
			`{"index":2,"type":"invoke","process":1,"value":[["r",1,null]]}` + "\n" +
			`{"index":3,"type":"ok","process":1,"value":[["r",1,[1]]]}` + "\n",
		"latetime.jsonl": `{"index":0,"type":"invoke","process":0,"value":[["append",1,1]]}` + "\n\n" +
			`{"index":1,"type":"ok","process":0,"time":null,"value":[["append",1,1]]}` + "\n" +
			`{"index":2,"type":"invoke","process":1,"time":7,"value":[["r",1,null]]}` + "\n",
	})
	if err := os.Mkdir(filepath.Join(dir, "adir.toml"), 0o755); err != nil {
		t.Fatal(err)
	}
	missingDir := filepath.Join(dir, "no-such-dir")
	// A report path that is a directory: repro wrote the report only after every simulation.
	reportDirOut := filepath.Join(dir, "repro-out")
	if err := os.MkdirAll(filepath.Join(reportDirOut, "k2-fig17", "report.md"), 0o755); err != nil {
		t.Fatal(err)
	}
	// Links to one output: a dangling symbolic link to a history not yet written, and a hard
	// link to an existing file.
	if err := os.Symlink("fresh.jsonl", filepath.Join(dir, "fresh-link.prof")); err != nil {
		t.Fatal(err)
	}
	writeFiles(t, dir, map[string]string{"kept.jsonl": "kept\n"})
	if err := os.Link(filepath.Join(dir, "kept.jsonl"), filepath.Join(dir, "kept-hard.prof")); err != nil {
		t.Fatal(err)
	}
	cluster := freeClusterConfig(t, dir)
	// Cluster configurations a node cannot run safely: the runtime's parser refuses them and
	// names the line.
	clusterText, err := os.ReadFile(cluster)
	if err != nil {
		t.Fatal(err)
	}
	for name, edit := range map[string][2]string{
		"ttl.toml":   {`ttl = "5ms"`, `ttl = "2000000h"`},
		"eps.toml":   {`epsilon = "1ms"`, `epsilon = "2000000h"`},
		"scale.toml": {"scale = 1.0", "scale = nan"},
	} {
		text := strings.Replace(string(clusterText), edit[0], edit[1], 1)
		if text == string(clusterText) {
			t.Fatalf("%s: %q is not in the default configuration", name, edit[0])
		}
		writeFiles(t, dir, map[string]string{name: text})
	}
	f := func(name string) string { return filepath.Join(dir, name) }
	// A run that would take well under a second if the input were accepted.
	tiny := []string{"sim", "--protocol", "serial", "--duration", "100ms", "--warmup", "0s", "--clients", "1"}
	sim := func(args ...string) []string { return append(append([]string{}, tiny...), args...) }
	realRun := []string{"bench", "--config", cluster, "--duration", "200ms", "--warmup", "0s", "--clients", "1"}
	bench := func(args ...string) []string { return append(append([]string{}, realRun...), args...) }

	cases := []badCase{
		// Flags, counts and durations.
		{sim("--bogus"), "unknown flag: --bogus", 0},
		{sim("--duration", "abc"), `invalid argument "abc" for "--duration"`, 0},
		{sim("--duration", "0s"), "--duration must be positive", 0},
		{sim("--duration", "2562047h", "--warmup", "2562047h"), "--duration must be at most 1000h, got 2562047h", 0},
		{sim("--duration", "900h", "--warmup", "200h"), "--warmup + --duration must be at most 1000h", 0},
		{sim("--warmup", "-1s"), "--warmup must not be negative", 0},
		{sim("--clients", "0"), "--clients must be 1..100000", 0},
		{sim("--clients", "10000000"), "--clients must be 1..100000 (per region), got 10000000", 0},
		{sim("--cores", "0"), "--cores must be 1..1024, got 0", 0},
		{sim("--jitter", "-1s"), "--jitter must be 0..100s, got -1s", 0},
		{sim("--protocol", "k2", "--jitter", "2ms"), "most batches would arrive expired; raise ttl", 0},
		{sim("--service-time", "1000h"), "--service-time must be 0..100s, got 1000h", 0},
		{sim("--flush-latency", "-5ms"), "--flush-latency must be 0..100s", 0},
		{sim("--epsilon", "-5ms"), "--epsilon must be 0..100s", 0},
		{sim("--max-offset", "200s"), "--max-offset must be 0..100s", 0},
		{sim("--intra-rtt", "1000h"), "--intra-rtt must be 0..100s", 0},
		{sim("--max-drift", "NaN"), "--max-drift must be 0..0.01", 0},
		{sim("--truetime-error", "most"), `--truetime-error must be half or full, got "most"`, 0},
		{sim("--disk", "nvme"), `--disk must be local or shared, got "nvme"`, 0},
		{sim("--nodes-per-region", "0"), "--nodes-per-region must be 1..1000, got 0", 0},
		{sim("--shards-per-node", "100000"), "--shards-per-node must be 1..1024, got 100000", 0},
		{sim("--topology", "uniform:100:5", "--nodes-per-region", "1000", "--shards-per-node", "1024"), "at most 1048576", 0},
		{sim("--seed", "-1"), `invalid argument "-1" for "--seed"`, 0},
		// Workloads.
		{sim("--workload", "nope"), `--workload "nope": unknown workload (known: list-append, rw-register, ycsbt, tpcc)`, 0},
		{sim("--keys", "-5"), "--keys must not be negative (0 for the workload's default), got -5", 0},
		{sim("--ops", "-1"), "--ops must be 1..1000", 0},
		{sim("--keys", "2000000000"), "key count must be 1..1000000", 0},
		{sim("--workload", "ycsbt", "--keys", "2000000000"), "key count must be 2..134217728 with the scrambled distribution", 0},
		{sim("--workload", "tpcc", "--warehouses", "100000000"), "--warehouses must be 1..10000 (or 0 for one per region), got 100000000", 0},
		{sim("--workload", "tpcc", "--tpcc-items", "5"), "TPC-C items must be 100..100000", 0},
		{sim("--workload", "tpcc", "--tpcc-mix", "1,2"), "--tpcc-mix wants 5 weights", 0},
		{sim("--workload", "tpcc", "--tpcc-mix", "0,0,0,0,0"), "--tpcc-mix weights sum to zero", 0},
		{sim("--workload", "tpcc", "--tpcc-mix", "-1,0,0,0,5"), "--tpcc-mix weights must not be negative", 0},
		// The weights' sum overflowed and the workload panicked drawing below it.
		{sim("--workload", "tpcc", "--tpcc-mix", "9223372036854775807,1,0,0,0"), "--tpcc-mix weights must be 0..1000000", 0},
		{sim("--workload", "tpcc", "--remote-item-ratio", "7"), "--remote-item-ratio must be in [0, 1]", 0},
		{sim("--write-ratio", "2"), "--write-ratio must be in [0, 1]", 0},
		{sim("--write-ratio", "NaN"), "--write-ratio must be in [0, 1]", 0},
		{sim("--workload", "ycsbt", "--scan-ratio", "1.5"), "--scan-ratio must be in [0, 1]", 0},
		{sim("--workload", "tpcc", "--rmw"), "--rmw does not apply to --workload tpcc (only to ycsbt)", 0},
		// Clocks 200 ms apart under crdb's 100 ms uncertainty: honest runs read stale values.
		{sim("--protocol", "crdb", "--max-offset", "100ms", "--opt", "max-offset=100ms"), "protocol crdb: max-offset 100ms is below the 200ms two clocks may be apart", 0},
		{sim("--workload", "ycsbt", "--scan-ratio", "1", "--scan-length", "-3"), "--scan-length must not be negative", 0},
		{sim("--workload", "ycsbt", "--scan-ratio", "1", "--scan-length", "5000"), "exceed the 4194304-byte scan answer limit", 0},
		{sim("--scan-ratio", "0.5"), "--scan-ratio does not apply to --workload list-append (only to ycsbt)", 0},
		{sim("--crt-ratio", "-0.5"), "--crt-ratio must be in [0, 1] (or -1 for the workload's default), got -0.5", 0},
		{sim("--workload", "ycsbt", "--zipf", "1"), "--zipf must be in [0, 1)", 0},
		{sim("--workload", "ycsbt", "--zipf", "-5"), "--zipf must be in [0, 1) (or -1 for the workload's default), got -5", 0},
		{sim("--workload", "ycsbt", "--preset", "nope"), `unknown YCSB-T preset "nope"`, 0},
		{sim("--workload", "tpcc", "--zipf", "0.5"), "--zipf does not apply to --workload tpcc (only to list-append, rw-register, ycsbt)", 0},
		{sim("--warehouses", "5"), "--warehouses does not apply to --workload list-append (only to tpcc)", 0},
		{sim("--workload", "tpcc", "--keys", "100"), "--keys does not apply to --workload tpcc", 0},
		{sim("--workload", "ycsbt", "--tpcc-full"), "--tpcc-full does not apply to --workload ycsbt", 0},
		{sim("--preset", "rls"), "--preset does not apply to --workload list-append", 0},
		// Protocols and their options.
		{sim("--protocol", "nope"), `unknown protocol "nope" (known:`, 0},
		{sim("--protocol", ""), `unknown protocol ""`, 0},
		{sim("--opt", "noequals"), `--opt "noequals": want key=value`, 0},
		{sim("--opt", "=v"), `--opt "=v": want key=value`, 0},
		{sim("--opt", "colour=blue"), `unknown option "colour"`, 0},
		{sim("--opt", "idle-timeout=1s", "--opt", "idle-timeout=2s"), "--opt idle-timeout given twice", 0},
		{sim("--opt", "idle-timeout=0s"), "--opt idle-timeout=0s: protocol serial wants a positive duration", 0},
		// K2's commit wait, 2×(ttl+ε), overflowed: k2 stopped waiting and its history was
		// not strictly serializable.
		{sim("--protocol", "k2", "--opt", "ttl=2000000h"), "--opt ttl=2000000h: a duration option must be at most 1000h", 0},
		{sim("--protocol", "crdb", "--opt", "max-offset=2562047h"), "--opt max-offset=2562047h: a duration option must be at most 1000h", 0},
		{sim("--protocol", "k2", "--opt", "mutant=nope"), `--opt mutant=nope: protocol k2 wants one of "" (none), no-commit-wait`, 0},
		{sim("--protocol", "spanner", "--opt", "lock-policy=sometimes"), "--opt lock-policy=sometimes: protocol spanner wants one of no-wait", 0},
		{sim("--workload", "list-append", "--max-writes-per-key", "-1"), "--max-writes-per-key must be 1..1000000 (or 0 for no limit), got -1", 0},
		{sim("--workload", "tpcc", "--max-writes-per-key", "5"), "--max-writes-per-key does not apply to --workload tpcc", 0},
		// k2 takes its declared clock bounds on trust: below the simulated clocks' own, honest
		// runs could break strict serializability without a word.
		{sim("--protocol", "k2", "--epsilon", "1ms", "--opt", "epsilon=500us"), "protocol k2: epsilon 500µs is below the oracles' TrueTime uncertainty 1ms", 0},
		{sim("--protocol", "k2", "--max-drift", "0.001"), "protocol k2: max-drift 0.0002 is below the local clocks' drift bound 0.001", 0},
		// NaN fails every comparison: it passed max-drift's range check and the clock refused
		// it later, with another bound, in another form. ±Inf must meet the same check.
		{sim("--protocol", "k2", "--opt", "max-drift=NaN"), "--opt max-drift=NaN: protocol k2 wants a rate in [0, 0.01]", 0},
		{sim("--protocol", "k2", "--opt", "max-drift=nan"), "--opt max-drift=nan: protocol k2 wants a rate in [0, 0.01]", 0},
		{sim("--protocol", "k2", "--opt", "max-drift=+Inf"), "--opt max-drift=+Inf: protocol k2 wants a rate in [0, 0.01]", 0},
		{sim("--protocol", "k2", "--opt", "max-drift=-Inf"), "--opt max-drift=-Inf: protocol k2 wants a rate in [0, 0.01]", 0},
		{sim("--protocol", "k2", "--opt", "max-drift=-1"), "--opt max-drift=-1: protocol k2 wants a rate in [0, 0.01]", 0},
		// The batcher refused a step above ttl in its own terms ("clock: batcher step …").
		{sim("--protocol", "k2", "--opt", "step=1000h"), "--opt step=1000h: protocol k2 wants a duration no longer than ttl (500µs)", 0},
		{sim("--protocol", "k2", "--opt", "ttl=5ns"), "--opt ttl=5ns: protocol k2 wants a duration no shorter than step (10ns)", 0},
		// Spanner's own checks said "idle-timeout and decision-timeout must be positive": neither
		// which option nor its value.
		{sim("--protocol", "spanner", "--opt", "decision-timeout=0s"), "--opt decision-timeout=0s: protocol spanner wants a positive duration", 0},
		{sim("--protocol", "spanner", "--opt", "idle-timeout=0s"), "--opt idle-timeout=0s: protocol spanner wants a positive duration", 0},
		{sim("--protocol", "spanner", "--opt", "lock-policy=timeout", "--opt", "lock-timeout=0s"), "--opt lock-timeout=0s: protocol spanner wants a positive duration", 0},
		{sim("--protocol", "spanner", "--opt", "lock-timeout=1s"), "--opt lock-timeout=1s: protocol spanner wants lock-policy=timeout with it (lock-policy is wound-wait)", 0},
		{sim("--protocol", "spanner", "--opt", "mutant=eager-no-lock"), "--opt mutant=eager-no-lock: protocol spanner wants write-locks=eager with it", 0},
		{sim("--check", "nope"), `--check "nope": want auto, none or one of`, 0},
		{sim("--workload", "tpcc", "--check", "strict-serializable"), "the tpcc workload records no reads and writes a checker can judge", 0},
		{sim("--topology", "single-dc", "--crt-ratio", "0.5"), "topology single-dc has one region", 0},
		// Topologies.
		{sim("--topology", "nope"), `unknown topology "nope"`, 0},
		{sim("--topology", "uniform:0:5"), "region count must be 1..100", 0},
		{sim("--topology", "uniform:3"), "want uniform:N:RTTms", 0},
		{sim("--topology", "uniform:3:NaN"), `topology "uniform:3:NaN": RTT must be 0..10000 ms`, 0},
		{sim("--topology", f("missing.toml")), "no such file or directory", 0},
		{sim("--topology", f("adir.toml")), "is a directory", 0},
		{sim("--topology", f("syntax.toml")), "syntax.toml:3:", 0},
		{sim("--topology", f("empty.toml")), "no [[region]] tables", 0},
		{sim("--topology", f("badtype.toml")), "line 3", 0},
		{sim("--topology", f("huge.toml")), "huge.toml:8: shards_per_node must be 1..1024, got 100000", 0},
		{sim("--topology", f("product.toml")), "2048000 shard replicas; at most 1048576", 0},
		{sim("--topology", f("negshards.toml")), "negshards.toml:7: shards_per_node must be 1..1024, got -3", 0},
		{sim("--topology", f("negbackups.toml")), "negbackups.toml:8: backups must not be negative", 0},
		{sim("--topology", f("nanrtt.toml")), `nanrtt.toml:3: region "A": rtt_ms to "B" must be 0..100000, got NaN`, 0},
		{sim("--topology", f("layout.toml"), "--nodes-per-region", "3"), "--nodes-per-region 3 conflicts with nodes_per_region = 2 in", 0},
		{sim("--topology", f("hugeintra.toml")), "hugeintra.toml:1: intra_rtt_ms must be 0..100000, got 1e+30", 0},
		{sim("--topology", f("backups.toml")), `backups.toml:5: backups = 3 needs replication = "backups" (replication is "primary")`, 0},
		// Output files that are written only when the run ends.
		{sim("--history", filepath.Join(missingDir, "h.jsonl")), "--history " + filepath.Join(missingDir, "h.jsonl") + ": no such file or directory", 0},
		{sim("--history", dir), "is a directory, want a file name", 0},
		{sim("--history", f("out"), "--memprofile", filepath.Join(dir, ".", "out")), "--history and --memprofile both name", 0},
		{sim("--history", f("fresh.jsonl"), "--cpuprofile", f("fresh-link.prof")), "--history and --cpuprofile both name", 0},
		{sim("--workload", "tpcc", "--history", f("tpcc.jsonl")), "--history: the tpcc workload records no reads and writes a checker can judge", 0},
		{bench("--workload", "ycsbt", "--history", f("ycsbt.jsonl")), "--history: the ycsbt workload records no reads and writes", 0},
		{sim("--history", f("kept.jsonl"), "--memprofile", f("kept-hard.prof")), "--history and --memprofile both name", 0},
		{sim("--memprofile", filepath.Join(missingDir, "m.prof")), "--memprofile", 0},
		{sim("--cpuprofile", filepath.Join(missingDir, "c.prof")), "--cpuprofile", 0},
		{[]string{"sim", "extra"}, `unknown command "extra" for "meridian sim"`, 0},
		// A K2-TB batch that cannot outlast its own fetch: every one would arrive expired and
		// the run would report 0 txn/s without saying why.
		{[]string{"sim", "--protocol", "k2", "--oracle-service-time", "133us", "--intra-rtt", "36us", "--opt", "ttl=100us"},
			"protocol k2: ttl 100µs does not outlast a timestamp request to the region's oracle (36µs round trip + 133µs service)", 0},
		// check: usage errors exit 3 ("error"), never 1 ("anomalies found").
		{[]string{"check"}, "usage: meridian check", 3},
		{[]string{"check", "a", "b"}, "2 arguments given, want 1", 3},
		{[]string{"check", f("missing.jsonl")}, "no such file or directory", 3},
		{[]string{"check", dir}, dir + " is a directory, not a history file", 3},
		{[]string{"check", "--model", "nope", f("empty.jsonl")}, `--model "nope": want one of`, 3},
		{[]string{"check", f("long.jsonl")}, "bytes cut", 3},
		{[]string{"check", f("dupindex.jsonl")}, "dupindex.jsonl: history line 2 (index 0): the previous event has index 0 too: every event needs its own index", 3},
		// Some operations with a time and some without: no real-time order can be drawn.
		{[]string{"check", f("mixtime.jsonl")}, `mixtime.jsonl: history line 3 (index 2): no "time", though line 1 (index 0) has one; either every operation carries a time or none does`, 3},
		{[]string{"check", "--model", "serializable", f("latetime.jsonl")}, `latetime.jsonl: history line 4 (index 2): a "time", though line 1 (index 0) has none`, 3},
		// A flag error is an error too, not "anomalies found".
		{[]string{"check", "--bogus", f("empty.jsonl")}, "unknown flag: --bogus", 3},
		{[]string{"check", f("empty.jsonl"), "--model"}, "flag needs an argument: --model", 3},
		// repro: refused before any simulation.
		{[]string{"repro"}, "usage: meridian repro NAME (0 names given", 0},
		{[]string{"repro", "a", "b"}, "2 names given", 0},
		{[]string{"repro", "--list", "x"}, "repro --list takes no experiment name", 0},
		{[]string{"repro", "--list", "--scale", "paper"}, "repro --list takes no --scale", 0},
		{[]string{"repro", "nope"}, `unknown experiment "nope" (known:`, 0},
		{[]string{"repro", "k2-fig17", "--scale", "huge"}, `unknown scale "huge" (want quick or paper)`, 0},
		{[]string{"repro", "k2-fig17", "--parallel", "-1"}, "--parallel must be 0..", 0},
		{[]string{"repro", "k2-fig17", "--parallel", "100000"}, "--parallel must be 0..", 0},
		{[]string{"repro", "k2-fig17", "--seeds", "0"}, "--seeds must be 1..100, got 0", 0},
		{[]string{"repro", "k2-fig17", "--out", reportDirOut}, "k2-fig17/report.md is not a regular file", 0},
		{[]string{"repro", "k2-fig17", "--seeds", "101"}, "--seeds must be 1..100, got 101", 0},
		{[]string{"repro", "k2-fig17", "--out", f("empty.jsonl")}, "--out: mkdir", 0},
		// The report went to the working directory.
		{[]string{"repro", "k2-fig17", "--out", ""}, "--out is empty", 0},
		// The seeds wrapped past the largest to 0.
		{[]string{"repro", "k2-fig17", "--seed", "18446744073709551615", "--seeds", "2"}, "--seed 18446744073709551615 with --seeds 2: the seeds would pass", 0},
		// demo.
		{[]string{"demo", "--duration", "0s"}, "--duration must be positive", 0},
		{[]string{"demo", "--duration", "2562047h"}, "--duration must be at most 1000h", 0},
		{[]string{"demo", "--clients", "-1"}, "--clients must be 1..100000", 0},
		{[]string{"demo", "--clients", "10000000"}, "--clients must be 1..100000", 0},
		{[]string{"demo", "--protocols", "nope"}, `--protocols: unknown protocol "nope"`, 0},
		{[]string{"demo", "--protocols", "serial,serial"}, "--protocols names serial twice", 0},
		{[]string{"demo", "--protocols", "serial", "--out", f("empty.jsonl")}, "--out: mkdir", 0},
		// An empty list (an unset shell variable) ran every protocol.
		{[]string{"demo", "--protocols", ""}, "--protocols is empty", 0},
		{[]string{"demo", "--protocols", "serial", "--out", ""}, "--out is empty", 0},
		// bench, kv, cluster and server without a running cluster.
		{bench("--duration", "0s"), "--duration must be positive", 0},
		{bench("--clients", "0"), "--clients must be 1..100000", 0},
		{bench("--workload", "nope"), "unknown workload", 0},
		{bench("--check", "nope"), `--check "nope"`, 0},
		{bench("--history", filepath.Join(missingDir, "h.jsonl")), "--history", 0},
		{bench(), "refused the connection: is the cluster running?", 0},
		{[]string{"bench", "--config", f("missing.toml")}, "cluster config: open", 0},
		{[]string{"bench", "--config", f("syntax.toml")}, "syntax.toml:3:", 0},
		{[]string{"kv", "get", "k", "--config", cluster}, "refused the connection: is the cluster running?", 0},
		{[]string{"kv", "get"}, "usage: meridian kv get KEY", 0},
		{[]string{"kv", "put", "a"}, "1 argument given, want 2", 0},
		{[]string{"kv", "put", "a", "b", "--value-file", "-"}, "give VALUE or --value-file, not both", 0},
		{[]string{"kv", "put", "--value-file", "-"}, "(no KEY given)", 0},
		{[]string{"kv", "put", "a", "--value-file", f("missing-value")}, "--value-file: open " + f("missing-value") + ": no such file or directory", 0},
		{[]string{"kv", "scan", "a", "--limit", "-5"}, "--limit must not be negative", 0},
		{[]string{"kv", "scan", "b", "a"}, `END "a" is not after START "b"`, 0},
		{[]string{"kv", "scan", "a", "a"}, `END "a" is not after START "a"`, 0},
		{[]string{"kv", "scan", "a", "--prefix", "b"}, "give START [END] or --prefix, not both", 0},
		{[]string{"kv", "scan", "--prefix", "\xff"}, `key "\xff" is not valid UTF-8`, 0},
		{[]string{"kv", "get", "k", "--region", "nope"}, `--region "nope": no such region`, 0},
		{[]string{"kv", "get", "k", "--node", "sh-1", "--region", "SG", "--config", cluster}, "--node sh-1 and --region SG both choose the node to talk to", 0},
		{[]string{"kv", "get", "k", "--region", "", "--config", cluster}, "--region is empty", 0},
		// A node drops a request whose key is not UTF-8: the client waited 10 s and called
		// the node unavailable.
		{[]string{"kv", "put", "\xff", "v", "--config", cluster}, `key "\xff" is not valid UTF-8`, 0},
		{[]string{"kv", "exec", "--namespace", "\xff", "--config", cluster}, `--namespace "\xff" is not valid UTF-8`, 0},
		{bench("--namespace", "\xff"), `--namespace "\xff" is not valid UTF-8`, 0},
		// Keys past the client's limit: every transaction failed, and the run exited 0.
		{bench("--namespace", strings.Repeat("n", 5000)), "--namespace is 5000 bytes long: keys under it would pass the 4096-byte key limit", 0},
		{[]string{"kv", "exec", "--namespace", strings.Repeat("n", 5000), "--config", cluster}, "--namespace is 5000 bytes long", 0},
		// Only list-append and rw-register have keys under a namespace.
		{bench("--workload", "ycsbt", "--namespace", "a"), "--namespace does not apply to --workload ycsbt", 0},
		{[]string{"kv", "bogus"}, `unknown command "bogus" for "meridian kv" (want del, exec, get, put, scan)`, 0},
		{[]string{"cluster", "bogus"}, `unknown command "bogus" for "meridian cluster" (want chaos, start, status, stop)`, 0},
		{[]string{"cluster", "status", "--data-dir", missingDir}, "no cluster was started in", 0},
		{[]string{"cluster", "start", "--config", cluster, "--data-dir", filepath.Join(f("empty.jsonl"), "data")}, "data directory: mkdir", 0},
		{[]string{"server"}, "--node is required", 0},
		{[]string{"server", "--node", "nope"}, `no node "nope"`, 0},
		{[]string{"server", "--node", "sh-1", "--log-level", "loud"}, `--log-level "loud"`, 0},
		{[]string{"kv", "get", "k", "--config", f("ttl.toml")}, "ttl.toml:18: protocol k2: option ttl=2000000h: want a duration from 0 to 1000h", 0},
		{[]string{"kv", "get", "k", "--config", f("eps.toml")}, `eps.toml:9: epsilon "2000000h": want a duration from 0 to 100s`, 0},
		{[]string{"kv", "get", "k", "--config", f("scale.toml")}, "scale.toml:26: latency scale NaN: want 0..100", 0},
		// The command tree.
		{[]string{"nope"}, "unknown command", 0},
		// Cobra printed its suggestions on four more lines.
		{[]string{"sm"}, `unknown command "sm" for "meridian" (did you mean kv or sim?)`, 0},
		// An empty command name (an unset shell variable) printed the usage and exited 0.
		{[]string{""}, `unknown command "" for "meridian" (meridian --help lists the commands)`, 0},
		{[]string{"help", "nope"}, `help: unknown command "nope"`, 0},
		{[]string{"completion", "nope"}, `unknown command "nope" for "meridian completion"`, 0},
		{[]string{"topologies", "extra"}, `unknown command "extra"`, 0},
	}
	// Runs too big for this machine, added only where they are: on a larger one they would
	// start (and the test would never end).
	if mem := memoryLimit(); mem > 0 {
		if mem < 90<<30 { // 10M clients need at least 95 GB
			cases = append(cases, badCase{sim("--clients", "100000", "--topology", "uniform:100:1"), "lower --clients", 0})
		}
		if mem < 300<<30 { // 10000 compact warehouses: at least 380 GB
			cases = append(cases, badCase{sim("--workload", "tpcc", "--warehouses", "10000"), "lower --warehouses or --tpcc-items", 0})
		}
		if mem < 150<<30 { // 134M YCSB-T keys of 1,000 bytes, loaded for scans: at least 170 GB
			cases = append(cases,
				badCase{sim("--workload", "ycsbt", "--keys", "134217728", "--scan-ratio", "0.5"), "lower --keys", 0},
				badCase{bench("--workload", "ycsbt", "--keys", "134217728", "--scan-ratio", "0.5"), "lower --keys", 0})
		}
		if mem < 4000<<30 { // 10000 specification-sized warehouses: at least 4.7 TB
			cases = append(cases,
				badCase{sim("--workload", "tpcc", "--warehouses", "10000", "--tpcc-full"), "GB of memory", 0},
				badCase{bench("--workload", "tpcc", "--warehouses", "10000", "--tpcc-full"), "GB of memory", 0})
		}
	}
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err == nil && rl.Cur < 300000 {
		cases = append(cases, badCase{bench("--clients", "100000"), "exceed this process's open-file limit", 0})
	}
	// A command that wrongly accepts its input writes where it runs (demo's and repro's
	// reports): not into the source tree.
	t.Chdir(t.TempDir())
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			out, errs, code := run(t, c.args...)
			if code == 0 {
				t.Fatalf("exit 0, want an error; stdout:\n%s", out)
			}
			if c.code != 0 && code != c.code {
				t.Errorf("exit %d, want %d", code, c.code)
			}
			line := strings.TrimSpace(errs)
			if strings.Contains(line, "\n") || strings.Contains(errs, "panic") || strings.Contains(errs, "goroutine") || strings.Contains(errs, "Usage:") {
				t.Errorf("want one line, got:\n%s", errs)
			}
			if len(line) > 1100 {
				t.Errorf("error line is %d bytes long", len(line))
			}
			if !strings.Contains(line, c.want) {
				t.Errorf("error %q, want it to mention %q", line, c.want)
			}
			if out != "" {
				t.Errorf("printed to stdout before failing:\n%s", out)
			}
		})
	}
	if _, err := os.Stat(missingDir); err == nil {
		t.Errorf("a refused run created %s", missingDir)
	}
}

// The checks must not refuse what is valid: the explicit defaults and the boundaries.
func TestGoodInputStillRuns(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"layout.toml": "[[region]]\nname = \"A\"\n[layout]\nnodes_per_region = 2\n"})
	tiny := []string{"sim", "--protocol", "serial", "--duration", "100ms", "--warmup", "0s", "--clients", "1", "--json"}
	for _, args := range [][]string{
		{"--workload", "ycsbt", "--zipf", "-1", "--write-ratio", "-1", "--crt-ratio", "-1", "--keys", "1000"},
		{"--workload", "ycsbt", "--preset", "fwkv", "--zipf", "0", "--write-ratio", "1"},
		{"--workload", "ycsbt", "--keys", "1000", "--scan-ratio", "0.5", "--scan-length", "10"},
		// Nothing commits in 100 ms under 100 s of jitter, which a checker would call unknown,
		// and clients still wait at the drain's end, so no final read could run.
		{"--opt", "mutant=", "--cores", "1024", "--jitter", "100s", "--max-drift", "0.01", "--check", "none", "--verify=false", "--disk", "shared"},
		{"--history", filepath.Join(dir, "h.jsonl"), "--check", "none"},
		{"--workload", "rw-register", "--check", "serializable", "--topology", "single-dc", "--crt-ratio", "0"},
		{"--topology", filepath.Join(dir, "layout.toml"), "--nodes-per-region", "2", "--shards-per-node", "4"},
	} {
		out, errs, code := run(t, append(append([]string{}, tiny...), args...)...)
		if code != 0 {
			t.Errorf("%v: exit %d: %s", args, code, errs)
		} else if !strings.Contains(out, "trace_digest") {
			t.Errorf("%v: no result printed:\n%s", args, out)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "h.jsonl")); err != nil {
		t.Errorf("--history was not written: %v", err)
	}
}

// checkOutputPath must not leave behind a file it created only to test the path.
func TestCheckOutputPathLeavesNoFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "h.jsonl")
	if err := checkOutputPath("--history", p); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); !os.IsNotExist(err) {
		t.Fatalf("checkOutputPath left %s behind (stat: %v)", p, err)
	}
	if err := os.WriteFile(p, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := checkOutputPath("--history", p); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); string(b) != "keep" {
		t.Fatalf("checkOutputPath changed an existing file to %q", b)
	}
}

func TestShorten(t *testing.T) {
	short := "open x: no such file"
	if got := shorten(short); got != short {
		t.Fatalf("shorten changed a short message: %q", got)
	}
	long := "line 1: " + strings.Repeat("é", 5000) + " end"
	got := shorten(long)
	if len(got) > maxErrorBytes+100 || !strings.HasPrefix(got, "line 1: ") || !strings.HasSuffix(got, " end") {
		t.Fatalf("shorten: %d bytes, %q…", len(got), got[:40])
	}
	if !strings.Contains(got, "bytes cut") || !utf8Valid(got) {
		t.Fatalf("shorten cut badly: %q", got)
	}
}

func utf8Valid(s string) bool { return strings.ToValidUTF8(s, "\uFFFD") == s }

// An output flag naming a file the command reads is refused before the run: the history was
// written over the --topology file or the cluster configuration it was given, and bench wrote
// it over the cluster's state or a node's store when asked to.
func TestOutputNeverReplacesAnInput(t *testing.T) {
	dir := t.TempDir()
	topology := "[[region]]\nname = \"A\"\n"
	writeFiles(t, dir, map[string]string{"one.toml": topology})
	topo := filepath.Join(dir, "one.toml")
	if err := os.Symlink(topo, filepath.Join(dir, "link.toml")); err != nil {
		t.Fatal(err)
	}
	cluster := freeClusterConfig(t, dir)
	clusterText, err := os.ReadFile(cluster)
	if err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	text := strings.Replace(string(clusterText), `data_dir = "meridian-data"`, `data_dir = "data"`, 1)
	if text == string(clusterText) {
		t.Fatal(`data_dir = "meridian-data" is not in the default configuration`)
	}
	writeFiles(t, dir, map[string]string{"cluster.toml": text})
	if err := os.MkdirAll(filepath.Join(data, "sh-1"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFiles(t, data, map[string]string{"cluster.json": "{}", "sh-1/CURRENT": "MANIFEST-000001\n"})
	before := listing(t, dir)
	sim := []string{"sim", "--protocol", "serial", "--duration", "100ms", "--warmup", "0s", "--clients", "1", "--topology", topo}
	bench := []string{"bench", "--config", cluster, "--duration", "100ms", "--warmup", "0s", "--clients", "1"}
	for _, c := range []struct {
		args []string
		want string
	}{
		{append(sim, "--history", topo), "--history " + topo + " is the --topology file, which this command reads"},
		{append(sim, "--cpuprofile", filepath.Join(dir, ".", "link.toml")), "is the --topology file"},
		{append(sim, "--memprofile", filepath.Join(dir, "..", filepath.Base(dir), "one.toml")), "is the --topology file"},
		{append(bench, "--history", cluster), "is the cluster configuration, which this command reads"},
		{append(bench, "--history", filepath.Join(data, "cluster.json")), "is inside the cluster's data directory " + data},
		{append(bench, "--history", filepath.Join(data, "sh-1", "CURRENT")), "is inside the cluster's data directory"},
		{append(bench, "--history", filepath.Join(data, "h.jsonl")), "is inside the cluster's data directory"},
	} {
		out, errs, code := run(t, c.args...)
		line := strings.TrimSpace(errs)
		if code == 0 || strings.Contains(line, "\n") || !strings.Contains(line, c.want) {
			t.Errorf("%v: exit %d, stderr %q, want one line mentioning %q (stdout %q)", c.args[len(c.args)-2:], code, errs, c.want, out)
		}
		if after := listing(t, dir); after != before {
			t.Fatalf("%v changed %s:\nbefore:\n%s\nafter:\n%s", c.args[len(c.args)-2:], dir, before, after)
		}
	}
	// Another file beside the topology is no input.
	if out, errs, code := run(t, append(sim, "--history", filepath.Join(dir, "h.jsonl"))...); code != 0 {
		t.Errorf("--history beside the topology file: exit %d: %s%s", code, errs, out)
	}
}

// A profile that cannot be written whole fails the run: pprof drops its write errors, and a
// full disk left a truncated CPU profile behind a run that exited 0.
func TestProfileWriteErrorsFailTheRun(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full:", err)
	}
	for _, flag := range []string{"--cpuprofile", "--memprofile"} {
		_, errs, code := run(t, "sim", "--protocol", "serial", "--duration", "100ms", "--warmup", "0s", "--clients", "1", flag, "/dev/full")
		line := strings.TrimSpace(errs)
		if want := flag + " /dev/full: write /dev/full: no space left on device"; code == 0 || strings.Contains(line, "\n") || !strings.Contains(line, want) {
			t.Errorf("%s /dev/full: exit %d, stderr %q, want one line mentioning %q", flag, code, errs, want)
		}
	}
}

// pflag takes a `quoted` word of a flag's usage for its value's name: --topology showed as
// "--topology meridian topologies" in sim --help.
func TestFlagUsageNamesTheValue(t *testing.T) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, fs := range []*pflag.FlagSet{c.LocalFlags(), c.PersistentFlags()} {
			fs.VisitAll(func(f *pflag.Flag) {
				if name, _ := pflag.UnquoteUsage(f); strings.Contains(name, " ") {
					t.Errorf("%s --%s: help shows its value as %q", c.CommandPath(), f.Name, name)
				}
			})
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(rootCmd)
}

// Every error prints on one line, whatever its text holds: Pebble names each missing file of a
// damaged store on a line of its own, and a node refusing it printed two lines.
func TestErrorsPrintOnOneLine(t *testing.T) {
	var b strings.Builder
	printError(&b, errors.Join(errors.New("meridian: node sh-1: durable: open d: L0: 000013: missing"), errors.New("L6: 000011: missing\r\n")))
	if got, want := b.String(), "meridian: node sh-1: durable: open d: L0: 000013: missing; L6: 000011: missing\n"; got != want {
		t.Fatalf("printed %q, want %q", got, want)
	}
}
