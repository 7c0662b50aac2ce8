package runtime

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/meridiandb/meridian/client"
	"github.com/meridiandb/meridian/configs"
)

// A node's clock_offset moves its clocks, and is a duration within ±MaxEpsilon; anything else is
// refused on its node's line.
func TestNodeClockOffsetParsed(t *testing.T) {
	text := editDefault(t, `name = "sh-oracle"`, "name = \"sh-oracle\"\nclock_offset = \"20ms\"",
		`name = "bj-1"`, "name = \"bj-1\"\nclock_offset = \"-5ms\"")
	cfg, err := Parse("c.toml", text, "")
	if err != nil {
		t.Fatal(err)
	}
	offsets := map[string]time.Duration{}
	for _, n := range cfg.Nodes {
		offsets[n.Name] = n.ClockOffset
	}
	if offsets["sh-oracle"] != 20*time.Millisecond || offsets["bj-1"] != -5*time.Millisecond || offsets["sh-1"] != 0 {
		t.Errorf("offsets %v; want sh-oracle 20ms, bj-1 -5ms, the rest none", offsets)
	}
	for _, bad := range []string{`"101s"`, `"-101s"`, `"ahead"`, `20`} {
		text := editDefault(t, `name = "sg-1"`, "name = \"sg-1\"\nclock_offset = "+bad)
		_, err := Parse("c.toml", text, "")
		if err == nil || !strings.Contains(err.Error(), "clock_offset") || !strings.Contains(err.Error(), "c.toml:") || strings.Contains(err.Error(), "\n") {
			t.Errorf("clock_offset = %s: %v, want a one-line refusal naming the setting and its line", bad, err)
		}
	}
	if cfg, err := Parse("c.toml", configs.Default, ""); err != nil || cfg.Nodes[0].ClockOffset != 0 {
		t.Errorf("default: %v, %v; want no offset", cfg.Nodes[0].ClockOffset, err)
	}
}

// With SH's oracle 90 ms ahead, inside the 100 ms ε every node assumes, K2 stays strictly
// serializable: a write committed through sh-1 is seen by a read that starts after it at bj-1,
// whose oracle is honest, because the commit waited out its timestamp. Without commit wait (the
// mutant), that read is given a timestamp below the write's and misses it: the offset is a clock
// error a real cluster can show, not only the simulator.
func TestClockOffsetNeedsCommitWait(t *testing.T) {
	staleReads := func(t *testing.T, mutant bool) (stale int) {
		cfg := testConfig(t, func(text string) string {
			text = strings.Replace(text, `epsilon = "1ms"`, `epsilon = "100ms"`, 1)
			text = strings.Replace(text, `name = "sh-oracle"`, "name = \"sh-oracle\"\nclock_offset = \"90ms\"", 1)
			if mutant {
				text = strings.Replace(text, `ttl = "5ms"`, "ttl = \"5ms\"\nmutant = \"no-commit-wait\"", 1)
			}
			return text
		})
		startCluster(t, cfg)
		sh, bj := dial(t, cfg, 0), dial(t, cfg, 1)
		for i := range 5 {
			k, v := fmt.Sprintf("offset/k%d", i), fmt.Sprintf("v%d", i)
			if err := put(sh, k, v); err != nil {
				t.Fatal(err)
			}
			// Past K2-TB's 5 ms batches: a read that late gets a timestamp above the write's
			// on honest clocks, commit wait or not, so only the offset can make it miss.
			time.Sleep(30 * time.Millisecond)
			got, err := get(bj, k)
			if err != nil && !errors.Is(err, client.ErrNotFound) {
				t.Fatal(err)
			}
			if got != v {
				stale++
			}
		}
		return stale
	}
	if n := staleReads(t, false); n != 0 {
		t.Errorf("with commit wait, %d of 5 reads that began after a commit missed it", n)
	}
	// Each read misses unless more than 55 ms pass between the write's timestamp and the commit
	// (90 ms ahead, less the 30 ms pause and a 5 ms batch); that every one of five does is no
	// machine's load, but a commit wait.
	if n := staleReads(t, true); n == 0 {
		t.Error("without commit wait, every read that began after a commit saw it: the 90 ms offset moved no timestamp")
	}
}
