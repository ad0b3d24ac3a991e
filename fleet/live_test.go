package fleet

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fleetbench/fleetbench/pkg/client"
	"github.com/fleetbench/fleetbench/pkg/servermetrics"
	"github.com/fleetbench/fleetbench/pkg/sim"
	"github.com/fleetbench/fleetbench/pkg/ui"
)

// TestLiveAgentHealth runs three agents over loopback gRPC against a
// server that holds every request, so each agent streams exactly its
// share of the six sessions, and checks that the dashboard's feed shows
// each agent's heartbeat: its streams, its sessions and its CPU in cores.
func TestLiveAgentHealth(t *testing.T) {
	t.Setenv("FLEETBENCH_TEST_KEY", testAPIKey)
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" {
			http.NotFound(w, r) // the preflight's /v1/models
			return
		}
		select {
		case <-release:
		case <-r.Context().Done():
		}
		http.Error(w, "released", http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()

	feed := ui.NewFeed()
	cfg := agentsLevel(srv.URL, t.TempDir())
	cfg.Warmup, cfg.Duration, cfg.Drain = 0, time.Minute, 100*time.Millisecond
	cfg.Live = &Live{Feed: feed}
	cfg.SkipPreflight = true // its completion would be held too
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	var out, errb, logb bytes.Buffer
	go func() {
		_, err := cfg.Run(ctx, hclog.New(&hclog.LoggerOptions{Output: &logb, Level: hclog.Debug}), &out, &errb)
		done <- err
	}()

	healthy := func(as []ui.Agent) bool {
		if len(as) != 3 {
			return false
		}
		for _, a := range as {
			// Six sessions over three agents: two each, every one holding
			// a request.
			if a.CPU == nil || *a.CPU <= 0 || a.Streams == nil || *a.Streams != 2 || a.Sessions == nil || *a.Sessions != 2 {
				return false
			}
		}
		return true
	}
	var last []ui.Agent
	deadline := time.After(20 * time.Second)
	for !healthy(last) {
		select {
		case <-deadline:
			for _, a := range last {
				t.Logf("agent %s: cpu %v streams %v sessions %v heartbeat %.1f s ago", a.ID, show(a.CPU), show(a.Streams), show(a.Sessions), a.LastHeartbeat)
			}
			t.Fatalf("no heartbeat with CPU and 2 streams from each of 3 agents in 20 s (agents: %d)\n%s", len(last), logb.String())
		case err := <-done:
			t.Fatalf("run ended early: %v\n%s", err, errb.String())
		case <-time.After(100 * time.Millisecond):
			last = feed.Snapshot(time.Now()).Agents
		}
	}
	for _, a := range last {
		t.Logf("agent %s: %.3f cores, %d streams, %d sessions", a.ID, *a.CPU, *a.Streams, *a.Sessions)
		if a.LastHeartbeat > 3 {
			t.Errorf("agent %s: last heartbeat %.1f s ago", a.ID, a.LastHeartbeat)
		}
	}
	close(release)
	cancel()
	select {
	case err := <-done:
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Logf("run ended after its context: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("run did not end after its context")
	}
}

func show[T any](p *T) any {
	if p == nil {
		return "null"
	}
	return *p
}

// TestLiveServerHitRate runs a level with agents against the built-in
// simulator with its metrics scraped (--scrape sim): the dashboard's feed
// shows the server's own prefix-cache hit rate of the measured window so
// far while it runs, then of the whole window, labelled as the server's
// and close to the client-side rate of the same window (the simulator
// counts the same tokens).
func TestLiveServerHitRate(t *testing.T) {
	feed := ui.NewFeed()
	cfg := agentsLevel("", t.TempDir())
	cfg.Client = client.Config{}
	cfg.Sim = SimConfig{Profile: sim.DefaultProfile, Replicas: 2, Router: string(sim.ModeKV), TimeScale: 20}
	cfg.Workload.MaxTokens, cfg.Workload.PromptTokens = 32, 500
	cfg.Load.Concurrency = 8
	cfg.Warmup, cfg.Duration = 500*time.Millisecond, 3*time.Second
	cfg.Agents = 2
	cfg.Scrape = servermetrics.Config{Endpoints: []string{servermetrics.SimEndpoint}, Interval: 500 * time.Millisecond}
	cfg.Live = &Live{Feed: feed}
	var out, errb bytes.Buffer
	done := make(chan error, 1)
	go func() {
		_, err := cfg.Run(t.Context(), hclog.NewNullLogger(), &out, &errb)
		done <- err
	}()
	// While the window runs, the page shows its server hit rate so far.
	var soFar []string
	for running := true; running; {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("run: %v\n%s", err, errb.String())
			}
			running = false
		case <-time.After(100 * time.Millisecond):
			if sh := feed.Snapshot(time.Now()).ServerHitRate; sh != nil && strings.HasPrefix(sh.Label, ServerHitRateSoFar) &&
				!slices.Contains(soFar, sh.Label) {
				soFar = append(soFar, sh.Label)
			}
		}
	}
	t.Logf("shown while measuring: %q", soFar)
	if len(soFar) == 0 {
		t.Errorf("no server hit rate labelled %q while the window ran", ServerHitRateSoFar)
	}
	snap := feed.Snapshot(time.Now())
	if snap.ServerHitRate == nil {
		t.Fatalf("no server hit rate in the snapshot; stdout:\n%s", out.String())
	}
	sh := snap.ServerHitRate
	if !strings.HasPrefix(sh.Label, ServerHitRateLabel) || sh.Rate <= 0 || sh.Rate > 1 {
		t.Errorf("server hit rate %+v, want a rate in (0, 1] labelled %q", sh, ServerHitRateLabel)
	}
	if len(snap.Windows) == 0 || snap.Windows[len(snap.Windows)-1].HitRate == nil {
		t.Fatalf("no client-side hit rate of the measured window: %+v", snap.Windows)
	}
	cl := *snap.Windows[len(snap.Windows)-1].HitRate
	t.Logf("server %.4f (%s), client %.4f", sh.Rate, sh.Label, cl)
	if math.Abs(cl-sh.Rate) > 0.02 {
		t.Errorf("server hit rate %.4f, client %.4f: want within 2 points", sh.Rate, cl)
	}
	// The page's event carries it under the name app.js reads.
	b, err := json.Marshal(snap)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"server_hit_rate":{"rate":`) {
		t.Errorf("snapshot JSON lacks server_hit_rate: %.300s", b)
	}
}

// TestAgentsScrapeInterrupted: a level with agents whose server metrics
// are read (--scrape sim), interrupted well before its planned end, reads
// the server at the interrupt and ends at once, instead of waiting for
// the planned end of the measured window (the coordinator's loop ends
// with the run's context, so the span's end never moved).
func TestAgentsScrapeInterrupted(t *testing.T) {
	cfg := agentsLevel("", t.TempDir())
	cfg.Client = client.Config{}
	cfg.Sim = SimConfig{Profile: sim.DefaultProfile, Replicas: 2, Router: string(sim.ModeKV), TimeScale: 20}
	cfg.Workload.MaxTokens, cfg.Workload.PromptTokens = 32, 500
	cfg.Warmup, cfg.Duration = 300*time.Millisecond, time.Minute
	cfg.Agents = 2
	cfg.Scrape = servermetrics.Config{Endpoints: []string{servermetrics.SimEndpoint}, Interval: 500 * time.Millisecond}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	time.AfterFunc(2500*time.Millisecond, cancel)
	start := time.Now()
	var out, errb bytes.Buffer
	if _, err := cfg.Run(ctx, hclog.NewNullLogger(), &out, &errb); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("run: %v\n%s", err, errb.String())
	}
	if took := time.Since(start); took > 15*time.Second {
		t.Errorf("the run took %v after an interrupt at 2.5 s of a one-minute level", took.Round(time.Second))
	}
	res := readResult(t, cfg.OutDir)
	if _, ok := res["server_hit_rate"].(float64); !ok {
		t.Errorf("result.json server_hit_rate %v: want the server read at the interrupt", res["server_hit_rate"])
	}
}
