//go:build !linux

package runtime

import "time"

// sleepPrecisely sleeps for d. Only Linux has a finer sleep than Go's timers (sleep_linux.go).
func sleepPrecisely(d time.Duration) { time.Sleep(d) }
