// Package topo describes a Meridian deployment: regions and the round-trip times between them,
// nodes and their roles, shards with a home region and replica placement, and the mapping from a
// key to its shard.
//
// A Topology is built from a latency preset (or a TOML file) plus a Layout saying how many nodes
// each region runs and how shards are replicated. It is immutable once built and is shared by the
// simulator, the real runtime, protocols and workloads, so they all agree on who owns what.
package topo

import (
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// RegionID indexes Topology.Regions.
type RegionID int

// NodeID names an endpoint: a server node or (above NodeCount) a client.
type NodeID int32

// ShardID indexes Topology.Shards.
type ShardID int

// Role is a bit set of what a node does.
type Role uint8

// Node roles. Data nodes hold shard replicas and act as transaction coordinators for the clients
// of their region; the oracle serves TrueTime timestamps for its region (K2-TB).
const (
	RoleData Role = 1 << iota
	RoleOracle
)

func (r Role) String() string {
	var parts []string
	if r&RoleData != 0 {
		parts = append(parts, "data")
	}
	if r&RoleOracle != 0 {
		parts = append(parts, "oracle")
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, "+")
}

// Region is a group of nodes with a low-latency network between them.
type Region struct {
	ID   RegionID
	Name string
}

// Node is one server.
type Node struct {
	ID     NodeID
	Region RegionID
	Roles  Role
	Addr   string // host:port for the real runtime; empty in the simulator
}

// Shard is a unit of placement. Replicas[0] is the primary (leader); the others are replicas
// whose role the protocol decides (async followers for K2, per-DC masters for Wren, backups for
// FaRMv2).
type Shard struct {
	ID       ShardID
	Home     RegionID
	Replicas []NodeID
}

// Primary returns the shard's primary node.
func (s Shard) Primary() NodeID { return s.Replicas[0] }

// Replication says where a shard's replicas go.
type Replication string

// Replication modes.
const (
	ReplicatePrimaryOnly Replication = "primary"     // one copy, in the home region (Walter's preferred site)
	ReplicateEveryRegion Replication = "all-regions" // one replica per region, primary in the home region (K2 async replicas, Wren)
	ReplicateLocalBackup Replication = "backups"     // primary plus Backups copies inside the home region (FaRMv2)
)

// Layout says how to populate regions with nodes and shards.
type Layout struct {
	NodesPerRegion  int         // data nodes per region
	ShardsPerNode   int         // primary shards per data node
	Replication     Replication // replica placement
	Backups         int         // for ReplicateLocalBackup
	OraclePerRegion bool        // add one oracle node per region
}

// DefaultLayout is one data node per region, four shards per node, primary copies only, with
// an oracle in each region.
func DefaultLayout() Layout {
	return Layout{NodesPerRegion: 1, ShardsPerNode: 4, Replication: ReplicatePrimaryOnly, OraclePerRegion: true}
}

// Topology is a whole deployment.
type Topology struct {
	Name     string
	Regions  []Region
	Nodes    []Node
	Shards   []Shard
	RTT      [][]time.Duration // RTT[a][b]: round trip between regions a and b (a != b)
	IntraRTT time.Duration     // round trip inside a region
	Layout   Layout

	dataByRegion   [][]NodeID
	oracleByRegion []NodeID
	shardsByNode   map[NodeID][]ShardID
}

// Validate checks the invariants every user of a Topology relies on.
func (t *Topology) Validate() error {
	if len(t.Regions) == 0 {
		return fmt.Errorf("topology %q: no regions", t.Name)
	}
	if len(t.RTT) != len(t.Regions) {
		return fmt.Errorf("topology %q: latency matrix has %d rows for %d regions", t.Name, len(t.RTT), len(t.Regions))
	}
	for i, row := range t.RTT {
		if len(row) != len(t.Regions) {
			return fmt.Errorf("topology %q: latency row %d has %d entries for %d regions", t.Name, i, len(row), len(t.Regions))
		}
		for j, d := range row {
			if d < 0 {
				return fmt.Errorf("topology %q: negative latency between %s and %s", t.Name, t.Regions[i].Name, t.Regions[j].Name)
			}
			if t.RTT[j][i] != d {
				return fmt.Errorf("topology %q: latency %s→%s (%v) differs from %s→%s (%v)", t.Name,
					t.Regions[i].Name, t.Regions[j].Name, d, t.Regions[j].Name, t.Regions[i].Name, t.RTT[j][i])
			}
		}
	}
	if t.IntraRTT < 0 {
		return fmt.Errorf("topology %q: negative intra-region latency", t.Name)
	}
	for i, n := range t.Nodes {
		if n.ID != NodeID(i) {
			return fmt.Errorf("topology %q: node %d has id %d", t.Name, i, n.ID)
		}
		if int(n.Region) < 0 || int(n.Region) >= len(t.Regions) {
			return fmt.Errorf("topology %q: node %d in unknown region %d", t.Name, i, n.Region)
		}
	}
	for i, s := range t.Shards {
		if s.ID != ShardID(i) || len(s.Replicas) == 0 {
			return fmt.Errorf("topology %q: shard %d malformed", t.Name, i)
		}
		for _, r := range s.Replicas {
			if int(r) < 0 || int(r) >= len(t.Nodes) || t.Nodes[r].Roles&RoleData == 0 {
				return fmt.Errorf("topology %q: shard %d placed on %d, which is not a data node", t.Name, i, r)
			}
		}
	}
	return nil
}

// Size limits of a topology. A layout past them would hold more state than a machine has memory
// for (ten million shard replicas already take about 2 GB in the simulator).
const (
	MaxRegions        = 100
	MaxNodesPerRegion = 1000
	MaxShardsPerNode  = 1024
	MaxReplicas       = 1 << 20 // shard replicas over the whole topology
)

// Build lays out nodes and shards over the regions of a latency preset.
func Build(name string, regions []string, rtt [][]time.Duration, intra time.Duration, l Layout) (*Topology, error) {
	if l.NodesPerRegion <= 0 {
		return nil, fmt.Errorf("topology %q: nodes per region must be positive, got %d", name, l.NodesPerRegion)
	}
	if l.NodesPerRegion > MaxNodesPerRegion || len(regions) > MaxRegions {
		return nil, fmt.Errorf("topology %q: too large (%d regions × %d nodes; at most %d × %d)", name, len(regions), l.NodesPerRegion, MaxRegions, MaxNodesPerRegion)
	}
	if l.ShardsPerNode > MaxShardsPerNode {
		return nil, fmt.Errorf("topology %q: shards per node must be 1..%d, got %d", name, MaxShardsPerNode, l.ShardsPerNode)
	}
	if l.ShardsPerNode <= 0 {
		l.ShardsPerNode = 1
	}
	if l.Backups < 0 {
		return nil, fmt.Errorf("topology %q: backups must not be negative, got %d", name, l.Backups)
	}
	if l.Replication == "" {
		l.Replication = ReplicatePrimaryOnly
	}
	perShard := 1
	switch l.Replication {
	case ReplicateEveryRegion:
		perShard = len(regions)
	case ReplicateLocalBackup:
		perShard = 1 + l.Backups
	}
	// Every replica costs the simulator a store and the topology an index entry; past this
	// the layout exhausts memory long before it does anything useful.
	if n := len(regions) * l.NodesPerRegion * l.ShardsPerNode * perShard; n > MaxReplicas {
		return nil, fmt.Errorf("topology %q: too large (%d regions × %d nodes × %d shards × %d replicas = %d shard replicas; at most %d)",
			name, len(regions), l.NodesPerRegion, l.ShardsPerNode, perShard, n, MaxReplicas)
	}
	t := &Topology{Name: name, RTT: rtt, IntraRTT: intra, Layout: l}
	for i, r := range regions {
		t.Regions = append(t.Regions, Region{ID: RegionID(i), Name: r})
	}
	for r := range regions {
		for i := 0; i < l.NodesPerRegion; i++ {
			t.Nodes = append(t.Nodes, Node{ID: NodeID(len(t.Nodes)), Region: RegionID(r), Roles: RoleData})
		}
	}
	if l.OraclePerRegion {
		for r := range regions {
			t.Nodes = append(t.Nodes, Node{ID: NodeID(len(t.Nodes)), Region: RegionID(r), Roles: RoleOracle})
		}
	}
	// Shards are dealt round-robin over regions, so shard s's home is region s mod R and
	// consecutive shards of a region land on consecutive nodes of it.
	nShards := len(regions) * l.NodesPerRegion * l.ShardsPerNode
	for s := 0; s < nShards; s++ {
		home := s % len(regions)
		idx := (s / len(regions)) % l.NodesPerRegion
		primary := NodeID(home*l.NodesPerRegion + idx)
		reps := []NodeID{primary}
		switch l.Replication {
		case ReplicatePrimaryOnly:
		case ReplicateEveryRegion:
			for r := range regions {
				if r != home {
					reps = append(reps, NodeID(r*l.NodesPerRegion+idx))
				}
			}
		case ReplicateLocalBackup:
			if l.Backups >= l.NodesPerRegion {
				return nil, fmt.Errorf("topology %q: %d backups need more than %d nodes per region", name, l.Backups, l.NodesPerRegion)
			}
			for b := 1; b <= l.Backups; b++ {
				reps = append(reps, NodeID(home*l.NodesPerRegion+(idx+b)%l.NodesPerRegion))
			}
		default:
			return nil, fmt.Errorf("topology %q: unknown replication %q (want primary, all-regions or backups)", name, l.Replication)
		}
		t.Shards = append(t.Shards, Shard{ID: ShardID(s), Home: RegionID(home), Replicas: reps})
	}
	if err := t.Validate(); err != nil {
		return nil, err
	}
	t.index()
	return t, nil
}

func (t *Topology) index() {
	t.dataByRegion = make([][]NodeID, len(t.Regions))
	t.oracleByRegion = make([]NodeID, len(t.Regions))
	for i := range t.oracleByRegion {
		t.oracleByRegion[i] = -1
	}
	for _, n := range t.Nodes {
		if n.Roles&RoleData != 0 {
			t.dataByRegion[n.Region] = append(t.dataByRegion[n.Region], n.ID)
		}
		if n.Roles&RoleOracle != 0 && t.oracleByRegion[n.Region] < 0 {
			t.oracleByRegion[n.Region] = n.ID
		}
	}
	t.shardsByNode = map[NodeID][]ShardID{}
	for _, s := range t.Shards {
		for _, r := range s.Replicas {
			t.shardsByNode[r] = append(t.shardsByNode[r], s.ID)
		}
	}
}

// DataNodes returns the data nodes of a region.
func (t *Topology) DataNodes(r RegionID) []NodeID { return t.dataByRegion[r] }

// Oracle returns the region's oracle node, or -1 if it has none.
func (t *Topology) Oracle(r RegionID) NodeID { return t.oracleByRegion[r] }

// ShardsOn lists the shards that have a replica on node n, ascending.
func (t *Topology) ShardsOn(n NodeID) []ShardID { return t.shardsByNode[n] }

// RegionOf returns the region of node n.
func (t *Topology) RegionOf(n NodeID) RegionID { return t.Nodes[n].Region }

// OneWay returns the one-way delay between two regions: RTT/2, or IntraRTT/2 inside a region.
func (t *Topology) OneWay(a, b RegionID) time.Duration {
	if a == b {
		return t.IntraRTT / 2
	}
	return t.RTT[a][b] / 2
}

// RegionByName finds a region by name (case-insensitive).
func (t *Topology) RegionByName(name string) (RegionID, bool) {
	for _, r := range t.Regions {
		if strings.EqualFold(r.Name, name) {
			return r.ID, true
		}
	}
	return -1, false
}

// RoutingPrefix returns the part of a key that decides its shard: everything before the first
// '/'. Keys that share a prefix always live together (a TPC-C warehouse, a YCSB-T key).
func RoutingPrefix(key string) string {
	if i := strings.IndexByte(key, '/'); i >= 0 {
		return key[:i]
	}
	return key
}

// ShardOf maps a key to its shard. A routing prefix of the form "#N" pins the key to shard
// N mod len(Shards), which lets workloads place data deliberately (warehouse w in region w mod R,
// region-local YCSB-T keys); any other prefix is hashed.
func (t *Topology) ShardOf(key string) ShardID {
	p := RoutingPrefix(key)
	n := len(t.Shards)
	if len(p) > 1 && p[0] == '#' {
		if v, err := strconv.ParseUint(p[1:], 10, 63); err == nil {
			return ShardID(v % uint64(n))
		}
	}
	h := fnv.New64a()
	h.Write([]byte(p))
	return ShardID(h.Sum64() % uint64(n))
}

// RangeShard reports the one shard that holds every key in [start, end) when the range lies
// within one routing prefix P: start begins with P+"/" and end either does too or is P+"0", the
// first key past all of P's (so [P+"/", P+"0") is all of P's keys). Any other range may hold keys
// of every shard (end "" means to the end of the key space).
func (t *Topology) RangeShard(start, end string) (ShardID, bool) {
	p := RoutingPrefix(start)
	if len(p) == len(start) || end <= start {
		return 0, false
	}
	if !strings.HasPrefix(end, p+"/") && end != p+"0" {
		return 0, false
	}
	return t.ShardOf(start), true
}

// PrefixEnd is the end of a scan over every key that begins with prefix: the least key above
// them all, or "" (the end of the key space) when there is none. Keys are UTF-8, so the end is
// too: the prefix's last character is replaced by the next one (in UTF-8, byte order is
// character order); a prefix that is not UTF-8 gets its last byte incremented instead.
func PrefixEnd(prefix string) string {
	if !utf8.ValidString(prefix) {
		b := []byte(prefix)
		for i := len(b) - 1; i >= 0; i-- {
			if b[i] < 0xff {
				b[i]++
				return string(b[:i+1])
			}
		}
		return ""
	}
	for prefix != "" {
		r, size := utf8.DecodeLastRuneInString(prefix)
		prefix = prefix[:len(prefix)-size]
		next := r + 1
		if next == 0xd800 { // surrogates are no characters
			next = 0xe000
		}
		if next <= utf8.MaxRune {
			return prefix + string(next)
		}
	}
	return ""
}

// PinnedKey returns a routing prefix that places a key on the given shard.
func PinnedKey(s ShardID, rest string) string {
	if rest == "" {
		return "#" + strconv.Itoa(int(s))
	}
	return "#" + strconv.Itoa(int(s)) + "/" + rest
}

// ShardsHomedIn lists the shards whose home is region r, ascending.
func (t *Topology) ShardsHomedIn(r RegionID) []ShardID {
	var out []ShardID
	for _, s := range t.Shards {
		if s.Home == r {
			out = append(out, s.ID)
		}
	}
	return out
}

// PrimaryOf returns the primary node of key's shard.
func (t *Topology) PrimaryOf(key string) NodeID { return t.Shards[t.ShardOf(key)].Primary() }

// HomeOf returns the home region of key's shard.
func (t *Topology) HomeOf(key string) RegionID { return t.Shards[t.ShardOf(key)].Home }

// ReplicaIn returns shard s's replica in region r, or the primary if it has none there.
func (t *Topology) ReplicaIn(s ShardID, r RegionID) NodeID {
	for _, n := range t.Shards[s].Replicas {
		if t.Nodes[n].Region == r {
			return n
		}
	}
	return t.Shards[s].Primary()
}
