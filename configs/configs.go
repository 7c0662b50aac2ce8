// Package configs ships Meridian's cluster configurations inside the binary, so that
// `meridian cluster start`, `meridian bench` and `meridian kv` work with no flags at all, and any
// protocol's local cluster starts with one: `--config crdb-3region`.
package configs

import (
	"embed"
	"sort"
	"strings"
)

// DefaultName is how the built-in default configuration is named in messages.
const DefaultName = "built-in k2-3region.toml"

// Default is the built-in cluster configuration: three regions with K2 Table 1 latencies.
//
//go:embed k2-3region.toml
var Default string

//go:embed *.toml
var files embed.FS

// Builtin returns the built-in configuration called name ("crdb-3region"), and the name to
// give it in messages.
func Builtin(name string) (text, source string, ok bool) {
	if strings.ContainsAny(name, `/\.`) {
		return "", "", false
	}
	data, err := files.ReadFile(name + ".toml")
	if err != nil {
		return "", "", false
	}
	return string(data), "built-in " + name + ".toml", true
}

// Names lists the built-in configurations, sorted.
func Names() []string {
	ents, _ := files.ReadDir(".")
	var out []string
	for _, e := range ents {
		out = append(out, strings.TrimSuffix(e.Name(), ".toml"))
	}
	sort.Strings(out)
	return out
}
