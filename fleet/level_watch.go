package fleet

import (
	"context"
	"fmt"
	"time"

	"github.com/fleetbench/fleetbench/coordinator"
	"github.com/fleetbench/fleetbench/pkg/load"
)

// watch moves the engine to the measurement window at origin (when there
// is a warm-up) until ran is closed. After an interrupt (ctx done) it
// gives the turns in flight InterruptDrain (at most Drain) to end, then
// aborts them.
//
// After FailFast, if every request so far failed with one class, it stops
// the run (stop ends the engine's context) and returns why.
//
// judge, when set, is called every coordinator.JudgeInterval; false stops
// the run.
func (r *levelRun) watch(ctx context.Context, ran <-chan struct{}, eng *load.Engine, origin time.Time, t *tally, stop func(), judge func(time.Time) bool) error {
	var judgeC <-chan time.Time
	if judge != nil {
		jt := time.NewTicker(coordinator.JudgeInterval)
		defer jt.Stop()
		judgeC = jt.C
	}
	var failFast <-chan time.Time
	if r.cfg.FailFast > 0 {
		ft := time.NewTimer(r.cfg.FailFast)
		defer ft.Stop()
		failFast = ft.C
	}
	var measure <-chan time.Time
	if r.cfg.Warmup > 0 {
		t := time.NewTimer(time.Until(origin))
		defer t.Stop()
		measure = t.C
	}
	interrupt := ctx.Done()
	var abort <-chan time.Time
	for {
		select {
		case <-ran:
			return nil
		case now := <-judgeC:
			if !judge(now) {
				judgeC = nil
				stop()
			}
		case <-failFast:
			failFast = nil
			if class, last, ok := t.allFailed(); ok {
				r.logger.Error("every request failed the same way; stopping early", "after", r.cfg.FailFast, "class", class)
				stop()
				eng.Abort()
				return fmt.Errorf("%w in the first %s, all %s (%s); stopped early (--fail-fast 0 keeps going)",
					ErrAllFailed, r.cfg.FailFast, class, last)
			}
		case <-interrupt:
			interrupt = nil
			grace := min(r.cfg.Drain, InterruptDrain)
			r.logger.Info("interrupted, finishing turns in flight; interrupt again to exit at once", "grace", grace)
			t := time.NewTimer(grace)
			defer t.Stop()
			abort = t.C
		case <-abort:
			abort = nil
			eng.Abort()
		case <-measure:
			measure = nil
			eng.SetWindow(windowMeasure)
			r.logger.Info("warm-up done, measuring", "duration", r.cfg.Duration)
		}
	}
}
