package cpu

import (
	"sync"
	"time"
)

// Cores returns the cores used between two readings of a process's CPU
// time, prev at prevAt and used at at; ok is false when there is no
// earlier reading, the readings are not in time order, or the CPU time
// went down (another process: a restart).
func Cores(prevAt time.Time, prev time.Duration, at time.Time, used time.Duration) (float64, bool) {
	if prevAt.IsZero() || !at.After(prevAt) || used < prev {
		return 0, false
	}
	return (used - prev).Seconds() / at.Sub(prevAt).Seconds(), true
}

// Meter turns this process's CPU time into cores used between samples.
// Its zero value is ready; it is safe for concurrent use.
type Meter struct {
	mu   sync.Mutex
	at   time.Time
	used time.Duration
}

// Sample returns the cores used since the last sample, ok false on the
// first or where the CPU time cannot be read.
func (m *Meter) Sample(now time.Time) (float64, bool) {
	used, ok := Process()
	if !ok {
		return 0, false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	prevAt, prev := m.at, m.used
	m.at, m.used = now, used
	return Cores(prevAt, prev, now, used)
}
