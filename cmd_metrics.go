package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// metricsShutdown bounds the metrics server's shutdown.
const metricsShutdown = 5 * time.Second

// newMetricsRegistry returns the registry a command's metrics go to, with
// the Go runtime's and the process's collectors, or nil when addr is empty
// (no --metrics-listen: nothing is exported).
func newMetricsRegistry(addr string) *prometheus.Registry {
	if addr == "" {
		return nil
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// route is one more handler on the metrics port.
type route struct {
	path    string
	handler http.Handler
}

// serveMetrics serves reg's /metrics, and routes, on addr until stop is
// called (a no-op server when reg is nil). It returns the address it
// listens on.
func serveMetrics(ctx context.Context, addr string, reg *prometheus.Registry, logger hclog.Logger, routes ...route) (bound string, stop func(), err error) {
	if reg == nil {
		return "", func() {}, nil
	}
	var lc net.ListenConfig
	lis, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("listen for metrics: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
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

// registerer returns reg as a Registerer, nil (register nothing) when reg
// is nil: a nil *Registry in the interface would not compare equal to nil.
func registerer(reg *prometheus.Registry) prometheus.Registerer {
	if reg == nil {
		return nil
	}
	return reg
}
