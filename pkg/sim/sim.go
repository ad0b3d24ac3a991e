package sim

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
)

// WorkerHeader is the response header naming the worker that served a request.
const WorkerHeader = "X-Fleetbench-Worker"

// ErrServing is returned by Serve and Start on a Sim that already serves.
var ErrServing = errors.New("simulator already serving")

// Sim is one simulated serving stack. Create it with New, run it with Start
// or Serve, stop it with Close or by cancelling the context. Its methods are
// safe for concurrent use.
type Sim struct {
	cfg     Config
	log     hclog.Logger
	gather  *prometheus.Registry
	m       *metrics
	idx     *indexer
	router  *router
	workers []*worker
	handler http.Handler
	created int64
	reqID   atomic.Uint64
	quit    chan struct{} // closed when the engines stop
	// onFirstToken, when set before serving, is called by the handler of
	// each request that gets a first token, with its simulated TTFT. Tests
	// use it for exact percentiles the metrics' buckets cannot give.
	onFirstToken func(worker int, simTTFT time.Duration)

	life      sync.Mutex
	bootStart time.Time // start of the current startup; zero when ready
	epoch     uint64    // restarts of the workers so far

	mu      sync.Mutex
	serving bool
	url     string
	stop    chan struct{}
	stopped chan struct{}
	stopErr error
	once    sync.Once
}

// New validates cfg and builds a simulator. Its collectors are registered on
// reg when reg is not nil, and always on the simulator's own registry, which
// GET /metrics serves.
func New(cfg Config, logger hclog.Logger, reg prometheus.Registerer) (*Sim, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("validate config: %w", err)
	}
	mode, _ := ParseMode(string(cfg.Router))
	cfg.Router = mode
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	s := &Sim{
		cfg:     cfg,
		log:     logger.Named("sim"),
		gather:  prometheus.NewRegistry(),
		m:       newMetrics(),
		created: time.Now().Unix(),
		quit:    make(chan struct{}),
		stop:    make(chan struct{}),
		stopped: make(chan struct{}),
	}
	if err := s.m.register(s.gather); err != nil {
		return nil, err
	}
	if reg != nil {
		if err := s.m.register(reg); err != nil {
			return nil, err
		}
	}
	s.idx = newIndexer(cfg.Replicas, cfg.scaled(cfg.EventDelay))
	s.router = newRouter(cfg, s.idx)
	for i := range cfg.Replicas {
		wm := s.m.forWorker(cfg.Model, i)
		s.workers = append(s.workers, newWorker(i, cfg.Engine, cfg.TimeScale, wm, s.idx.publish))
	}
	for _, w := range s.workers {
		w.gauges()
	}
	if cfg.ColdStart {
		s.bootStart = time.Now()
	}
	s.handler = s.routes()
	return s, nil
}

// Config returns the validated configuration.
func (s *Sim) Config() Config { return s.cfg }

// Handler returns the HTTP handler. It serves requests only while Start or
// Serve runs the engines.
func (s *Sim) Handler() http.Handler { return s.handler }

// Gatherer returns the registry GET /metrics serves.
func (s *Sim) Gatherer() prometheus.Gatherer { return s.gather }

// URL returns the base URL ("http://host:port") once Start or Serve has a
// listener, else "".
func (s *Sim) URL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.url
}

// Mode returns the current routing mode.
func (s *Sim) Mode() Mode { return s.router.getMode() }

// SetMode switches the routing mode; requests already routed are unaffected.
func (s *Sim) SetMode(m Mode) {
	s.router.setMode(m)
	s.log.Info("routing mode changed", "mode", m)
}

// RestartFrontend simulates a frontend restart: routing state is lost (the
// kv indexer is emptied, the round-robin counter restarts, tracked load is
// forgotten) while worker caches are kept.
func (s *Sim) RestartFrontend() {
	s.router.reset()
	s.log.Info("frontend restarted")
}

// RestartWorkers simulates restarting every worker: requests in flight on
// them fail, and so do requests the frontend admitted before the restart
// that reach a worker after it; caches are flushed, and the workers go through the startup
// phases again (see Config.StartupTime). It waits until every engine has
// flushed, or ctx is done.
func (s *Sim) RestartWorkers(ctx context.Context) error {
	s.life.Lock()
	if s.cfg.StartupTime > 0 {
		s.bootStart = time.Now()
	}
	s.epoch++
	epoch := s.epoch
	s.life.Unlock()
	for _, w := range s.workers {
		s.idx.dropWorker(w.idx)
		ack := make(chan struct{})
		select {
		case w.ctrl <- ctrlMsg{restart: true, epoch: epoch, ack: ack}:
		case <-s.quit:
			return errShutdown
		case <-ctx.Done():
			return ctx.Err()
		}
		select {
		case <-ack:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	s.log.Info("workers restarted", "startup", s.cfg.StartupTime)
	return nil
}

// phase of the workers' lifecycle.
type phase int

const (
	phaseReady   phase = iota
	phaseLoading       // nothing registered: /v1/models empty, completions 404
	phaseListed        // model listed, not serving: completions 503
)

func (s *Sim) phase(now time.Time) phase {
	p, _ := s.admit(now)
	return p
}

// admit returns the workers' phase at now and their restart count, which a
// request admitted then carries to its worker.
func (s *Sim) admit(now time.Time) (phase, uint64) {
	s.life.Lock()
	defer s.life.Unlock()
	if s.bootStart.IsZero() {
		return phaseReady, s.epoch
	}
	el := now.Sub(s.bootStart)
	switch {
	case el >= s.cfg.scaled(s.cfg.StartupTime):
		s.bootStart = time.Time{}
		return phaseReady, s.epoch
	case el >= s.cfg.scaled(s.cfg.ModelsListedAfter):
		return phaseListed, s.epoch
	}
	return phaseLoading, s.epoch
}

// Start listens on Config.Listen and serves in the background until ctx is
// done or Close is called.
func (s *Sim) Start(ctx context.Context) error {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", s.cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	if err := s.claim(ln); err != nil {
		ln.Close()
		return err
	}
	go func() { _ = s.serve(ctx, ln) }()
	return nil
}

// Serve serves on ln until ctx is done or Close is called, then drains
// in-flight requests for up to Config.ShutdownTimeout and stops the engines.
// It returns nil after such a stop.
func (s *Sim) Serve(ctx context.Context, ln net.Listener) error {
	if err := s.claim(ln); err != nil {
		return err
	}
	return s.serve(ctx, ln)
}

func (s *Sim) claim(ln net.Listener) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.serving {
		return ErrServing
	}
	s.serving = true
	s.url = "http://" + ln.Addr().String()
	return nil
}

func (s *Sim) serve(ctx context.Context, ln net.Listener) error {
	defer close(s.stopped)
	engCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	for _, w := range s.workers {
		wg.Go(func() { w.run(engCtx) })
	}
	wg.Go(func() { s.idx.run(engCtx) })

	srv := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 30 * time.Second,
		ErrorLog:          s.log.StandardLogger(&hclog.StandardLoggerOptions{InferLevels: true}),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	s.log.Info("serving", "url", s.URL(), "replicas", s.cfg.Replicas, "mode", s.Mode(), "profile", s.cfg.Profile, "time_scale", s.cfg.TimeScale)

	var err error
	select {
	case <-ctx.Done():
	case <-s.stop:
	case err = <-errc:
		err = fmt.Errorf("serve http: %w", err)
	}
	sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.ShutdownTimeout)
	if serr := srv.Shutdown(sctx); serr != nil {
		s.log.Debug("graceful shutdown timed out, closing connections")
		_ = srv.Close()
	}
	scancel()
	cancel()
	wg.Wait()
	close(s.quit)
	s.log.Debug("stopped")
	s.mu.Lock()
	s.stopErr = err
	s.mu.Unlock()
	return err
}

// Close stops a running simulator and waits for it. It is idempotent and
// returns the error that ended serving, if any.
func (s *Sim) Close() error {
	s.once.Do(func() { close(s.stop) })
	s.mu.Lock()
	serving := s.serving
	s.mu.Unlock()
	if !serving {
		return nil
	}
	<-s.stopped
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stopErr
}
