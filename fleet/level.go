package fleet

import (
	"context"
	"errors"
	"fmt"
	"io"
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
	"github.com/fleetbench/fleetbench/pkg/record"
	"github.com/fleetbench/fleetbench/pkg/result"
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

// run is the single-engine run, in named steps: show the progress, set up
// the environment, build the engine, schedule the server's metrics, run
// the load with its watchers, then write what it measured.
func (r *levelRun) run(ctx context.Context) (*result.Summary, error) {
	c := r.cfg
	disp, err := r.startDisplay()
	if err != nil {
		return nil, err
	}
	logger := r.logger
	env, err := r.setUp(ctx)
	if err != nil {
		return nil, err
	}
	defer env.Close()

	lv, err := r.build(env)
	if err != nil {
		return nil, err
	}
	defer lv.cl.Close()

	// The server's metrics over the measurement: from origin to its
	// planned end, or to the end of a run cut short.
	ss, stopScrape, err := r.startScrape(ctx, env)
	if err != nil {
		return nil, err
	}
	defer stopScrape()
	planned := lv.origin.Add(c.Duration)
	if c.Duration == 0 {
		planned = lv.origin.Add(unboundedRun) // a budget: until it is spent
	}
	if ss != nil {
		ss.schedule(0, lv.origin, planned)
	}

	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	if c.Duration > 0 {
		runCtx, stopRun = context.WithTimeout(ctx, c.Warmup+c.Duration)
		defer stopRun()
	}
	logger.Info("run starting", "target", client.RedactURL(env.target), "model", env.model, "workload", lv.src.Name(),
		"concurrency", c.Load.Concurrency, "request_rate", c.Load.RequestRate, "warmup", c.Warmup, "duration", c.Duration)

	out, detach := r.drive(ctx, runCtx, stopRun, disp, lv)
	defer detach()
	return r.finish(ctx, env, lv, ss, planned, out)
}

// startDisplay starts the progress display. It comes first: on a
// terminal every log line from here on goes above its status line.
func (r *levelRun) startDisplay() (*progress.Display[levelStatus], error) {
	disp := progress.New(r.stderr, progress.IsTerminal(r.stderr), r.logger, "progress", levelStatus.line)
	if rl, ok := r.logger.(hclog.OutputResettable); ok && disp.LogOutput() != r.stderr {
		// Only this sub-logger (and those made from it) changes; the
		// caller's keeps its output.
		if err := rl.ResetOutput(&hclog.LoggerOptions{Output: disp.LogOutput()}); err != nil {
			return nil, fmt.Errorf("set log output: %w", err)
		}
	}
	return disp, nil
}

// levelLoad is what build makes for the single-engine run before its
// load starts.
type levelLoad struct {
	cl     *client.Client
	src    workload.Source
	mtr    *meter
	origin time.Time
	peaks  *result.Peaks
	tally  *tally
	eng    *load.Engine
}

// build creates the client, the workload, the recorder and its meter, and
// the load engine against env's target. On an error it closes what it
// created; otherwise the caller closes lv.cl.
func (r *levelRun) build(env *runEnv) (_ *levelLoad, err error) {
	c, logger := r.cfg, r.logger
	target, model, reqLog := env.target, env.model, env.reqLog

	cl, err := client.New(c.clientConfig(target, model), logger)
	if err != nil {
		return nil, fmt.Errorf("create client: %w", err)
	}
	defer func() {
		if err != nil {
			cl.Close()
		}
	}()

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
	return &levelLoad{cl: cl, src: src, mtr: mtr, origin: origin, peaks: peaks, tally: tally, eng: eng}, nil
}

// loadOutcome is how the load of a single-engine run ended.
type loadOutcome struct {
	// failFast is why fail-fast stopped the run, nil when it did not.
	failFast error
	// runErr is the engine's.
	runErr error
	// end is when the load and its watchers had ended.
	end time.Time
	// stopped is set when a failed threshold stopped the run early;
	// early is that threshold's error.
	stopped bool
	early   error
}

// drive runs lv's load until runCtx ends, with the display, the watcher
// and the meter beside it, and waits for all of them. stopRun ends
// runCtx. The caller defers detach, which unhooks the live page's
// concurrency control when the run returns.
func (r *levelRun) drive(ctx, runCtx context.Context, stopRun context.CancelFunc, disp *progress.Display[levelStatus], lv *levelLoad) (loadOutcome, func()) {
	c, logger := r.cfg, r.logger
	eng, mtr, origin := lv.eng, lv.mtr, lv.origin
	detach := func() {}

	// Two goroutines, owned here: one moves the window and cuts the drain
	// short after an interrupt, the other shows the progress until the
	// load ends or is interrupted.
	var wg sync.WaitGroup
	ran := make(chan struct{})
	dctx, stopDisplay := context.WithCancel(ctx)
	disp.Update(levelStatus{tally: lv.tally, eng: eng, origin: origin, warmup: c.Warmup, duration: c.Duration})
	wg.Go(func() { disp.Run(dctx) })
	var failFast error
	// With AbortOnFail the measurement so far is judged every few
	// seconds; a failed threshold stops the run (stopped is then set).
	var stopped atomic.Bool
	var early atomic.Pointer[error]
	var judge func(now time.Time) bool
	if j := c.earlyJudge(); j != nil {
		judge = func(now time.Time) bool {
			w := mtr.peek(windowMeasure)
			if w == nil || now.Before(origin) {
				return true
			}
			if err := j(0, w, now.Sub(origin)); err != nil {
				logger.Error("stopping early", "error", err)
				early.Store(&err)
				stopped.Store(true)
				return false
			}
			return true
		}
	}
	wg.Go(func() {
		failFast = r.watch(ctx, ran, eng, origin, lv.tally, stopRun, judge)
	})
	mctx, stopMeter := context.WithCancel(ctx)
	wg.Go(func() { mtr.run(mctx, eng, c.Load.OpenLoop(), c.Warmup > 0) })
	if !c.Load.OpenLoop() {
		detach = c.Live.attach(ui.ControllerFunc(func(_ context.Context, n int) error {
			if err := eng.SetConcurrency(n); err != nil {
				return err
			}
			// At once, as the coordinator does, not at the meter's next
			// tick: the page draws the baseline at the target.
			c.Live.setTarget(n)
			return nil
		}))
	}
	runErr := eng.Run(runCtx)
	close(ran)
	stopDisplay()
	stopMeter()
	wg.Wait()
	return loadOutcome{failFast: failFast, runErr: runErr, end: time.Now(), stopped: stopped.Load(), early: derefErr(early.Load())}, detach
}

// finish turns the outcome of the load into the run's result: what
// fail-fast stopped is kept marked; otherwise the measurement window, with
// the server's figures over it, is summarised, printed and saved.
func (r *levelRun) finish(ctx context.Context, env *runEnv, lv *levelLoad, ss *serverScrape, planned time.Time, out loadOutcome) (*result.Summary, error) {
	c, logger := r.cfg, r.logger
	target, model, origin, end := env.target, env.model, lv.origin, out.end
	if out.failFast != nil {
		// Nothing worth measuring: every request failed the same way. What
		// was seen is kept, marked, for the server's messages.
		return nil, r.keepStopped(lv.mtr, c.resultLoad(target, model, lv.src.Name()), origin, end, out.failFast, env.closeRequestLog())
	}
	if out.runErr != nil {
		return nil, fmt.Errorf("run load: %w", out.runErr)
	}
	logErr := env.closeRequestLog()

	interrupted := ctx.Err() != nil || out.stopped
	// The last intervals reach the metrics too, before the result is
	// written.
	w, err := lv.mtr.measured()
	if err != nil {
		return nil, errors.Join(err, logErr)
	}
	if !sawTurns(w) {
		if ctx.Err() != nil && sawTurns(lv.mtr.peek(windowWarmUp)) {
			// Interrupted in the warm-up: what it saw is kept, marked, so
			// its errors and the server's messages are not lost.
			return nil, r.keepStopped(lv.mtr, c.resultLoad(target, model, lv.src.Name()), origin, end, interruptedBeforeMeasure(ctx), logErr)
		}
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
	facts := c.resultLoad(target, model, lv.src.Name()).Facts(origin, origin.Add(dur), dur)
	facts.PeakOutputTokensPerSec, facts.PeakConcurrentRequests = lv.peaks.Max()
	facts.SLO = c.SLO
	facts.Interrupted = interrupted
	facts.Stopped = stopReason(ctx, out.early)
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
