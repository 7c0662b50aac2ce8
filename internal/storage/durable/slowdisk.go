package durable

import (
	"time"

	"github.com/meridiandb/meridian/internal/node"
)

// WithApplyDelay returns b with every Apply held back d before it reaches b: a slower disk, for
// crash reviews of real clusters ([disk] flush_delay). A local fsync takes a fraction of a
// millisecond, so a kill -9 almost never falls between a write acknowledged before it was
// durable and its flush; with the delay, a node killed meanwhile loses the batch, as a crash
// before the write reached the disk would. Reads are not delayed.
func WithApplyDelay(b Backend, d time.Duration) Backend {
	if d <= 0 {
		return b
	}
	return &slowDisk{Backend: b, delay: d, sleep: time.Sleep}
}

type slowDisk struct {
	Backend
	delay time.Duration
	sleep func(time.Duration) // time.Sleep; tests record the waits instead
}

func (s *slowDisk) Apply(batch []node.Write) error {
	s.sleep(s.delay)
	return s.Backend.Apply(batch)
}
