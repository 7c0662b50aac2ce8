package runtime

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/meridiandb/meridian/client"
	"github.com/meridiandb/meridian/configs"
	"github.com/meridiandb/meridian/internal/protocol"
	"github.com/meridiandb/meridian/internal/runtime/frame"
	"github.com/meridiandb/meridian/internal/topo"
)

// Config is a cluster as its TOML file describes it, resolved into a topology whose nodes carry
// their addresses. See configs/k2-3region.toml for the annotated format.
type Config struct {
	Name           string
	Protocol       protocol.Protocol
	Options        map[string]string // protocol options, checked against the protocol
	Topology       *topo.Topology    // node i of the topology is Nodes[i]
	Nodes          []NodeConfig      // indexed by topology node id
	DataDir        string            // resolved against the config file's directory; relative (to the working directory) only for the built-in default
	Epsilon        time.Duration     // TrueTime ε
	EmulateLatency bool
	LatencyScale   float64
	ClientTimeout  time.Duration
	// FlushDelay holds each node's persist batches back this long before they reach its disk
	// ([disk] flush_delay; durable.WithApplyDelay): a slower disk for crash reviews.
	FlushDelay time.Duration
	Source     string // the file it came from, or configs.DefaultName
	Text       string // the TOML it was parsed from
}

// MaxEpsilon bounds the TrueTime ε a configuration may declare. Protocols add ε to clock
// readings (K2's commit wait is 2×(ttl+ε)), where millions of hours overflow and silently end
// the wait; no real clock is that uncertain, so the bound is the one the simulator's clock
// errors have.
const MaxEpsilon = 100 * time.Second

// MaxClientTimeout bounds [client] timeout, how long a client waits for one reply before it
// reports the node unavailable (or a commit's outcome unknown). The slowest request a valid
// configuration allows is a commit waiting out 2×(ttl+ε) with ε ≤ MaxEpsilon, plus a few WAN
// round trips at latency scale ≤ 100: minutes at most. Past an hour a timeout no longer bounds
// anything: with "2000000h" a client of a stopped node waited for centuries.
const MaxClientTimeout = time.Hour

// MaxFlushDelay bounds [disk] flush_delay: a disk slower than that is no disk a review needs,
// and every acknowledged commit waits for it.
const MaxFlushDelay = time.Second

// NodeConfig is one [[node]] table.
type NodeConfig struct {
	ID       topo.NodeID
	Name     string
	Region   topo.RegionID
	Roles    topo.Role
	Addr     string // host:port of the node's transport
	GRPCAddr string // host:port of the node's gRPC client API; empty for none
	// MetricsAddr is host:port of the node's Prometheus metrics (GET /metrics); empty for none.
	MetricsAddr string
	DataDir     string // the node's own store
	// ClockOffset moves the node's clocks, its local clock and its TrueTime readings, this far
	// ahead (behind if negative) of the machine's: a clock gone astray, for reviews of what a
	// protocol does with one, as `meridian sim --clock-skew` does in the simulator.
	ClockOffset time.Duration
}

type fileConfig struct {
	Name      string         `toml:"name"`
	Protocol  string         `toml:"protocol"`
	Topology  string         `toml:"topology"`
	DataDir   string         `toml:"data_dir"`
	Epsilon   string         `toml:"epsilon"`
	Options   map[string]any `toml:"options"` // strings, and [options.<protocol>] tables of strings
	Placement struct {
		ShardsPerNode int    `toml:"shards_per_node"`
		Replication   string `toml:"replication"`
		Backups       int    `toml:"backups"`
	} `toml:"placement"`
	Latency struct {
		Emulate *bool    `toml:"emulate"`
		Scale   *float64 `toml:"scale"`
	} `toml:"latency"`
	Client struct {
		Timeout string `toml:"timeout"`
	} `toml:"client"`
	Disk struct {
		FlushDelay string `toml:"flush_delay"`
	} `toml:"disk"`
	Nodes []fileNode `toml:"node"`
}

type fileNode struct {
	Name        string   `toml:"name"`
	Region      string   `toml:"region"`
	Roles       []string `toml:"roles"`
	Addr        string   `toml:"addr"`
	GRPCAddr    string   `toml:"grpc_addr"`
	MetricsAddr string   `toml:"metrics_addr"`
	DataDir     string   `toml:"data_dir"`
	ClockOffset string   `toml:"clock_offset"`
}

// Load reads a cluster configuration: a file, or when no file has that name a built-in one
// (configs.Names: "crdb-3region"); an empty path means the built-in default.
func Load(path string) (*Config, error) {
	if path == "" {
		return Parse(configs.DefaultName, configs.Default, "")
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		if text, source, ok := configs.Builtin(path); ok {
			return Parse(source, text, "")
		}
		return nil, fmt.Errorf("cluster config: %w (built-in configurations: %s)", err, strings.Join(configs.Names(), ", "))
	}
	if err != nil {
		return nil, fmt.Errorf("cluster config: %w", err)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("cluster config: %w", err)
	}
	return Parse(abs, string(data), filepath.Dir(abs))
}

// configError names the source, and the line when it is known.
type configError struct {
	source string
	line   int
	msg    string
}

func (e *configError) Error() string {
	if e.line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.source, e.line, e.msg)
	}
	return e.source + ": " + e.msg
}

// Parse parses the TOML text of a configuration. Relative paths in it (data_dir, a topology
// file) are resolved against baseDir; an empty baseDir leaves them relative to the working
// directory. Errors name the line of the offending entry.
func Parse(source, text, baseDir string) (*Config, error) {
	fail := func(line int, format string, args ...any) error {
		return &configError{source: source, line: line, msg: fmt.Sprintf(format, args...)}
	}
	var f fileConfig
	md, err := toml.Decode(text, &f)
	if err != nil {
		var pe toml.ParseError
		// The decoder quotes the text it stopped at verbatim, line breaks included.
		oneLine := strings.NewReplacer("\r", `\r`, "\n", `\n`)
		if errors.As(err, &pe) {
			return nil, fail(pe.Position.Line, "%s", oneLine.Replace(pe.Message))
		}
		return nil, fail(0, "%s", oneLine.Replace(err.Error()))
	}
	// A map takes no error from the decoder for a value that is not a table: options = "ttl=5ms"
	// and [[options]] decoded as no options at all, and the cluster ran on defaults.
	if t := md.Type("options"); t != "" && t != "Hash" { // "" for a table implied by [options.k2]
		return nil, fail(settingLine(text, "options"), "options: want a table [options] of key = \"value\" (and [options.<protocol>] tables)")
	}
	for _, k := range md.Undecoded() {
		if k[0] == "options" { // its tables are decoded as any; effectiveOptions judges them
			continue
		}
		return nil, fail(lineOfKey(text, k[len(k)-1]), "unknown setting %q", k.String())
	}
	c := &Config{Name: f.Name, Source: source, Text: text, EmulateLatency: true, LatencyScale: 1}
	if c.Name == "" {
		c.Name = "meridian"
	}
	if f.Protocol == "" {
		return nil, fail(0, "protocol is required (known: %s)", strings.Join(protocol.Names(), ", "))
	}
	if c.Protocol, err = protocol.Lookup(f.Protocol); err != nil {
		return nil, fail(lineOfKey(text, "protocol"), "%v", err)
	}
	var optionTables map[string]string // which table set each option, for errors naming its line
	if c.Options, optionTables, err = effectiveOptions(text, f.Options, f.Protocol, fail); err != nil {
		return nil, err
	}
	if err := protocol.CheckOptions(c.Protocol, c.Options); err != nil {
		return nil, fail(optionsErrorLine(text, c.Protocol, c.Options, optionTables, err), "%v", err)
	}
	if f.Epsilon != "" {
		if c.Epsilon, err = time.ParseDuration(f.Epsilon); err != nil || c.Epsilon < 0 || c.Epsilon > MaxEpsilon {
			return nil, fail(lineOfKey(text, "epsilon"), "epsilon %q: want a duration from 0 to %ds such as 1ms", f.Epsilon, MaxEpsilon/time.Second)
		}
	} else {
		c.Epsilon = time.Millisecond
	}
	if f.Latency.Emulate != nil {
		c.EmulateLatency = *f.Latency.Emulate
	}
	if f.Latency.Scale != nil {
		if !(*f.Latency.Scale >= 0 && *f.Latency.Scale <= 100) { // also rejects NaN
			return nil, fail(lineOfKey(text, "scale"), "latency scale %v: want 0..100", *f.Latency.Scale)
		}
		c.LatencyScale = *f.Latency.Scale
	}
	c.ClientTimeout = 10 * time.Second
	if f.Client.Timeout != "" {
		if c.ClientTimeout, err = time.ParseDuration(f.Client.Timeout); err != nil || c.ClientTimeout <= 0 || c.ClientTimeout > MaxClientTimeout {
			return nil, fail(lineOfKey(text, "timeout"), "client timeout %q: want a positive duration up to %dh (no request a configuration allows takes that long)",
				f.Client.Timeout, MaxClientTimeout/time.Hour)
		}
	}
	if f.Disk.FlushDelay != "" {
		if c.FlushDelay, err = time.ParseDuration(f.Disk.FlushDelay); err != nil || c.FlushDelay < 0 || c.FlushDelay > MaxFlushDelay {
			return nil, fail(lineOfKey(text, "flush_delay"), "disk flush_delay %q: want a duration from 0 to %v such as 10ms", f.Disk.FlushDelay, MaxFlushDelay)
		}
	}
	c.DataDir = f.DataDir
	if c.DataDir == "" {
		c.DataDir = "meridian-data"
	}
	if baseDir != "" && !filepath.IsAbs(c.DataDir) {
		c.DataDir = filepath.Join(baseDir, c.DataDir)
	}

	// Regions and latencies come from the topology; nodes decide the layout.
	if f.Topology == "" {
		return nil, fail(0, "topology is required: a latency preset (%s) or a topology .toml file", strings.Join(topo.Presets(), ", "))
	}
	topoRef := f.Topology
	if strings.HasSuffix(topoRef, ".toml") && baseDir != "" && !filepath.IsAbs(topoRef) {
		topoRef = filepath.Join(baseDir, topoRef)
	}
	// A first pass with one node per region learns the region names.
	probe, err := topo.Resolve(topoRef, topo.Layout{NodesPerRegion: 1, ShardsPerNode: 1})
	if err != nil {
		return nil, fail(lineOfKey(text, "topology"), "%v", err)
	}
	if len(f.Nodes) == 0 {
		return nil, fail(0, "no [[node]] tables: a cluster needs at least one data node per region")
	}
	if len(f.Nodes) > frame.MaxHostNodes {
		return nil, fail(0, "%d nodes: at most %d are supported", len(f.Nodes), frame.MaxHostNodes)
	}
	type placed struct {
		fileNode
		region topo.RegionID
		roles  topo.Role
		line   int
	}
	var (
		dataIn   = make([][]placed, len(probe.Regions))
		oracleIn = make([][]placed, len(probe.Regions))
		names    = map[string]bool{}
		addrs    = map[string]string{}
		sockets  = newSocketSet()
	)
	for i, n := range f.Nodes {
		line := lineOfValue(text, "name", n.Name)
		if n.Name == "" {
			return nil, fail(0, "node %d has no name", i+1)
		}
		if names[n.Name] {
			return nil, fail(line, "node name %q used twice", n.Name)
		}
		names[n.Name] = true
		r, ok := probe.RegionByName(n.Region)
		if !ok {
			var known []string
			for _, reg := range probe.Regions {
				known = append(known, reg.Name)
			}
			return nil, fail(line, "node %s: unknown region %q (topology %s has %s)", n.Name, n.Region, probe.Name, strings.Join(known, ", "))
		}
		var roles topo.Role
		for _, role := range n.Roles {
			switch role {
			case "data":
				roles |= topo.RoleData
			case "oracle":
				roles |= topo.RoleOracle
			default:
				return nil, fail(line, "node %s: unknown role %q (want data or oracle)", n.Name, role)
			}
		}
		if roles != topo.RoleData && roles != topo.RoleOracle {
			return nil, fail(line, "node %s: roles must be [\"data\"] or [\"oracle\"]", n.Name)
		}
		for _, a := range []string{n.Addr, n.GRPCAddr, n.MetricsAddr} {
			if a == "" {
				continue
			}
			if err := checkAddr(a); err != nil {
				return nil, fail(line, "node %s: address %q: %v", n.Name, a, err)
			}
			if other, dup := addrs[a]; dup {
				return nil, fail(line, "node %s: address %s already used by node %s", n.Name, a, other)
			}
			addrs[a] = n.Name
			if other, clash := sockets.add(n.Name, a); clash {
				return nil, fail(line, "node %s's %s and node %s's %s are one socket on this machine: give each its own port",
					other.node, other.addr, n.Name, a)
			}
		}
		if n.Addr == "" {
			return nil, fail(line, "node %s: addr is required", n.Name)
		}
		if n.ClockOffset != "" {
			d, err := time.ParseDuration(n.ClockOffset)
			if err != nil || d < -MaxEpsilon || d > MaxEpsilon {
				return nil, fail(line, "node %s: clock_offset %q: want a duration from -%ds to %ds such as 20ms or -5ms",
					n.Name, n.ClockOffset, MaxEpsilon/time.Second, MaxEpsilon/time.Second)
			}
		}
		p := placed{fileNode: n, region: r, roles: roles, line: line}
		if roles == topo.RoleData {
			dataIn[r] = append(dataIn[r], p)
		} else {
			oracleIn[r] = append(oracleIn[r], p)
		}
	}
	perRegion := len(dataIn[0])
	withOracles := len(oracleIn[0]) > 0
	for r, reg := range probe.Regions {
		if len(dataIn[r]) == 0 {
			return nil, fail(0, "region %s has no data node", reg.Name)
		}
		if len(dataIn[r]) != perRegion {
			return nil, fail(dataIn[r][0].line, "region %s has %d data nodes but %s has %d: every region needs the same number",
				reg.Name, len(dataIn[r]), probe.Regions[0].Name, perRegion)
		}
		if len(oracleIn[r]) > 1 {
			return nil, fail(oracleIn[r][1].line, "region %s has %d oracle nodes: at most one per region", reg.Name, len(oracleIn[r]))
		}
		if (len(oracleIn[r]) == 1) != withOracles {
			return nil, fail(0, "region %s: either every region has an oracle node or none does", reg.Name)
		}
	}
	l := topo.DefaultLayout()
	l.NodesPerRegion = perRegion
	l.OraclePerRegion = withOracles
	// A zero is "not set" unless written: shards_per_node = 0 ran with the default.
	if f.Placement.ShardsPerNode < 0 || f.Placement.ShardsPerNode > 1024 || f.Placement.ShardsPerNode == 0 && md.IsDefined("placement", "shards_per_node") {
		return nil, fail(lineOfKey(text, "shards_per_node"), "shards_per_node %d: want 1..1024 (leave it out for the default, %d)", f.Placement.ShardsPerNode, topo.DefaultLayout().ShardsPerNode)
	}
	if f.Placement.ShardsPerNode > 0 {
		l.ShardsPerNode = f.Placement.ShardsPerNode
	}
	if f.Placement.Replication != "" {
		l.Replication = topo.Replication(f.Placement.Replication)
	}
	l.Backups = f.Placement.Backups
	l = c.Protocol.Layout(l)
	if withOracles && !l.OraclePerRegion {
		// The protocol places no oracles (crdb uses hybrid logical clocks), so the file's
		// oracle nodes would have no place in the topology.
		return nil, fail(oracleIn[0][0].line, "node %s: protocol %s runs no oracle nodes; remove every region's oracle node",
			oracleIn[0][0].Name, f.Protocol)
	}
	tp, err := topo.Resolve(topoRef, l)
	if err != nil {
		return nil, fail(lineOfKey(text, "placement"), "%v", err)
	}
	// Only backups replication places backups (the topology file or the protocol may have
	// chosen another), and under another the count would be ignored without a word.
	if f.Placement.Backups != 0 && tp.Layout.Replication != topo.ReplicateLocalBackup {
		return nil, fail(lineOfKey(text, "backups"), "backups = %d needs replication = %q (replication is %q)",
			f.Placement.Backups, topo.ReplicateLocalBackup, tp.Layout.Replication)
	}
	tp.Name = c.Name
	c.Topology = tp
	c.Nodes = make([]NodeConfig, len(tp.Nodes))
	assign := func(id topo.NodeID, p placed) {
		dir := p.DataDir
		if dir == "" {
			dir = filepath.Join(c.DataDir, p.Name)
		} else if baseDir != "" && !filepath.IsAbs(dir) {
			dir = filepath.Join(baseDir, dir)
		}
		offset, _ := time.ParseDuration(p.ClockOffset) // checked above; "" is no offset
		c.Nodes[id] = NodeConfig{ID: id, Name: p.Name, Region: p.region, Roles: p.roles, Addr: p.Addr, GRPCAddr: p.GRPCAddr,
			MetricsAddr: p.MetricsAddr, DataDir: dir, ClockOffset: offset}
		tp.Nodes[id].Addr = p.Addr
	}
	// topo.Build numbers data nodes region by region, then one oracle per region.
	for r := range tp.Regions {
		for i, p := range dataIn[r] {
			assign(tp.DataNodes(topo.RegionID(r))[i], p)
		}
		if withOracles {
			assign(tp.Oracle(topo.RegionID(r)), oracleIn[r][0])
		}
	}
	for i, n := range c.Nodes {
		if n.Name == "" || tp.Nodes[i].Roles != n.Roles {
			return nil, fail(0, "internal: node %d of the topology has no matching [[node]] table", i)
		}
	}
	return c, nil
}

func checkAddr(a string) error {
	host, port, err := net.SplitHostPort(a)
	if err != nil {
		return err
	}
	if host == "" {
		return errors.New("want host:port")
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 1 || p > 65535 {
		return fmt.Errorf("port %q: want 1..65535", port)
	}
	return nil
}

// socketSet finds two node addresses that are one socket although spelled differently
// (localhost:7301 beside 127.0.0.1:7301, or 0.0.0.0:7301 beside either): comparing them as text
// let both pass, and the second node to start could not listen, while clients and peers dialing
// it reached the first. Every process that loads the configuration checks, not only cluster
// start: a server on its own would otherwise run beside a node it shadows.
type socketSet struct {
	byPort map[int][]socket
	hosts  map[string][]netip.Addr // each host's addresses, looked up once
}

type socket struct {
	node, addr string
	ips        []netip.Addr // nil for a name the local resolver does not know
	name       string       // the host name as compared when ips is nil
}

func newSocketSet() *socketSet {
	return &socketSet{byPort: map[int][]socket{}, hosts: map[string][]netip.Addr{}}
}

// add records node's address addr (checked by checkAddr) and returns an earlier address that is
// the same socket, if any. Two sockets on one port clash when either is a wildcard (0.0.0.0 and
// :: listen on every address), when their hosts share an address, or when neither host resolves
// locally and the names are equal.
func (s *socketSet) add(node, addr string) (socket, bool) {
	host, portText, _ := net.SplitHostPort(addr)
	port, _ := strconv.Atoi(portText) // "07301" is port 7301
	name := strings.TrimSuffix(strings.ToLower(host), ".")
	ips, seen := s.hosts[name]
	if !seen {
		ips = localAddrs(name)
		s.hosts[name] = ips
	}
	me := socket{node: node, addr: addr, ips: ips, name: name}
	for _, other := range s.byPort[port] {
		if sameSocket(me, other) {
			return other, true
		}
	}
	s.byPort[port] = append(s.byPort[port], me)
	return socket{}, false
}

func sameSocket(a, b socket) bool {
	if hasWildcard(a.ips) || hasWildcard(b.ips) {
		return true
	}
	if a.ips == nil || b.ips == nil {
		return a.ips == nil && b.ips == nil && a.name == b.name
	}
	for _, x := range a.ips {
		for _, y := range b.ips {
			if x == y {
				return true
			}
		}
	}
	return false
}

func hasWildcard(ips []netip.Addr) bool {
	for _, ip := range ips {
		if ip.IsUnspecified() {
			return true
		}
	}
	return false
}

// hostsOnly is the local resolver without DNS: it reads the hosts file, and any query it would
// send to a name server fails at once: loading a configuration must neither wait on the network
// nor depend on a name server's answer. A name only DNS knows is compared by its spelling.
var hostsOnly = &net.Resolver{
	PreferGo: true,
	Dial: func(context.Context, string, string) (net.Conn, error) {
		return nil, errors.New("no DNS while loading a configuration")
	},
}

// localAddrs returns the addresses host (lower case, no trailing dot) stands for on this
// machine, IPv4-mapped IPv6 ones as IPv4, or nil if it is a name the hosts file does not know.
// localhost and its subdomains are the loopback addresses (RFC 6761) whatever the hosts file
// says, and both of them: a dialer may reach either.
func localAddrs(host string) []netip.Addr {
	if ip, err := netip.ParseAddr(host); err == nil {
		return []netip.Addr{ip.Unmap()}
	}
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return []netip.Addr{netip.AddrFrom4([4]byte{127, 0, 0, 1}), netip.IPv6Loopback()}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ips, err := hostsOnly.LookupNetIP(ctx, "ip", host)
	if err != nil || len(ips) == 0 {
		return nil
	}
	for i, ip := range ips {
		ips[i] = ip.Unmap()
	}
	return ips
}

// effectiveOptions are the options the cluster's protocol runs with: the [options] table's
// strings and those of its [options.<protocol>] table, with the table each came from. A table
// for another protocol does not apply, so one file can carry what each protocol needs (the
// shipped default sets K2's ttl there) and switching the protocol line is enough to run another;
// its keys and value types are still checked, so that a typo there is refused now rather than
// when someone switches to it. A key set both ways is refused rather than one silently winning.
// Each refusal names the line that set the entry.
func effectiveOptions(text string, raw map[string]any, protocolName string, fail func(int, string, ...any) error) (opts, tables map[string]string, err error) {
	opts, tables = map[string]string{}, map[string]string{}
	var scoped map[string]any
	for _, k := range sortedKeys(raw) {
		switch v := raw[k].(type) {
		case string:
			opts[k], tables[k] = v, "options"
		case map[string]any:
			table := "options." + k
			p, err := protocol.Lookup(k)
			if err != nil {
				return nil, nil, fail(optionLine(text, "options", k), "[%s]: %v", table, err)
			}
			known := p.Options()
			for _, name := range sortedKeys(v) {
				if _, isString := v[name].(string); !isString {
					return nil, nil, fail(optionLine(text, table, name), "option %s in [%s]: want a quoted string", name, table)
				}
				if _, isKnown := known[name]; !isKnown {
					return nil, nil, fail(optionLine(text, table, name), "[%s]: protocol %s has no option %q (known: %s)",
						table, k, name, strings.Join(sortedKeys(known), ", "))
				}
			}
			if k == protocolName {
				scoped = v
			}
		default:
			return nil, nil, fail(optionLine(text, "options", k), "option %s: want a quoted string (or a table [options.<protocol>])", k)
		}
	}
	for _, k := range sortedKeys(scoped) {
		if _, dup := opts[k]; dup {
			return nil, nil, fail(optionLine(text, "options."+protocolName, k),
				"option %s is set both in [options] and in [options.%s]: keep one", k, protocolName)
		}
		opts[k], tables[k] = scoped[k].(string), "options."+protocolName
	}
	return opts, tables, nil
}

// optionsErrorLine returns the line that set the option a protocol refused (err): the key an
// OptionError names or, as CheckOptions reports unknown keys first in sorted order, the first
// unknown one; failing that, the [options] table.
func optionsErrorLine(text string, p protocol.Protocol, opts, tables map[string]string, err error) int {
	key := ""
	var oe *protocol.OptionError
	if errors.As(err, &oe) {
		key = oe.Key
	} else {
		known := p.Options()
		for _, k := range sortedKeys(opts) {
			if _, ok := known[k]; !ok {
				key = k
				break
			}
		}
	}
	if table, ok := tables[key]; ok {
		if line := optionLine(text, table, key); line > 0 {
			return line
		}
	}
	return lineOfKey(text, "options")
}

// optionLine returns the line that sets key in table or, failing that (an inline table), the
// line that opens the nearest table holding it, or 0.
func optionLine(text, table, key string) int {
	for path := table + "." + key; path != ""; {
		if line := settingLine(text, path); line > 0 {
			return line
		}
		i := strings.LastIndex(path, ".")
		if i < 0 {
			break
		}
		path = path[:i]
	}
	return 0
}

// settingLine returns the first line that opens table path ([options.k2]) or assigns it
// (options.k2.ttl, under whichever table header or dotted key spells it), or 0.
func settingLine(text, path string) int {
	section := ""
	for i, l := range strings.Split(text, "\n") {
		t := strings.TrimSpace(l)
		if strings.HasPrefix(t, "[") {
			name, _, _ := strings.Cut(strings.TrimLeft(t, "["), "]")
			if section = tomlPath(name); section == path {
				return i + 1
			}
			continue
		}
		k, _, ok := strings.Cut(t, "=")
		if !ok || strings.HasPrefix(t, "#") {
			continue
		}
		full := tomlPath(k)
		if section != "" {
			full = section + "." + full
		}
		if full == path {
			return i + 1
		}
	}
	return 0
}

// tomlPath normalizes a TOML key or table name (options . "k2") to its dotted path (options.k2).
func tomlPath(s string) string {
	parts := strings.Split(s, ".")
	for i, p := range parts {
		parts[i] = strings.Trim(strings.TrimSpace(p), `"'`)
	}
	return strings.Join(parts, ".")
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// lineOfKey returns the first line that assigns key (or opens table [key]), or 0.
func lineOfKey(text, key string) int {
	for i, l := range strings.Split(text, "\n") {
		t := strings.TrimSpace(l)
		if strings.HasPrefix(t, "["+key+"]") {
			return i + 1
		}
		if rest, ok := strings.CutPrefix(t, key); ok {
			if r := strings.TrimSpace(rest); strings.HasPrefix(r, "=") {
				return i + 1
			}
		}
	}
	return 0
}

// lineOfValue returns the line that sets key to the string value, or 0.
func lineOfValue(text, key, value string) int {
	for i, l := range strings.Split(text, "\n") {
		t := strings.TrimSpace(l)
		rest, ok := strings.CutPrefix(t, key)
		if !ok {
			continue
		}
		rest = strings.TrimSpace(rest)
		if rest, ok = strings.CutPrefix(rest, "="); !ok {
			continue
		}
		rest = strings.TrimSpace(rest)
		if strings.HasPrefix(rest, strconv.Quote(value)) || strings.HasPrefix(rest, "'"+value+"'") {
			return i + 1
		}
	}
	return 0
}

// NodeByName finds a node by name, or by its numeric topology id.
func (c *Config) NodeByName(name string) (NodeConfig, error) {
	for _, n := range c.Nodes {
		if n.Name == name {
			return n, nil
		}
	}
	if id, err := strconv.Atoi(name); err == nil && id >= 0 && id < len(c.Nodes) {
		return c.Nodes[id], nil
	}
	names := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		names[i] = n.Name
	}
	sort.Strings(names)
	return NodeConfig{}, fmt.Errorf("%s: no node %q (nodes: %s)", c.Source, name, strings.Join(names, ", "))
}

// SetDataDir moves the cluster's data directory (and every node's default one under it).
func (c *Config) SetDataDir(dir string) {
	old := c.DataDir
	c.DataDir = dir
	for i, n := range c.Nodes {
		if rel, err := filepath.Rel(old, n.DataDir); err == nil && !strings.HasPrefix(rel, "..") {
			c.Nodes[i].DataDir = filepath.Join(dir, rel)
		}
	}
}

// Coordinator returns the data node a client of region r (the i-th client) should talk to.
func (c *Config) Coordinator(r topo.RegionID, i int) NodeConfig {
	d := c.Topology.DataNodes(r)
	return c.Nodes[d[i%len(d)]]
}

// delay is the emulated one-way delay from region a to region b.
func (c *Config) delay(a, b topo.RegionID) time.Duration {
	if !c.EmulateLatency {
		return 0
	}
	return time.Duration(float64(c.Topology.OneWay(a, b)) * c.LatencyScale)
}

// Setup lists the settings every node of the cluster and every client that reads its results
// must share beyond its name and protocol: the protocol's options (the model a client checks
// histories against can depend on them), ε, the latencies the nodes emulate, and the layout of
// regions, nodes and shards (a client's workload places its keys by it). Nodes exchange it in
// their Hello and refuse a peer or client that differs. Per-process settings (data directories,
// gRPC addresses, the client timeout) are left out: they may differ between processes.
func (c *Config) Setup() []frame.Setting {
	var out []frame.Setting
	add := func(name, format string, args ...any) {
		out = append(out, frame.Setting{Name: name, Value: fmt.Sprintf(format, args...)})
	}
	keys := make([]string, 0, len(c.Options))
	for k := range c.Options {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		add("option "+k, "%s", c.Options[k])
	}
	add("epsilon", "%v", c.Epsilon)
	tp := c.Topology
	regions := make([]string, len(tp.Regions))
	for i, r := range tp.Regions {
		regions[i] = r.Name
	}
	add("regions", "%s", strings.Join(regions, ", "))
	if c.EmulateLatency {
		add("latency emulation", "on, scale %v", c.LatencyScale)
	} else {
		add("latency emulation", "off")
	}
	for i := range tp.Regions {
		for j := i + 1; j < len(tp.Regions); j++ {
			add("rtt "+regions[i]+"-"+regions[j], "%v", tp.RTT[i][j])
		}
	}
	add("rtt within a region", "%v", tp.IntraRTT)
	l := tp.Layout
	add("placement", "%d shards per node, replication %s, %d backups", l.ShardsPerNode, l.Replication, l.Backups)
	for _, n := range c.Nodes {
		add("node "+n.Name, "%s in %s at %s", n.Roles, regions[n.Region], n.Addr)
	}
	// The shards follow from the above, but a digest of them says so without trusting it.
	h := fnv.New64a()
	for _, sh := range tp.Shards {
		fmt.Fprintf(h, "%d:%d:%v;", sh.ID, sh.Home, sh.Replicas)
	}
	add("shards", "%d (digest %016x)", len(tp.Shards), h.Sum64())
	return out
}

// DialOptions are the options of a client.Dial to a node of this cluster: the cluster's name,
// protocol and settings, which the node checks against its own, and the request timeout.
func (c *Config) DialOptions() []client.DialOption {
	return []client.DialOption{client.WithCluster(c.Name), client.WithProtocol(c.Protocol.Name()),
		client.WithSetup(c.Setup()), client.WithRequestTimeout(c.ClientTimeout)}
}
