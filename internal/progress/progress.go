package progress

import (
	"context"
	"io"
	"os"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/term"
)

// Display intervals: a terminal's status line is redrawn often, a log gets
// a line now and then.
const (
	DefaultRedrawEvery = 500 * time.Millisecond
	DefaultLogEvery    = 10 * time.Second
)

// LineFunc returns the status line of s at now. ok false marks a status
// with nothing more to tell (a finished sweep): it is drawn when handed to
// Update, but neither redrawn nor logged on the ticks after.
type LineFunc[S any] func(s S, now time.Time) (line string, ok bool)

// Display shows a status S: Update hands it the latest status, Run owns
// the output and draws the line of the latest status. On a terminal the
// line is drawn at once on every Update and redrawn every
// DefaultRedrawEvery (so elapsed times move); otherwise a log line carries
// it every DefaultLogEvery. Update and LogOutput may be called from any
// goroutine; Run from one.
type Display[S any] struct {
	out     io.Writer
	status  *statusLine // nil when out is not a terminal
	log     hclog.Logger
	msg     string
	line    LineFunc[S]
	now     func() time.Time
	updates chan S
}

// New returns a display of line writing to out (redrawn in place when tty)
// or, when not tty, logging msg with the line under the key "status" to
// logger (may be nil: nothing is logged).
func New[S any](out io.Writer, tty bool, logger hclog.Logger, msg string, line LineFunc[S]) *Display[S] {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	d := &Display[S]{out: out, log: logger, msg: msg, line: line, now: time.Now, updates: make(chan S, 16)}
	if tty {
		d.status = &statusLine{out: out}
	}
	return d
}

// IsTerminal reports whether w is a terminal, which a Display redraws in
// place.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// LogOutput returns the writer logs should go to while the display runs:
// on a terminal one that prints each log line above the status line
// (clearing it first and drawing it again after), else out itself. It is
// safe for concurrent use.
func (d *Display[S]) LogOutput() io.Writer {
	if d.status != nil {
		return d.status
	}
	return d.out
}

// Update hands the latest status to the display. It never blocks the
// caller: when the display lags, the status is dropped.
func (d *Display[S]) Update(s S) {
	select {
	case d.updates <- s:
	default:
	}
}

// Run shows progress until ctx is done, then clears the status line.
func (d *Display[S]) Run(ctx context.Context) {
	every := DefaultLogEvery
	if d.status != nil {
		every = DefaultRedrawEvery
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	var cur S
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
				line, _ := d.line(cur, d.now())
				d.status.set(line)
			}
		case <-tick.C:
			if !have {
				continue
			}
			line, ok := d.line(cur, d.now())
			switch {
			case !ok:
			case d.status != nil:
				d.status.set(line)
			default:
				d.log.Info(d.msg, "status", line)
			}
		}
	}
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
