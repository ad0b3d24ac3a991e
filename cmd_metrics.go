package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/fleetbench/fleetbench/internal/flags"
)

// metricsShutdown bounds the metrics server's shutdown.
const metricsShutdown = 5 * time.Second

// metricsLinger bounds the wait for a last scrape when a command ends.
const metricsLinger = time.Minute

// newMetricsRegistry returns the registry a command's metrics go to, with
// the Go runtime's and the process's collectors (process_cpu_seconds_total
// is an agent's CPU), or nil when addr is empty (no --metrics-listen:
// nothing is exported).
func newMetricsRegistry(addr string) *prometheus.Registry {
	if addr == "" {
		return nil
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// checkMetricsListen checks a --metrics-listen value before anything
// starts (empty: no metrics); the caller makes its error a usage error.
func checkMetricsListen(addr string) error {
	if addr == "" {
		return nil
	}
	if err := flags.CheckListen(addr); err != nil {
		return fmt.Errorf("--metrics-listen %w", err)
	}
	return nil
}

// route is one more handler on the metrics port.
type route struct {
	path    string
	handler http.Handler
}

// serveMetrics serves reg's /metrics, and routes, on addr until stop is
// called (a no-op server when reg is nil). It returns the address it
// listens on.
//
// stop waits, before it shuts the server down, for the scrapers to read
// the final figures: each scraper that has read /metrics regularly (at
// least twice, the last time within twice its interval) must read once
// more, beginning after stop was called; stop waits at most three times
// the longest of their intervals plus a second (a busy scraper is late),
// and metricsLinger, and not at all once ctx is done (an interrupt). A
// short run then reaches Prometheus whole, and both servers of a
// Prometheus pair.
func serveMetrics(ctx context.Context, addr string, reg *prometheus.Registry, logger hclog.Logger, routes ...route) (bound string, stop func(), err error) {
	if reg == nil {
		return "", func() {}, nil
	}
	var lc net.ListenConfig
	lis, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("listen for metrics: %w", err)
	}
	sc := newScrapes()
	mux := http.NewServeMux()
	mux.Handle("/metrics", sc.wrap(promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})))
	for _, r := range routes {
		mux.Handle(r.path, r.handler)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan struct{})
	go func() {
		defer close(served)
		if err := srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("serve metrics", "error", err)
		}
	}()
	logger.Info("serving metrics", "addr", lis.Addr().String(), "path", "/metrics")
	stop = func() {
		sc.waitLast(ctx, logger)
		// The scrape in flight may finish even after a signal.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), metricsShutdown)
		defer cancel()
		if err := srv.Shutdown(sctx); err != nil {
			_ = srv.Close()
		}
		<-served
	}
	return lis.Addr().String(), stop, nil
}

// scrapes follows the reads of /metrics, by scraper (remote address: a
// scraper keeps its connection, and a pair of Prometheus servers reads
// through two).
type scrapes struct {
	mu   sync.Mutex
	by   map[string]*scraper
	done chan struct{} // a read ended; capacity 1
}

// scraper is one scraper's reads: when the last two began, and when the
// last one to end began.
type scraper struct {
	last, prev, served time.Time
}

// maxScrapers bounds the scrapers followed; the longest silent go first.
const maxScrapers = 64

func newScrapes() *scrapes {
	return &scrapes{by: make(map[string]*scraper), done: make(chan struct{}, 1)}
}

func (s *scrapes) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		s.mu.Lock()
		sc := s.by[r.RemoteAddr]
		if sc == nil {
			if len(s.by) >= maxScrapers {
				s.forgetOldest()
			}
			sc = &scraper{}
			s.by[r.RemoteAddr] = sc
		}
		sc.prev, sc.last = sc.last, start
		s.mu.Unlock()
		h.ServeHTTP(w, r)
		s.mu.Lock()
		sc.served = start
		s.mu.Unlock()
		select {
		case s.done <- struct{}{}:
		default:
		}
	})
}

// forgetOldest drops the scraper read longest ago; s.mu is held.
func (s *scrapes) forgetOldest() {
	var oldest string
	for addr, sc := range s.by {
		if oldest == "" || sc.last.Before(s.by[oldest].last) {
			oldest = addr
		}
	}
	delete(s.by, oldest)
}

// waitLast waits until every scraper that reads regularly (twice so far,
// the last time within twice its interval) has read once more from now
// on, as serveMetrics's stop says.
func (s *scrapes) waitLast(ctx context.Context, logger hclog.Logger) {
	if ctx.Err() != nil {
		return
	}
	from := time.Now()
	var waiting []*scraper
	var bound time.Duration
	s.mu.Lock()
	for _, sc := range s.by {
		iv := sc.last.Sub(sc.prev)
		if sc.prev.IsZero() || from.Sub(sc.last) > 2*iv {
			continue
		}
		waiting = append(waiting, sc)
		bound = max(bound, 3*iv+time.Second)
	}
	s.mu.Unlock()
	if len(waiting) == 0 {
		return
	}
	bound = min(bound, metricsLinger)
	logger.Info("waiting for a last scrape of the metrics", "scrapers", len(waiting), "at_most", bound.Round(time.Millisecond))
	t := time.NewTimer(bound)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			logger.Debug("no last scrape of the metrics", "waited", bound)
			return
		case <-s.done:
			s.mu.Lock()
			all := true
			for _, sc := range waiting {
				all = all && !sc.served.Before(from)
			}
			s.mu.Unlock()
			if all {
				return
			}
		}
	}
}

// registerer returns reg as a Registerer, nil (register nothing) when reg
// is nil: a nil *Registry in the interface would not compare equal to nil.
func registerer(reg *prometheus.Registry) prometheus.Registerer {
	if reg == nil {
		return nil
	}
	return reg
}
