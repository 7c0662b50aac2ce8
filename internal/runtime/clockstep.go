package runtime

import (
	"fmt"
	"time"
)

// A node's clocks can be stepped while it runs, as NTP steps a real server's clock, so that
// real processes can be reviewed under clock error that comes and goes, as the simulator's
// --random-skews reviews simulated clocks; `meridian cluster chaos --skews` steps them
// (cmd/meridian). A step adds to the configured clock_offset, and moves the local clock and
// TrueTime readings alike (env.Now): whether a protocol keeps its promise depends on the step
// staying within the ε it trusts, which the node's log says at each step.

// SetClockStep moves the node's clocks by step from where clock_offset puts them, replacing any
// earlier step; zero steps them back. A step that would put the clocks more than MaxEpsilon
// off the machine's is refused and changes nothing.
func (s *Server) SetClockStep(step time.Duration) error {
	if total := s.me.ClockOffset + step; total > MaxEpsilon || total < -MaxEpsilon {
		return fmt.Errorf("node %s: a clock step of %s would put its clocks %s off the machine's, past ±%s", s.me.Name, step, total, MaxEpsilon)
	}
	old := time.Duration(s.clockStep.Swap(int64(step)))
	switch total := s.me.ClockOffset + step; {
	case step == old:
	case step == 0:
		s.log.Warn("clock stepped back: its clocks are where clock_offset puts them", "undone", old, "offset", s.me.ClockOffset)
	case total > s.cfg.Epsilon || total < -s.cfg.Epsilon:
		s.log.Warn("clock stepped on purpose (SetClockStep) past epsilon: protocols that trust TrueTime may break their promises",
			"step", step, "offset", total, "epsilon", s.cfg.Epsilon)
	default:
		s.log.Warn("clock stepped on purpose (SetClockStep)", "step", step, "offset", total, "epsilon", s.cfg.Epsilon)
	}
	return nil
}

// ClockStep is how far SetClockStep (or Options.ClockStep) has moved the node's clocks.
func (s *Server) ClockStep() time.Duration { return time.Duration(s.clockStep.Load()) }
