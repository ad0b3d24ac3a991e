//go:build !unix

package cpu

import "time"

// Process returns this process's CPU time so far; it is not read on this
// system, so ok is always false.
func Process() (used time.Duration, ok bool) { return 0, false }
