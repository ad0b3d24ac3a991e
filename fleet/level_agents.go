package fleet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/fleetbench/fleetbench/coordinator"
	"github.com/fleetbench/fleetbench/pkg/client"
	"github.com/fleetbench/fleetbench/pkg/load"
	"github.com/fleetbench/fleetbench/pkg/record"
	"github.com/fleetbench/fleetbench/pkg/result"
	"github.com/fleetbench/fleetbench/pkg/workload"
)

// runAgents runs the level with a coordinator and Agents agents in this
// process (see Run), prints the vLLM block of the merged measurement
// and writes OutDir/result.json, as the single-engine run does.
func (r *levelRun) runAgents(ctx context.Context) (*result.Summary, error) {
	c := r.cfg
	logger := r.logger
	env, err := r.setUp(ctx)
	if err != nil {
		return nil, err
	}
	defer env.Close()
	target, model, reqLog := env.target, env.model, env.reqLog
	src, err := workload.Open(c.Workload, logger)
	if err != nil {
		return nil, err
	}
	var engOpts []load.Option
	if c.RampUp > 0 {
		engOpts = append(engOpts, load.WithRampUp(c.RampUp))
	}
	if c.SingleTurn {
		engOpts = append(engOpts, load.WithSingleTurn())
	}
	// Peaks per coordinator window, all from one origin so that the
	// measured windows' in-flight timelines merge tick by tick (the peak is
	// that of the summed count); which windows are measured is known only
	// at the end.
	origin := time.Now()
	var peaksMu sync.Mutex
	peaks := map[uint32]*result.Peaks{}
	observe := func(s *record.Sample) {
		peaksMu.Lock()
		p := peaks[s.Window]
		if p == nil {
			p = result.NewPeaks(origin)
			peaks[s.Window] = p
		}
		peaksMu.Unlock()
		p.Add(s)
		if reqLog != nil {
			_ = reqLog.Write(s) // the first error is sticky; Close reports it
		}
	}
	// The label names the mode, as the single engine's metrics do.
	stage := coordinator.Stage{Level: c.Load.Concurrency, RequestRate: c.Load.RequestRate, Warmup: c.Warmup, Duration: c.Duration, Mode: c.Label}
	if c.Load.OpenLoop() {
		stage.Level = 0
	}
	logger.Info("run starting", "target", client.RedactURL(target), "model", model, "workload", src.Name(), "agents", c.Agents,
		"concurrency", c.Load.Concurrency, "request_rate", c.Load.RequestRate, "warmup", c.Warmup, "duration", c.Duration)
	wl := c.Workload
	fc := Config{
		Agents: c.Agents, Stages: []coordinator.Stage{stage}, Client: c.clientConfig(target, model), Source: src,
		Workload:      workload.Config{Seed: wl.Seed, MaxTokens: wl.MaxTokens, SessionHeader: wl.SessionHeader},
		EngineOptions: engOpts, Observe: observe, Version: c.Version, SLO: c.SLO, FailFast: c.FailFast,
		Judge: c.earlyJudge(), Registerer: c.Registerer, Live: c.Live,
	}
	ss, stopScrape, err := r.startScrape(ctx, env)
	if err != nil {
		return nil, err
	}
	defer stopScrape()
	if ss != nil {
		fc.OnMeasureSpan = ss.schedule
	}
	res, runErr := Run(ctx, Quiet(logger.Named("fleet")), fc)
	if errors.Is(runErr, ErrAllFailed) {
		// Nothing worth measuring: every request failed the same way. What
		// was seen is kept, marked, for the server's messages.
		rl := c.resultLoad(target, model, src.Name())
		rl.MaxConcurrency, rl.Burstiness = stage.Level, 0
		return nil, r.keepFleetStopped(res, rl, runErr, env.closeRequestLog())
	}
	interrupted := ctx.Err() != nil
	var early *result.ThresholdError
	if errors.As(runErr, &early) {
		// Stopped early by a failed threshold: the measurement so far is
		// saved and judged below.
		interrupted, runErr = true, nil
	}
	if runErr != nil && !interrupted {
		return nil, fmt.Errorf("run load: %w", runErr)
	}
	logErr := env.closeRequestLog()
	var sm *Measurement
	st := StageResult(res, 0)
	if st != nil {
		sm, _ = MeasureStage(res, st)
	}
	if sm == nil || !sawTurns(sm.Window) {
		if ctx.Err() != nil && res != nil {
			if w, _, _, err := stoppedWindow(res.Windows); err == nil && sawTurns(w) {
				// Interrupted in the warm-up: what it saw is kept, marked.
				rl := c.resultLoad(target, model, src.Name())
				rl.MaxConcurrency, rl.Burstiness = stage.Level, 0
				return nil, r.keepFleetStopped(res, rl, interruptedBeforeMeasure(ctx), logErr)
			}
		}
		return nil, r.nothingMeasured(ctx, logErr)
	}
	dur := sm.Duration
	if interrupted {
		// Cut short: the measurement lasted until its last turn ended.
		dur = max(sm.Window.LastEnd.Sub(sm.Start), time.Millisecond)
	}
	rl := c.resultLoad(target, model, src.Name())
	rl.MaxConcurrency, rl.Burstiness = stage.Level, 0 // the fleet's open loop is Poisson, uncapped
	facts := rl.Facts(sm.Start, sm.Start.Add(dur), dur)
	merged := result.NewPeaks(origin)
	perAgent := map[string]int64{}
	for _, w := range StageWindows(res, st) {
		peaksMu.Lock()
		p := peaks[w.ID]
		peaksMu.Unlock()
		if err := merged.Merge(p); err != nil {
			return nil, fmt.Errorf("merge peaks: %w", err)
		}
		for _, cv := range w.Coverage {
			perAgent[cv.Agent] += cv.Requests
		}
	}
	facts.PeakOutputTokensPerSec, facts.PeakConcurrentRequests = merged.Max()
	facts.SLO, facts.AgentNotes = c.SLO, AgentNotes(st.Agents)
	facts.Interrupted = interrupted
	var earlyErr error // not a nil *ThresholdError, which is a non-nil error
	if early != nil {
		earlyErr = early
	}
	facts.Stopped = stopReason(ctx, earlyErr)
	if ss != nil {
		if interrupted {
			// The coordinator's loop ended with the run's context, so the
			// measured span's end never moved: read the server now, not
			// at the planned end.
			ss.schedule(0, sm.Start, time.Now())
		}
		facts.Server = ss.result(context.WithoutCancel(ctx), 0)
	}
	agents := make([]string, 0, len(perAgent))
	for _, id := range slices.Sorted(maps.Keys(perAgent)) {
		agents = append(agents, fmt.Sprintf("%s=%d", id, perAgent[id]))
	}
	return r.writeResult(ctx, sm.Window, facts, logErr, func(w io.Writer) {
		fmt.Fprintf(w, "Agents: %d, requests per agent: %s; start skew %s%s\n", sm.Agents, strings.Join(agents, " "),
			st.StartSkew.Round(time.Microsecond), degradedSuffix(st.Degraded))
	})
}
