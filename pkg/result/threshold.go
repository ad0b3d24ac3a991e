package result

import (
	"fmt"
	"io"

	"github.com/fleetbench/fleetbench/pkg/judge"
	"github.com/fleetbench/fleetbench/pkg/record"
)

// The judgements live in pkg/judge; these names keep result's callers
// (commands, fleet, the wire) unchanged.
type (
	// SLO is judge.SLO: vLLM's --goodput objectives.
	SLO = judge.SLO
	// Threshold is judge.Threshold: a pass/fail criterion on a result.
	Threshold = judge.Threshold
	// Verdict is judge.Verdict: one threshold checked.
	Verdict = judge.Verdict
	// ThresholdError is judge.ThresholdError: the thresholds that failed.
	ThresholdError = judge.ThresholdError
)

// ErrThreshold is judge.ErrThreshold, wrapped by ParseThreshold's errors.
var ErrThreshold = judge.ErrThreshold

// ParseSLO parses vLLM's goodput form (judge.ParseSLO).
func ParseSLO(s string) (SLO, error) { return judge.ParseSLO(s) }

// ParseThreshold parses one threshold (judge.ParseThreshold).
func ParseThreshold(s string) (Threshold, error) { return judge.ParseThreshold(s) }

// ThresholdRates returns the figures judge.Threshold.Check reads beside
// the window's latencies.
func (s *Summary) ThresholdRates() judge.Rates {
	return judge.Rates{
		Completed: s.Completed, Failed: s.Failed, Goodput: s.RequestGoodput,
		RequestThroughput: s.RequestThroughput, OutputThroughput: s.OutputThroughput,
	}
}

var _ judge.Rater = (*Summary)(nil)

// Judge checks every threshold, prints one pass/fail line each to out, and
// returns a *ThresholdError naming those that failed (nil when all pass).
func Judge(out io.Writer, ts []Threshold, s *Summary, w *record.Window) error {
	if len(ts) == 0 {
		return nil
	}
	var failed []Verdict
	var b blockWriter
	b.rule(" Thresholds ", '=')
	for _, t := range ts {
		v := t.Check(s, w)
		mark := "pass"
		if !v.Pass {
			mark, failed = "FAIL", append(failed, v)
		}
		fmt.Fprintf(&b, "%-4s %-30s measured %s\n", mark, t.Raw, v.Measured())
	}
	b.closeRule()
	if _, err := out.Write(b.Bytes()); err != nil {
		return fmt.Errorf("write thresholds: %w", err)
	}
	if len(failed) > 0 {
		return &ThresholdError{Failed: failed}
	}
	return nil
}
