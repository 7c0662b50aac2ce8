// Package configs ships Meridian's default cluster configuration inside the binary, so that
// `meridian cluster start`, `meridian bench` and `meridian kv` work with no flags at all.
package configs

import _ "embed"

// DefaultName is how the built-in configuration is named in messages.
const DefaultName = "built-in k2-3region.toml"

// Default is the built-in cluster configuration: three regions with K2 Table 1 latencies.
//
//go:embed k2-3region.toml
var Default string
