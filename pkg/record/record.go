package record

import (
	"time"

	"github.com/fleetbench/fleetbench/pkg/client"
)

// Sample is one finished turn as the load engine saw it.
type Sample struct {
	// Window is the coordinator's window in force when the turn was sent.
	Window uint32
	// Conversation and Turn (1-based) identify the turn.
	Conversation int
	Turn         int
	// Restarted marks a turn of a session restarted after an agent loss.
	Restarted bool
	// Intended is when the turn was due to be sent by the schedule (open
	// loop arrival, or end of think time in a closed loop). Result.Start is
	// when it was actually sent; both come from one monotonic base.
	Intended time.Time
	// Result is the client's measurement.
	Result *client.Result
}

// Lag is how late the turn was sent against its schedule.
func (s *Sample) Lag() time.Duration {
	if s.Intended.IsZero() || s.Result == nil {
		return 0
	}
	if d := s.Result.Start.Sub(s.Intended); d > 0 {
		return d
	}
	return 0
}
