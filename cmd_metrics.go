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

	"github.com/fleetbench/fleetbench/pkg/flags"
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

// serveMetrics serves reg's /metrics on addr until stop is called (a
// no-op server when reg is nil). It returns the address it listens on.
//
// stop waits, before it shuts the server down, for a scraper to read the
// final figures: when /metrics has been read at least twice, it waits for
// one read that begins after stop was called, at most twice the interval
// between the last two reads and metricsLinger, and not at all once ctx
// is done (an interrupt). A short run then reaches Prometheus whole.
func serveMetrics(ctx context.Context, addr string, reg *prometheus.Registry, logger hclog.Logger) (bound string, stop func(), err error) {
	if reg == nil {
		return "", func() {}, nil
	}
	var lc net.ListenConfig
	lis, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("listen for metrics: %w", err)
	}
	sc := &scrapes{done: make(chan time.Time, 16)}
	mux := http.NewServeMux()
	mux.Handle("/metrics", sc.wrap(promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg})))
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

// scrapes follows the reads of /metrics: when the last two began, and
// (on done) the start of every read completed.
type scrapes struct {
	mu         sync.Mutex
	last, prev time.Time
	done       chan time.Time
}

func (s *scrapes) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		s.mu.Lock()
		s.prev, s.last = s.last, start
		s.mu.Unlock()
		h.ServeHTTP(w, r)
		select {
		case s.done <- start:
		default: // nobody waits; older starts are of no use
		}
	})
}

// waitLast waits for a read of /metrics that begins from now on, as
// serveMetrics's stop says.
func (s *scrapes) waitLast(ctx context.Context, logger hclog.Logger) {
	s.mu.Lock()
	last, prev := s.last, s.prev
	s.mu.Unlock()
	if prev.IsZero() || ctx.Err() != nil {
		return
	}
	bound := min(2*last.Sub(prev), metricsLinger)
	from := time.Now()
	logger.Info("waiting for a last scrape of the metrics", "at_most", bound.Round(time.Millisecond))
	t := time.NewTimer(bound)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			logger.Debug("no last scrape of the metrics", "waited", bound)
			return
		case start := <-s.done:
			if !start.Before(from) {
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
