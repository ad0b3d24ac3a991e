package fleet

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fleetbench/fleetbench/coordinator"
	"github.com/fleetbench/fleetbench/pkg/record"
	"github.com/fleetbench/fleetbench/pkg/result"
)

// WriteStages prints to w the vLLM block of each measured stage of res, a
// run of cfg, and writes its result.json to outDir/stage-<i>/; version is
// fleetbench's. Each stage's result is judged by ths after it is saved.
// A stage that measured nothing has no result: it is an error wrapping
// ErrNothingMeasured, returned after the other stages are written; else
// the failures of every stage are returned as one *result.ThresholdError.
func WriteStages(w io.Writer, res *coordinator.Result, cfg coordinator.Config, outDir, version string, ths []result.Threshold) error {
	var failed []result.Verdict
	var empty []string
	for _, s := range res.Stages {
		if s.Measured == nil || s.Measured.Counters.Requests+s.Measured.Counters.Failed == 0 {
			if !s.Interrupted {
				empty = append(empty, fmt.Sprintf("stage %d (level %d%s)%s", s.Index, s.Level, modeSuffix(s.Mode), notesSuffix(AgentNotes(s.Agents))))
			}
			continue
		}
		// The stage's measured time: its measured windows not re-run.
		var dur time.Duration
		var start, end time.Time
		for _, mw := range StageWindows(res, s) {
			dur += mw.End.Sub(mw.Start)
			if start.IsZero() || mw.Start.Before(start) {
				start = mw.Start
			}
			if mw.End.After(end) {
				end = mw.End
			}
		}
		if dur <= 0 {
			continue
		}
		load := result.Load{
			Target: cfg.Spec.Target, Model: cfg.Spec.Model, Workload: cfg.Spec.Workload.Kind, Version: version,
			Label: s.Mode, MaxConcurrency: s.Level, RequestRate: s.RequestRate, Backend: result.BackendFor(cfg.Spec.Endpoint),
			WorkerHeader: cfg.Spec.WorkerHeader,
		}
		if s.RequestRate > 0 {
			load.MaxConcurrency = 0
		}
		facts := load.Facts(start, end, dur)
		facts.SLO, facts.AgentNotes = cfg.Spec.SLO, AgentNotes(s.Agents)
		sum, err := result.New(s.Measured, facts)
		if err != nil {
			return fmt.Errorf("summarise stage %d: %w", s.Index, err)
		}
		fmt.Fprintf(w, "Stage %d (level %d%s%s)\n", s.Index, s.Level, modeSuffix(s.Mode), degradedSuffix(s.Degraded))
		if err := result.WriteBlock(w, sum); err != nil {
			return err
		}
		dir := filepath.Join(outDir, fmt.Sprintf("stage-%d", s.Index))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("write stage %d result: %w", s.Index, err)
		}
		if err := result.WriteJSONFile(filepath.Join(dir, "result.json"), sum); err != nil {
			return fmt.Errorf("write stage %d result: %w", s.Index, err)
		}
		var te *result.ThresholdError
		if err := result.Judge(w, ths, sum, s.Measured); errors.As(err, &te) {
			for _, v := range te.Failed {
				v.Raw = fmt.Sprintf("stage %d: %s", s.Index, v.Raw)
				failed = append(failed, v)
			}
		} else if err != nil {
			return err
		}
	}
	if len(empty) > 0 {
		return fmt.Errorf("%s: %w", strings.Join(empty, "; "), ErrNothingMeasured)
	}
	if len(failed) > 0 {
		return &result.ThresholdError{Failed: failed}
	}
	return nil
}

// PrintStages writes to w one line per stage of res with the fleet-wide
// percentiles.
func PrintStages(w io.Writer, res *coordinator.Result) {
	ms := func(d time.Duration) string { return fmt.Sprintf("%.1f", float64(d)/float64(time.Millisecond)) }
	fmt.Fprintf(w, "%-6s %-8s %-10s %9s %9s %9s %9s %9s %9s %9s %s\n",
		"stage", "level", "mode", "requests", "ttft_p50", "ttft_p95", "ttft_p99", "e2e_p50", "e2e_p99", "skew_ms", "degraded")
	for _, s := range res.Stages {
		m := s.Measured
		if m == nil {
			continue
		}
		if m.Counters.Requests+m.Counters.Failed == 0 {
			fmt.Fprintf(w, "%-6d %-8d %-10s %9s (no request measured)\n", s.Index, s.Level, s.Mode, "-")
			continue
		}
		ttft, e2e := m.Hist[record.TTFT], m.Hist[record.E2E]
		fmt.Fprintf(w, "%-6d %-8d %-10s %9d %9s %9s %9s %9s %9s %9s %t\n",
			s.Index, s.Level, s.Mode, m.Counters.Requests, ms(ttft.Percentile(50)), ms(ttft.Percentile(95)),
			ms(ttft.Percentile(99)), ms(e2e.Percentile(50)), ms(e2e.Percentile(99)), ms(s.StartSkew), s.Degraded)
	}
	if len(res.Agents) > 0 {
		fmt.Fprintln(w, "Agents:")
		for _, a := range res.Agents {
			fmt.Fprintf(w, "  %s\n", a)
		}
	}
}

func modeSuffix(mode string) string {
	if mode == "" {
		return ""
	}
	return ", mode " + mode
}

func degradedSuffix(d bool) string {
	if d {
		return ", degraded: an agent was lost or failed"
	}
	return ""
}
