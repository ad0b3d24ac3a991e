package servermetrics

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/fleetbench/fleetbench/pkg/openai"
	"github.com/fleetbench/fleetbench/pkg/sim"
)

// startSim runs the built-in simulator on a loopback port for the test.
func startSim(t *testing.T, replicas int, mode sim.Mode) *sim.Sim {
	t.Helper()
	cfg, err := sim.ProfileConfig(sim.DefaultProfile)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Listen = "127.0.0.1:0"
	cfg.TimeScale = 50
	cfg.Replicas = replicas
	cfg.Router = mode
	cfg.ShutdownTimeout = time.Second
	s, err := sim.New(cfg, hclog.NewNullLogger(), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	for s.URL() == "" {
		time.Sleep(time.Millisecond)
	}
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return s
}

// chat sends one unary chat completion and returns its usage and the
// worker named in the response header.
func chat(t *testing.T, base, model, prompt string) (openai.Usage, string) {
	t.Helper()
	body, err := json.Marshal(map[string]any{
		"model":      model,
		"messages":   []map[string]string{{"role": "user", "content": prompt}},
		"max_tokens": 4,
	})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(base+"/v1/chat/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Usage openai.Usage `json:"usage"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %v", resp.StatusCode, err)
	}
	return out.Usage, WorkerFromHeader(resp.Header, nil)
}

// TestSimulatorServerHitRate scrapes the simulator's /metrics around a
// window of requests: the server-side hit rate from its vLLM counters
// matches the client-side one from usage, and the per-worker counts from
// its counters match those from the worker header.
func TestSimulatorServerHitRate(t *testing.T) {
	s := startSim(t, 2, sim.ModeRoundRobin)
	sc, err := New(Config{Endpoints: []string{s.URL() + "/metrics"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	sc.Begin(ctx)

	var prompt, cached float64
	client := WorkerCounts{}
	for i := range 6 {
		// Two conversations in turn: round robin over two workers sends
		// each back to the worker that holds its prefix.
		p := fmt.Sprintf("conversation %d: %s", i%2, strings.Repeat(fmt.Sprintf("word%d ", i%2), 300))
		u, worker := chat(t, s.URL(), s.Config().Model, p)
		prompt += float64(u.PromptTokens)
		if u.PromptTokensDetails != nil {
			cached += float64(u.PromptTokensDetails.CachedTokens)
		}
		if worker == "" {
			t.Fatal("no worker header")
		}
		client.Add(worker, 1, float64(u.PromptTokens))
	}
	w, err := sc.End(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(w.Missing()) != 0 {
		t.Fatalf("missing %v", w.Missing())
	}
	f := w.Total
	if f.HitRate == nil || *f.HitRate <= 0 {
		t.Fatalf("server hit rate %v, want a positive figure (cached %v of %v)", f.HitRate, cached, prompt)
	}
	t.Logf("server hit rate %.4f, client-side %.4f, workers %v", *f.HitRate, cached/prompt, w.Workers)
	if clientRate := cached / prompt; math.Abs(*f.HitRate-clientRate) > 0.01 {
		t.Errorf("server hit rate %.4f, client-side %.4f", *f.HitRate, clientRate)
	}
	if f.Sources["server_hit_rate"] != "vllm:prefix_cache_hits_total / vllm:prefix_cache_queries_total" {
		t.Errorf("hit rate source %q", f.Sources["server_hit_rate"])
	}
	want(t, "requests", f.Requests, 6)
	want(t, "prompt tokens", f.PromptTokens, prompt)
	if f.TTFT.Count != 6 || f.TTFT.P50 == nil {
		t.Errorf("server ttft %+v", f.TTFT)
	}
	for name, c := range client {
		if got := w.Workers[name]; got != c {
			t.Errorf("worker %s: counters %+v, header %+v", name, got, c)
		}
	}
	if len(w.Workers) != 2 {
		t.Errorf("workers %v", w.Workers)
	}
	want(t, "worker skew (round robin)", w.WorkerSkew(), 1)
}
