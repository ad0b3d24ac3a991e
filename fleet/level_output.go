package fleet

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/fleetbench/fleetbench/pkg/record"
	"github.com/fleetbench/fleetbench/pkg/report"
	"github.com/fleetbench/fleetbench/pkg/result"
)

// nothingMeasured is the outcome of a run whose measurement window saw no
// turn: the interrupt that cut it short, or an error. logErr is the request
// log's close error, which is reported either way.
func (r *levelRun) nothingMeasured(ctx context.Context, logErr error) error {
	if ctx.Err() != nil {
		r.logRequestLogErr(logErr)
		fmt.Fprintln(r.stdout, "Interrupted before any turn of the measurement window was sent; nothing to report.")
		return errors.Join(ctx.Err(), logErr)
	}
	return errors.Join(fmt.Errorf("%w: no turn was sent in the measurement window", ErrNothingMeasured), logErr)
}

// writeResult summarises the measurement window w, prints the vLLM block
// (then extra, when not nil) and writes OutDir/result.json. logErr, the
// request log's close error, fails the run after the result is saved:
// requests.jsonl is incomplete and the user asked for it.
func (r *levelRun) writeResult(ctx context.Context, w *record.Window, facts result.Facts, logErr error, extra func(io.Writer)) (*result.Summary, error) {
	sum, err := result.New(w, facts)
	if err != nil {
		return nil, fmt.Errorf("summarise result: %w", err)
	}
	if err := result.WriteBlock(r.stdout, sum); err != nil {
		return sum, err
	}
	if extra != nil {
		extra(r.stdout)
	}
	if err := result.WriteJSONFile(r.cfg.resultPath(), sum); err != nil {
		return sum, errors.Join(err, logErr)
	}
	// The window's histograms, for `fleetbench report OUT ...` to compare
	// runs with the same statistics as sweeps.
	pt := &report.Point{
		Run: 1, Mode: r.cfg.Label, Level: facts.MaxConcurrency, RPS: facts.RequestRate, Window: w,
		MeasureStart: facts.Start, MeasureEnd: facts.End, Coverage: 1, SLO: facts.SLO.String(), AgentNotes: facts.AgentNotes,
		Server: facts.Server,
	}
	if err := report.WritePoint(r.cfg.OutDir, pt, "[fleetbench run "+r.cfg.Label+"]"); err != nil {
		return sum, errors.Join(err, logErr)
	}
	if facts.Interrupted && ctx.Err() != nil {
		fmt.Fprintln(r.stdout, "Interrupted: the measurement window was cut short; result.json is marked \"interrupted\": true.")
		r.logRequestLogErr(logErr)
		return sum, errors.Join(ctx.Err(), logErr)
	}
	if facts.Interrupted {
		fmt.Fprintln(r.stdout, "Stopped early (--abort-on-fail): a threshold failed; result.json is marked \"interrupted\": true.")
	}
	if sum.Completed == 0 {
		// Every request failed: the result is saved, and the run fails
		// with the most frequent reason.
		top, most := "unknown", int64(0)
		for _, cc := range sum.ErrorsByClass {
			if cc.Count > most {
				top, most = string(cc.Class), cc.Count
			}
		}
		return sum, errors.Join(fmt.Errorf("%w: %d requests, most of them %s (see the errors by class in %s)", ErrAllFailed,
			sum.Failed, top, r.cfg.resultPath()), logErr)
	}
	if err := result.Judge(r.stdout, r.cfg.Thresholds, sum, w); err != nil {
		return sum, errors.Join(err, logErr)
	}
	return sum, logErr
}

// logRequestLogErr logs the request log's close error on an interrupted
// run, whose exit reports only the interrupt.
func (r *levelRun) logRequestLogErr(err error) {
	if err != nil {
		r.logger.Error("request log incomplete", "error", err)
	}
}
