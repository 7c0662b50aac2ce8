package main

// Every protocol registers itself with internal/protocol when its package is linked in.
import (
	_ "github.com/meridiandb/meridian/internal/protocol/crdb"
	_ "github.com/meridiandb/meridian/internal/protocol/k2"
	_ "github.com/meridiandb/meridian/internal/protocol/serial"
	_ "github.com/meridiandb/meridian/internal/protocol/spanner"
)
