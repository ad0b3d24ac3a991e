package coordinator

import (
	"time"

	"github.com/fleetbench/fleetbench/pkg/record"
)

// Result is everything a run measured. It is built by Run's goroutine and
// handed over when Run returns; the caller owns it.
type Result struct {
	Windows []*WindowResult
	Stages  []*StageResult
	// Agents is every agent's status at the end of the run.
	Agents []AgentStatus
}

// StageResult is one stage (level and routing mode) of a run.
type StageResult struct {
	Index       int
	Level       int
	RequestRate float64
	Mode        string
	// Start is the broadcast start instant; Offsets the start offset each
	// agent reported against it; StartSkew the spread of those offsets
	// (latest minus earliest), the worst start skew of the stage.
	Start     time.Time
	Offsets   map[string]time.Duration
	StartSkew time.Duration
	// Measured merges every measured window that was not re-run, late
	// samples included.
	Measured *record.Window
	// Windows lists the stage's window ids in order.
	Windows []uint32
	// Degraded is set when any measured window of the stage lost an agent
	// or refused one of its reports, or when an agent failed (said it
	// cannot run) before or during it.
	Degraded bool
	// Agents is every agent's status when the stage ended.
	Agents []AgentStatus
	// Interrupted is set when Run's ctx ended during the stage: its windows
	// were closed with what had been reported, and Measured covers less
	// than the planned time.
	Interrupted bool
}

// WindowResult is one closed window, merged across agents.
type WindowResult struct {
	ID    uint32
	Stage int
	Kind  Kind
	Level int
	Mode  string
	// Start and End are the planned window bounds (End is when the next
	// window started, or when the stage drained).
	Start, End time.Time
	// Data merges every report for the window that arrived before it
	// closed.
	Data *record.Window
	// Late merges reports that arrived after the window closed (grace
	// timeout), nil when none did; LateRequests counts their requests.
	Late         *record.Window
	LateRequests int64
	// Coverage lists every agent that was a member during the window.
	Coverage []Coverage
	// Degraded is set when an agent was lost during the window or one of
	// its reports for the window was refused (Coverage.Rejected); Rerun
	// when PolicyRerun replaced it with another window.
	Degraded bool
	Rerun    bool
	// ClosedBy says why the window closed: "watermarks" (every agent had
	// finished its turns) or "grace" (the timeout).
	ClosedBy string
}

// Merged returns the window's data with its late samples merged in.
func (w *WindowResult) Merged() (*record.Window, error) {
	m := w.Data.Clone()
	if w.Late != nil {
		if err := m.Merge(w.Late); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Coverage is what one agent contributed to one window.
type Coverage struct {
	Agent string
	// Incarnation tells apart processes that used the same agent id: a
	// restarted agent has a coverage entry of its own.
	Incarnation uint64
	Index       int
	// Seconds is the agent-seconds it ran load in the window; LostSeconds
	// what it would have added had it not been lost.
	Seconds     float64
	LostSeconds float64
	Reports     int
	// Rejected counts its reports for the window that could not be
	// decoded (malformed histograms, another geometry): acked, logged and
	// left out of the window's data.
	Rejected int
	// Requests counts the requests (ok and failed) in its applied reports.
	Requests int64
	Lost     bool
}
