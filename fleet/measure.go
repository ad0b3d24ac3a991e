package fleet

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/fleetbench/fleetbench/coordinator"
	"github.com/fleetbench/fleetbench/pkg/record"
	"github.com/fleetbench/fleetbench/pkg/result"
)

// StageResult returns stage i of res, nil when it has none. A stage cut
// short by the end of the run's ctx is there, marked Interrupted.
func StageResult(res *coordinator.Result, i int) *coordinator.StageResult {
	if res == nil {
		return nil
	}
	for _, s := range res.Stages {
		if s.Index == i {
			return s
		}
	}
	return nil
}

// StageWindows returns the stage's measured windows that count (not
// re-run), in order, from res.
func StageWindows(res *coordinator.Result, st *coordinator.StageResult) []*coordinator.WindowResult {
	byID := make(map[uint32]*coordinator.WindowResult, len(res.Windows))
	for _, w := range res.Windows {
		byID[w.ID] = w
	}
	var out []*coordinator.WindowResult
	for _, id := range st.Windows {
		if w := byID[id]; w != nil && w.Kind == coordinator.KindMeasure && !w.Rerun {
			out = append(out, w)
		}
	}
	return out
}

// Measurement is one stage's measurement: the merge of its measured
// windows (late samples included), the windows' data for snapshots, their
// time span and summed length, the agents' coverage and how many agents
// took part. The caller owns it.
type Measurement struct {
	Window     *record.Window
	Snapshots  []*record.Window
	Start, End time.Time
	Duration   time.Duration
	Coverage   float64
	Agents     int
}

// MeasureStage merges the measured windows of st. Percentiles come from
// the merged histograms, never from averaging the windows'.
func MeasureStage(res *coordinator.Result, st *coordinator.StageResult) (*Measurement, error) {
	ws := StageWindows(res, st)
	if len(ws) == 0 {
		return nil, fmt.Errorf("stage %d (level %d): no measured window", st.Index, st.Level)
	}
	m := &Measurement{}
	var covered, planned float64
	agents := map[string]bool{}
	for _, w := range ws {
		data, err := w.Merged()
		if err != nil {
			return nil, fmt.Errorf("merge window %d: %w", w.ID, err)
		}
		m.Snapshots = append(m.Snapshots, data)
		if m.Window == nil {
			m.Window = data.Clone()
		} else if err := m.Window.Merge(data); err != nil {
			return nil, fmt.Errorf("merge window %d: %w", w.ID, err)
		}
		if m.Start.IsZero() || w.Start.Before(m.Start) {
			m.Start = w.Start
		}
		if w.End.After(m.End) {
			m.End = w.End
		}
		d := w.End.Sub(w.Start)
		m.Duration += d
		// Coverage: agent-seconds delivered over agent-seconds planned,
		// every agent of the window for its whole length. A restarted
		// agent has two entries but one planned share.
		inWindow := map[string]bool{}
		for _, c := range w.Coverage {
			agents[c.Agent], inWindow[c.Agent] = true, true
			covered += c.Seconds
		}
		planned += float64(len(inWindow)) * d.Seconds()
	}
	m.Coverage = 1
	if planned > 0 {
		m.Coverage = min(covered/planned, 1)
	}
	m.Agents = len(agents)
	return m, nil
}

// ErrNothingMeasured is wrapped by the error of a command whose stage (a
// level of a run, sweep or coordinator) measured not one request: such a
// stage is an error in every output, never a row of zeros.
var ErrNothingMeasured = errors.New("measured no requests")

// AgentNotes returns one line per agent that did not simply run: failed
// (with the reason it gave), lost, never ready, or warned.
func AgentNotes(statuses []coordinator.AgentStatus) []string {
	var out []string
	for _, s := range statuses {
		if s.State != coordinator.StateReady || len(s.Warnings) > 0 {
			out = append(out, s.String())
		}
	}
	return out
}

// notesSuffix is ": note; note" or "".
func notesSuffix(notes []string) string {
	if len(notes) == 0 {
		return ""
	}
	return " (agents: " + strings.Join(notes, "; ") + ")"
}

// EarlyJudge returns a coordinator.Config.Judge that checks ths on a
// stage's measurement so far (goodput counted against slo) and, at the
// first failure, returns a *result.ThresholdError naming the stage: the
// run stops early (k6's abortOnFail) and exits as a failed threshold.
func EarlyJudge(ths []result.Threshold, slo result.SLO) func(stage int, measured *record.Window, elapsed time.Duration) error {
	return func(stage int, measured *record.Window, elapsed time.Duration) error {
		if elapsed <= 0 || measured.Counters.Requests+measured.Counters.Failed == 0 {
			return nil
		}
		end := time.Now()
		facts := result.Load{}.Facts(end.Add(-elapsed), end, elapsed)
		facts.SLO = slo
		sum, err := result.New(measured, facts)
		if err != nil {
			return fmt.Errorf("judge stage %d: %w", stage, err)
		}
		var failed []result.Verdict
		for _, th := range ths {
			if v := th.Check(sum, measured); !v.Pass {
				v.Raw = fmt.Sprintf("stage %d after %s (stopped early)", stage, elapsed.Round(time.Second)) + ": " + v.Raw
				failed = append(failed, v)
			}
		}
		if len(failed) > 0 {
			return &result.ThresholdError{Failed: failed}
		}
		return nil
	}
}
