package main

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

// readMetrics reads addr's /metrics once, as the default client's
// scraper (one kept connection).
func readMetrics(t *testing.T, addr string) { readMetricsWith(t, http.DefaultClient, addr) }

// readMetricsWith reads addr's /metrics once with c.
func readMetricsWith(t *testing.T, c *http.Client, addr string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
}

// TestMetricsStopWaitsForALastScrape: with a scraper reading /metrics
// every 200 ms, stop returns after its next read, not before; with two, after
// both have read; without one (fewer than two reads), or after an
// interrupt, it returns at once.
func TestMetricsStopWaitsForALastScrape(t *testing.T) {
	logger := hclog.NewNullLogger()
	serve := func(ctx context.Context) (string, func()) {
		reg := newMetricsRegistry("127.0.0.1:0")
		addr, stop, err := serveMetrics(ctx, "127.0.0.1:0", reg, logger)
		if err != nil {
			t.Fatal(err)
		}
		return addr, stop
	}
	timed := func(stop func()) time.Duration {
		start := time.Now()
		stop()
		return time.Since(start)
	}

	addr, stop := serve(t.Context())
	readMetrics(t, addr)
	time.Sleep(200 * time.Millisecond)
	readMetrics(t, addr)
	stopped := make(chan time.Duration, 1)
	go func() { stopped <- timed(stop) }()
	time.Sleep(150 * time.Millisecond)
	select {
	case d := <-stopped:
		t.Fatalf("stop returned after %v, before the last scrape", d)
	default:
	}
	readMetrics(t, addr)
	select {
	case d := <-stopped:
		if d < 150*time.Millisecond {
			t.Errorf("stop took %v", d)
		}
	case <-time.After(2 * time.Second):
		t.Fatal("stop did not return after the last scrape")
	}

	// Two scrapers (a Prometheus pair): stop waits for both.
	addr, stop = serve(t.Context())
	other := &http.Client{Transport: &http.Transport{}}
	for range 2 {
		readMetrics(t, addr)
		readMetricsWith(t, other, addr)
		time.Sleep(200 * time.Millisecond)
	}
	go func() { stopped <- timed(stop) }()
	time.Sleep(50 * time.Millisecond)
	readMetrics(t, addr)
	time.Sleep(100 * time.Millisecond)
	select {
	case d := <-stopped:
		t.Fatalf("stop returned after %v, before the second scraper's last read", d)
	default:
	}
	readMetricsWith(t, other, addr)
	select {
	case <-stopped:
	case <-time.After(2 * time.Second):
		t.Fatal("stop did not return after both scrapers' last reads")
	}

	addr, stop = serve(t.Context())
	readMetrics(t, addr)
	if d := timed(stop); d > 100*time.Millisecond {
		t.Errorf("stop without a regular scraper took %v", d)
	}

	ctx, cancel := context.WithCancel(t.Context())
	addr, stop = serve(ctx)
	readMetrics(t, addr)
	readMetrics(t, addr)
	cancel()
	if d := timed(stop); d > 100*time.Millisecond {
		t.Errorf("stop after an interrupt took %v", d)
	}
}
