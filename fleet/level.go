package fleet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fleetbench/fleetbench/coordinator"
	"github.com/fleetbench/fleetbench/internal/progress"
	"github.com/fleetbench/fleetbench/pkg/client"
	"github.com/fleetbench/fleetbench/pkg/hdr"
	"github.com/fleetbench/fleetbench/pkg/load"
	"github.com/fleetbench/fleetbench/pkg/loadmetrics"
	"github.com/fleetbench/fleetbench/pkg/ready"
	"github.com/fleetbench/fleetbench/pkg/record"
	"github.com/fleetbench/fleetbench/pkg/report"
	"github.com/fleetbench/fleetbench/pkg/result"
	"github.com/fleetbench/fleetbench/pkg/sim"
	"github.com/fleetbench/fleetbench/pkg/ui"
	"github.com/fleetbench/fleetbench/pkg/workload"
)

// Windows of a single-engine run: warm-up turns are stamped 0 and
// discarded; the measurement window is 1.
const (
	windowWarmUp  uint32 = 0
	windowMeasure uint32 = 1
)

// InterruptDrain bounds the wait for turns in flight after an interrupt
// (the planned end waits up to RunConfig.Drain).
const InterruptDrain = 3 * time.Second

// Run runs the level: it validates c, starts the simulator when c has no
// target, runs the load (one engine, or c.Agents agents and a coordinator)
// while it shows its progress on stderr, then prints vLLM's result block
// to stdout and writes OutDir/result.json, and returns the summary. Logs go
// to a sub-logger of logger named "run" (above the progress line when
// stderr is a terminal).
//
// When ctx ends (an interrupt), the turns in flight get InterruptDrain to
// end; what was measured is still printed and saved, marked interrupted,
// and Run returns the summary with ctx's error. Every goroutine it starts
// has ended when it returns.
func (c RunConfig) Run(ctx context.Context, logger hclog.Logger, stdout, stderr io.Writer) (*result.Summary, error) {
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("check run: %w", err)
	}
	lr := &levelRun{cfg: c, logger: logger.Named("run"), stdout: stdout, stderr: stderr}
	if c.Agents > 0 {
		return lr.runAgents(ctx)
	}
	return lr.run(ctx)
}

// ErrAllFailed is returned by RunConfig.Run, after the result is saved,
// when every request of the measurement failed, and wrapped by a fleet's
// error when its fail-fast found every request of a stage failing one way
// (it is coordinator.ErrAllFailed).
var ErrAllFailed = coordinator.ErrAllFailed

// levelRun is one call of RunConfig.Run.
type levelRun struct {
	cfg            RunConfig
	logger         hclog.Logger
	stdout, stderr io.Writer
}

// runEnv is what both kinds of run set up before the load starts: the
// output directory, the target (the in-process simulator when the config
// has none) and the optional request log.
type runEnv struct {
	target, model string
	// reqLog is nil without SaveRequests.
	reqLog *result.RequestLog
	sim    *sim.Sim
}

// setUp prepares a run's environment; the caller must Close it.
func (r *levelRun) setUp(ctx context.Context) (_ *runEnv, err error) {
	c := r.cfg
	if err := os.MkdirAll(c.OutDir, 0o755); err != nil {
		return nil, fmt.Errorf("create output directory: %w", err)
	}
	env := &runEnv{target: c.Client.BaseURL, model: c.Client.Model}
	defer func() {
		if err != nil {
			env.Close()
		}
	}()
	if env.target == "" {
		if env.sim, err = r.startSim(ctx); err != nil {
			return nil, err
		}
		env.target, env.model = env.sim.URL(), env.sim.Config().Model
	}
	if c.Client.BaseURL != "" && !c.SkipPreflight {
		cc := c.Client
		cc.BaseURL, cc.Model = env.target, env.model
		if err := ready.Preflight(ctx, cc, 0, r.logger.Named("preflight")); err != nil {
			return nil, err
		}
	}
	if c.SaveRequests {
		if env.reqLog, err = result.CreateRequestLog(filepath.Join(c.OutDir, "requests.jsonl"), time.Now()); err != nil {
			return nil, err
		}
	}
	return env, nil
}

// closeRequestLog flushes and closes the request log, once the load has
// stopped; nil without SaveRequests.
func (e *runEnv) closeRequestLog() error {
	if e.reqLog == nil {
		return nil
	}
	return e.reqLog.Close()
}

// Close releases what setUp started; the request log's own error is
// reported by closeRequestLog, so Close on an early return loses nothing
// the user was promised.
func (e *runEnv) Close() {
	_ = e.closeRequestLog()
	if e.sim != nil {
		_ = e.sim.Close()
	}
}

// startSim starts the built-in simulator in-process on a loopback port.
func (r *levelRun) startSim(ctx context.Context) (*sim.Sim, error) {
	c := r.cfg
	cfg, err := sim.ProfileConfig(c.Sim.Profile)
	if err != nil {
		return nil, fmt.Errorf("simulator profile: %w", err)
	}
	if c.Sim.Replicas > 0 {
		cfg.Replicas = c.Sim.Replicas
	}
	mode, err := sim.ParseMode(c.Sim.Router)
	if err != nil {
		return nil, err
	}
	cfg.Router, cfg.TimeScale, cfg.Listen = mode, c.Sim.TimeScale, "127.0.0.1:0"
	if c.Client.Model != "" {
		cfg.Model = c.Client.Model
	}
	// The workload's natural stop is the simulator's natural-stop model:
	// only the cap is sent, so answers end on their own.
	if c.Workload.NaturalStop {
		cfg.Output.UntilMaxTokens = false
	}
	s, err := sim.New(cfg, r.logger, nil)
	if err != nil {
		return nil, fmt.Errorf("create simulator: %w", err)
	}
	// The simulator outlives the run's signal so turns can drain; Close
	// stops it.
	if err := s.Start(context.WithoutCancel(ctx)); err != nil {
		return nil, fmt.Errorf("start simulator: %w", err)
	}
	r.logger.Info("simulator started", "url", s.URL(), "profile", cfg.Profile, "replicas", cfg.Replicas, "router", cfg.Router)
	return s, nil
}

// run is the single-engine run.
func (r *levelRun) run(ctx context.Context) (*result.Summary, error) {
	c := r.cfg
	// The progress display comes first: on a terminal every log line from
	// here on goes above its status line.
	disp := progress.New(r.stderr, progress.IsTerminal(r.stderr), r.logger, "progress", levelStatus.line)
	if rl, ok := r.logger.(hclog.OutputResettable); ok && disp.LogOutput() != r.stderr {
		// Only this sub-logger (and those made from it) changes; the
		// caller's keeps its output.
		if err := rl.ResetOutput(&hclog.LoggerOptions{Output: disp.LogOutput()}); err != nil {
			return nil, fmt.Errorf("set log output: %w", err)
		}
	}
	logger := r.logger
	env, err := r.setUp(ctx)
	if err != nil {
		return nil, err
	}
	defer env.Close()
	target, model, reqLog := env.target, env.model, env.reqLog

	cl, err := client.New(c.clientConfig(target, model), logger)
	if err != nil {
		return nil, fmt.Errorf("create client: %w", err)
	}
	defer cl.Close()

	src, err := workload.Open(c.Workload, logger)
	if err != nil {
		return nil, err
	}

	rec := record.NewRecorder(hdr.Default)
	if !c.SLO.IsZero() {
		rec.SetGood(c.SLO.Good)
	}
	var sink loadmetrics.Sink
	if c.Registerer != nil {
		ld, err := loadmetrics.NewLoad(c.Registerer)
		if err != nil {
			return nil, err
		}
		sink = ld
	}
	if c.Live != nil && c.Live.Feed != nil {
		sink = loadmetrics.Tee(sink, c.Live.Feed)
	}
	// The level asked for: the closed loop's sessions (0 in the open loop).
	level := c.Load.Concurrency
	if c.Load.OpenLoop() {
		level = 0
	}
	mtr := newMeter(rec, sink, logger, c.Label, level)
	origin := time.Now().Add(c.Warmup)
	peaks := result.NewPeaks(origin)
	tally := newTally()
	observe := func(s *record.Sample) {
		tally.add(s) // the warm-up's too: errors show from the first second
		if s.Window == windowMeasure {
			peaks.Add(s)
		}
		if reqLog != nil {
			_ = reqLog.Write(s) // the first error is sticky; Close reports it
		}
	}

	opts := []load.Option{load.WithObserver(observe), load.WithDrainTimeout(c.Drain), load.WithRampUp(c.RampUp)}
	if c.Warmup == 0 {
		opts = append(opts, load.WithWindow(windowMeasure))
	}
	if c.SingleTurn {
		opts = append(opts, load.WithSingleTurn())
	}
	ecfg := c.engineConfig()
	if err := load.CheckFileLimit(ecfg.Concurrency); err != nil {
		logger.Warn("open-file limit too low for the sessions", "error", err)
	}
	eng, err := load.New(ecfg, src, cl, rec, logger, opts...)
	if err != nil {
		return nil, err
	}

	// The server's metrics over the measurement: from origin to its
	// planned end, or to the end of a run cut short.
	ss, stopScrape, err := r.startScrape(ctx, env)
	if err != nil {
		return nil, err
	}
	defer stopScrape()
	planned := origin.Add(c.Duration)
	if c.Duration == 0 {
		planned = origin.Add(unboundedRun) // a budget: until it is spent
	}
	if ss != nil {
		ss.schedule(0, origin, planned)
	}

	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	if c.Duration > 0 {
		runCtx, stopRun = context.WithTimeout(ctx, c.Warmup+c.Duration)
		defer stopRun()
	}
	logger.Info("run starting", "target", client.RedactURL(target), "model", model, "workload", src.Name(),
		"concurrency", c.Load.Concurrency, "request_rate", c.Load.RequestRate, "warmup", c.Warmup, "duration", c.Duration)

	// Two goroutines, owned here: one moves the window and cuts the drain
	// short after an interrupt, the other shows the progress until the
	// load ends or is interrupted.
	var wg sync.WaitGroup
	ran := make(chan struct{})
	dctx, stopDisplay := context.WithCancel(ctx)
	disp.Update(levelStatus{tally: tally, eng: eng, origin: origin, warmup: c.Warmup, duration: c.Duration})
	wg.Go(func() { disp.Run(dctx) })
	var failFast error
	// With AbortOnFail the measurement so far is judged every few
	// seconds; a failed threshold stops the run (stopped is then set).
	var stopped atomic.Bool
	var judge func(now time.Time) bool
	if j := c.earlyJudge(); j != nil {
		judge = func(now time.Time) bool {
			w := mtr.peek(windowMeasure)
			if w == nil || now.Before(origin) {
				return true
			}
			if err := j(0, w, now.Sub(origin)); err != nil {
				logger.Error("stopping early", "error", err)
				stopped.Store(true)
				return false
			}
			return true
		}
	}
	wg.Go(func() {
		failFast = r.watch(ctx, ran, eng, origin, tally, stopRun, judge)
	})
	mctx, stopMeter := context.WithCancel(ctx)
	wg.Go(func() { mtr.run(mctx, eng, c.Load.OpenLoop(), c.Warmup > 0) })
	if !c.Load.OpenLoop() {
		defer c.Live.attach(ui.ControllerFunc(func(_ context.Context, n int) error {
			if err := eng.SetConcurrency(n); err != nil {
				return err
			}
			// At once, as the coordinator does, not at the meter's next
			// tick: the page draws the baseline at the target.
			c.Live.setTarget(n)
			return nil
		}))()
	}
	runErr := eng.Run(runCtx)
	close(ran)
	stopDisplay()
	stopMeter()
	wg.Wait()
	end := time.Now()
	if failFast != nil {
		// Nothing worth measuring: every request failed the same way. What
		// was seen is kept, marked, for the server's messages.
		return nil, r.keepStopped(mtr, c.resultLoad(target, model, src.Name()), origin, end, failFast, env.closeRequestLog())
	}
	if runErr != nil {
		return nil, fmt.Errorf("run load: %w", runErr)
	}
	logErr := env.closeRequestLog()

	interrupted := ctx.Err() != nil || stopped.Load()
	// The last intervals reach the metrics too, before the result is
	// written.
	w, err := mtr.measured()
	if err != nil {
		return nil, errors.Join(err, logErr)
	}
	if w == nil || w.Counters.Requests+w.Counters.Failed == 0 {
		return nil, r.nothingMeasured(ctx, logErr)
	}
	// A run cut short (by the budget or a signal) lasts until its last
	// turn ended; a full run lasts the planned duration, as the turns sent
	// in it are the measurement.
	dur := c.Duration
	if dur == 0 || interrupted || end.Before(origin.Add(c.Duration)) {
		dur = w.LastEnd.Sub(origin)
	}
	if dur <= 0 {
		dur = time.Millisecond
	}
	if late := w.Counters.LateSends; late > 0 && late*100 >= w.Counters.Requests+w.Counters.Failed {
		// Sends behind schedule in a closed loop mean this process could
		// not keep up (CPU, connections); the lag is in the "from intended
		// send" figures.
		logger.Warn("the load generator fell behind its schedule; see the schedule lag figures",
			"late_sends", late, "threshold", load.DefaultLateThreshold)
	}
	facts := c.resultLoad(target, model, src.Name()).Facts(origin, origin.Add(dur), dur)
	facts.PeakOutputTokensPerSec, facts.PeakConcurrentRequests = peaks.Max()
	facts.SLO = c.SLO
	facts.Interrupted = interrupted
	if ss != nil {
		if end.Before(planned) {
			ss.schedule(0, origin, end)
		}
		facts.Server = ss.result(context.WithoutCancel(ctx), 0)
	}
	return r.writeResult(ctx, w, facts, logErr, nil)
}

// unboundedRun stands for the planned end of a run without a duration.
const unboundedRun = 100 * 365 * 24 * time.Hour

// startScrape starts reading the run's --scrape endpoints (the in-process
// simulator's for "sim"); a nil serverScrape without any. Its readings
// outlive an interrupt, so the measured part of a run cut short is still
// read, each bounded by the scrape timeout; stop ends it.
func (r *levelRun) startScrape(ctx context.Context, env *runEnv) (*serverScrape, func(), error) {
	if len(r.cfg.Scrape.Endpoints) == 0 && r.cfg.Scrape.Pods == nil {
		return nil, func() {}, nil
	}
	simURL := ""
	if env.sim != nil {
		simURL = env.sim.URL()
	}
	sc, err := r.cfg.Scrape.WithDefaults().ResolveSim(simURL)
	if err != nil {
		return nil, nil, fmt.Errorf("scrape: %w", err)
	}
	return startServerScrape(context.WithoutCancel(ctx), sc, r.logger, r.cfg.Live)
}

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
