package ready

import (
	"context"
	"time"
)

// Backoff is capped exponential backoff with jitter: the delay before retry
// n (1-based) is Initial*2^(n-1), capped at Max, then reduced by up to
// Jitter (a fraction) at random so that many pollers do not retry in step.
// It is a plain value, safe to share.
type Backoff struct {
	Initial time.Duration
	Max     time.Duration
	Jitter  float64
}

// defaultJitter is the fraction of a delay taken off at random.
const defaultJitter = 0.2

// Delay returns the delay before retry n given r, a random number in [0,1).
// It is a pure function so that tests can pin r.
func (b Backoff) Delay(n int, r float64) time.Duration {
	d := b.Initial
	for i := 1; i < n && d < b.Max; i++ {
		d *= 2
	}
	d = min(d, b.Max)
	return d - time.Duration(float64(d)*b.Jitter*r)
}

// sleep waits for d or until ctx is done, and reports whether it waited the
// whole time.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
