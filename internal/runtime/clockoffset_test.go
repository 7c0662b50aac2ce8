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
// error a real cluster can show, not only the simulator. The same holds whether the oracle's
// clock is set ahead by its configuration (clock_offset) or stepped ahead while it runs
// (SetClockStep, as cluster chaos --skews steps it).
func TestClockOffsetNeedsCommitWait(t *testing.T) {
	for _, stepped := range []bool{false, true} {
		name := map[bool]string{false: "clock_offset", true: "SetClockStep"}[stepped]
		t.Run(name, func(t *testing.T) {
			if n := staleReadsAfterCommit(t, false, stepped); n != 0 {
				t.Errorf("with commit wait, %d of 5 reads that began after a commit missed it", n)
			}
			// Each read misses unless more than 55 ms pass between the write's timestamp and the
			// commit (90 ms ahead, less the 30 ms pause and a 5 ms batch); that every one of
			// five does is no machine's load, but a commit wait.
			if n := staleReadsAfterCommit(t, true, stepped); n == 0 {
				t.Error("without commit wait, every read that began after a commit saw it: the 90 ms offset moved no timestamp")
			}
		})
	}
}

// staleReadsAfterCommit counts the reads at bj-1 that missed a write committed through sh-1
// before they began, of five, with SH's oracle 90 ms ahead: by clock_offset, or stepped there
// once the cluster runs.
func staleReadsAfterCommit(t *testing.T, mutant, stepped bool) (stale int) {
	cfg := testConfig(t, func(text string) string {
		text = strings.Replace(text, `epsilon = "1ms"`, `epsilon = "100ms"`, 1)
		if !stepped {
			text = strings.Replace(text, `name = "sh-oracle"`, "name = \"sh-oracle\"\nclock_offset = \"90ms\"", 1)
		}
		if mutant {
			text = strings.Replace(text, `ttl = "5ms"`, "ttl = \"5ms\"\nmutant = \"no-commit-wait\"", 1)
		}
		return text
	})
	servers := startCluster(t, cfg)
	if stepped {
		oracle, err := cfg.NodeByName("sh-oracle")
		if err != nil {
			t.Fatal(err)
		}
		if err := servers[oracle.ID].SetClockStep(90 * time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
	sh, bj := dial(t, cfg, 0), dial(t, cfg, 1)
	for i := range 5 {
		k, v := fmt.Sprintf("offset/k%d", i), fmt.Sprintf("v%d", i)
		if err := put(sh, k, v); err != nil {
			t.Fatal(err)
		}
		// Past K2-TB's 5 ms batches: a read that late gets a timestamp above the write's on
		// honest clocks, commit wait or not, so only the offset can make it miss.
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

// A clock step is bounded as clock_offset is, together with it, and zero steps back.
func TestClockStepBounded(t *testing.T) {
	cfg := testConfig(t, func(text string) string {
		return strings.Replace(text, `name = "sh-1"`, "name = \"sh-1\"\nclock_offset = \"60s\"", 1)
	})
	servers := startCluster(t, cfg)
	s := servers[0]
	if err := s.SetClockStep(50 * time.Second); err == nil || strings.Contains(err.Error(), "\n") {
		t.Errorf("a step to 110 s off: %v, want a one-line refusal", err)
	}
	if s.ClockStep() != 0 {
		t.Errorf("a refused step moved the clock by %s", s.ClockStep())
	}
	before := (*env)(s).Now()
	if err := s.SetClockStep(-30 * time.Second); err != nil {
		t.Fatal(err)
	}
	if moved := time.Duration((*env)(s).Now() - before); moved > -29*time.Second || moved < -31*time.Second {
		t.Errorf("a -30 s step moved the clock by %s", moved)
	}
	if err := s.SetClockStep(0); err != nil || s.ClockStep() != 0 {
		t.Errorf("step back: %v, step %s", err, s.ClockStep())
	}
}
