package sim

import (
	"bytes"
	"context"
	"net/http"
	"testing"
	"time"

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
	send := func() string {
		r, err := post(ctx, c, s.URL(), "/v1/completions", openai.CompletionRequest{Prompt: words(9, 100), MaxTokens: ptr(2)})
		if err != nil || r.status != 200 {
			t.Fatalf("send: %v %+v", err, r)
		}
		return r.worker
	}
	if a, b := send(), send(); a != "worker-0" || b != "worker-1" {
		t.Fatalf("round robin gave %s, %s", a, b)
	}
	time.Sleep(10 * time.Millisecond)
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
	time.Sleep(10 * time.Millisecond)
	r2, err := post(ctx, c, s.URL(), "/v1/completions", fresh)
	if err != nil || r2.worker != r1.worker || r2.usage.PromptTokensDetails.CachedTokens < 288 {
		t.Errorf("kv repeat: %v worker %s then %s, usage %+v", err, r1.worker, r2.worker, r2.usage)
	}
}

func TestRestartWorkersReadiness(t *testing.T) {
	s := startSim(t, func(c *Config) {
		c.TimeScale = 10
		c.StartupTime = 4 * time.Second       // 400 ms wall
		c.ModelsListedAfter = 2 * time.Second // 200 ms wall
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
	// A long request in flight fails when workers restart.
	inflight := make(chan *result, 1)
	go func() {
		b := openai.ChatCompletionRequest{Messages: []openai.Message{{Role: "user", Content: "long"}}, MaxTokens: ptr(2000), IgnoreEOS: ptr(true), Stream: true}
		r, _ := post(ctx, c, s.URL(), "/v1/chat/completions", b)
		inflight <- r
	}()
	time.Sleep(50 * time.Millisecond)
	start := time.Now()
	if r, err := post(ctx, c, s.URL(), "/admin/restart/workers", []byte("{}")); err != nil || r.status != 200 {
		t.Fatalf("restart workers: %v %+v", err, r)
	}
	if r := <-inflight; r == nil || r.errBody == nil || !r.done {
		t.Errorf("in-flight stream after restart: %+v", r)
	}
	var ml openai.ModelList
	if st, _ := get(ctx, c, s.URL()+"/v1/models", &ml); st != 200 || len(ml.Data) != 0 {
		t.Errorf("loading: /v1/models %d %+v", st, ml)
	}
	if st, _ := get(ctx, c, s.URL()+"/health/ready", nil); st != 503 {
		t.Errorf("loading: ready %d", st)
	}
	if st, _ := get(ctx, c, s.URL()+"/health", nil); st != 200 {
		t.Errorf("loading: health %d", st)
	}
	if r, _ := post(ctx, c, s.URL(), "/v1/chat/completions", body); r.status != 404 {
		t.Errorf("loading: completion %d", r.status)
	}
	time.Sleep(time.Until(start.Add(260 * time.Millisecond)))
	if st, _ := get(ctx, c, s.URL()+"/v1/models", &ml); st != 200 || len(ml.Data) != 1 || ml.Data[0].ID != s.cfg.Model {
		t.Errorf("listed: /v1/models %d %+v", st, ml)
	}
	if r, _ := post(ctx, c, s.URL(), "/v1/chat/completions", body); r.status != 503 || r.errBody.Error.Type != "ServiceUnavailableError" {
		t.Errorf("listed: completion %d %+v", r.status, r.errBody)
	}
	if st, _ := get(ctx, c, s.URL()+"/health/ready", nil); st != 503 {
		t.Errorf("listed: ready %d", st)
	}
	time.Sleep(time.Until(start.Add(460 * time.Millisecond)))
	if st, _ := get(ctx, c, s.URL()+"/health/ready", nil); st != 200 {
		t.Errorf("after startup: ready %d", st)
	}
	r, err = post(ctx, c, s.URL(), "/v1/chat/completions", body)
	if err != nil || r.status != 200 || r.usage.PromptTokensDetails.CachedTokens != 0 {
		t.Errorf("after startup the cache is cold: %v %+v", err, r)
	}
}
