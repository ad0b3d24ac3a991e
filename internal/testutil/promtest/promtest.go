package promtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fleetbench/fleetbench/internal/testutil/testserve"
)

const (
	// EnvBinary names the variable holding the prometheus binary's path
	// (default DefaultBinary), as scripts/prometheus.sh reads it.
	EnvBinary = "FLEETBENCH_PROMETHEUS"
	// EnvRequire names the variable that, set to "1", turns a missing
	// binary into a test failure instead of a skip.
	EnvRequire = "FLEETBENCH_REQUIRE_PROMETHEUS"
	// DefaultBinary is where Debian's package installs prometheus.
	DefaultBinary = "/usr/bin/prometheus"
)

// Binary returns the prometheus binary's path. It skips the test when the
// binary is missing, or fails it when EnvRequire is "1".
func Binary(t testing.TB) string {
	t.Helper()
	bin := os.Getenv(EnvBinary)
	if bin == "" {
		bin = DefaultBinary
	}
	if _, err := exec.LookPath(bin); err != nil {
		msg := fmt.Sprintf("no Prometheus at %s (%v): run `scripts/prometheus.sh install` (Debian's prometheus package) or set %s", bin, err, EnvBinary)
		if os.Getenv(EnvRequire) == "1" {
			t.Fatal(msg + "; " + EnvRequire + "=1 requires it")
		}
		t.Skip(msg)
	}
	return bin
}

// Options describe a server.
type Options struct {
	// Targets maps a job name to the host:port whose /metrics it scrapes.
	Targets map[string]string
	// Interval is the scrape interval (default 1 s).
	Interval time.Duration
	// Native enables native histograms (--enable-feature=native-histograms):
	// Prometheus then negotiates the protobuf format and keeps only the
	// native buckets of a histogram that has them.
	Native bool
}

// Server is a running Prometheus.
type Server struct {
	// URL is its HTTP API's base, http://127.0.0.1:PORT.
	URL string
	log *syncBuffer
}

// Start starts bin with opts on a free loopback port and waits until it
// is ready; it is stopped, and its log shown on failure, when the test
// ends.
func Start(t testing.TB, bin string, opts Options) *Server {
	t.Helper()
	if opts.Interval == 0 {
		opts.Interval = time.Second
	}
	dir := t.TempDir()
	var cfg strings.Builder
	fmt.Fprintf(&cfg, "global:\n  scrape_interval: %s\n  scrape_timeout: %s\nscrape_configs:\n", opts.Interval, opts.Interval)
	jobs := make([]string, 0, len(opts.Targets))
	for job := range opts.Targets {
		jobs = append(jobs, job)
	}
	slices.Sort(jobs)
	for _, job := range jobs {
		fmt.Fprintf(&cfg, "  - job_name: %q\n    static_configs:\n      - targets: [%q]\n", job, opts.Targets[job])
	}
	cfgPath := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgPath, []byte(cfg.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := testserve.FreeAddr(t)
	args := []string{"--config.file=" + cfgPath, "--storage.tsdb.path=" + filepath.Join(dir, "data"),
		"--web.listen-address=" + addr, "--log.level=warn"}
	if opts.Native {
		args = append(args, "--enable-feature=native-histograms")
	}
	// Not the test's context, which ends before the cleanups run: the
	// cleanup below stops the server, with SIGINT first.
	cmd := exec.CommandContext(context.WithoutCancel(t.Context()), bin, args...)
	s := &Server{URL: "http://" + addr, log: &syncBuffer{}}
	cmd.Stdout, cmd.Stderr = s.log, s.log
	if err := cmd.Start(); err != nil {
		t.Fatalf("start prometheus: %v", err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("prometheus %s log:\n%s", addr, s.log.String())
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case <-exited:
			t.Fatalf("prometheus exited at start:\n%s", s.log.String())
		default:
		}
		if s.ready(t.Context()) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("prometheus not ready after 30s:\n%s", s.log.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (s *Server) ready(ctx context.Context) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/-/ready", nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// Sample is one series of a query's result: its labels and its value, or
// for a range query its last value and how many points it had.
type Sample struct {
	Labels map[string]string
	Value  float64
	Points int
}

// ErrQuery wraps the error Prometheus answered a query with.
var ErrQuery = errors.New("prometheus refused the query")

// Query evaluates expr at t (/api/v1/query).
func (s *Server) Query(ctx context.Context, expr string, t time.Time) ([]Sample, error) {
	return s.get(ctx, "/api/v1/query", url.Values{"query": {expr}, "time": {unix(t)}})
}

// QueryRange evaluates expr from start to end every step
// (/api/v1/query_range), as a dashboard's time series panel does.
func (s *Server) QueryRange(ctx context.Context, expr string, start, end time.Time, step time.Duration) ([]Sample, error) {
	return s.get(ctx, "/api/v1/query_range", url.Values{"query": {expr}, "start": {unix(start)}, "end": {unix(end)},
		"step": {strconv.FormatFloat(step.Seconds(), 'f', -1, 64)}})
}

func unix(t time.Time) string {
	return strconv.FormatFloat(float64(t.UnixNano())/1e9, 'f', 3, 64)
}

func (s *Server) get(ctx context.Context, path string, q url.Values) ([]Sample, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+path, strings.NewReader(q.Encode()))
	if err != nil {
		return nil, fmt.Errorf("query prometheus: %w", err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("query prometheus: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("read prometheus answer: %w", err)
	}
	var r struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			ResultType string `json:"resultType"`
			Result     []struct {
				Metric map[string]string `json:"metric"`
				Value  []any             `json:"value"`
				Values [][]any           `json:"values"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("parse prometheus answer %q: %w", b, err)
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("%w: %s %s", ErrQuery, q.Get("query"), r.Error)
	}
	var out []Sample
	for _, res := range r.Data.Result {
		smp := Sample{Labels: res.Metric}
		pts := res.Values
		if res.Value != nil {
			pts = [][]any{res.Value}
		}
		smp.Points = len(pts)
		if n := len(pts); n > 0 && len(pts[n-1]) == 2 {
			v, _ := pts[n-1][1].(string)
			smp.Value, _ = strconv.ParseFloat(v, 64)
		}
		out = append(out, smp)
	}
	return out, nil
}

// syncBuffer is a bytes.Buffer safe for the process's writes and a read.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
