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

	"github.com/fleetbench/fleetbench/pkg/record"
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
