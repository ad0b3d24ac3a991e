// Package agent is fleetbench's agent: it dials a coordinator, runs the
// conversations of its shard with the load engine, and streams interval
// histograms back, keeping every report until the coordinator acks it.
//
// One goroutine (the loop) owns the agent's state: the engine, the reports
// not yet acked and the current link to the coordinator. The connector
// goroutine dials with capped exponential backoff and hands each new link
// to the loop. Generated protobuf types stop at conn.go and convert.go.
package agent

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/fleetbench/fleetbench/internal/cpu"
	"github.com/fleetbench/fleetbench/pkg/load"
	"github.com/fleetbench/fleetbench/pkg/record"
	"github.com/fleetbench/fleetbench/pkg/shard"
)

// ErrAlreadyRun is returned by a second call of Run.
var ErrAlreadyRun = errors.New("agent already ran")

// Agent is one agent process's worth of load. Create it with New and call
// Run once; Run is the only method and owns every goroutine it starts.
type Agent struct {
	cfg         Config
	build       Builder
	logger      hclog.Logger
	rec         *record.Recorder
	incarnation uint64

	dial     Dialer
	observe  func(*record.Sample)
	onReport func(seq uint64, w *record.Window)
	onAck    func(seq uint64)
	onAssign func(Assignment)
	check    Checker
	reg      prometheus.Registerer
	metrics  *metrics
	ran      bool
	certErr  atomic.Pointer[error] // set by the TLS handshake on a certificate it cannot verify
}

// Option changes an Agent's defaults.
type Option func(*Agent)

// WithDialer makes the agent open connections with d (tests cut them).
func WithDialer(d Dialer) Option { return func(a *Agent) { a.dial = d } }

// WithObserver passes every recorded sample to fn, from the sessions'
// goroutines (concurrently); fn must be quick and not keep the sample.
func WithObserver(fn func(*record.Sample)) Option { return func(a *Agent) { a.observe = fn } }

// WithReportHook calls fn from the agent's loop for every report it
// creates (before it is sent), and ack for every ack received; tests use
// them to account for every report.
func WithReportHook(report func(seq uint64, w *record.Window), ack func(seq uint64)) Option {
	return func(a *Agent) { a.onReport, a.onAck = report, ack }
}

// WithAssignmentHook calls fn from the agent's loop with every assignment
// it applies (a new stage or a reshard of the running one); tests use it to
// follow the agent's concurrency share.
func WithAssignmentHook(fn func(Assignment)) Option { return func(a *Agent) { a.onAssign = fn } }

// WithChecker makes the agent check its environment against the run's
// spec as it joins (see EnvChecker) and tell the coordinator what is
// missing.
func WithChecker(c Checker) Option { return func(a *Agent) { a.check = c } }

// WithRegisterer registers the agent's health metrics with reg: its link
// to the coordinator, reports sent and pending, streams and sessions in
// flight, schedule lag (docs/metrics.md). Without it they are kept but not
// exported. A registry takes one agent's metrics, unless each agent's
// comes through prometheus.WrapRegistererWith with its own labels.
func WithRegisterer(reg prometheus.Registerer) Option { return func(a *Agent) { a.reg = reg } }

// New validates cfg and returns an agent. logger may be nil.
func New(cfg Config, build Builder, logger hclog.Logger, opts ...Option) (*Agent, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("validate agent config: %w", err)
	}
	if build == nil {
		return nil, errors.New("new agent: nil builder")
	}
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	cfg = cfg.withDefaults()
	a := &Agent{
		cfg:         cfg,
		build:       build,
		logger:      logger.Named("agent").With("agent_id", cfg.ID),
		rec:         record.NewRecorder(cfg.Histogram),
		incarnation: rand.Uint64() | 1,
	}
	for _, o := range opts {
		o(a)
	}
	var err error
	if a.metrics, err = newMetrics(a.reg); err != nil {
		return nil, fmt.Errorf("register agent metrics: %w", err)
	}
	return a, nil
}

// Run connects to the coordinator and runs what it assigns until it says
// stop (then Run returns nil, or an error wrapping ErrCannotRun when the
// agent had told it that it cannot run), ctx is done, or the coordinator
// refuses the agent (bad token, histogram mismatch: a permanent error). While the
// coordinator is unreachable Run keeps reconnecting; the load stops after
// CoordinatorTimeout without word from it.
func (a *Agent) Run(ctx context.Context) error {
	if a.ran {
		return ErrAlreadyRun
	}
	a.ran = true
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cc, err := a.newClient()
	if err != nil {
		return err
	}
	defer cc.Close()

	links := make(chan *link)
	fatal := make(chan error, 1)
	connDone := make(chan struct{})
	go func() {
		defer close(connDone)
		a.connect(ctx, cc, links, fatal)
	}()
	l := newLoop(a)
	err = l.run(ctx, links, fatal)
	cancel()
	<-connDone
	return err
}

// backoff returns the wait before reconnect attempt n (0-based): capped
// exponential with full jitter; u is uniform in [0, 1).
func backoff(n int, base, limit time.Duration, u float64) time.Duration {
	d := base
	for range n {
		d *= 2
		if d >= limit {
			d = limit
			break
		}
	}
	return time.Duration(float64(d) * (0.5 + 0.5*u))
}

// jitter spreads heartbeats over interval ±20%; u is uniform in [0, 1).
func jitter(interval time.Duration, u float64) time.Duration {
	return time.Duration(float64(interval) * (0.8 + 0.4*u))
}

// coordinatorLost reports whether the agent has heard nothing for longer
// than timeout.
func coordinatorLost(lastHeard, now time.Time, timeout time.Duration) bool {
	return now.Sub(lastHeard) > timeout
}

// pending is a report kept until acked.
type pending struct {
	seq uint64
	w   *record.Window
}

// engineRun is one stage's load engine.
type engineRun struct {
	stage    int
	e        *load.Engine
	ix       *shard.Indexer
	tix      *trackingIndexer
	tr       *tracker
	cancel   context.CancelFunc
	done     chan struct{} // closed when Run returned
	started  bool
	finished bool
	epoch    uint64
	close    func() error // the target's, after Run returned
	err      error        // Run's, set before done is closed
}

// reshard applies a's members, restarts and take-overs to the indexer.
func (er *engineRun) reshard(a Assignment) {
	er.ix.SetMembers(a.Members)
	er.ix.Restart(a.Restart)
	for _, t := range a.TakeOver {
		er.ix.TakeOver(t.Index, t.From)
	}
}

// revivable reports whether er ran out of conversations in a stage that
// has not been drained: a new assignment of that stage may hand it more
// (a lost agent's), which a new engine on the same shard cursor runs.
func (er *engineRun) revivable(stage int) bool {
	return er.stage == stage && er.started && er.finished && er.cancel != nil
}

// built is the result of building an engine in the background; prev is
// the finished engine of the same stage it continues, if any.
type built struct {
	asg  Assignment
	eng  *engineRun
	prev *engineRun
	err  error
}

// loop is the agent's state, owned by one goroutine.
type loop struct {
	a      *Agent
	logger hclog.Logger

	link       *link
	pending    []pending
	seq        uint64
	lastWM     *watermark
	lastHeard  time.Time
	heartbeat  time.Duration
	asg        *Assignment
	eng        *engineRun
	building   bool
	built      chan built
	phases     []phase // due phases waiting for the engine or their time
	stopReason string
	nbg        int
	checks     chan []Problem // the join check's result
	checked    bool           // the join check has been started
	fatal      *Problem       // the fatal problem told to the coordinator
	silentStop *silentStop    // the load this agent stopped for the coordinator's silence
}

// silentStop is a stage's load stopped because the coordinator fell
// silent.
type silentStop struct {
	stage int
	epoch uint64
	at    time.Time
}

// heardAfterSilence tells a coordinator that comes back after this agent
// stopped its load for its silence: a fatal problem, so that it accounts
// the sessions that did not run as lost (coverage, degraded window) and
// moves them to the agents that kept running, instead of measuring a level
// that was not there.
func (l *loop) heardAfterSilence() {
	st := l.silentStop
	if st == nil || l.link == nil {
		return
	}
	l.silentStop = nil
	l.tell(Problem{Step: StepRun, Stage: st.stage, Epoch: st.epoch, Class: ClassEngine, Fatal: true,
		Message: fmt.Sprintf("stopped its load %s ago after %s without word from the coordinator",
			time.Since(st.at).Round(time.Second), l.a.cfg.CoordinatorTimeout)})
}

func newLoop(a *Agent) *loop {
	return &loop{a: a, logger: a.logger, heartbeat: DefaultHeartbeatInterval, built: make(chan built, 1), checks: make(chan []Problem, 1)}
}

// errStop ends the loop after the coordinator said stop.
var errStop = errors.New("stopped by coordinator")

func (l *loop) run(ctx context.Context, links <-chan *link, fatal <-chan error) error {
	report := time.NewTicker(l.a.cfg.ReportInterval)
	defer report.Stop()
	beat := time.NewTimer(jitter(l.heartbeat, rand.Float64()))
	defer beat.Stop()
	phaseTimer := time.NewTimer(time.Hour)
	defer phaseTimer.Stop()
	watch := time.NewTicker(100 * time.Millisecond)
	defer watch.Stop()
	lastWatch := time.Now()
	defer l.shutdown()

	for {
		var in <-chan any
		var linkDone <-chan struct{}
		if l.link != nil {
			in, linkDone = l.link.in, l.link.done
		}
		var engDone <-chan struct{}
		if l.eng != nil && !l.eng.finished && l.eng.started {
			engDone = l.eng.done
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-fatal:
			return err
		case lk := <-links:
			l.connected(ctx, lk)
		case ps := <-l.checks:
			l.nbg--
			for _, p := range ps {
				l.tell(p)
			}
			if l.fatal == nil && l.link != nil {
				l.link.send(ready{Epoch: 0}) // checked: it can run
			}
		case <-linkDone:
			l.logger.Warn("connection to coordinator lost")
			l.link = nil
			l.a.metrics.connected.Set(0)
		case m := <-in:
			l.lastHeard = time.Now()
			l.heardAfterSilence()
			if err := l.handle(ctx, m); err != nil {
				if errors.Is(err, errStop) {
					return nil
				}
				return err
			}
		case b := <-l.built:
			l.building = false
			l.onBuilt(ctx, b)
		case <-engDone:
			l.eng.finished = true
			l.logger.Debug("load stopped", "stage", l.eng.stage)
			l.flush()
			if err := l.eng.err; err != nil && l.asg != nil {
				l.tell(Problem{Step: StepRun, Stage: l.eng.stage, Epoch: l.eng.epoch, Class: classOf(err),
					Message: redact(err.Error(), l.asg.Spec, ""), Fatal: true})
			}
		case <-report.C:
			l.flush()
		case <-beat.C:
			beat.Reset(jitter(l.heartbeat, rand.Float64()))
			if l.link != nil {
				var hb heartbeatOut
				if l.eng != nil && !l.eng.finished {
					hb.Next, hb.Active = l.eng.tix.snapshot()
					st := l.eng.e.Stats()
					hb.Streams, hb.Sessions = st.InFlight, st.Sessions
				}
				hb.At = time.Now()
				hb.CPU, hb.CPUOK = cpu.Process()
				l.link.send(hb)
			}
		case <-phaseTimer.C:
		case <-watch.C:
			now := time.Now()
			if gap := now.Sub(lastWatch); gap > l.a.cfg.CoordinatorTimeout/2 {
				// This process was paused; it could not hear anyone.
				l.lastHeard = l.lastHeard.Add(gap)
			}
			lastWatch = now
			if len(in) > 0 {
				break // messages are waiting: the coordinator is not silent
			}
			if l.eng != nil && l.eng.started && !l.eng.finished && l.eng.cancel != nil &&
				coordinatorLost(l.lastHeard, time.Now(), l.a.cfg.CoordinatorTimeout) {
				l.logger.Warn("coordinator silent, stopping load", "timeout", l.a.cfg.CoordinatorTimeout)
				l.eng.cancel()
				l.eng.cancel = nil
				l.silentStop = &silentStop{stage: l.eng.stage, epoch: l.eng.epoch, at: time.Now()}
			}
		}
		if d := l.applyPhases(ctx, time.Now()); d > 0 {
			phaseTimer.Reset(d)
		}
	}
}

// connected adopts a new link: drop what the coordinator has applied,
// resend the rest in order, then the latest watermark.
func (l *loop) connected(ctx context.Context, lk *link) {
	if l.link != nil {
		l.link.kill()
	}
	l.link = lk
	l.a.metrics.connected.Set(1)
	l.lastHeard = time.Now()
	if lk.welcome.Heartbeat > 0 {
		l.heartbeat = lk.welcome.Heartbeat
	}
	l.ack(lk.welcome.Acked)
	l.logger.Info("connected to coordinator", "index", lk.welcome.Index, "acked_seq", lk.welcome.Acked, "resending", len(l.pending))
	for _, p := range l.pending {
		lk.send(report{Seq: p.seq, Window: p.w})
		l.a.metrics.reports.Inc()
	}
	if l.lastWM != nil {
		lk.send(*l.lastWM)
	}
	if l.fatal != nil {
		lk.send(*l.fatal) // the coordinator may not have heard it
	}
	switch spec := lk.welcome.Spec; {
	case spec != nil && l.a.check != nil && !l.checked:
		l.checked = true
		l.nbg++
		go func() { l.checks <- l.a.check(ctx, *spec) }()
	case l.fatal == nil && (l.checked || l.a.check == nil):
		lk.send(ready{Epoch: 0}) // nothing (more) to check: it can run
	}
}

// tell sends p to the coordinator (and keeps a fatal one to resend after
// a reconnect and to return from Run).
func (l *loop) tell(p Problem) {
	if p.Fatal {
		l.logger.Error("cannot run", "step", p.Step, "class", p.Class, "error", p.Message)
		l.fatal = &p
	} else {
		l.logger.Warn("problem", "step", p.Step, "class", p.Class, "message", p.Message)
	}
	if l.link != nil {
		l.link.send(p)
	}
}

func (l *loop) ack(seq uint64) {
	n := 0
	for n < len(l.pending) && l.pending[n].seq <= seq {
		n++
	}
	l.pending = l.pending[n:]
	l.a.metrics.pending.Set(float64(len(l.pending)))
	if l.a.onAck != nil {
		l.a.onAck(seq)
	}
}

func (l *loop) handle(ctx context.Context, m any) error {
	switch m := m.(type) {
	case heartbeatIn:
	case ack:
		l.ack(m.Seq)
	case Assignment:
		l.assign(ctx, m)
	case phase:
		l.phases = append(l.phases, m)
	case stop:
		l.stopReason = m.Reason
		l.logger.Info("coordinator said stop", "reason", m.Reason)
		if l.fatal != nil {
			return fmt.Errorf("%w: %s: %s", ErrCannotRun, l.fatal.Class, l.fatal.Message)
		}
		return errStop
	case welcome:
		// Only the first message of a stream; handled by connected.
	}
	return nil
}

// assign applies an assignment: a new stage (or a stopped engine) builds
// a new engine in the background; otherwise the running one is resharded.
func (l *loop) assign(ctx context.Context, a Assignment) {
	l.asg = &a
	if l.a.onAssign != nil {
		l.a.onAssign(a)
	}
	if l.eng != nil && l.eng.stage == a.Stage && !l.eng.finished && (l.eng.cancel != nil || !l.eng.started) {
		l.eng.reshard(a)
		if err := l.eng.e.SetConcurrency(a.Concurrency); err != nil && !errors.Is(err, load.ErrOpenLoop) {
			l.logger.Warn("set concurrency", "error", err)
		}
		l.eng.epoch = a.Epoch
		l.logger.Debug("resharded", "epoch", a.Epoch, "concurrency", a.Concurrency, "members", len(a.Members), "restart", len(a.Restart))
		if l.link != nil {
			l.link.send(ready{Epoch: a.Epoch})
		}
		return
	}
	if l.building {
		return // onBuilt picks up l.asg
	}
	l.startBuild(ctx, a)
}

func (l *loop) startBuild(ctx context.Context, a Assignment) {
	if l.eng != nil && !l.eng.finished && l.eng.cancel != nil {
		// A new stage while the old one runs: stop it first.
		l.eng.cancel()
		l.eng.cancel = nil
	}
	var prev *engineRun
	if l.eng != nil && l.eng.revivable(a.Stage) {
		prev = l.eng
	}
	l.building = true
	l.nbg++
	go func() {
		eng, err := l.a.newEngine(ctx, a, prev)
		l.built <- built{asg: a, eng: eng, prev: prev, err: err}
	}()
}

func (l *loop) onBuilt(ctx context.Context, b built) {
	l.nbg--
	if b.err != nil {
		l.tell(Problem{Step: StepBuild, Stage: b.asg.Stage, Epoch: b.asg.Epoch, Class: classOf(b.err),
			Message: redact(b.err.Error(), b.asg.Spec, ""), Fatal: true})
		return
	}
	if l.eng != nil && l.eng.started && !l.eng.finished {
		// Wait for the old stage's engine: its windows must finish first.
		if l.eng.cancel != nil {
			l.eng.cancel()
			l.eng.cancel = nil
		}
		<-l.eng.done
		l.eng.finished = true
		l.flush()
	}
	l.eng = b.eng
	if l.asg != nil && l.asg.Epoch > b.asg.Epoch && l.asg.Stage == b.asg.Stage {
		// Assignments arrived while building: apply the latest.
		l.eng.reshard(*l.asg)
		_ = l.eng.e.SetConcurrency(l.asg.Concurrency)
		b.asg = *l.asg
	}
	l.eng.epoch = b.asg.Epoch
	l.logger.Info("stage ready", "stage", b.asg.Stage, "concurrency", b.asg.Concurrency, "index", b.asg.Index, "members", len(b.asg.Members))
	if err := load.CheckFileLimit(b.asg.Concurrency); err != nil {
		// A warning, not a failure: the sessions that get a descriptor
		// run, and the coordinator says why the others fail.
		l.logger.Warn("open-file limit too low for this agent's sessions", "error", err)
		l.tell(Problem{Step: StepBuild, Stage: b.asg.Stage, Epoch: b.asg.Epoch, Class: ClassEngine, Message: err.Error()})
	}
	if l.link != nil {
		l.link.send(ready{Epoch: b.asg.Epoch})
	}
	if b.prev != nil && b.prev.revivable(b.asg.Stage) {
		// The stage runs on and its window is open: go on in it at once.
		l.logger.Debug("continuing the stage's shard", "stage", b.asg.Stage, "window", b.prev.e.Window())
		l.start(ctx, l.eng, b.prev.e.Window(), time.Now(), time.Now())
	}
}

// newEngine builds, configures and warms a stage's engine. It runs on a
// background goroutine and touches no loop state.
// A prev engine of the same stage that ran out of conversations lends its
// shard indexer (cursor, restarts) and tracker, so the new engine goes on
// where it stopped instead of running the shard again.
func (a *Agent) newEngine(ctx context.Context, asg Assignment, prev *engineRun) (*engineRun, error) {
	t, err := a.build(ctx, asg.Spec)
	if err != nil {
		return nil, fmt.Errorf("build target: %w", err)
	}
	cfg := load.Config{
		Concurrency: asg.Concurrency, MaxTokens: asg.Spec.Workload.MaxTokens,
		SessionHeader: asg.Spec.Workload.SessionHeader, Seed: asg.Spec.Workload.Seed,
	}
	if asg.Rate > 0 {
		// Open loop: the level caps the conversations in flight, and this
		// agent's share of it caps its own, so the fleet never exceeds it.
		cfg.Concurrency, cfg.RequestRate, cfg.MaxConcurrency = 0, asg.Rate, asg.Concurrency
	}
	var ix *shard.Indexer
	var tr *tracker
	if prev != nil {
		ix, tr = prev.ix, prev.tr
		(&engineRun{ix: ix}).reshard(asg)
	} else {
		ix = shard.NewIndexer(asg.Index, asg.Members, asg.Limit)
		ix.Restart(asg.Restart)
		tr = newTracker(4*max(asg.Concurrency, 1) + 16)
	}
	tix := &trackingIndexer{ix: ix, src: t.Source, tr: tr}
	opts := append([]load.Option{
		load.WithIndexer(tix),
		load.WithObserver(observer(tr, a.observe)),
		load.WithDrainTimeout(a.cfg.DrainTimeout),
	}, t.Options...)
	e, err := load.New(cfg, t.Source, t.Streamer, a.rec, a.logger, opts...)
	if err != nil {
		return nil, fmt.Errorf("new load engine: %w", err)
	}
	// Goodput: the recorder counts the requests that meet the spec's
	// objectives (or none, when it has none).
	if asg.Spec.SLO.IsZero() {
		a.rec.SetGood(nil)
	} else {
		a.rec.SetGood(asg.Spec.SLO.Good)
	}
	if w, ok := t.Streamer.(Warmer); ok {
		wctx, cancel := context.WithTimeout(ctx, DefaultWarmTimeout)
		err := w.Warm(wctx, max(asg.Concurrency, 1))
		cancel()
		if err != nil {
			a.logger.Warn("warm connection pool", "error", err)
		}
	}
	return &engineRun{stage: asg.Stage, e: e, ix: ix, tix: tix, tr: tr, done: make(chan struct{}), close: t.Close}, nil
}

// applyPhases applies every phase whose start has come and returns how
// long until the next one (0 for none). ctx is the loop's.
func (l *loop) applyPhases(ctx context.Context, now time.Time) time.Duration {
	var next time.Duration
	rest := l.phases[:0]
	for _, p := range l.phases {
		if d := p.StartAt.Sub(now); d > 0 || l.eng == nil || (p.Kind != KindDrain && l.eng.finished) {
			if d > 0 && (next == 0 || d < next) {
				next = d
			}
			if p.Kind == KindDrain && l.eng == nil {
				continue // nothing to drain
			}
			rest = append(rest, p)
			continue
		}
		l.applyPhase(ctx, p, now)
	}
	l.phases = rest
	return next
}

func (l *loop) applyPhase(ctx context.Context, p phase, now time.Time) {
	eng := l.eng
	switch p.Kind {
	case KindDrain:
		if eng.started && eng.cancel != nil {
			l.logger.Debug("draining", "window", p.Window)
			eng.cancel()
			eng.cancel = nil
		} else if !eng.started {
			eng.finished = true
			close(eng.done)
		}
	default:
		eng.e.SetWindow(p.Window)
		if eng.started {
			return
		}
		l.start(ctx, eng, p.Window, p.StartAt, now)
	}
}

// start runs eng's load in window from now; startAt is when the
// coordinator asked for it.
func (l *loop) start(ctx context.Context, eng *engineRun, window uint32, startAt, now time.Time) {
	eng.e.SetWindow(window)
	// The engine keeps the loop's values but not its cancellation: the
	// loop ends it with eng.cancel (a drain, a stop or shutdown) so its
	// turns finish and are reported.
	ectx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	eng.cancel, eng.started = cancel, true
	go func() {
		defer close(eng.done)
		if err := eng.e.Run(ectx); err != nil && ectx.Err() == nil {
			l.logger.Error("load engine", "error", err)
			eng.err = err
		}
		if eng.close != nil {
			if err := eng.close(); err != nil {
				l.logger.Warn("close target", "error", err)
			}
		}
	}()
	offset := now.Sub(startAt)
	l.logger.Debug("load started", "window", window, "offset", offset)
	if l.link != nil {
		l.link.send(started{Window: window, Offset: offset})
	}
}

// flush drains the recorder into reports and sends them with a watermark.
// The watermark is read before the drain, so every turn it covers is in
// this or an earlier report.
func (l *loop) flush() {
	if l.eng == nil {
		return
	}
	wm, ok := l.eng.e.Watermark()
	for _, w := range l.a.rec.Drain() {
		l.seq++
		l.pending = append(l.pending, pending{seq: l.seq, w: w})
		l.a.metrics.drained(w)
		if l.a.onReport != nil {
			l.a.onReport(l.seq, w)
		}
		if l.link != nil {
			l.link.send(report{Seq: l.seq, Window: w})
			l.a.metrics.reports.Inc()
		}
	}
	l.a.metrics.pending.Set(float64(len(l.pending)))
	var st load.Stats
	if !l.eng.finished {
		st = l.eng.e.Stats()
	}
	l.a.metrics.streams.Set(float64(st.InFlight))
	l.a.metrics.sessions.Set(float64(st.Sessions))
	if ok {
		l.lastWM = &watermark{Window: wm, Seq: l.seq, Finished: l.eng.finished, Epoch: l.eng.epoch}
		if l.link != nil {
			l.link.send(*l.lastWM)
		}
	}
}

// lastAcksWait bounds how long a stopping agent waits for the acks of its
// last reports.
const lastAcksWait = 5 * time.Second

// awaitAcks waits until the coordinator acked every report sent, the
// link ends or timeout passes. A coordinator that finished its run still
// applies the reports its agents send after the stop, and acks them, until
// their streams end: closing the stream before the acks would leave the
// agent unable to tell applied from lost.
func (l *loop) awaitAcks(timeout time.Duration) {
	if len(l.pending) == 0 {
		return
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	for len(l.pending) > 0 {
		select {
		case m := <-l.link.in:
			if a, ok := m.(ack); ok {
				l.ack(a.Seq)
			}
		case <-l.link.done:
			return
		case <-t.C:
			l.logger.Warn("coordinator did not ack the last reports", "unacked", len(l.pending), "waited", timeout)
			return
		}
	}
}

// shutdown stops the engine, waits for it, sends the last reports when a
// link is up, waits for their acks and lets the link flush.
func (l *loop) shutdown() {
	if l.eng != nil && l.eng.started && !l.eng.finished {
		if l.eng.cancel != nil {
			l.eng.cancel()
		}
		<-l.eng.done
		l.eng.finished = true
	}
	l.flush()
	for l.nbg > 0 {
		select {
		case <-l.built:
		case <-l.checks:
		}
		l.nbg--
	}
	if l.link != nil {
		l.awaitAcks(lastAcksWait)
		l.link.closeSend(5 * time.Second)
	}
	l.a.metrics.connected.Set(0)
	// What this process reported, for an operator (or a test) to compare
	// with the coordinator's applied count: unacked reports are lost
	// unless the coordinator saw them before it went away.
	l.logger.Info("agent done", "reports_sent", l.seq, "reports_unacked", len(l.pending))
}
