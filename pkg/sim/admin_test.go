package sim

import (
	"bytes"
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/fleetbench/fleetbench/pkg/openai"
)

func put(t *testing.T, c *http.Client, url, body string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPut, url, bytes.NewBufferString(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestAdminModeSwitchAndFrontendRestart(t *testing.T) {
	s := startSim(t, func(c *Config) { c.Router = ModeRoundRobin })
	c := testClient()
	ctx := context.Background()
	var mb modeBody
	if st, err := get(ctx, c, s.URL()+"/admin/router", &mb); err != nil || st != 200 || mb.Mode != ModeRoundRobin {
		t.Fatalf("GET mode: %d %v %v", st, err, mb.Mode)
	}
	// Round robin visits workers in order and restarts from worker-0 after
	// a frontend restart.
	sent := openai.CompletionRequest{Prompt: words(9, 100), MaxTokens: ptr(2)}
	send := func() string {
		r, err := post(ctx, c, s.URL(), "/v1/completions", sent)
		if err != nil || r.status != 200 {
			t.Fatalf("send: %v %+v", err, r)
		}
		return r.worker
	}
	if a, b := send(), send(); a != "worker-0" || b != "worker-1" {
		t.Fatalf("round robin gave %s, %s", a, b)
	}
	sentTokens := completionTokens(sent.Prompt)
	waitIndexed(t, s, sentTokens, len(sentTokens)/s.cfg.Engine.BlockSize)
	var st State
	if _, err := get(ctx, c, s.URL()+"/admin/state", &st); err != nil || st.IndexedBlocks == 0 {
		t.Fatalf("indexer empty before restart: %v %+v", err, st)
	}
	if code := put(t, c, s.URL()+"/admin/router", `{"mode":"bogus"}`); code != 400 {
		t.Errorf("bogus mode: %d", code)
	}
	r, err := post(ctx, c, s.URL(), "/admin/restart/frontend", []byte("{}"))
	if err != nil || r.status != 200 {
		t.Fatalf("restart frontend: %v %+v", err, r)
	}
	if _, err := get(ctx, c, s.URL()+"/admin/state", &st); err != nil || st.IndexedBlocks != 0 {
		t.Fatalf("indexer not emptied: %+v", st)
	}
	if w := send(); w != "worker-0" {
		t.Errorf("after restart round robin starts at %s", w)
	}
	// Caches survive a frontend restart, but the kv router only learns of
	// blocks stored after it: a new prompt is routed blind, its repeat
	// follows the events to the same worker and hits.
	if code := put(t, c, s.URL()+"/admin/router", "kv"); code != 200 || s.Mode() != ModeKV {
		t.Fatalf("PUT kv: %d, mode %s", code, s.Mode())
	}
	fresh := openai.CompletionRequest{Prompt: words(10, 300), MaxTokens: ptr(2)}
	r1, err := post(ctx, c, s.URL(), "/v1/completions", fresh)
	if err != nil {
		t.Fatal(err)
	}
	freshTokens := completionTokens(fresh.Prompt)
	waitIndexed(t, s, freshTokens, len(freshTokens)/s.cfg.Engine.BlockSize)
	r2, err := post(ctx, c, s.URL(), "/v1/completions", fresh)
	if err != nil || r2.worker != r1.worker || r2.usage.PromptTokensDetails.CachedTokens < 288 {
		t.Errorf("kv repeat: %v worker %s then %s, usage %+v", err, r1.worker, r2.worker, r2.usage)
	}
}

func TestRestartWorkersReadiness(t *testing.T) {
	const scale = 10
	s := startSim(t, func(c *Config) {
		c.TimeScale = scale
		c.StartupTime = 12 * time.Second      // 1.2 s wall
		c.ModelsListedAfter = 6 * time.Second // 600 ms wall
	})
	c := testClient()
	ctx := context.Background()
	body := openai.ChatCompletionRequest{Messages: []openai.Message{{Role: "user", Content: words(5, 200)}}, MaxTokens: ptr(4)}
	r, err := post(ctx, c, s.URL(), "/v1/chat/completions", body)
	if err != nil || r.status != 200 {
		t.Fatalf("warm: %v %+v", err, r)
	}
	if st, _ := get(ctx, c, s.URL()+"/health/ready", nil); st != 200 {
		t.Fatalf("ready before restart: %d", st)
	}
	// A long request in flight fails when workers restart. The engine sets
	// its gauges after the step that finished the warm-up request, which
	// can come after that request's reply: wait for them to drop, or the
	// warm-up's gauge could pass for the long request's and the restart
	// come before the long request reaches a worker.
	running := func() (n float64) {
		for _, w := range s.workers {
			n += testutil.ToFloat64(w.m.running)
		}
		return n
	}
	for deadline := time.Now().Add(10 * time.Second); running() != 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%v sequences still running 10 s after the warm-up's reply", running())
		}
	}
	inflight := make(chan *result, 1)
	go func() {
		b := openai.ChatCompletionRequest{Messages: []openai.Message{{Role: "user", Content: "long"}}, MaxTokens: ptr(2000), IgnoreEOS: ptr(true), Stream: true}
		r, _ := post(ctx, c, s.URL(), "/v1/chat/completions", b)
		inflight <- r
	}()
	for running() == 0 {
		time.Sleep(time.Millisecond)
	}
	start := time.Now()
	if r, err := post(ctx, c, s.URL(), "/admin/restart/workers", []byte("{}")); err != nil || r.status != 200 {
		t.Fatalf("restart workers: %v %+v", err, r)
	}

	// Poll until the workers serve again. The phases are checked by their
	// order and by when they may start at the earliest, not by sleeping
	// into the middle of each, so a slow host cannot make this flake.
	type obs struct {
		at                        time.Duration
		models, ready, completion int
		health                    int
		errType                   string
		cached                    int
	}
	var seen []obs
	for {
		var o obs
		var ml openai.ModelList
		if _, err := get(ctx, c, s.URL()+"/v1/models", &ml); err != nil {
			t.Fatal(err)
		}
		o.models = len(ml.Data)
		o.ready, _ = get(ctx, c, s.URL()+"/health/ready", nil)
		o.health, _ = get(ctx, c, s.URL()+"/health", nil)
		r, err := post(ctx, c, s.URL(), "/v1/chat/completions", body)
		if err != nil {
			t.Fatal(err)
		}
		o.at, o.completion = time.Since(start), r.status
		if r.errBody != nil {
			o.errType = r.errBody.Error.Type
		}
		if r.usage != nil {
			o.cached = r.usage.PromptTokensDetails.CachedTokens
		}
		seen = append(seen, o)
		if o.completion == 200 || o.at > 10*time.Second {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	phase := map[int]int{404: 0, 503: 1, 200: 2}
	first := map[int]time.Duration{}
	last := -1
	for _, o := range seen {
		p, ok := phase[o.completion]
		if !ok || p < last {
			t.Fatalf("completion %d at %v after %v: want 404s (loading), then 503s (listed), then 200", o.completion, o.at, seen)
		}
		if _, ok := first[o.completion]; !ok {
			first[o.completion] = o.at
		}
		last = p
		// Calls go models, ready, health, completion: a phase seen by the
		// completion held for the calls before it, except for the model
		// list, which may have appeared just before a 503.
		switch {
		case o.health != 200:
			t.Errorf("liveness %d while restarting (%+v)", o.health, o)
		case o.completion == 404 && (o.models != 0 || o.ready != 503 || o.errType != "NotFoundError"):
			t.Errorf("loading: %+v, want no models, not ready, NotFoundError", o)
		case o.completion == 503 && (o.ready != 503 || o.errType != "ServiceUnavailableError"):
			t.Errorf("listed: %+v, want not ready, ServiceUnavailableError", o)
		case o.models > 0 && o.completion == 404:
			t.Errorf("model listed, then completion 404: %+v", o)
		case o.completion == 200 && o.cached != 0:
			t.Errorf("after startup the cache is cold, got %d cached tokens", o.cached)
		}
	}
	listed, ready := s.cfg.scaled(s.cfg.ModelsListedAfter), s.cfg.scaled(s.cfg.StartupTime)
	t.Logf("%d polls; first 404 at %v, 503 at %v, 200 at %v (listed after %v, ready after %v)", len(seen), first[404], first[503], first[200], listed, ready)
	for code, want := range map[int]time.Duration{503: listed, 200: ready} {
		if at, ok := first[code]; !ok || at < want {
			t.Errorf("first %d at %v (seen %v), want one, not before %v", code, at, ok, want)
		}
	}
	if _, ok := first[404]; !ok {
		t.Error("no poll saw the loading phase")
	}
	if r := <-inflight; r == nil || r.errBody == nil || !r.done {
		t.Errorf("in-flight stream after restart: %+v", r)
	}
}

// A request the frontend admitted before a worker restart, but that reaches
// its worker after it, fails like the requests in flight: the restarted
// worker has not loaded, and it must not serve a request it never admitted.
func TestRestartWorkersFailsAdmittedRequest(t *testing.T) {
	s := startSim(t, func(c *Config) {
		c.TimeScale = 1
		c.StartupTime = 0 // ready again at once: only the epoch can fail it
		c.ModelsListedAfter = 0
		c.Frontend.Overhead = 400 * time.Millisecond
	})
	c := testClient()
	ctx := context.Background()
	body := openai.ChatCompletionRequest{Messages: []openai.Message{{Role: "user", Content: words(7, 50)}}, MaxTokens: ptr(4), Stream: true}
	got := make(chan *result, 1)
	go func() {
		r, err := post(ctx, c, s.URL(), "/v1/chat/completions", body)
		if err != nil {
			t.Error(err)
		}
		got <- r
	}()
	// The request is in the frontend once its in-flight gauge counts it.
	inflight := s.m.feInflight.WithLabelValues(s.cfg.Model)
	for deadline := time.Now().Add(10 * time.Second); testutil.ToFloat64(inflight) == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the request never reached the frontend")
		}
	}
	if r, err := post(ctx, c, s.URL(), "/admin/restart/workers", []byte("{}")); err != nil || r.status != 200 {
		t.Fatalf("restart workers: %v %+v", err, r)
	}
	r := <-got
	if r == nil || r.errBody == nil || r.chunks != 0 {
		t.Fatalf("request admitted before the restart: %+v, want an error and no tokens", r)
	}
	// Requests admitted after the restart are served.
	body.Stream = false
	if r, err := post(ctx, c, s.URL(), "/v1/chat/completions", body); err != nil || r.status != 200 {
		t.Fatalf("after the restart: %v %+v", err, r)
	}
}
