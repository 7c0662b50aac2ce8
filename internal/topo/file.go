package topo

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
)

// File is the TOML form of a topology:
//
//	name = "three-regions"
//	intra_rtt_ms = 0.2
//
//	[[region]]
//	name = "SH"
//	rtt_ms = { BJ = 27.3, SG = 69.3 }
//
//	[[region]]
//	name = "BJ"
//	rtt_ms = { SG = 77.6 }
//
//	[[region]]
//	name = "SG"
//
//	[layout]            # optional; command-line flags fill what is missing
//	nodes_per_region = 1
//	shards_per_node = 4
//	replication = "primary"   # primary | all-regions | backups
//
// Each pair's RTT is given once (on either region); a pair given twice must agree.
type File struct {
	Name       string       `toml:"name"`
	IntraRTTms float64      `toml:"intra_rtt_ms"`
	Regions    []FileRegion `toml:"region"`
	Layout     *FileLayout  `toml:"layout"`
}

// FileRegion is one [[region]] table.
type FileRegion struct {
	Name  string             `toml:"name"`
	RTTms map[string]float64 `toml:"rtt_ms"`
}

// FileLayout is the optional [layout] table.
type FileLayout struct {
	NodesPerRegion int    `toml:"nodes_per_region"`
	ShardsPerNode  int    `toml:"shards_per_node"`
	Replication    string `toml:"replication"`
	Backups        int    `toml:"backups"`
}

// maxRTTms bounds every round trip a file gives, in milliseconds: far beyond any real network,
// and small enough that converting it to a Duration cannot overflow.
const maxRTTms = 100000

// LoadFile reads a topology from a TOML file. Errors name the file, the line where it is known,
// and the problem.
func LoadFile(path string, l Layout) (*Topology, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("topology file: %w", err)
	}
	return Parse(path, string(data), l)
}

// lineOf finds the first line of text that mentions needle, for error messages.
func lineOf(text, needle string) int {
	for i, line := range strings.Split(text, "\n") {
		if strings.Contains(line, needle) {
			return i + 1
		}
	}
	return 0
}

// keyLine finds the first line of text that sets key, for error messages.
func keyLine(text, key string) int {
	for i, line := range strings.Split(text, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), key)
		if ok && strings.HasPrefix(strings.TrimLeft(rest, " \t"), "=") {
			return i + 1
		}
	}
	return 0
}

// escapeLineBreaks keeps an error one line: the TOML decoder quotes the text it stopped at
// verbatim, line breaks included ("not a binary number: '0b\n'").
var escapeLineBreaks = strings.NewReplacer("\r", `\r`, "\n", `\n`)

// Parse reads a topology from TOML text; name is used in error messages.
func Parse(name, text string, l Layout) (*Topology, error) {
	var f File
	md, err := toml.Decode(text, &f)
	if err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			return nil, fmt.Errorf("%s:%d: %s", name, pe.Position.Line, escapeLineBreaks.Replace(pe.Message))
		}
		return nil, fmt.Errorf("%s: %s", name, escapeLineBreaks.Replace(err.Error()))
	}
	at := func(needle, format string, args ...any) error {
		if ln := lineOf(text, needle); ln > 0 {
			return fmt.Errorf("%s:%d: %s", name, ln, fmt.Sprintf(format, args...))
		}
		return fmt.Errorf("%s: %s", name, fmt.Sprintf(format, args...))
	}
	// atKey is at for a key's own line: its name may also appear in values (backups).
	atKey := func(key, format string, args ...any) error {
		if ln := keyLine(text, key); ln > 0 {
			return fmt.Errorf("%s:%d: %s", name, ln, fmt.Sprintf(format, args...))
		}
		return at(key, format, args...)
	}
	if und := md.Undecoded(); len(und) > 0 {
		k := und[0].String()
		parts := strings.Split(k, ".")
		return nil, at(parts[len(parts)-1], "unknown key %q", k)
	}
	if len(f.Regions) == 0 {
		return nil, fmt.Errorf("%s: no [[region]] tables", name)
	}
	if !(f.IntraRTTms >= 0 && f.IntraRTTms <= maxRTTms) { // also rejects NaN
		return nil, atKey("intra_rtt_ms", "intra_rtt_ms must be 0..%d, got %g", maxRTTms, f.IntraRTTms)
	}
	idx := map[string]int{}
	folded := map[string]string{}
	names := make([]string, len(f.Regions))
	for i, r := range f.Regions {
		if r.Name == "" {
			return nil, fmt.Errorf("%s: region %d has no name", name, i+1)
		}
		// Flags name regions in any case and between '|' and '@' (--partition SH|BJ@2s/1s),
		// and nodes after them (sh-1): a name they cannot spell, or two that differ only in
		// case, were accepted and then mixed up (--crash a-1 crashed region A's node).
		if !validRegionName(r.Name) {
			return nil, at(r.Name, "region name %q: use letters, digits, '-', '_' and '.' only", r.Name)
		}
		if other, dup := folded[strings.ToLower(r.Name)]; dup {
			if other == r.Name {
				return nil, at(r.Name, "region %q defined twice", r.Name)
			}
			return nil, at(r.Name, "regions %q and %q differ only in case, and flags take names in any case", other, r.Name)
		}
		folded[strings.ToLower(r.Name)] = r.Name
		idx[r.Name] = i
		names[i] = r.Name
	}
	n := len(f.Regions)
	rtt := make([][]time.Duration, n)
	set := make([][]bool, n)
	for i := range rtt {
		rtt[i] = make([]time.Duration, n)
		set[i] = make([]bool, n)
	}
	for i, r := range f.Regions {
		peers := make([]string, 0, len(r.RTTms))
		for p := range r.RTTms {
			peers = append(peers, p)
		}
		sort.Strings(peers)
		for _, p := range peers {
			v := r.RTTms[p]
			j, ok := idx[p]
			switch {
			case !ok:
				return nil, at(p, "region %q: rtt_ms names unknown region %q", r.Name, p)
			case j == i:
				return nil, at(p, "region %q: rtt_ms to itself (use intra_rtt_ms)", r.Name)
			case !(v >= 0 && v <= maxRTTms): // also rejects NaN
				return nil, at(p, "region %q: rtt_ms to %q must be 0..%d, got %g", r.Name, p, maxRTTms, v)
			case set[i][j] && rtt[i][j] != ms(v):
				return nil, at(p, "regions %q and %q: two different RTTs", r.Name, p)
			}
			rtt[i][j], rtt[j][i] = ms(v), ms(v)
			set[i][j], set[j][i] = true, true
		}
	}
	for i := 0; i < n; i++ {
		for j := i + 1; j < n; j++ {
			if !set[i][j] {
				return nil, at(names[i], "no rtt_ms between %q and %q", names[i], names[j])
			}
		}
	}
	if f.Layout != nil {
		// Checked here rather than left to Build so that the error names the file's line; a
		// zero means "not set" unless it is written.
		written := func(key string) bool { return md.IsDefined("layout", key) }
		switch fl := f.Layout; {
		case fl.NodesPerRegion < 0 || fl.NodesPerRegion > MaxNodesPerRegion || fl.NodesPerRegion == 0 && written("nodes_per_region"):
			return nil, atKey("nodes_per_region", "nodes_per_region must be 1..%d, got %d", MaxNodesPerRegion, fl.NodesPerRegion)
		case fl.ShardsPerNode < 0 || fl.ShardsPerNode > MaxShardsPerNode || fl.ShardsPerNode == 0 && written("shards_per_node"):
			return nil, atKey("shards_per_node", "shards_per_node must be 1..%d, got %d", MaxShardsPerNode, fl.ShardsPerNode)
		case fl.Backups < 0:
			return nil, atKey("backups", "backups must not be negative, got %d", fl.Backups)
		}
		if f.Layout.NodesPerRegion != 0 {
			l.NodesPerRegion = f.Layout.NodesPerRegion
		}
		if f.Layout.ShardsPerNode != 0 {
			l.ShardsPerNode = f.Layout.ShardsPerNode
		}
		if f.Layout.Replication != "" {
			l.Replication = Replication(f.Layout.Replication)
		}
		if f.Layout.Backups != 0 {
			l.Backups = f.Layout.Backups
			// Only backups replication places backups; under another the count would be
			// ignored without a word.
			if l.Replication != ReplicateLocalBackup {
				rep := l.Replication
				if rep == "" {
					rep = ReplicatePrimaryOnly
				}
				return nil, atKey("backups", "backups = %d needs replication = %q (replication is %q)", l.Backups, ReplicateLocalBackup, rep)
			}
		}
	}
	tn := f.Name
	if tn == "" {
		tn = name
	}
	t, err := Build(tn, names, rtt, ms(f.IntraRTTms), l)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return t, nil
}

// Resolve builds a topology from a preset name or, if it ends in .toml, a file.
func Resolve(nameOrFile string, l Layout) (*Topology, error) {
	if strings.HasSuffix(nameOrFile, ".toml") {
		return LoadFile(nameOrFile, l)
	}
	return FromPreset(nameOrFile, l)
}

// validRegionName reports whether a region name is one the flags and node names can carry.
func validRegionName(s string) bool {
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return s != ""
}
