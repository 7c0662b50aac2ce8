package runtime

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzParseConfig: a cluster configuration, however malformed, is a one-line error or a
// configuration, never a panic. `go test ./internal/runtime -run '^$' -fuzz FuzzParseConfig`
// explores; plain `go test` replays the seeds.
func FuzzParseConfig(f *testing.F) {
	f.Add("name = 0b\n") // the decoder's message quoted the line break
	files, _ := filepath.Glob("../../configs/*.toml")
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(string(b))
		}
	}
	f.Fuzz(func(t *testing.T, text string) {
		if _, err := Parse("fuzz.toml", text, ""); err != nil && strings.Contains(err.Error(), "\n") {
			t.Fatalf("error is not one line: %q", err)
		}
	})
}
