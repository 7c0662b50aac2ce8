package topo

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

func ms(f float64) time.Duration { return time.Duration(f * float64(time.Millisecond)) }

// symmetric builds a full matrix from the lower triangle given row by row.
func symmetric(lower [][]float64) [][]time.Duration {
	n := len(lower)
	m := make([][]time.Duration, n)
	for i := range m {
		m[i] = make([]time.Duration, n)
	}
	for i, row := range lower {
		for j, v := range row {
			m[i][j] = ms(v)
			m[j][i] = ms(v)
		}
	}
	return m
}

type preset struct {
	regions []string
	rtt     [][]time.Duration
	intra   time.Duration
	layout  func(Layout) Layout
	about   string
}

var presets = map[string]preset{
	// K2 Table 1: round trips between Shanghai, Beijing, Guangzhou, Guiyang, Singapore (ms).
	"k2-5region": {
		regions: []string{"SH", "BJ", "GZ", "GY", "SG"},
		rtt: symmetric([][]float64{
			{0},
			{27.3, 0},
			{31.3, 42.6, 0},
			{29.2, 38.5, 28.0, 0},
			{69.3, 77.6, 46.8, 60.0, 0},
		}),
		intra: ms(0.2),
		about: "K2 Table 1: SH, BJ, GZ, GY, SG; 0.2 ms inside a region",
	},
	// The K2 latencies of SH, BJ and SG: the real cluster's default.
	"k2-3region": {
		regions: []string{"SH", "BJ", "SG"},
		rtt: symmetric([][]float64{
			{0},
			{27.3, 0},
			{69.3, 77.6, 0},
		}),
		intra: ms(0.2),
		about: "SH, BJ and SG of K2 Table 1",
	},
	// Wren: one-way delays of the CC-SIM configuration, doubled (notes/wren.md §5.6).
	"wren-3dc": {
		regions: []string{"DC0", "DC1", "DC2"},
		rtt: symmetric([][]float64{
			{0},
			{166.1, 0},
			{87.5, 81.2, 0},
		}),
		intra: ms(0.7),
		layout: func(l Layout) Layout {
			l.Replication = ReplicateEveryRegion
			return l
		},
		about: "Wren 3 DCs, full replication",
	},
	// Wren 5 DCs: approximate public one-way latencies × 2 (notes/wren.md §5.6).
	"wren-5dc": {
		regions: []string{"VA", "OR", "IE", "BOM", "SYD"},
		rtt: symmetric([][]float64{
			{0},
			{70, 0},
			{76, 130, 0},
			{186, 216, 120, 0},
			{200, 140, 260, 150, 0},
		}),
		intra: ms(0.7),
		layout: func(l Layout) Layout {
			l.Replication = ReplicateEveryRegion
			return l
		},
		about: "Wren 5 DCs (Virginia, Oregon, Ireland, Mumbai, Sydney), full replication",
	},
	// FaRMv2: one data center, primary-backup.
	"single-dc": {
		regions: []string{"DC"},
		rtt:     [][]time.Duration{{0}},
		intra:   ms(0.02),
		about:   "one data center, 20 µs round trips",
	},
}

// Presets lists the named presets with a one-line description, sorted by name.
func Presets() []string {
	var out []string
	for n, p := range presets {
		out = append(out, n+": "+p.about)
	}
	out = append(out, "uniform:N:RTTms: N regions, every pair RTTms apart (RLS)")
	sort.Strings(out)
	return out
}

// FromPreset builds a named preset. "uniform:N:RTT" gives N regions R0..R(N-1) with every pair
// RTT milliseconds apart and 0.2 ms inside a region.
func FromPreset(name string, l Layout) (*Topology, error) {
	if strings.HasPrefix(name, "uniform:") {
		parts := strings.Split(name, ":")
		if len(parts) != 3 {
			return nil, fmt.Errorf("topology %q: want uniform:N:RTTms", name)
		}
		n, err := strconv.Atoi(parts[1])
		if err != nil || n <= 0 || n > 100 {
			return nil, fmt.Errorf("topology %q: region count must be 1..100", name)
		}
		rtt, err := strconv.ParseFloat(parts[2], 64)
		if err != nil || !(rtt >= 0 && rtt <= 10000) { // also rejects NaN
			return nil, fmt.Errorf("topology %q: RTT must be 0..10000 ms", name)
		}
		regions := make([]string, n)
		m := make([][]time.Duration, n)
		for i := range regions {
			regions[i] = "R" + strconv.Itoa(i)
			m[i] = make([]time.Duration, n)
			for j := range m[i] {
				if i != j {
					m[i][j] = ms(rtt)
				}
			}
		}
		return Build(name, regions, m, ms(0.2), l)
	}
	p, ok := presets[name]
	if !ok {
		var names []string
		for n := range presets {
			names = append(names, n)
		}
		sort.Strings(names)
		return nil, fmt.Errorf("unknown topology %q (known: %s, uniform:N:RTTms, or a .toml file)", name, strings.Join(names, ", "))
	}
	if p.layout != nil {
		l = p.layout(l)
	}
	return Build(name, p.regions, p.rtt, p.intra, l)
}
