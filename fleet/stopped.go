package fleet

import (
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
	for _, kind := range []coordinator.Kind{coordinator.KindMeasure, coordinator.KindWarmup} {
		var w *record.Window
		var start, end time.Time
		for _, wr := range res.Windows {
			if wr.Kind != kind || wr.Rerun || wr.Data == nil {
				continue
			}
			data, err := wr.Merged()
			if err != nil {
				return errors.Join(why, fmt.Errorf("merge window %d: %w", wr.ID, err), logErr)
			}
			if w == nil {
				w = data
			} else if err := w.Merge(data); err != nil {
				return errors.Join(why, fmt.Errorf("merge window %d: %w", wr.ID, err), logErr)
			}
			if start.IsZero() || wr.Start.Before(start) {
				start = wr.Start
			}
			if w.LastEnd.After(end) {
				end = w.LastEnd
			}
		}
		if sawTurns(w) {
			return r.saveStopped(w, load, start, end, why, logErr)
		}
	}
	return errors.Join(why, logErr)
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
