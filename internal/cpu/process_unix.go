//go:build unix

package cpu

import (
	"syscall"
	"time"
)

// Process returns this process's user and system CPU time so far; ok is
// false where it cannot be read. Safe for concurrent use.
func Process() (used time.Duration, ok bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
