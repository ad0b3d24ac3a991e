package sweeprun

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fleetbench/fleetbench/pkg/sweep"
)

// Progress display intervals: a terminal's status line is redrawn often,
// a log gets a line now and then.
const (
	DefaultRedrawEvery = 500 * time.Millisecond
	DefaultLogEvery    = 10 * time.Second
)

// Display shows the progress of a whole sweep: the current mode, level and
// phase, the time left in the level and in the sweep, and the live TTFT p95
// and error rate. On a terminal it redraws one status line; otherwise it
// logs a line every DefaultLogEvery. Update may be called from any
// goroutine; Run owns the output.
type Display struct {
	out     io.Writer
	tty     bool
	status  *statusLine
	log     hclog.Logger
	live    *Live
	now     func() time.Time
	updates chan Status
}

// NewDisplay returns a display writing to out (redrawn in place when tty)
// or logging to logger, with live figures from live (may be nil).
func NewDisplay(out io.Writer, tty bool, logger hclog.Logger, live *Live) *Display {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	d := &Display{out: out, tty: tty, log: logger.Named("progress"), live: live, now: time.Now, updates: make(chan Status, 16)}
	if tty {
		d.status = &statusLine{out: out}
	}
	return d
}

// LogOutput returns the writer logs should go to while the display runs:
// on a terminal one that prints each log line above the status line
// (clearing it first and drawing it again after), else out itself.
func (d *Display) LogOutput() io.Writer {
	if d.status != nil {
		return d.status
	}
	return d.out
}

// statusLine is a terminal's last line, kept for a status: whatever else is
// written goes above it. Safe for concurrent use.
type statusLine struct {
	mu   sync.Mutex
	out  io.Writer
	line string
}

// Write writes p above the status line.
func (s *statusLine) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.line != "" {
		_, _ = io.WriteString(s.out, "\r\x1b[K")
	}
	n, err := s.out.Write(p)
	if s.line != "" && (len(p) == 0 || p[len(p)-1] == '\n') {
		_, _ = io.WriteString(s.out, s.line)
	}
	return n, err
}

// set draws line as the status line; "" clears it.
func (s *statusLine) set(line string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if line != "" || s.line != "" {
		_, _ = io.WriteString(s.out, "\r\x1b[K"+line)
	}
	s.line = line
}

// Update hands the runner's latest status to the display. It never blocks
// the runner: when the display lags, the status is dropped.
func (d *Display) Update(s Status) {
	select {
	case d.updates <- s:
	default:
	}
}

// Run shows progress until ctx is done, then clears the status line.
func (d *Display) Run(ctx context.Context) {
	every := DefaultLogEvery
	if d.tty {
		every = DefaultRedrawEvery
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	var cur Status
	have := false
	for {
		select {
		case <-ctx.Done():
			if d.status != nil {
				d.status.set("")
			}
			return
		case s := <-d.updates:
			cur, have = s, true
			if d.status != nil {
				d.status.set(d.Line(cur, d.now()))
			}
		case <-tick.C:
			if !have || cur.Step.Kind == StepDone {
				continue
			}
			line := d.Line(cur, d.now())
			if d.status != nil {
				d.status.set(line)
			} else {
				d.log.Info("sweep progress", "status", line)
			}
		}
	}
}

// Line is the status line of s at now.
func (d *Display) Line(s Status, now time.Time) string {
	st := s.Step
	elapsed := max(now.Sub(s.Started), 0)
	var b strings.Builder
	if st.Run > 0 {
		fmt.Fprintf(&b, "run %d %s", st.Run, st.Mode)
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
