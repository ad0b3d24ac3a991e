package fleet

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fleetbench/fleetbench/coordinator"
	"github.com/fleetbench/fleetbench/pkg/servermetrics"
	"github.com/fleetbench/fleetbench/pkg/sweep/runner"
)

// Sweeper runs a whole sweep on one fleet: one coordinator run whose
// stages are the sweep's levels, the agents (local, or remote with
// Config.Remote) connected from the first level to the last. The sweep's
// switches, gates and cooldowns run from the coordinator's BeforeStage,
// with the agents idle; each level's measured time is cut into windows of
// Measure/Snapshots, and its measurement, the merge of those windows, goes
// to the runner as soon as the next stage is due (or the run ends). Run
// may be called once at a time.
type Sweeper struct {
	logger  hclog.Logger
	cfg     Config
	metrics *runner.Metrics
}

var _ runner.Fleet = (*Sweeper)(nil)

// NewSweeper returns a Sweeper of the fleet cfg (its Stages and hooks are
// the Sweeper's to set) that reports its level and points to metrics.
func NewSweeper(logger hclog.Logger, cfg Config, metrics *runner.Metrics) *Sweeper {
	return &Sweeper{logger: logger, cfg: cfg, metrics: metrics}
}

// Run runs levels on one coordinator run.
func (f *Sweeper) Run(ctx context.Context, levels []runner.Level, h runner.Hooks) error {
	cfg := f.cfg
	cfg.Stages = make([]coordinator.Stage, len(levels))
	for i, l := range levels {
		n := time.Duration(max(l.Snapshots, 1))
		cfg.Stages[i] = coordinator.Stage{
			Level: l.Key.Level, RequestRate: l.RequestRate, Mode: l.Key.Mode, Warmup: l.Warmup, Duration: l.Measure,
			ModeWarmup: l.ModeWarmup, ModeWarmupLevel: l.ModeWarmupLevel,
			// Rounded up so the last window is not a sliver.
			Window: (l.Measure + n - 1) / n,
		}
	}
	// The coordinator's loop calls OnWindowClosed and OnStageDone;
	// BeforeStage runs on its own goroutine, and the last stage is
	// delivered here after Run: mu orders them.
	var (
		mu      sync.Mutex
		windows []*coordinator.WindowResult
		ended   *coordinator.StageResult // measured, not yet delivered
	)
	ss, stopScrape, err := startScrape(ctx, &cfg, f.logger)
	if err != nil {
		return err
	}
	defer stopScrape()
	cfg.OnWindowClosed = func(w *coordinator.WindowResult) {
		mu.Lock()
		windows = append(windows, w)
		mu.Unlock()
	}
	cfg.OnStageDone = func(s *coordinator.StageResult) {
		if s.Interrupted {
			return // a level cut short is measured again on resume
		}
		mu.Lock()
		ended = s
		mu.Unlock()
	}
	deliver := func(ctx context.Context) error {
		mu.Lock()
		st := ended
		ended = nil
		res := &coordinator.Result{Windows: windows}
		if st != nil {
			// Later stages need none of the windows so far.
			windows = nil
		}
		mu.Unlock()
		if st == nil {
			return nil
		}
		sm, err := MeasureStage(res, st)
		if err != nil {
			return err
		}
		notes := AgentNotes(st.Agents)
		var server *servermetrics.Window
		if ss != nil {
			server = ss.result(ctx, st.Index)
		}
		if c := sm.Window.Counters; c.Requests+c.Failed == 0 {
			// Never a row of zeros: a level that measured nothing ends
			// the sweep with what the agents said.
			return fmt.Errorf("%w%s", ErrNothingMeasured, notesSuffix(notes))
		}
		if err := h.Done(st.Index, &runner.Measurement{
			Window: sm.Window, Snapshots: sm.Snapshots, Start: sm.Start, End: sm.End,
			Coverage: sm.Coverage, Degraded: st.Degraded, StartSkew: st.StartSkew, Agents: sm.Agents,
			AgentNotes: notes, Server: server,
		}); err != nil {
			return err
		}
		f.metrics.PointDone()
		return nil
	}
	cfg.BeforeStage = func(ctx context.Context, i int, _ coordinator.Stage) error {
		if err := deliver(ctx); err != nil {
			return err
		}
		f.metrics.SetLevel(0)
		if err := h.Before(ctx, i); err != nil {
			return err
		}
		f.metrics.SetLevel(levels[i].Key.Level)
		return nil
	}
	defer f.metrics.SetLevel(0)
	if _, err := Run(ctx, f.logger, cfg); err != nil {
		if errors.Is(err, ErrAllFailed) {
			// What the stopped level saw, for its errors to be kept.
			mu.Lock()
			w, start, end, werr := stoppedWindow(windows)
			mu.Unlock()
			return errors.Join(&StoppedLevel{Err: err, Window: w, Start: start, End: end}, werr)
		}
		return err
	}
	return deliver(ctx)
}

// startScrape starts reading the server's metrics over each stage's
// measured time when cfg.Scrape names endpoints, and hooks it to the
// coordinator's OnMeasureSpan; stop ends it once the last stage is
// delivered.
func startScrape(ctx context.Context, cfg *Config, logger hclog.Logger) (*serverScrape, func(), error) {
	ss, stop, err := startServerScrape(ctx, cfg.Scrape, logger, cfg.Live)
	if err != nil {
		return nil, nil, err
	}
	if ss != nil {
		cfg.OnMeasureSpan = ss.schedule
	}
	return ss, stop, nil
}
