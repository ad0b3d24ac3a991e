package coordinator

import (
	"math/rand/v2"
	"time"
)

// jitter spreads heartbeats over interval ±20% so a fleet started together
// does not beat in lockstep; u is a uniform number in [0, 1).
func jitter(interval time.Duration, u float64) time.Duration {
	return time.Duration(float64(interval) * (0.8 + 0.4*u))
}

// nextBeat returns the delay to the next heartbeat.
func nextBeat(interval time.Duration) time.Duration { return jitter(interval, rand.Float64()) }
