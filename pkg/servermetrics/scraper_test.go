package servermetrics

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashicorp/go-hclog"
)

// pages serves fixture pages and switches them from "start" to "end".
type pages struct {
	ended atomic.Bool
	start []byte
	end   []byte
}

func (p *pages) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	if p.ended.Load() {
		_, _ = w.Write(p.end)
		return
	}
	_, _ = w.Write(p.start)
}

func fixturePages(t *testing.T, start, end string) *pages {
	return &pages{start: readFixture(t, start), end: readFixture(t, end)}
}

// syncBuffer is a log sink safe for the scraper's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func testLogger(out *syncBuffer) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Output: out, Level: hclog.Debug})
}

func TestScraperBadEndpoints(t *testing.T) {
	good := fixturePages(t, "vllm_a_start.txt", "vllm_a_end.txt")
	goodSrv := httptest.NewServer(good)
	defer goodSrv.Close()

	downSrv := httptest.NewServer(http.NotFoundHandler())
	downURL := downSrv.URL + "/metrics"
	downSrv.Close()

	release := make(chan struct{})
	slowSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer slowSrv.Close()
	defer close(release)

	htmlSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, "<html><body>Sign in</body></html>")
	}))
	defer htmlSrv.Close()

	notFoundSrv := httptest.NewServer(http.NotFoundHandler())
	defer notFoundSrv.Close()

	hugeSrv := httptest.NewServer(hugePage(10 << 20))
	defer hugeSrv.Close()

	malformedSrv := httptest.NewServer(&pages{start: readFixture(t, "malformed.txt"), end: readFixture(t, "malformed.txt")})
	defer malformedSrv.Close()

	eps := map[string]string{
		"good":      goodSrv.URL + "/metrics",
		"down":      downURL,
		"slow":      slowSrv.URL + "/metrics",
		"html":      htmlSrv.URL + "/metrics",
		"404":       notFoundSrv.URL + "/metrics",
		"10MB":      hugeSrv.URL + "/metrics",
		"malformed": malformedSrv.URL + "/metrics",
	}
	wantMissing := map[string]string{
		"down":      "connection refused",
		"slow":      "context deadline exceeded",
		"html":      `content type "text/html": not a metrics page`,
		"404":       "status 404 Not Found",
		"10MB":      "over 65536 bytes: metrics page too large",
		"malformed": `text format parsing error in line 6: expected float as value, got "zero"`,
	}
	var logs syncBuffer
	// A 64 KiB cap keeps the 10 MB case quick under -race on a busy
	// machine: with 1 MiB, parsing up to the cap outlasted the 1 s timeout
	// the slow endpoint needs, once in a make test run (2026-11-27).
	// TestFetchHugePageMemoryBounded reads at the default cap.
	cfg := Config{Timeout: time.Second, MaxBytes: 64 << 10}
	for _, k := range []string{"good", "down", "slow", "html", "404", "10MB", "malformed"} {
		cfg.Endpoints = append(cfg.Endpoints, eps[k])
	}
	s, err := New(cfg, testLogger(&logs))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	s.Begin(ctx)
	good.ended.Store(true)
	w, err := s.End(ctx)
	if err != nil {
		t.Fatal(err)
	}

	want(t, "good hit rate", w.Total.HitRate, 0.75)
	want(t, "good requests", w.Total.Requests, 7)
	missing := w.Missing()
	for name, sub := range wantMissing {
		got := missing[eps[name]]
		if !strings.HasPrefix(got, "window start: fetch metrics: ") || !strings.Contains(got, sub) || strings.Contains(got, "\n") {
			t.Errorf("%s: missing %q, want one line with %q", name, got, sub)
		}
	}
	if _, bad := missing[eps["good"]]; bad || len(missing) != len(wantMissing) {
		t.Errorf("missing %v", missing)
	}
	// Two readings of each bad endpoint, one warning each.
	for name := range wantMissing {
		if n := strings.Count(logs.String(), "endpoint="+eps[name]); n != 1 {
			t.Errorf("%s logged %d times, want once:\n%s", name, n, logs.String())
		}
	}
	if !strings.Contains(logs.String(), "[WARN]  scrape: metrics endpoint unreadable") {
		t.Errorf("logs:\n%s", logs.String())
	}
}

// hugePage serves an endless-looking valid page of size bytes.
func hugePage(size int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		line := []byte("filler_metric_seconds_total 1\n")
		chunk := bytes.Repeat(line, 4096)
		for n := 0; n < size; n += len(chunk) {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})
}

func TestFetchHugePageMemoryBounded(t *testing.T) {
	srv := httptest.NewServer(hugePage(10 << 20))
	defer srv.Close()
	f := NewFetcher(nil, DefaultMaxBytes)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := f.Fetch(t.Context(), srv.URL)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("err %v, want ErrTooLarge", err)
	}
	// The text parser allocates per line it reads, so what a page costs
	// is bounded by the cap, not by the page: 4 MiB read at most.
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("allocated %.1f MiB reading a 10 MiB page capped at 4 MiB", float64(alloc)/(1<<20))
	if alloc > 96<<20 {
		t.Errorf("allocated %d MiB", alloc>>20)
	}
}

func TestScraperLogsOncePerOutage(t *testing.T) {
	var up atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if !up.Load() {
			http.Error(w, "loading", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		fmt.Fprintln(w, "vllm:num_requests_waiting 1")
	}))
	defer srv.Close()
	var logs syncBuffer
	s, err := New(Config{Endpoints: []string{srv.URL}}, testLogger(&logs))
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	for range 3 {
		s.Snapshot(ctx)
	}
	up.Store(true)
	for range 2 {
		s.Snapshot(ctx)
	}
	up.Store(false)
	s.Snapshot(ctx)
	out := logs.String()
	if n := strings.Count(out, "metrics endpoint unreadable"); n != 2 {
		t.Errorf("%d warnings, want 2 (one per outage):\n%s", n, out)
	}
	if n := strings.Count(out, "metrics endpoint readable again"); n != 1 {
		t.Errorf("%d recoveries, want 1:\n%s", n, out)
	}
	if !strings.Contains(out, "error=\"fetch metrics: status 503 Service Unavailable\"") {
		t.Errorf("logs lack the reason:\n%s", out)
	}
}

func TestScraperEndWithoutBegin(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	s, err := New(Config{Endpoints: []string{srv.URL}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.End(t.Context()); !errors.Is(err, ErrNoWindow) {
		t.Errorf("err %v, want ErrNoWindow", err)
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want []string // substrings of the joined error; none: valid
	}{
		{"defaults", Config{Endpoints: []string{"http://a:8000/metrics", "https://b/metrics"}}.WithDefaults(), nil},
		{"empty", Config{}.WithDefaults(), []string{"no endpoints"}},
		{"bad urls", Config{Endpoints: []string{"a:8000", "ftp://x/m", "http://a/m", "http://a/m"}}.WithDefaults(),
			[]string{`"a:8000": want an http(s) URL`, `"ftp://x/m": want an http(s) URL`, `"http://a/m": listed twice`}},
		{"bad knobs", Config{Endpoints: []string{"http://a/m"}, Timeout: -1, Interval: -1, MaxBytes: -1, Parallel: -1},
			[]string{"timeout -1ns", "interval -1ns", "max bytes -1", "parallelism -1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			if len(tt.want) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatal("want an error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("err %q lacks %q", err, w)
				}
			}
		})
	}
}

// handlerTransport serves requests in memory, so that tests can run the
// scraper inside a synctest bubble with a fake clock.
type handlerTransport struct{ h http.Handler }

func (t handlerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	t.h.ServeHTTP(rec, r)
	return rec.Result(), nil
}

func TestScraperSamplesGaugesBetweenEdges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var waiting atomic.Int64
		h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			fmt.Fprintf(w, "vllm:num_requests_waiting{engine=\"0\"} %d\nvllm:kv_cache_usage_perc{engine=\"0\"} 0.%d\n", waiting.Load(), waiting.Load())
		})
		s, err := New(Config{Endpoints: []string{"http://sim/metrics"}, Interval: time.Second},
			nil, WithHTTPClient(&http.Client{Transport: handlerTransport{h}}))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- s.Run(ctx) }()

		waiting.Store(1)
		s.Begin(ctx) // sample 1 at t=0
		waiting.Store(9)
		time.Sleep(1500 * time.Millisecond) // sampler at t=1s reads 9
		synctest.Wait()
		waiting.Store(3)
		time.Sleep(time.Second) // t=2s reads 3
		synctest.Wait()
		waiting.Store(2)
		w, err := s.End(ctx) // sample 2 at t=2.5s
		if err != nil {
			t.Fatal(err)
		}
		want(t, "queue_mean", w.Total.QueueMean, (1.0+9+3+2)/4)
		want(t, "queue_max", w.Total.QueueMax, 9)
		want(t, "kv_usage_max", w.Total.KVUsageMax, 0.9)
		if got := w.End.Sub(w.Start); got != 2500*time.Millisecond {
			t.Errorf("window %v", got)
		}

		// End opened the next window at its own reading.
		waiting.Store(5)
		time.Sleep(time.Second) // t=3s reads 5
		synctest.Wait()
		w2, err := s.End(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want(t, "next queue_mean", w2.Total.QueueMean, (2.0+5+5)/3)
		if !w2.Start.Equal(w.End) {
			t.Errorf("next window starts %v, previous ended %v", w2.Start, w.End)
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	})
}

// TestScraperProgress: with WithProgress, every sample Run takes while a
// window is open hands over the window so far: its hit rate from the
// counters at its start to this sample. Before Begin nothing is handed.
func TestScraperProgress(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var hits, queries atomic.Int64
		h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			fmt.Fprintf(w, "vllm:prefix_cache_hits_total{engine=\"0\"} %d\nvllm:prefix_cache_queries_total{engine=\"0\"} %d\n", hits.Load(), queries.Load())
		})
		var mu sync.Mutex
		var got []Window
		s, err := New(Config{Endpoints: []string{"http://sim/metrics"}, Interval: time.Second}, nil,
			WithHTTPClient(&http.Client{Transport: handlerTransport{h}}),
			WithProgress(func(w Window) { mu.Lock(); got = append(got, w); mu.Unlock() }))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- s.Run(ctx) }()

		hits.Store(100)
		queries.Store(1000)
		time.Sleep(1500 * time.Millisecond) // t=1s: no window open
		synctest.Wait()
		s.Begin(ctx) // t=1.5s, from 100/1000
		hits.Store(100 + 30)
		queries.Store(1000 + 100)
		time.Sleep(time.Second) // t=2s: 30 of 100
		synctest.Wait()
		hits.Store(100 + 30 + 70)
		queries.Store(1000 + 100 + 100)
		time.Sleep(time.Second) // t=3s: 100 of 200
		synctest.Wait()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(got) != 2 {
			t.Fatalf("%d progress calls, want 2 (one a sample while the window is open)", len(got))
		}
		want(t, "hit rate at 2s", got[0].Total.HitRate, 0.3)
		want(t, "hit rate at 3s", got[1].Total.HitRate, 0.5)
		if d := got[1].End.Sub(got[1].Start); d != 1500*time.Millisecond {
			t.Errorf("window so far %v, want 1.5s", d)
		}
	})
}
