package ui

import (
	"sync"
	"time"
)

// cpuMeter turns the process's CPU time into cores used between samples.
type cpuMeter struct {
	mu   sync.Mutex
	at   time.Time
	used time.Duration
}

// sample returns the cores used since the last sample, ok false on the
// first or where the CPU time cannot be read.
func (c *cpuMeter) sample(now time.Time) (float64, bool) {
	used, ok := processCPU()
	if !ok {
		return 0, false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	prevAt, prev := c.at, c.used
	c.at, c.used = now, used
	if prevAt.IsZero() || !now.After(prevAt) {
		return 0, false
	}
	return (used - prev).Seconds() / now.Sub(prevAt).Seconds(), true
}
