package sim

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/fleetbench/fleetbench/pkg/openai"
)

func TestTokenizerRoundTrip(t *testing.T) {
	prompt := chatTokens([]openai.Message{{Role: openai.RoleUser, Content: "Summarize: the report, page 3."}})
	for _, lead := range []bool{false, true} {
		c := generate(prompt, 7, OutputConfig{Mean: 300, Sigma: 0.5, Min: 50, Max: 600}, lengthParams{maxTokens: 1000}, lead)
		if got := tokenize(nil, c.text); !slices.Equal(got, c.ids) {
			t.Fatalf("leading space %v: tokenize(reply) has %d tokens, want the %d generated", lead, len(got), len(c.ids))
		}
	}
	// The next turn's prompt starts with this turn's prompt and reply.
	msgs := []openai.Message{{Role: openai.RoleUser, Content: "hello there"}}
	p1 := chatTokens(msgs)
	c := generate(p1, 1, OutputConfig{Mean: 40, Sigma: 0.5, Min: 10, Max: 100}, lengthParams{maxTokens: 100}, false)
	msgs = append(msgs, openai.Message{Role: openai.RoleAssistant, Content: c.text}, openai.Message{Role: openai.RoleUser, Content: "more"})
	p2 := chatTokens(msgs)
	want := append(slices.Clone(p1), c.ids...)
	if !slices.Equal(p2[:len(want)], want) {
		t.Fatal("next turn's prompt does not start with prompt + reply tokens")
	}
	if got := tokenize(nil, "Hello, world!  x\ny"); len(got) != 6 {
		t.Fatalf("tokenize: got %d tokens, want 6", len(got))
	}
}

func TestBlockPoolLRU(t *testing.T) {
	p := newBlockPool(4)
	if !p.reserve(3) {
		t.Fatal("reserve 3 of 4")
	}
	for _, h := range []uint64{1, 2, 3} {
		p.commit(h)
	}
	// Release newest first, as a finished sequence does: 3 is evicted first.
	for _, h := range []uint64{3, 2, 1} {
		p.release(h)
	}
	if p.free() != 1 || p.lruLen != 3 || p.usage() != 0 {
		t.Fatalf("free %d lru %d usage %v", p.free(), p.lruLen, p.usage())
	}
	if !p.reserve(2) {
		t.Fatal("reserve 2 with evictions")
	}
	if p.evictions != 1 || p.match([]uint64{1, 2, 3}, 3) != 2 {
		t.Fatalf("evictions %d match %d, want 1 and 2", p.evictions, p.match([]uint64{1, 2, 3}, 3))
	}
	if p.reserve(5) {
		t.Fatal("reserve beyond capacity succeeded")
	}
	// Committing a hash that exists shares it instead of storing twice.
	p.commit(1)
	if p.blocks[1].refs != 1 || p.private != 1 {
		t.Fatalf("refs %d private %d", p.blocks[1].refs, p.private)
	}
	ev := p.drainEvents()
	if len(ev) != 4 || !ev[0].stored || ev[3].stored || ev[3].hash != 3 {
		t.Fatalf("events %+v", ev)
	}
}

func TestStreamingFormatAndUsage(t *testing.T) {
	s := startSim(t, nil)
	c := testClient()
	ctx := context.Background()
	msgs := []openai.Message{{Role: openai.RoleSystem, Content: "You are terse."}, {Role: openai.RoleUser, Content: words(1, 500)}}
	r1, err := post(ctx, c, s.URL(), "/v1/chat/completions", chatBody(msgs, 40))
	if err != nil {
		t.Fatal(err)
	}
	if r1.status != 200 || !r1.done || r1.usage == nil || r1.worker == "" {
		t.Fatalf("status %d done %v usage %v worker %q", r1.status, r1.done, r1.usage, r1.worker)
	}
	if !strings.Contains(r1.events[0], `"role":"assistant"`) {
		t.Errorf("first event %s lacks the assistant role", r1.events[0])
	}
	if last := r1.events[len(r1.events)-2]; !strings.Contains(last, `"choices":[]`) || !strings.Contains(last, `"cached_tokens"`) {
		t.Errorf("usage chunk %s", last)
	}
	u := r1.usage
	if u.PromptTokens != len(chatTokens(msgs)) || u.CompletionTokens+u.PromptTokens != u.TotalTokens || u.PromptTokensDetails.CachedTokens != 0 {
		t.Errorf("first usage %+v %+v", u, u.PromptTokensDetails)
	}
	if got := len(tokenize(nil, r1.content)); got != u.CompletionTokens {
		t.Errorf("content has %d tokens, usage says %d", got, u.CompletionTokens)
	}
	// The second turn, resending the reply, hits the first turn's blocks,
	// including those of the reply.
	msgs = append(msgs, openai.Message{Role: openai.RoleAssistant, Content: r1.content}, openai.Message{Role: openai.RoleUser, Content: "Why?"})
	bs := s.cfg.Engine.BlockSize
	wantCached := (u.PromptTokens + u.CompletionTokens - 1) / bs * bs
	waitIndexed(t, s, chatTokens(msgs), wantCached/bs)
	r2, err := post(ctx, c, s.URL(), "/v1/chat/completions", chatBody(msgs, 40))
	if err != nil {
		t.Fatal(err)
	}
	if r2.worker != r1.worker || r2.usage.PromptTokensDetails.CachedTokens != wantCached {
		t.Errorf("turn 2 on %s (turn 1 on %s) cached %d, want %d", r2.worker, r1.worker, r2.usage.PromptTokensDetails.CachedTokens, wantCached)
	}

	// Completions endpoint, streaming and not.
	cb := openai.CompletionRequest{Prompt: "Once upon a time", MaxTokens: ptr(12), Stream: true}
	r3, err := post(ctx, c, s.URL(), "/v1/completions", cb)
	if err != nil || r3.status != 200 || !r3.done || r3.usage != nil || r3.finish == "" {
		t.Fatalf("completion stream: %v %+v", err, r3)
	}
	cb.Stream = false
	r4, err := post(ctx, c, s.URL(), "/v1/completions", cb)
	if err != nil || r4.status != 200 || r4.content != r3.content || r4.usage.CompletionTokens != 12 || !strings.HasPrefix(r4.content, " ") {
		t.Fatalf("completion unary: %v %+v (stream said %q)", err, r4, r3.content)
	}
}

func TestLengthControlsAndDeterminism(t *testing.T) {
	s := startSim(t, func(c *Config) { c.Output = OutputConfig{Mean: 30, Sigma: 0.3, Min: 20, Max: 40} })
	c := testClient()
	ctx := context.Background()
	msgs := []openai.Message{{Role: openai.RoleUser, Content: "Tell me about caching."}}
	cases := []struct {
		name       string
		max, min   *int
		ignoreEOS  bool
		wantN      func(n int) bool
		wantFinish string
	}{
		{"natural", nil, nil, false, func(n int) bool { return n >= 20 && n <= 40 }, "stop"},
		{"max_tokens caps", ptr(5), nil, false, func(n int) bool { return n == 5 }, "length"},
		{"min_tokens extends", nil, ptr(100), false, func(n int) bool { return n == 100 }, "stop"},
		{"ignore_eos runs to max", ptr(300), nil, true, func(n int) bool { return n == 300 }, "length"},
		{"min equals max", ptr(60), ptr(60), false, func(n int) bool { return n == 60 }, "length"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, stream := range []bool{true, false} {
				b := openai.ChatCompletionRequest{Messages: msgs, Stream: stream, MaxTokens: tc.max, MinTokens: tc.min, IgnoreEOS: ptr(tc.ignoreEOS)}
				r, err := post(ctx, c, s.URL(), "/v1/chat/completions", b)
				if err != nil {
					t.Fatal(err)
				}
				n := len(tokenize(nil, r.content))
				if !tc.wantN(n) || r.finish != tc.wantFinish {
					t.Errorf("stream %v: %d tokens, finish %q", stream, n, r.finish)
				}
			}
		})
	}
	// Determinism: same prompt and seed give the same reply, another seed
	// another one.
	reply := func(seed int64) string {
		r, err := post(ctx, c, s.URL(), "/v1/chat/completions", openai.ChatCompletionRequest{Messages: msgs, Seed: ptr(seed), MaxTokens: ptr(30), MinTokens: ptr(30)})
		if err != nil {
			t.Fatal(err)
		}
		return r.content
	}
	if a, b, d := reply(1), reply(1), reply(2); a != b || a == d {
		t.Errorf("seed 1 twice: %q vs %q; seed 2: %q", a, b, d)
	}
}

func TestErrorResponses(t *testing.T) {
	s := startSim(t, func(c *Config) { c.Engine.MaxModelLen = 1000 })
	c := testClient()
	ctx := context.Background()
	user := []openai.Message{{Role: openai.RoleUser, Content: "hi"}}
	// Types, params and messages as vLLM (vllm/entrypoints/openai/engine/
	// serving.py create_error_response, serve/utils/server_utils.py
	// validation_exception_handler) writes them.
	cases := []struct {
		name   string
		method string
		path   string
		body   any
		status int
		typ    string
		param  any // nil for JSON null
		msg    string
	}{
		{"invalid json", "POST", "/v1/chat/completions", []byte("{not json"), 400, "Bad Request", "body.2", "'type': 'json_invalid'"},
		{"body not an object", "POST", "/v1/completions", []byte("[1]"), 400, "Bad Request", "body", "'loc': ('body',)"},
		{"max_tokens not a number", "POST", "/v1/completions", []byte(`{"prompt":"x","max_tokens":"9"}`), 400, "Bad Request", "body.max_tokens", "valid integer"},
		{"unknown model", "POST", "/v1/chat/completions", openai.ChatCompletionRequest{Model: "gpt-9", Messages: user}, 404, "NotFoundError", "model", "The model `gpt-9` does not exist."},
		{"missing messages", "POST", "/v1/chat/completions", map[string]any{"model": s.cfg.Model}, 400, "Bad Request", "body.messages", "Field required"},
		{"prompt too long", "POST", "/v1/chat/completions", openai.ChatCompletionRequest{Messages: []openai.Message{{Role: "user", Content: words(3, 1200)}}}, 400, "BadRequestError", "input_tokens", "maximum context length is 1000 tokens"},
		{"prompt plus max_tokens too long", "POST", "/v1/completions", openai.CompletionRequest{Prompt: words(4, 900), MaxTokens: ptr(200)}, 400, "BadRequestError", "max_tokens", "'max_tokens' or 'max_completion_tokens' is too large: 200."},
		{"max_tokens zero", "POST", "/v1/completions", openai.CompletionRequest{Prompt: "x", MaxTokens: ptr(0)}, 400, "BadRequestError", "max_tokens", "max_tokens must be at least 1, got 0. (parameter=max_tokens, value=0)"},
		{"min above max", "POST", "/v1/completions", openai.CompletionRequest{Prompt: "x", MaxTokens: ptr(3), MinTokens: ptr(5)}, 400, "BadRequestError", nil, "min_tokens must be less than or equal to max_tokens=3, got 5."},
		{"min negative", "POST", "/v1/completions", openai.CompletionRequest{Prompt: "x", MinTokens: ptr(-1)}, 400, "BadRequestError", nil, "min_tokens must be greater than or equal to 0, got -1."},
		{"empty prompt", "POST", "/v1/completions", openai.CompletionRequest{Prompt: ""}, 400, "Bad Request", "body", "Either prompt or prompt_embeds must be provided and non-empty."},
		{"GET on a POST endpoint", "GET", "/v1/chat/completions", nil, 405, "Method Not Allowed", nil, "Method Not Allowed"},
		{"unknown path", "POST", "/v1/embeddings", []byte("{}"), 404, "Not Found", nil, "Not Found"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, ok := tc.body.([]byte)
			if !ok && tc.body != nil {
				var err error
				if b, err = json.Marshal(tc.body); err != nil {
					t.Fatal(err)
				}
			}
			req, err := http.NewRequestWithContext(ctx, tc.method, s.URL()+tc.path, bytes.NewReader(b))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			raw := mustRead(resp)
			resp.Body.Close()
			if resp.StatusCode != tc.status || resp.Header.Get("Content-Type") != "application/json" {
				t.Fatalf("status %d, content type %q, want %d JSON: %s", resp.StatusCode, resp.Header.Get("Content-Type"), tc.status, raw)
			}
			info := checkErrorBody(t, []byte(raw), tc.status)
			if info["type"] != tc.typ || info["param"] != tc.param || !strings.Contains(info["message"].(string), tc.msg) {
				t.Errorf("type %q param %v message %q; want %q, %v, containing %q", info["type"], info["param"], info["message"], tc.typ, tc.param, tc.msg)
			}
		})
	}
	if got := testutil.ToFloat64(s.m.feRequests.WithLabelValues(s.cfg.Model, "chat_completions", "unary", "error")); got < 3 {
		t.Errorf("dynamo_frontend_requests_total errors = %v", got)
	}
}

// checkErrorBody checks that raw is exactly vLLM's error layout,
// {"error": {"message", "type", "param", "code"}} with param present (null
// or a string) and code the status, and returns the inner object.
func checkErrorBody(t testing.TB, raw []byte, status int) map[string]any {
	t.Helper()
	var outer map[string]map[string]any
	if err := json.Unmarshal(raw, &outer); err != nil || len(outer) != 1 || outer["error"] == nil {
		t.Fatalf("error body %s: want one key \"error\" holding an object (%v)", raw, err)
	}
	info := outer["error"]
	keys := slices.Sorted(maps.Keys(info))
	if !slices.Equal(keys, []string{"code", "message", "param", "type"}) {
		t.Fatalf("error body %s: keys %v, want code message param type", raw, keys)
	}
	if code, ok := info["code"].(float64); !ok || int(code) != status {
		t.Errorf("error body %s: code %v, want the number %d", raw, info["code"], status)
	}
	if msg, ok := info["message"].(string); !ok || msg == "" {
		t.Errorf("error body %s: message %v", raw, info["message"])
	}
	if typ, ok := info["type"].(string); !ok || typ == "" {
		t.Errorf("error body %s: type %v", raw, info["type"])
	}
	if p, ok := info["param"].(string); info["param"] != nil && (!ok || p == "") {
		t.Errorf("error body %s: param %v, want null or a name", raw, info["param"])
	}
	return info
}

// A client that goes away in the middle of its request frees the
// sequence: the handler wakes, marks it aborted and the worker drops it at
// its next step, for a stream and for a unary request alike. Without that
// the request would hold its slot for the ~50 s its 4,000 tokens take.
func TestClientGoneFreesItsSequence(t *testing.T) {
	s := startSim(t, func(c *Config) { c.Replicas = 1; c.TimeScale = 1 })
	running := func() float64 { return testutil.ToFloat64(s.workers[0].m.running) }
	waitRunning := func(t *testing.T, want float64) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for running() != want {
			if time.Now().After(deadline) {
				t.Fatalf("vllm:num_requests_running is %v after 10 s, want %v", running(), want)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	for _, stream := range []bool{true, false} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			body, err := json.Marshal(openai.CompletionRequest{Prompt: "Once upon a time", MaxTokens: ptr(4000), IgnoreEOS: ptr(true), Stream: stream})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL()+"/v1/completions", bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() {
				resp, err := testClient().Do(req)
				if err != nil {
					done <- err
					return
				}
				defer resp.Body.Close()
				if stream {
					// The first event is written: the handler is in its
					// write loop when the client leaves.
					line, err := bufio.NewReader(resp.Body).ReadString('\n')
					if err != nil {
						done <- fmt.Errorf("read the first event: %w", err)
						return
					}
					if !strings.HasPrefix(line, "data: ") {
						done <- fmt.Errorf("first line %q, want an event", line)
						return
					}
					cancel()
				}
				_, err = io.Copy(io.Discard, resp.Body)
				done <- err
			}()
			waitRunning(t, 1)
			if !stream {
				cancel()
			}
			if err := <-done; err == nil {
				t.Fatal("the request finished before the client left")
			}
			waitRunning(t, 0)
		})
	}
}
