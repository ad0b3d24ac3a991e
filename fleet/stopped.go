package fleet

import (
	"errors"
	"fmt"
	"time"

	"github.com/fleetbench/fleetbench/pkg/result"
)

// keepStopped saves what a run stopped by fail-fast saw before it ended at
// end: the measurement window's turns, or the warm-up's when the stop came
// before the measurement began, as result.json marked "interrupted" and
// "stopped" with why, its top errors carrying the server's messages. Then
// it returns why, joined with logErr (the request log's close error) and
// any error saving the result.
func (r *levelRun) keepStopped(mtr *meter, load result.Load, origin, end time.Time, why, logErr error) error {
	start, w := origin, mtr.peek(windowMeasure)
	if w == nil || w.Counters.Requests+w.Counters.Failed == 0 {
		start, w = origin.Add(-r.cfg.Warmup), mtr.peek(windowWarmUp)
	}
	if w == nil || w.Counters.Requests+w.Counters.Failed == 0 {
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
