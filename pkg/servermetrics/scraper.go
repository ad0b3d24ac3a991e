package servermetrics

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"k8s.io/client-go/kubernetes"
)

// Defaults applied by Config.WithDefaults to zero fields.
const (
	// DefaultTimeout bounds one read of one endpoint.
	DefaultTimeout = 2 * time.Second
	// DefaultInterval is how often Run samples the gauges.
	DefaultInterval = 5 * time.Second
	// DefaultMaxBytes caps a page; a vLLM page is a few tens of KiB.
	DefaultMaxBytes = 4 << 20
	// DefaultParallel bounds the endpoints read at once.
	DefaultParallel = 8
)

// ErrNoWindow is returned by End when no window is open.
var ErrNoWindow = errors.New("no window open: call Begin first")

// Config names the /metrics endpoints to read and how.
type Config struct {
	// Endpoints are /metrics URLs: a frontend, each worker, or a
	// Prometheus-compatible aggregate.
	Endpoints []string
	// Timeout bounds each read of each endpoint.
	Timeout time.Duration
	// Interval is how often Run samples gauges between a window's edges.
	Interval time.Duration
	// MaxBytes caps a page; a longer page is an error, not read further.
	MaxBytes int64
	// Parallel bounds the endpoints read at once.
	Parallel int
	// Pods, when set, adds the serving pods it selects, listed through the
	// Kubernetes API (WithKubernetes) at every Begin.
	Pods *Pods
}

// WithDefaults returns c with zero fields set to the defaults.
func (c Config) WithDefaults() Config {
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.Interval == 0 {
		c.Interval = DefaultInterval
	}
	if c.MaxBytes == 0 {
		c.MaxBytes = DefaultMaxBytes
	}
	if c.Parallel == 0 {
		c.Parallel = DefaultParallel
	}
	return c
}

// Validate reports every problem of c at once.
func (c Config) Validate() error {
	var errs []error
	if len(c.Endpoints) == 0 && c.Pods == nil {
		errs = append(errs, errors.New("scrape: no endpoints"))
	}
	if c.Pods != nil {
		errs = append(errs, c.Pods.validate()...)
	}
	seen := map[string]bool{}
	for _, e := range c.Endpoints {
		u, err := url.Parse(e)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("scrape endpoint %q: %w", e, err))
		case u.Scheme != "http" && u.Scheme != "https" || u.Host == "":
			errs = append(errs, fmt.Errorf("scrape endpoint %q: want an http(s) URL", e))
		case seen[e]:
			errs = append(errs, fmt.Errorf("scrape endpoint %q: listed twice", e))
		}
		seen[e] = true
	}
	if c.Timeout <= 0 {
		errs = append(errs, fmt.Errorf("scrape timeout %v: must be positive", c.Timeout))
	}
	if c.Interval <= 0 {
		errs = append(errs, fmt.Errorf("scrape interval %v: must be positive", c.Interval))
	}
	if c.MaxBytes <= 0 {
		errs = append(errs, fmt.Errorf("scrape max bytes %d: must be positive", c.MaxBytes))
	}
	if c.Parallel <= 0 {
		errs = append(errs, fmt.Errorf("scrape parallelism %d: must be positive", c.Parallel))
	}
	return errors.Join(errs...)
}

// Option configures a Scraper.
type Option func(*Scraper)

// WithHTTPClient reads the endpoints through c instead of a client of the
// Scraper's own.
func WithHTTPClient(c *http.Client) Option { return func(s *Scraper) { s.client = c } }

// WithClock makes the Scraper read time from now (tests).
func WithClock(now func() time.Time) Option { return func(s *Scraper) { s.now = now } }

// WithProgress has Run hand fn, after each sample taken while a window is
// open, that window's figures so far: its counters and histograms from
// its start to this sample, its gauges over the samples so far. fn is
// called from Run's goroutine, one call at a time; it must return
// quickly. A live view of the window (the dashboard) follows it.
func WithProgress(fn func(Window)) Option { return func(s *Scraper) { s.progress = fn } }

// Scraper reads a set of /metrics endpoints at the edges of measurement
// windows and samples their gauges in between. The window code calls Begin
// when a window opens and End when it closes (End also opens the next
// window at the same instant, so back-to-back windows need one End each);
// Run, in a goroutine of the caller's, samples gauges every Interval until
// its ctx ends. Begin, End, Snapshot and Run are safe to call concurrently.
//
// A failing endpoint never fails the others or the caller: its figures are
// marked missing with the reason, and the failure is logged once (Warn)
// until the endpoint recovers (Info).
type Scraper struct {
	cfg     Config
	logger  hclog.Logger
	client  *http.Client
	fetcher *Fetcher
	now     func() time.Time

	kube kubernetes.Interface

	logMu   sync.Mutex
	failing map[string]bool
	listErr bool // the last pod listing failed (logged once)

	// The open window. Two callers touch it (the window code's Begin/End
	// and the sampler) at a few calls a second; a mutex keeps Begin/End
	// usable without Run, which a channel-fed owner goroutine would not.
	mu     sync.Mutex
	start  *Snapshot
	gauges *gauges
	eps    []string // the endpoints read: Config.Endpoints and the pods found at the last Begin

	progress func(Window) // WithProgress; nil: none
}

// New returns a Scraper of cfg (defaults applied, then validated).
func New(cfg Config, logger hclog.Logger, opts ...Option) (*Scraper, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	s := &Scraper{
		cfg:     cfg,
		logger:  logger.Named("scrape"),
		now:     time.Now,
		failing: map[string]bool{},
	}
	for _, o := range opts {
		o(s)
	}
	if cfg.Pods != nil && s.kube == nil {
		return nil, errors.New("scrape pods: no Kubernetes client (WithKubernetes)")
	}
	s.fetcher = NewFetcher(s.client, cfg.MaxBytes)
	s.eps = slices.Clone(cfg.Endpoints)
	return s, nil
}

// endpoints returns the endpoints read now.
func (s *Scraper) endpoints() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.eps
}

// discover lists Config.Pods again (a window's Begin) and sets the
// endpoints read: the configured ones and the pods found. A failed
// listing keeps the previous pods and is logged once until it works.
func (s *Scraper) discover(ctx context.Context) {
	if s.cfg.Pods == nil {
		return
	}
	found, err := podEndpoints(ctx, s.kube, s.cfg.Pods)
	s.logMu.Lock()
	switch {
	case err != nil && ctx.Err() == nil && !s.listErr:
		s.listErr = true
		s.logger.Warn("serving pods not listed; reading the ones found before", "error", err)
	case err == nil && s.listErr:
		s.listErr = false
		s.logger.Info("serving pods listed again", "pods", len(found))
	}
	s.logMu.Unlock()
	if err != nil {
		return
	}
	eps := slices.Clone(s.cfg.Endpoints)
	for _, e := range found {
		if !slices.Contains(eps, e) {
			eps = append(eps, e)
		}
	}
	s.mu.Lock()
	s.eps = eps
	s.mu.Unlock()
	s.logger.Debug("serving pods listed", "pods", len(found), "endpoints", len(eps))
}

// Snapshot reads every endpoint once, in parallel (at most
// Config.Parallel at a time), each bounded by Config.Timeout, and returns
// their pages or errors in the configured order.
func (s *Scraper) Snapshot(ctx context.Context) Snapshot {
	eps := s.endpoints()
	snap := Snapshot{At: s.now(), Endpoints: make([]EndpointPage, len(eps))}
	sem := make(chan struct{}, s.cfg.Parallel)
	var wg sync.WaitGroup
	for i, ep := range eps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				snap.Endpoints[i] = EndpointPage{Endpoint: ep, Err: fmt.Errorf("fetch metrics: %w", ctx.Err())}
				return
			}
			defer func() { <-sem }()
			fctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
			defer cancel()
			page, err := s.fetcher.Fetch(fctx, ep)
			snap.Endpoints[i] = EndpointPage{Endpoint: ep, Page: page, Err: err}
		}()
	}
	wg.Wait()
	s.logOutcomes(ctx, snap)
	return snap
}

// logOutcomes logs an endpoint's failure once, and its recovery.
func (s *Scraper) logOutcomes(ctx context.Context, snap Snapshot) {
	s.logMu.Lock()
	defer s.logMu.Unlock()
	for _, ep := range snap.Endpoints {
		switch {
		case ep.Err != nil && ctx.Err() != nil:
			// Shutting down: not the endpoint's fault.
		case ep.Err != nil && !s.failing[ep.Endpoint]:
			s.failing[ep.Endpoint] = true
			s.logger.Warn("metrics endpoint unreadable; its server figures are missing until it recovers",
				"endpoint", ep.Endpoint, "error", ep.Err)
		case ep.Err == nil && s.failing[ep.Endpoint]:
			delete(s.failing, ep.Endpoint)
			s.logger.Info("metrics endpoint readable again", "endpoint", ep.Endpoint)
		}
	}
}

// Begin reads every endpoint and opens a window there, dropping any window
// still open. With Config.Pods it first lists the serving pods again.
func (s *Scraper) Begin(ctx context.Context) {
	s.discover(ctx)
	snap := s.Snapshot(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.open(snap)
}

// open starts a window at snap. Callers hold s.mu.
func (s *Scraper) open(snap Snapshot) {
	s.start = &snap
	s.gauges = newGauges(snap.At)
	s.gauges.observe(snap)
}

// End reads every endpoint, closes the open window there and returns its
// figures, and opens the next window at the same reading. It returns
// ErrNoWindow when Begin was never called.
func (s *Scraper) End(ctx context.Context) (Window, error) {
	snap := s.Snapshot(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.start == nil {
		return Window{}, ErrNoWindow
	}
	s.gauges.observe(snap)
	w := diff(*s.start, snap, s.gauges)
	s.open(snap)
	s.logger.Debug("window closed", "start", w.Start, "end", w.End, "missing", len(w.Missing()), "reset", w.Reset)
	return w, nil
}

// Run samples the gauges of every endpoint every Config.Interval into the
// open window until ctx ends, then returns nil. A round slower than the
// interval delays the next one instead of piling up.
func (s *Scraper) Run(ctx context.Context) error {
	tick := time.NewTicker(s.cfg.Interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			snap := s.Snapshot(ctx)
			if ctx.Err() != nil {
				return nil
			}
			s.mu.Lock()
			var sofar *Window
			if s.gauges != nil {
				s.gauges.observe(snap)
				if s.progress != nil && s.start != nil {
					w := diff(*s.start, snap, s.gauges)
					sofar = &w
				}
			}
			s.mu.Unlock()
			if sofar != nil {
				s.progress(*sofar)
			}
		}
	}
}
