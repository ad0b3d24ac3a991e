package coordinator

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/fleetbench/fleetbench/pkg/loadmetrics"
)

// Errors returned to agents at join; the edge maps them to status codes.
var (
	// ErrHistogramMismatch refuses an agent whose histogram configuration
	// differs from the coordinator's.
	ErrHistogramMismatch = errors.New("histogram configuration mismatch")
	// ErrRunOver refuses an agent that joins after the run ended.
	ErrRunOver = errors.New("run is over")
	// ErrAlreadyRun is returned by a second call of Run.
	ErrAlreadyRun = errors.New("coordinator already ran")
)

// tick is the loop's scheduling resolution. Phases carry exact start
// instants and are sent PhaseLead ahead, so agents switch windows on time
// whatever the tick.
const tick = 20 * time.Millisecond

// Coordinator runs one fleet run: every stage of Config.Stages with the
// same connected agents, idle between stages. Create it with New, attach
// its gRPC service with Register (or use Serve), then call Run once.
// SetConcurrency and Run are safe to call from any goroutine.
type Coordinator struct {
	cfg    Config
	logger hclog.Logger
	now    func() time.Time

	events  chan event
	done    chan struct{} // closed when Run's loop has ended
	reg     prometheus.Registerer
	live    loadmetrics.Sink
	metrics *metrics
	ran     sync.Once
	conns   sync.WaitGroup // stream goroutines of the edge
}

// Option changes a Coordinator's defaults.
type Option func(*Coordinator)

// WithClock makes the coordinator read time from now (tests).
func WithClock(now func() time.Time) Option { return func(c *Coordinator) { c.now = now } }

// WithRegisterer registers the coordinator's metrics with reg: its own
// workings (agents connected, reports applied and duplicate, windows
// closed, late requests, agents lost, the last measured window's TTFT) and
// the fleet's load merged from every report the windows merge (pkg/loadmetrics's
// Load: requests, tokens, latency histograms by mode, level and phase).
// Without it they are kept but not exported. A registry takes one
// coordinator's metrics.
func WithRegisterer(reg prometheus.Registerer) Option { return func(c *Coordinator) { c.reg = reg } }

// WithLive hands the live view (pkg/ui's feed) every call the load
// metrics get, from Run's loop: each report merged, under its window's
// mode, level and phase, the stage, its target and the sessions in flight.
// live must return quickly.
func WithLive(live loadmetrics.Sink) Option { return func(c *Coordinator) { c.live = live } }

// New validates cfg and returns a coordinator. logger may be nil.
func New(cfg Config, logger hclog.Logger, opts ...Option) (*Coordinator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("validate coordinator config: %w", err)
	}
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	c := &Coordinator{
		cfg:    cfg.withDefaults(),
		logger: logger.Named("coordinator"),
		now:    time.Now,
		events: make(chan event, 256),
		done:   make(chan struct{}),
	}
	for _, o := range opts {
		o(c)
	}
	var err error
	if c.metrics, err = newMetrics(c.reg, c.live); err != nil {
		return nil, err
	}
	return c, nil
}

// SetConcurrency changes the running stage's level: the coordinator
// recomputes every agent's share and pushes it without stopping the load.
// Later stages keep their own levels.
func (c *Coordinator) SetConcurrency(ctx context.Context, level int) error {
	if level < 1 {
		return fmt.Errorf("set concurrency %d: must be >= 1", level)
	}
	return c.submit(ctx, concurrencyEvent{level: level})
}

// AgentLost tells the run that agent id is gone for good (its process
// died: a pod OOM-killed, failed or deleted), so its sessions move to the
// others at once instead of after Config.HeartbeatTimeout. An unknown or
// already lost agent is ignored; an agent that joins later under the same
// id is admitted as new. It returns ErrRunOver once the run is over (a
// loss reported as it ends is ignored), or ctx's error. It is safe to
// call from any goroutine.
func (c *Coordinator) AgentLost(ctx context.Context, id, reason string) error {
	select {
	case <-c.done:
		// The events channel has room after the run too: say it is over.
		return ErrRunOver
	default:
	}
	return c.submit(ctx, lostEvent{id: id, reason: reason})
}

// Run waits for the agents, runs every stage with the same agents (each
// preceded by Config.BeforeStage and separated by the stages' cooldowns)
// and returns the merged result. It returns early with what was measured
// and ctx's error when ctx is done (the stage it cut short is in
// Result.Stages, marked Interrupted), with BeforeStage's error, and with
// ErrAgentLost under PolicyFail. Agents are told to stop before it
// returns, and a running BeforeStage has returned. Run may be called once.
func (c *Coordinator) Run(ctx context.Context) (*Result, error) {
	first := false
	c.ran.Do(func() { first = true })
	if !first {
		return nil, ErrAlreadyRun
	}
	r := newRun(c.cfg, c.logger, c.now())
	r.metrics = c.metrics
	defer close(c.done)
	t := time.NewTicker(tick)
	defer t.Stop()
	// BeforeStage runs beside the loop, which keeps serving the agents;
	// whoever starts it cancels it and waits for it.
	hookCtx, cancelHook := context.WithCancel(ctx)
	var hooks sync.WaitGroup
	defer hooks.Wait()
	defer cancelHook()
	hookDone := make(chan error, 1)
	for {
		select {
		case <-ctx.Done():
			r.abort(ctx.Err().Error(), c.now())
			return r.result(), ctx.Err()
		case err := <-hookDone:
			r.beforeStageDone(err, c.now())
		case e := <-c.events:
			r.handle(e, c.now())
			reports := isReport(e)
			// Take everything already queued before judging silence:
			// after a pause of this process, heartbeats wait here.
			for n := len(c.events); n > 0; n-- {
				e := <-c.events
				r.handle(e, c.now())
				reports = reports && isReport(e)
			}
			if reports && c.now().Sub(r.lastStep) < tick {
				// A report changes no state that step acts on (its
				// ack is sent already), and step walks every agent:
				// after reports alone it waits for the tick, as it
				// would have with a busier queue.
				continue
			}
		case <-t.C:
		}
		done := r.step(c.now())
		c.metrics.agents.Set(float64(len(r.byIndex)))
		c.metrics.load.SetInFlight(r.inFlight())
		if done {
			c.lastReports(ctx, r, t.C)
			// Windows a failed run left open keep what they merged in
			// the metrics too.
			c.metrics.publish(r.windows, c.now(), true)
			return r.result(), r.err
		}
		if r.hookDue {
			r.hookDue = false
			i, s, before := r.next, r.cfg.Stages[r.next], r.cfg.BeforeStage
			hooks.Go(func() { hookDone <- before(hookCtx, i, s) })
		}
	}
}

// lastReportsWait bounds how long a finished run waits for the agents'
// last reports (see lastReports). A stopped agent first lets its turns in
// flight end, for up to its drain timeout (30 s by default,
// load.DefaultDrainTimeout), then cancels the rest and reports.
const lastReportsWait = 45 * time.Second

// lastReports applies what the agents send after they were told to stop:
// each stops its load, reports what it recorded since its last report
// (turns that ended after a window closed by grace: late data) and waits
// for the acks before it closes its stream. It returns once every agent's
// stream has ended, after lastReportsWait, or when ctx is done; the
// result then holds every report that came.
func (c *Coordinator) lastReports(ctx context.Context, r *run, tick <-chan time.Time) {
	connected := func() int {
		n := 0
		for _, m := range r.agents {
			if m.conn != nil {
				n++
			}
		}
		return n
	}
	deadline := c.now().Add(lastReportsWait)
	for n := connected(); n > 0; n = connected() {
		select {
		case <-ctx.Done():
			return
		case e := <-c.events:
			r.handle(e, c.now())
		case <-tick:
			if c.now().After(deadline) {
				r.logger.Warn("agents still connected after the run; their last reports may be missing", "agents", n, "waited", lastReportsWait)
				return
			}
		}
	}
}
