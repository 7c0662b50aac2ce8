package runtime

import (
	"time"

	"golang.org/x/sys/unix"
)

// sleepPrecisely blocks the calling goroutine's thread for d. Go's timers serve a wait shorter
// than a millisecond about a millisecond late once the process idles (the poller waits in whole
// milliseconds), so an emulated 100µs hop inside a region took ~1.08ms; nanosleep with a
// timer slack of 1ns takes ~0.12ms on the same machine. The thread is parked in the kernel, not
// spinning, and the scheduler hands its P to other goroutines meanwhile.
func sleepPrecisely(d time.Duration) {
	// The slack is per thread and this goroutine may run on any: set it each time (one cheap
	// syscall). A failure only costs precision.
	_ = unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0)
	ts := unix.NsecToTimespec(int64(d))
	for unix.Nanosleep(&ts, &ts) == unix.EINTR { // the Go runtime's preemption signals interrupt it
	}
}
