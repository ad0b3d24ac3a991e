package fleet

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fleetbench/fleetbench/coordinator"
	"github.com/fleetbench/fleetbench/pkg/record"
	"github.com/fleetbench/fleetbench/pkg/result"
)

// keepStopped saves what a run stopped by fail-fast saw before it ended at
// end: the measurement window's turns, or the warm-up's when the stop came
// before the measurement began (see saveStopped). It returns why, joined
// with logErr (the request log's close error) and any error saving.
func (r *levelRun) keepStopped(mtr *meter, load result.Load, origin, end time.Time, why, logErr error) error {
	start, w := origin, mtr.peek(windowMeasure)
	if !sawTurns(w) {
		start, w = origin.Add(-r.cfg.Warmup), mtr.peek(windowWarmUp)
	}
	return r.saveStopped(w, load, start, end, why, logErr)
}

// keepFleetStopped is keepStopped for a run on agents, from the
// coordinator's result res (nil when it returned none): the measured
// windows of its stage, or its warm-up windows.
func (r *levelRun) keepFleetStopped(res *coordinator.Result, load result.Load, why, logErr error) error {
	if res == nil {
		return errors.Join(why, logErr)
	}
	w, start, end, err := stoppedWindow(res.Windows)
	if err != nil {
		return errors.Join(why, err, logErr)
	}
	return r.saveStopped(w, load, start, end, why, logErr)
}

// stoppedWindow merges what a stage stopped early saw: its measured
// windows, or its warm-up windows when none of those holds a turn; the
// span runs from the first window's start to the last turn's end. w is
// nil when no window holds a turn.
func stoppedWindow(ws []*coordinator.WindowResult) (w *record.Window, start, end time.Time, err error) {
	for _, kind := range []coordinator.Kind{coordinator.KindMeasure, coordinator.KindWarmup} {
		w, start, end = nil, time.Time{}, time.Time{}
		for _, wr := range ws {
			if wr.Kind != kind || wr.Rerun || wr.Data == nil {
				continue
			}
			data, err := wr.Merged()
			if err != nil {
				return nil, start, end, fmt.Errorf("merge window %d: %w", wr.ID, err)
			}
			if w == nil {
				w = data
			} else if err := w.Merge(data); err != nil {
				return nil, start, end, fmt.Errorf("merge window %d: %w", wr.ID, err)
			}
			if start.IsZero() || wr.Start.Before(start) {
				start = wr.Start
			}
			if w.LastEnd.After(end) {
				end = w.LastEnd
			}
		}
		if sawTurns(w) {
			return w, start, end, nil
		}
	}
	return nil, start, end, nil
}

// StoppedLevel is the error of a sweep level that fail-fast stopped, with
// what it saw: Window (nil when nothing) from Start to End. It unwraps to
// the fail-fast error (ErrAllFailed). It is immutable once returned.
type StoppedLevel struct {
	Err        error
	Window     *record.Window
	Start, End time.Time
}

func (e *StoppedLevel) Error() string { return e.Err.Error() }

func (e *StoppedLevel) Unwrap() error { return e.Err }

// SaveStopped writes what the stopped level saw to path as a result.json
// for load, marked "interrupted" and "stopped" with the reason, its top
// errors carrying the server's messages. It writes nothing without turns.
func (e *StoppedLevel) SaveStopped(path string, load result.Load) error {
	if !sawTurns(e.Window) {
		return nil
	}
	dur := max(e.End.Sub(e.Start), time.Millisecond)
	facts := load.Facts(e.Start, e.Start.Add(dur), dur)
	facts.Interrupted, facts.Stopped = true, e.Err.Error()
	sum, err := result.New(e.Window, facts)
	if err != nil {
		return fmt.Errorf("summarise stopped level: %w", err)
	}
	return result.WriteJSONFile(path, sum)
}

// sawTurns reports whether w holds a turn that ended.
func sawTurns(w *record.Window) bool {
	return w != nil && w.Counters.Requests+w.Counters.Failed > 0
}

// saveStopped writes w, the turns of a run stopped early from start to
// end, as result.json marked "interrupted" and "stopped" with why, its top
// errors carrying the server's messages, and returns why joined with
// logErr and any error saving. A w without turns saves nothing.
func (r *levelRun) saveStopped(w *record.Window, load result.Load, start, end time.Time, why, logErr error) error {
	if !sawTurns(w) {
		return errors.Join(why, logErr)
	}
	dur := max(end.Sub(start), time.Millisecond)
	facts := load.Facts(start, start.Add(dur), dur)
	facts.Interrupted = true
	facts.Stopped = why.Error()
	sum, err := result.New(w, facts)
	if err != nil {
		return errors.Join(why, fmt.Errorf("summarise stopped run: %w", err), logErr)
	}
	if err := result.WriteJSONFile(r.cfg.resultPath(), sum); err != nil {
		return errors.Join(why, err, logErr)
	}
	fmt.Fprintf(r.stdout, "Stopped early: %s is marked \"stopped\", with the %d failures by class and the server's messages.\n",
		r.cfg.resultPath(), sum.Failed)
	return errors.Join(why, logErr)
}

// stopReason is the "stopped" of a run's result.json: the failed threshold
// that --abort-on-fail stopped it for, or the interrupt; empty for a run
// that ran its course.
func stopReason(ctx context.Context, early error) string {
	switch {
	case early != nil:
		return "stopped early (--abort-on-fail): " + early.Error()
	case ctx.Err() != nil:
		return "interrupted (a signal): the measurement window was cut short"
	}
	return ""
}

// interruptedBeforeMeasure is the "stopped" reason of a run interrupted
// before its measurement window saw a turn, whose result.json then holds
// the warm-up's turns. It wraps ctx's error: the exit stays the interrupt's.
func interruptedBeforeMeasure(ctx context.Context) error {
	return fmt.Errorf("interrupted (a signal) in the warm-up, before the measurement window: result.json holds the warm-up's turns: %w", ctx.Err())
}

// derefErr is *p, nil for a nil p.
func derefErr(p *error) error {
	if p == nil {
		return nil
	}
	return *p
}
