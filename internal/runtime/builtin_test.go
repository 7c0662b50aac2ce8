package runtime

import (
	"strings"
	"testing"

	"github.com/meridiandb/meridian/configs"
)

// TestBuiltinConfigs: every built-in configuration loads by name, runs the protocol it is named
// for, and keeps its own ports and data directory, so the built-in clusters run side by side.
func TestBuiltinConfigs(t *testing.T) {
	names := configs.Names()
	if len(names) < 4 {
		t.Fatalf("built-in configurations %v: want one per protocol", names)
	}
	addrs := map[string]string{}
	dirs := map[string]string{}
	for _, name := range names {
		cfg, err := Load(name)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if proto, _, _ := strings.Cut(name, "-"); cfg.Protocol.Name() != proto || cfg.Name != name {
			t.Errorf("%s: cluster %q runs %s", name, cfg.Name, cfg.Protocol.Name())
		}
		if other, ok := dirs[cfg.DataDir]; ok {
			t.Errorf("%s and %s share data directory %s", name, other, cfg.DataDir)
		}
		dirs[cfg.DataDir] = name
		for _, n := range cfg.Nodes {
			for _, a := range []string{n.Addr, n.GRPCAddr} {
				if a == "" {
					continue
				}
				if other, ok := addrs[a]; ok {
					t.Errorf("%s and %s both listen on %s", name, other, a)
				}
				addrs[a] = name
			}
		}
	}
	if _, err := Load("no-such-3region"); err == nil || !strings.Contains(err.Error(), "crdb-3region") {
		t.Errorf("unknown configuration: %v, want an error listing the built-in ones", err)
	}
	text, source, ok := configs.Builtin("k2-3region")
	if !ok || text != configs.Default || source != configs.DefaultName {
		t.Errorf("Builtin(k2-3region) is not the default configuration (%q, %v)", source, ok)
	}
}
