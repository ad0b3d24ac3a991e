package runner

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fleetbench/fleetbench/internal/progress"
	"github.com/fleetbench/fleetbench/pkg/sweep"
)

// Progress display intervals (internal/progress's).
const (
	DefaultRedrawEvery = progress.DefaultRedrawEvery
	DefaultLogEvery    = progress.DefaultLogEvery
)

// Display shows the progress of a whole sweep: the current mode, level and
// phase, the time left in the level and in the sweep, and the live TTFT p95
// and error rate. On a terminal it redraws one status line; otherwise it
// logs a line every DefaultLogEvery (a progress.Display of the sweep's
// Status). Update may be called from any goroutine; Run owns the output.
type Display struct {
	live *Live
	d    *progress.Display[Status]
}

// NewDisplay returns a display writing to out (redrawn in place when tty)
// or logging to logger, with live figures from live (may be nil).
func NewDisplay(out io.Writer, tty bool, logger hclog.Logger, live *Live) *Display {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	d := &Display{live: live}
	d.d = progress.New(out, tty, logger.Named("progress"), "sweep progress", func(s Status, now time.Time) (string, bool) {
		return d.Line(s, now), s.Step.Kind != StepDone
	})
	return d
}

// LogOutput returns the writer logs should go to while the display runs:
// on a terminal one that prints each log line above the status line
// (clearing it first and drawing it again after), else out itself.
func (d *Display) LogOutput() io.Writer { return d.d.LogOutput() }

// Update hands the runner's latest status to the display. It never blocks
// the runner: when the display lags, the status is dropped.
func (d *Display) Update(s Status) { d.d.Update(s) }

// Run shows progress until ctx is done, then clears the status line.
func (d *Display) Run(ctx context.Context) { d.d.Run(ctx) }

// Line is the status line of s at now.
func (d *Display) Line(s Status, now time.Time) string {
	st := s.Step
	elapsed := max(now.Sub(s.Started), 0)
	var b strings.Builder
	if st.Run > 0 {
		fmt.Fprintf(&b, "run %d %s", st.Run, st.Mode)
	}
	if d.live != nil {
		// A fleet: how many agents can run, of those expected.
		if ready, expected := d.live.Agents(); expected > 1 || ready < expected {
			fmt.Fprintf(&b, " | agents %d/%d ready", ready, expected)
		}
	}
	var left time.Duration
	switch st.Kind {
	case sweep.StepSwitch:
		if st.Run == 0 {
			return "restoring mode " + st.Mode
		}
		fmt.Fprintf(&b, " | switching to %s", st.Mode)
		left = max(st.Duration-elapsed, 0)
	case sweep.StepGate:
		fmt.Fprintf(&b, " | waiting for readiness %s", elapsed.Round(time.Second))
	case sweep.StepPrime:
		b.WriteString(" | priming")
	case sweep.StepWarmup, sweep.StepMeasure:
		phase := "measure"
		levelLeft := max(s.Warmup+s.Measure-elapsed, 0)
		switch {
		case elapsed < s.Warmup:
			phase = "warm-up"
		case elapsed >= s.Warmup+s.Measure:
			phase = "drain"
		}
		fmt.Fprintf(&b, " | level %d (%d/%d) %s, %s left", st.Level, s.Done+1, s.Total, phase, fmtLeft(levelLeft))
		left = levelLeft
		if d.live != nil {
			since := later(s.Started, now.Add(-DefaultLiveSpan))
			if phase != "warm-up" {
				since = later(since, s.Started.Add(s.Warmup))
			}
			ls := d.live.Stats(since, now)
			p95 := "-"
			if ls.TTFTP95 > 0 {
				p95 = ls.TTFTP95.Round(time.Millisecond).String()
			}
			fmt.Fprintf(&b, " | TTFT p95 %s, errors %.1f%% (%d turns, last %s)", p95, 100*ls.ErrorRate(),
				ls.Requests+ls.Errors, fmtLeft(now.Sub(since)))
			if ls.LastError != "" {
				fmt.Fprintf(&b, ", latest error %s", ls.LastError)
			}
		}
	case sweep.StepCooldown:
		left = max(st.Duration-elapsed, 0)
		fmt.Fprintf(&b, " | level %d cooldown, %s left", st.Level, fmtLeft(left))
	case StepDone:
		return fmt.Sprintf("sweep done: %d/%d points", s.Done, s.Total)
	}
	fmt.Fprintf(&b, " | sweep %s left", fmtLeft(left+s.After))
	return strings.TrimPrefix(b.String(), " | ")
}

func fmtLeft(d time.Duration) string { return d.Round(time.Second).String() }

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
