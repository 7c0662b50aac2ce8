package main

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/meridiandb/meridian/internal/bench"
	"github.com/meridiandb/meridian/internal/protocol"
	"github.com/meridiandb/meridian/internal/topo"
	"github.com/meridiandb/meridian/internal/workload"
	"github.com/meridiandb/meridian/internal/workload/tpcc"
	"github.com/meridiandb/meridian/internal/workload/ycsbt"
)

// Bounds on what a command line may ask for. Each is far past any meaningful run; they exist so
// that a slip of the keyboard fails at once instead of overflowing a clock or running for days.
const (
	// maxRunTime bounds warm-up plus measured time. Virtual nanoseconds overflow after 292
	// years, and protocol timers add to the clock, so the sum must stay well below that.
	maxRunTime = 1000 * time.Hour
	// maxModelDelay bounds each simulated latency, CPU cost and clock error: a topology file's
	// round trips stop at the same 100 s.
	maxModelDelay = 100 * time.Second
	// maxClientsPerRegion is the driver's own bound (bench.Spec.Validate).
	maxClientsPerRegion = 100000
	// maxMixWeight bounds each --tpcc-mix weight (bench.MaxTPCCMixWeight).
	maxMixWeight = bench.MaxTPCCMixWeight
)

// checkRunTime validates a run's --warmup and --duration.
func checkRunTime(warmup, duration time.Duration) error {
	switch {
	case duration <= 0:
		return fmt.Errorf("--duration must be positive, got %v", duration)
	case duration > maxRunTime:
		return fmt.Errorf("--duration must be at most %s, got %s", human(maxRunTime), human(duration))
	case warmup < 0:
		return fmt.Errorf("--warmup must not be negative, got %v", warmup)
	case duration > maxRunTime || warmup > maxRunTime-duration:
		return fmt.Errorf("--warmup + --duration must be at most %s, got %s + %s", human(maxRunTime), human(warmup), human(duration))
	}
	return nil
}

// checkClients validates --clients (per region).
func checkClients(n int) error {
	if n <= 0 || n > maxClientsPerRegion {
		return fmt.Errorf("--clients must be 1..%d (per region), got %d", maxClientsPerRegion, n)
	}
	return nil
}

// validate checks the deployment flags one by one, so that the error names the flag; the
// simulator's own check would only say that "durations" are wrong.
func (f *simFlags) validate() error {
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{{"--jitter", f.jitter}, {"--service-time", f.serviceTime}, {"--oracle-service-time", f.oracleService},
		{"--flush-latency", f.flushLatency}, {"--epsilon", f.epsilon}, {"--max-offset", f.maxOffset}, {"--intra-rtt", f.intraRTT}} {
		if d.v < 0 || d.v > maxModelDelay {
			return fmt.Errorf("%s must be 0..%s, got %s", d.flag, human(maxModelDelay), human(d.v))
		}
	}
	switch {
	case f.cores < 1 || f.cores > 1024:
		return fmt.Errorf("--cores must be 1..1024, got %d", f.cores)
	case f.disk != "local" && f.disk != "shared":
		return fmt.Errorf("--disk must be local or shared, got %q", f.disk)
	case !(f.maxDrift >= 0 && f.maxDrift <= 0.01): // also rejects NaN
		return fmt.Errorf("--max-drift must be 0..0.01 (0 to 10000 ppm), got %g", f.maxDrift)
	case f.nodesPerRegion < 1 || f.nodesPerRegion > topo.MaxNodesPerRegion:
		return fmt.Errorf("--nodes-per-region must be 1..%d, got %d", topo.MaxNodesPerRegion, f.nodesPerRegion)
	case f.shardsPerNode < 1 || f.shardsPerNode > topo.MaxShardsPerNode:
		return fmt.Errorf("--shards-per-node must be 1..%d, got %d", topo.MaxShardsPerNode, f.shardsPerNode)
	case f.trueTimeError != "half" && f.trueTimeError != "full":
		return fmt.Errorf("--truetime-error must be half or full, got %q", f.trueTimeError)
	}
	return nil
}

// checkOptionDurations refuses a protocol option whose value is a duration longer than any run.
// Protocols add such durations to clock readings (K2's commit wait is 2×(ttl+ε)), where millions
// of hours overflow: with ttl=2000000h k2 stopped waiting and its history was not strictly
// serializable. Protocols check only that durations are not negative, so the bound is here.
func checkOptionDurations(opts map[string]string) error {
	for _, k := range sortedKeys(opts) {
		if d, err := time.ParseDuration(opts[k]); err == nil && d > maxRunTime {
			return fmt.Errorf("%s=%s: a duration option must be at most %s", k, opts[k], human(maxRunTime))
		}
	}
	return nil
}

// checkClusterConfig bounds what a cluster configuration may give beyond what its parser
// checks: protocol option durations, as for --opt; ε, as for --epsilon, since it too is added
// to clock readings; and a latency scale that is a number (NaN passes a range check).
func checkClusterConfig(source string, opts map[string]string, epsilon time.Duration, latencyScale float64) error {
	if err := checkOptionDurations(opts); err != nil {
		return fmt.Errorf("%s: [options] %w", source, err)
	}
	if epsilon > maxModelDelay {
		return fmt.Errorf("%s: epsilon must be at most %s, got %s", source, human(maxModelDelay), human(epsilon))
	}
	if math.IsNaN(latencyScale) {
		return fmt.Errorf("%s: [latency] scale must be a number 0..100, got NaN", source)
	}
	return nil
}

// checkDistinctOutputs refuses two output flags naming one file: the later write would
// silently replace the earlier.
// Paths are compared resolved, and existing files as files: a symbolic or hard link to the
// history given as --cpuprofile wrote the profile over it.
func checkDistinctOutputs(outputs []struct{ flag, path string }) error {
	type seenOutput struct {
		flag, at string
		st       os.FileInfo // nil: no such file yet
	}
	var seen []seenOutput
	for _, o := range outputs {
		if o.path == "" {
			continue
		}
		this := seenOutput{o.flag, resolvedPath(o.path), nil}
		this.st, _ = os.Stat(o.path)
		for _, prev := range seen {
			if prev.at == this.at || this.st != nil && prev.st != nil && os.SameFile(this.st, prev.st) {
				return fmt.Errorf("%s and %s both name %s: give each output its own file", prev.flag, o.flag, o.path)
			}
		}
		seen = append(seen, this)
	}
	return nil
}

// optionError restates a protocol's refusal of an --opt value in the flag's terms. The
// simulator reports it from the first node it builds ("node 0: …"), which is no concern of
// the user's.
func optionError(err error) error {
	var oe *protocol.OptionError
	if errors.As(err, &oe) {
		return fmt.Errorf("--opt %s=%s: protocol %s wants %s", oe.Key, oe.Value, oe.Protocol, tidyChoices(oe.Want))
	}
	return err
}

// tidyChoices renders "one of [a b]" as "one of a, b", where an empty choice (no mutant, say)
// would otherwise show only as a stray space.
func tidyChoices(want string) string {
	inner, ok := strings.CutPrefix(want, "one of [")
	if inner, ok2 := strings.CutSuffix(inner, "]"); ok && ok2 {
		choices := strings.Split(inner, " ")
		for i, c := range choices {
			if c == "" {
				choices[i] = `"" (none)`
			}
		}
		return "one of " + strings.Join(choices, ", ")
	}
	return want
}

// human prints a duration without Go's trailing zero units (1000h, not 1000h0m0s).
func human(d time.Duration) string {
	switch {
	case d != 0 && d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d != 0 && d%time.Second == 0 && d < time.Hour:
		return fmt.Sprintf("%ds", d/time.Second)
	}
	return d.String()
}

// workloadsOf names the workloads each workload flag shapes; a flag given for another
// workload would be silently ignored.
var workloadsOf = map[string][]string{
	"keys":               {"list-append", "rw-register", "ycsbt"},
	"ops":                {"list-append", "rw-register", "ycsbt"},
	"write-ratio":        {"list-append", "rw-register", "ycsbt"},
	"crt-ratio":          {"list-append", "rw-register", "ycsbt"},
	"zipf":               {"list-append", "rw-register", "ycsbt"},
	"preset":             {"ycsbt"},
	"scan-ratio":         {"ycsbt"},
	"scan-length":        {"ycsbt"},
	"rmw":                {"ycsbt"},
	"blind-writes":       {"rw-register"},
	"read-back":          {"list-append", "rw-register"},
	"max-writes-per-key": {"list-append", "rw-register"},
	"warehouses":         {"tpcc"},
	"tpcc-full":          {"tpcc"},
	"tpcc-mix":           {"tpcc"},
	"tpcc-items":         {"tpcc"},
	"tpcc-families":      {"tpcc"},
	"remote-item-ratio":  {"tpcc"},
}

// validate checks the workload flags against each other and names the flag at fault.
func (f *workloadFlags) validate() error {
	if f.fs == nil {
		return nil
	}
	name := f.p.Name
	if !slices.Contains(bench.Workloads(), name) {
		return fmt.Errorf("--workload %q: unknown workload (known: %s)", name, strings.Join(bench.Workloads(), ", "))
	}
	for _, flag := range sortedKeys(workloadsOf) {
		if !f.fs.Changed(flag) {
			continue
		}
		if !slices.Contains(workloadsOf[flag], name) {
			return fmt.Errorf("--%s does not apply to --workload %s (only to %s)", flag, name, strings.Join(workloadsOf[flag], ", "))
		}
	}
	for _, c := range []struct {
		flag     string
		v        int
		max      int
		whatZero string
	}{{"keys", f.p.Keys, 0, "the workload's default"}, {"ops", f.p.Ops, 1000, "the workload's default"},
		{"warehouses", f.p.Warehouses, 10000, "one per region"}, {"scan-length", f.p.ScanLength, 0, "100"},
		{"max-writes-per-key", f.p.MaxWritesPerKey, 1_000_000, "no limit"}} {
		if c.v < 0 || (c.max > 0 && c.v > c.max) {
			if c.max > 0 {
				return fmt.Errorf("--%s must be 1..%d (or 0 for %s), got %d", c.flag, c.max, c.whatZero, c.v)
			}
			return fmt.Errorf("--%s must not be negative (0 for %s), got %d", c.flag, c.whatZero, c.v)
		}
	}
	// -1 is the documented "default"; any other negative value is a mistake, not a request.
	for _, r := range []struct {
		flag  string
		v     float64
		upper string
		ok    bool
	}{{"write-ratio", f.p.WriteRatio, "1]", f.p.WriteRatio <= 1}, {"crt-ratio", f.p.CRTRatio, "1]", f.p.CRTRatio <= 1},
		{"remote-item-ratio", f.p.RemoteItemRatio, "1]", f.p.RemoteItemRatio <= 1}, {"zipf", f.p.Zipf, "1)", f.p.Zipf < 1},
		{"scan-ratio", f.p.ScanRatio, "1]", f.p.ScanRatio <= 1}} {
		if r.v == -1 {
			continue
		}
		if !(r.v >= 0 && r.ok) { // also rejects NaN
			return fmt.Errorf("--%s must be in [0, %s (or -1 for the workload's default), got %g", r.flag, r.upper, r.v)
		}
	}
	if f.mix != nil {
		if len(f.mix) != 5 {
			return fmt.Errorf("--tpcc-mix wants 5 weights (new-order,payment,order-status,delivery,stock-level), got %d", len(f.mix))
		}
		sum := 0
		for _, w := range f.mix {
			if w < 0 {
				return fmt.Errorf("--tpcc-mix weights must not be negative, got %v", f.mix)
			}
			// The weights are summed and a transaction type drawn below the sum: huge
			// weights would overflow it.
			if w > maxMixWeight {
				return fmt.Errorf("--tpcc-mix weights must be 0..%d, got %v", maxMixWeight, f.mix)
			}
			sum += w
		}
		if sum == 0 {
			return fmt.Errorf("--tpcc-mix weights sum to zero: give at least one transaction type a positive weight")
		}
	}
	return nil
}

// checkOutputPath fails early if a file a command writes only at the end of its run cannot be
// created, rather than after the run. It leaves no file behind that was not there.
func checkOutputPath(flag, path string) error {
	if path == "" {
		return nil
	}
	st, statErr := os.Stat(path)
	if statErr == nil && st.IsDir() {
		return fmt.Errorf("%s %s: is a directory, want a file name", flag, path)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return fmt.Errorf("%s %s: %v", flag, path, err)
	}
	f.Close()
	if errors.Is(statErr, fs.ErrNotExist) {
		_ = os.Remove(path)
	}
	return nil
}

// input is a file a command reads, or a directory whose files are not the command's to write.
type input struct {
	what, path string
	dir        bool
}

// checkNotInput refuses an output path that names a file the command reads, or one inside a
// directory that holds others' data: the output is written when the run ends, and replaced
// the topology or cluster configuration it was given (or a node's store, or the cluster's
// state) without a word.
func checkNotInput(flag, path string, inputs []input) error {
	if path == "" {
		return nil
	}
	st, statErr := os.Stat(path)
	out := resolvedPath(path)
	for _, in := range inputs {
		if in.path == "" {
			continue
		}
		if in.dir {
			rel, err := filepath.Rel(resolvedPath(in.path), out)
			if err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
				return fmt.Errorf("%s %s is inside %s %s: write it elsewhere", flag, path, in.what, in.path)
			}
			continue
		}
		if ist, err := os.Stat(in.path); statErr == nil && err == nil && os.SameFile(st, ist) {
			return fmt.Errorf("%s %s is %s, which this command reads: give the output its own file", flag, path, in.what)
		}
	}
	return nil
}

// resolvedPath is path made absolute, with the symbolic links of its deepest existing
// directory resolved, so that two spellings of one place compare equal.
func resolvedPath(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		return filepath.Clean(path)
	}
	// A link to a file not yet written resolves no further than its directory: follow it by
	// hand, so that it compares equal to the file it will write.
	for range 40 {
		fi, err := os.Lstat(abs)
		if err != nil || fi.Mode()&os.ModeSymlink == 0 {
			break
		}
		target, err := os.Readlink(abs)
		if err != nil {
			break
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(filepath.Dir(abs), target)
		}
		abs = filepath.Clean(target)
	}
	var tail []string
	for dir := abs; ; dir = filepath.Dir(dir) {
		if real, err := filepath.EvalSymlinks(dir); err == nil {
			return filepath.Join(append([]string{real}, tail...)...)
		}
		if parent := filepath.Dir(dir); parent == dir {
			return abs
		}
		tail = append([]string{filepath.Base(dir)}, tail...)
	}
}

// Lower bounds of what a run holds in memory. The process keeps its heap under a soft limit
// below the machine's memory (main), so what must fit is the live heap: at the end of a
// 50-warehouse k2 TPC-C run (`meridian sim --protocol k2 --workload tpcc --warehouses 50
// --nodes-per-region 5 --clients 250 --duration 2s --memprofile`) it was 928 MB for 2.05M rows
// and 1,250 clients, about 450 bytes per row, of which the initial rows alone were about 330.
// Being lower bounds, they refuse only runs that certainly cannot fit.
const (
	bytesPerRow    = 320
	bytesPerClient = 10 << 10
)

// tpccRows estimates the rows of a TPC-C database: per warehouse its stock (one row per item)
// and, per customer, the customer, its history row, its initial order with about ten lines,
// and the undelivered orders; plus one ITEM copy per shard that holds a warehouse.
func tpccRows(c tpcc.Config, shards int) int64 {
	perWarehouse := int64(c.Items) + int64(c.Districts)*int64(c.CustomersPerDistrict)*13
	return int64(c.Warehouses)*perWarehouse + int64(min(c.Warehouses, shards))*int64(c.Items)
}

// checkMemory refuses a run whose database and clients would need more memory than the machine
// has, before it spends minutes loading and is then killed.
func checkMemory(wl workload.Workload, tp *topo.Topology, clientsPerRegion int) error {
	avail := heapLimit(memoryLimit())
	need, what, lower := memoryNeed(wl, tp, clientsPerRegion)
	if avail <= 0 || need <= avail {
		return nil
	}
	return fmt.Errorf("this run needs at least %s of memory (%s) but the heap may use %s of this machine's memory: lower %s",
		gb(need), what, gb(avail), lower)
}

// memoryNeed is a lower bound on a run's memory, what it goes to, and the flags that lower it.
func memoryNeed(wl workload.Workload, tp *topo.Topology, clientsPerRegion int) (need int64, what, lower string) {
	var rows, rowBytes int64
	var rowKind, rowFlags string
	switch w := wl.(type) {
	case *tpcc.Workload:
		rows, rowBytes, rowKind, rowFlags = tpccRows(w.Config(), len(tp.Shards)), bytesPerRow, "TPC-C rows", "--warehouses or --tpcc-items"
	case *ycsbt.Workload:
		// Loaded before the run only when it scans (bench.NewWorkload; otherwise a missing key
		// reads as counter 0): every key, each holding its value.
		cfg := w.Config()
		rows, rowBytes, rowKind, rowFlags = int64(cfg.Keys), bytesPerRow+int64(cfg.ValueBytes), "YCSB-T rows loaded for scans", "--keys"
	}
	clients := int64(clientsPerRegion) * int64(len(tp.Regions))
	need = rows*rowBytes + clients*bytesPerClient
	what, lower = fmt.Sprintf("%d clients", clients), "--clients"
	if rows*rowBytes > clients*bytesPerClient {
		what = fmt.Sprintf("%.1fM %s and %s", float64(rows)/1e6, rowKind, what)
		lower = rowFlags
	}
	return need, what, lower
}

func gb(b int64) string { return fmt.Sprintf("%.1f GB", float64(b)/(1<<30)) }

// heapLimit is the share of the machine's memory the process keeps its heap under (main): the
// rest is for the runtime's own memory and the rest of the machine.
func heapLimit(machine int64) int64 { return machine / 100 * 85 }

// memoryLimit is the memory this process may use: the machine's, or its control group's or
// address-space limit's if smaller; 0 if none is known.
func memoryLimit() int64 {
	var limit int64
	if f, err := os.Open("/proc/meminfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:"); ok {
				kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
				if err == nil {
					limit = kb << 10
				}
			}
		}
		f.Close()
	}
	if data, err := os.ReadFile("/sys/fs/cgroup/memory.max"); err == nil {
		if v, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 64); err == nil && v > 0 && (limit == 0 || v < limit) {
			limit = v
		}
	}
	// ulimit -v bounds the address space, which is more than the heap, so the heap's share of
	// it (heapLimit) is a generous bound; it still turns a run sure to fail into a refusal.
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_AS, &rl); err == nil && rl.Cur < math.MaxInt64 {
		if v := int64(rl.Cur); v > 0 && (limit == 0 || v < limit) {
			limit = v
		}
	}
	return limit
}

// checkConnections refuses a real run that would open more connections than the process may
// hold files: it would fail part-way, after loading, with "too many open files".
func checkConnections(clientsPerRegion, regions int) error {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return nil
	}
	const spare = 64 // standard streams, the history file, loaders' connections
	conns := uint64(clientsPerRegion) * uint64(regions)
	if conns+spare > rl.Cur {
		return fmt.Errorf("--clients %d: %d connections (one per client in each of %d regions) exceed this process's open-file limit of %d (ulimit -n)",
			clientsPerRegion, conns, regions, rl.Cur)
	}
	return nil
}

// exactArgs is cobra.ExactArgs with a message that shows the command's usage.
func exactArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return fmt.Errorf("usage: %s (%d argument%s given, want %d)", cmd.UseLine(), len(args), plural(len(args)), n)
		}
		return nil
	}
}

// rangeArgs is cobra.RangeArgs with a message that shows the command's usage.
func rangeArgs(lo, hi int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < lo || len(args) > hi {
			return fmt.Errorf("usage: %s (%d argument%s given, want %d to %d)", cmd.UseLine(), len(args), plural(len(args)), lo, hi)
		}
		return nil
	}
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// guardGroups makes every command that only groups subcommands refuse an unknown one; cobra
// would print the group's help and exit 0, as if the command had worked.
func guardGroups(c *cobra.Command) {
	for _, sub := range c.Commands() {
		guardGroups(sub)
	}
	if c == rootCmd || c.Runnable() || !c.HasSubCommands() {
		return
	}
	c.Args = cobra.ArbitraryArgs
	c.RunE = func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return cmd.Help()
		}
		var names []string
		for _, s := range cmd.Commands() {
			if s.IsAvailableCommand() {
				names = append(names, s.Name())
			}
		}
		return fmt.Errorf("unknown command %q for %q (want %s)", args[0], cmd.CommandPath(), strings.Join(names, ", "))
	}
}

// maxErrorBytes bounds the error line main prints: some errors quote their input, which can be
// a megabyte long.
const maxErrorBytes = 1000

// shorten cuts an over-long error message in the middle, on rune boundaries.
func shorten(msg string) string {
	if len(msg) <= maxErrorBytes {
		return msg
	}
	i := maxErrorBytes * 2 / 3
	for i > 0 && !utf8.RuneStart(msg[i]) {
		i--
	}
	j := len(msg) - maxErrorBytes/4
	for j < len(msg) && !utf8.RuneStart(msg[j]) {
		j++
	}
	return fmt.Sprintf("%s … (%d bytes cut) … %s", msg[:i], j-i, msg[j:])
}
