package client

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetbench/fleetbench/pkg/openai"
	"github.com/fleetbench/fleetbench/pkg/sse"
	"github.com/hashicorp/go-hclog"
)

func abs(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// TestStreamTimings checks TTFT, ITL, TPOT and E2E against a scripted server
// on loopback: each must be within 1 ms of the script. Not parallel, so other
// tests do not steal the CPU from the timing. The server records when it
// really flushed each token; an attempt in which the server itself missed
// its script by more than half a millisecond (a busy machine) is retried, so
// the assertions judge the client's measurement, not the scheduler; so is an
// on-time attempt that the client saw late, which a busy machine also
// causes now and then, while a systematic error misses in every attempt.
func TestStreamTimings(t *testing.T) {
	const (
		tol      = time.Millisecond
		slack    = 500 * time.Microsecond
		attempts = 20
	)
	s := &script{First: 50 * time.Millisecond, Gap: 20 * time.Millisecond, Tokens: 10}
	srv := httptest.NewServer(s)
	defer srv.Close()
	c := mustNew(t, newConfig(srv.URL))
	// A first request opens the connection, so the measured one reuses it.
	if res := c.Stream(t.Context(), userRequest("warm")); !res.OK() {
		t.Fatalf("warm-up request failed: %v", res.Err)
	}
	var problems []string // the last on-time attempt's
	for attempt := 1; attempt <= attempts; attempt++ {
		res := c.Stream(t.Context(), userRequest("hi"))
		if !res.OK() {
			t.Fatalf("Stream: class %q err %v", res.Class, res.Err)
		}
		sent, base := s.observed()
		// The script runs from when the server picked the request up; a
		// busy machine delays that pickup and every flush, which is the
		// server's lateness, not the client's measurement error.
		late := max(0, base.Sub(res.Start))
		for i, at := range sent {
			late = max(late, at.Sub(base.Add(s.First+time.Duration(i)*s.Gap)))
		}
		t.Logf("attempt %d: TTFB %v TTFT %v E2E %v median ITL %v TPOT %v (server late by up to %v)",
			attempt, res.TTFB, res.TTFT, res.E2E, median(res.ITL), res.TPOT(), late)
		if late > slack {
			continue
		}
		// On time: the measurement must match. A machine busy with other
		// tests (make test runs packages in parallel) may still wake the
		// client late once in a while, so a miss is retried; a systematic
		// error misses every time.
		if problems = timingProblems(s, sent, res, tol, late); len(problems) == 0 {
			return
		}
		t.Logf("attempt %d off: %s", attempt, strings.Join(problems, "; "))
	}
	if problems == nil {
		t.Skipf("the server missed its script in all %d attempts; machine too busy to judge timing", attempts)
	}
	t.Errorf("no on-time attempt of %d measured within %v; the last: %s", attempts, tol, strings.Join(problems, "; "))
}

// timingProblems lists how res differs from the script s (whose flushes
// were at sent) by more than tol, or from what the script sent. Against
// the script itself (TTFT, E2E) the server's own lateness, late, is added
// to tol: the client cannot see a token before the server sent it. What
// the client saw against the server's real flushes is held to tol.
func timingProblems(s *script, sent []time.Time, res *Result, tol, late time.Duration) []string {
	var p []string
	add := func(format string, args ...any) { p = append(p, fmt.Sprintf(format, args...)) }
	if !res.ConnReused {
		add("ConnReused = false, want a pooled connection")
	}
	wantE2E := s.First + time.Duration(s.Tokens-1)*s.Gap
	if d := abs(res.TTFT - s.First); d > tol+late {
		add("TTFT = %v, script %v (off by %v > %v)", res.TTFT, s.First, d, tol+late)
	}
	if d := abs(res.E2E - wantE2E); d > tol+late {
		add("E2E = %v, script %v (off by %v > %v)", res.E2E, wantE2E, d, tol+late)
	}
	if len(res.ITL) != s.Tokens-1 {
		add("len(ITL) = %d, want %d", len(res.ITL), s.Tokens-1)
		return p
	}
	if d := abs(median(res.ITL) - s.Gap); d > tol {
		add("median ITL = %v, script %v (off by %v > %v)", median(res.ITL), s.Gap, d, tol)
	}
	if d := abs(res.TPOT() - s.Gap); d > tol {
		add("TPOT = %v, script %v", res.TPOT(), s.Gap)
	}
	if res.TTFB <= 0 || res.TTFB >= res.TTFT-s.First/2 {
		add("TTFB = %v, want the role chunk's early arrival (before %v)", res.TTFB, res.TTFT-s.First/2)
	}
	// One clock on both sides: the client must see each token within the
	// tolerance of the server's flush.
	if d := abs(res.Start.Add(res.TTFT).Sub(sent[0])); d > tol {
		add("first token seen %v away from its flush", d)
	}
	if d := abs(res.Start.Add(res.E2E).Sub(sent[len(sent)-1])); d > tol {
		add("end seen %v away from the last flush", d)
	}
	if res.OutputTokens != s.Tokens || !res.UsageReported || res.PromptTokens != 10 || res.CachedTokens != 4 {
		add("usage = out %d prompt %d cached %d reported %t", res.OutputTokens, res.PromptTokens, res.CachedTokens, res.UsageReported)
	}
	if res.FinishReason != openai.FinishLength || res.Text != strings.Repeat(" tok", s.Tokens) {
		add("finish %q text %q", res.FinishReason, res.Text)
	}
	return p
}

// hijackReset sends headers and one chunk, then resets the connection.
func hijackReset(w http.ResponseWriter, r *http.Request) {
	conn, buf, err := w.(http.Hijacker).Hijack()
	if err != nil {
		return
	}
	defer conn.Close()
	data := chunk("hello", "")
	fmt.Fprintf(buf, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n", len(data), data)
	buf.Flush()
	time.Sleep(10 * time.Millisecond)
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0) // RST instead of FIN
	}
}

// hang streams a role chunk, optionally one token, then waits for the client.
func hang(withToken bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, roleChunk())
		if withToken {
			fmt.Fprint(w, chunk("a", ""))
		}
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}
}

// longLine streams a 10 MB data line in 64 KiB writes.
func longLine(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/event-stream")
	fmt.Fprint(w, chunk("a", "")+"data: ")
	block := bytes.Repeat([]byte("x"), 64<<10)
	for range (10 << 20) / len(block) {
		if _, err := w.Write(block); err != nil {
			return
		}
	}
}

func status(code int, contentType, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", contentType)
		w.WriteHeader(code)
		fmt.Fprint(w, body)
	}
}

func TestStreamFailures(t *testing.T) {
	tests := []struct {
		name    string
		handler http.HandlerFunc
		cfg     func(*Config)
		cancel  time.Duration // cancel the caller's ctx after this long
		class   Class
		is      error  // errors.Is target, when set
		msg     string // substring of the error, when set
	}{
		{name: "malformed json", handler: writeEvents(chunk("a", ""), "data: {\"choices\": [\n\n"), class: ClassProtocol, msg: "decode chunk"},
		{name: "trailing garbage", handler: writeEvents(`data: {"choices":[]} x` + "\n\n"), class: ClassProtocol, is: errTrailingData},
		{name: "not sse", handler: writeEvents("hello world\nthis is not sse\n"), class: ClassStreamCut, is: ErrTruncated},
		{name: "cut mid event", handler: writeEvents(chunk("a", ""), "data: {\"choi"), class: ClassStreamCut, is: ErrTruncated},
		{name: "eof before finish", handler: writeEvents(roleChunk(), chunk("a", "")), class: ClassStreamCut, is: ErrTruncated},
		{name: "429 json", handler: status(429, "application/json", `{"error":{"message":"rate limited","type":"rate_limit","code":429}}`), class: ClassRateLimited, msg: "http status 429: rate limited"},
		{name: "500 text", handler: status(500, "text/plain", "Internal Server Error\n"), class: ClassHTTP5xx, msg: "http status 500: Internal Server Error"},
		{name: "503 json old vllm", handler: status(503, "application/json", `{"object":"error","message":"overloaded","type":"ServiceUnavailable","code":503}`), class: ClassHTTP5xx, msg: "overloaded"},
		{name: "503 text", handler: status(503, "text/html", "<h1>busy</h1>"), class: ClassHTTP5xx, msg: "busy"},
		{name: "404 fastapi", handler: status(404, "application/json", `{"detail":"Not Found"}`), class: ClassNotFound, msg: "Not Found"},
		{name: "redirect", handler: func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/elsewhere", http.StatusFound) }, class: ClassHTTP4xx, msg: "302"},
		{name: "reset mid-stream", handler: hijackReset, class: ClassStreamCut, is: ErrTruncated},
		{name: "first token timeout", handler: hang(false), cfg: func(c *Config) { c.FirstTokenTimeout = 100 * time.Millisecond }, class: ClassTimeout, is: ErrFirstTokenTimeout},
		{name: "request timeout", handler: hang(true), cfg: func(c *Config) { c.RequestTimeout = 100 * time.Millisecond }, class: ClassTimeout, is: ErrRequestTimeout},
		{name: "first token timeout not hit", handler: hang(true), cfg: func(c *Config) {
			c.FirstTokenTimeout = 50 * time.Millisecond
			c.RequestTimeout = 150 * time.Millisecond
		}, class: ClassTimeout, is: ErrRequestTimeout},
		{name: "ten megabyte line", handler: longLine, class: ClassProtocol, is: sse.ErrLineTooLong},
		{name: "error object", handler: writeEvents(chunk("a", ""), `data: {"error":{"message":"engine died","type":"InternalServerError","code":500}}`+"\n\n", doneEvent), class: ClassHTTP5xx, msg: "engine died"},
		{name: "old error object", handler: writeEvents(`data: {"object":"error","message":"bad","type":"BadRequestError","code":400}` + "\n\n"), class: ClassBadRequest, msg: "bad"},
		{name: "error event", handler: writeEvents("event: error\ndata: upstream gone\n\n"), class: ClassProtocol, msg: "upstream gone"},
		{name: "json not stream", handler: status(200, "application/json", `{"choices":[]}`), class: ClassProtocol, is: ErrNotStreamed},
		{name: "cancelled", handler: hang(true), cancel: 50 * time.Millisecond, class: ClassCancelled, is: context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(tt.handler)
			defer srv.Close()
			cfg := newConfig(srv.URL)
			if tt.cfg != nil {
				tt.cfg(&cfg)
			}
			c := mustNew(t, cfg)
			ctx := t.Context()
			if tt.cancel > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithCancel(ctx)
				time.AfterFunc(tt.cancel, cancel)
			}
			res := c.Stream(ctx, userRequest("hi"))
			if res == nil {
				t.Fatal("Stream returned nil")
			}
			t.Logf("class %q err: %v", res.Class, res.Err)
			if res.Class != tt.class || res.Err == nil {
				t.Fatalf("class %q err %v, want class %q", res.Class, res.Err, tt.class)
			}
			if tt.is != nil && !errors.Is(res.Err, tt.is) {
				t.Errorf("err %v, want errors.Is %v", res.Err, tt.is)
			}
			if tt.msg != "" && !strings.Contains(res.Err.Error(), tt.msg) {
				t.Errorf("err %q, want it to contain %q", res.Err, tt.msg)
			}
			if res.E2E <= 0 {
				t.Errorf("E2E = %v, want the time to the failure", res.E2E)
			}
		})
	}
}

func TestStreamConnectFailures(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	t.Run("refused", func(t *testing.T) {
		c := mustNew(t, newConfig("http://"+addr))
		res := c.Stream(t.Context(), userRequest("hi"))
		if res.Class != ClassConnect || res.Status != 0 {
			t.Fatalf("class %q status %d err %v, want connect", res.Class, res.Status, res.Err)
		}
	})
	t.Run("dial timeout", func(t *testing.T) {
		cfg := newConfig("http://" + addr)
		cfg.ConnectTimeout = time.Nanosecond
		c := mustNew(t, cfg)
		res := c.Stream(t.Context(), userRequest("hi"))
		if res.Class != ClassTimeout {
			t.Fatalf("class %q err %v, want timeout", res.Class, res.Err)
		}
	})
	t.Run("nil request", func(t *testing.T) {
		c := mustNew(t, newConfig("http://"+addr))
		if res := c.Stream(t.Context(), nil); res == nil || !errors.Is(res.Err, ErrNilRequest) {
			t.Fatalf("Stream(nil) = %+v", res)
		}
	})
}

func TestStreamSuccessEndings(t *testing.T) {
	tests := []struct {
		name   string
		events []string
	}{
		{name: "done", events: []string{chunk("a", ""), chunk("b", "stop"), doneEvent}},
		{name: "eof after finish", events: []string{chunk("a", ""), chunk("b", "stop")}},
		{name: "done without blank line", events: []string{chunk("a", ""), chunk("b", ""), "data: [DONE]\n"}},
		{name: "crlf and comments", events: []string{": ping\r\n\r\n", strings.ReplaceAll(chunk("a", ""), "\n", "\r\n"), chunk("b", "stop"), "data:[DONE]\r\n\r\n"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(writeEvents(tt.events...))
			defer srv.Close()
			c := mustNew(t, newConfig(srv.URL))
			for i := range 2 {
				res := c.Stream(t.Context(), userRequest("hi"))
				if !res.OK() || res.Text != "ab" || res.OutputTokens != 2 || res.UsageReported {
					t.Fatalf("request %d: class %q err %v text %q out %d", i, res.Class, res.Err, res.Text, res.OutputTokens)
				}
				if i == 1 && !res.ConnReused {
					t.Errorf("request %d: a new connection; want the first one, whose body was read to its end", i)
				}
			}
		})
	}
}

func TestStreamUsage(t *testing.T) {
	t.Run("reported with cache", func(t *testing.T) {
		srv := httptest.NewServer(writeEvents(roleChunk(), chunk("a", ""), chunk("b", "stop"), usageChunk(100, 7, 64), doneEvent))
		defer srv.Close()
		res := mustNew(t, newConfig(srv.URL)).Stream(t.Context(), userRequest("hi"))
		if !res.OK() || !res.UsageReported || res.PromptTokens != 100 || res.OutputTokens != 7 || res.CachedTokens != 64 {
			t.Fatalf("%+v", res)
		}
		if res.FinishReason != "stop" || len(res.ITL) != 1 {
			t.Fatalf("finish %q ITL %v", res.FinishReason, res.ITL)
		}
	})
	t.Run("reported without details", func(t *testing.T) {
		srv := httptest.NewServer(writeEvents(chunk("a", "stop"), usageChunk(9, 1, -1), doneEvent))
		defer srv.Close()
		res := mustNew(t, newConfig(srv.URL)).Stream(t.Context(), userRequest("hi"))
		if !res.OK() || !res.UsageReported || res.PromptTokens != 9 || res.CachedTokens != 0 {
			t.Fatalf("%+v", res)
		}
	})
	t.Run("missing counts chunks", func(t *testing.T) {
		srv := httptest.NewServer(writeEvents(roleChunk(), chunk("a", ""), chunk("b", ""), chunk("c", "stop"), doneEvent))
		defer srv.Close()
		res := mustNew(t, newConfig(srv.URL)).Stream(t.Context(), userRequest("hi"))
		if !res.OK() || res.UsageReported || res.OutputTokens != 3 || res.Text != "abc" {
			t.Fatalf("%+v", res)
		}
	})
	t.Run("reasoning counts as first token", func(t *testing.T) {
		srv := httptest.NewServer(writeEvents(
			`data: {"choices":[{"index":0,"delta":{"reasoning_content":"think"},"finish_reason":null}]}`+"\n\n",
			`data: {"choices":[{"index":0,"delta":{"reasoning":" more"},"finish_reason":null}]}`+"\n\n",
			chunk("answer", "stop"), doneEvent))
		defer srv.Close()
		res := mustNew(t, newConfig(srv.URL)).Stream(t.Context(), userRequest("hi"))
		if !res.OK() || res.Reasoning != "think more" || res.Text != "answer" || res.OutputTokens != 3 || len(res.ITL) != 2 {
			t.Fatalf("%+v", res)
		}
	})
}

func TestStreamCompletions(t *testing.T) {
	var cap captured
	srv := httptest.NewServer(cap.wrap(writeEvents(
		`data: {"object":"text_completion","choices":[{"index":0,"text":"Hel","finish_reason":null}]}`+"\n\n",
		`data: {"object":"text_completion","choices":[{"index":0,"text":"lo","finish_reason":"length"}]}`+"\n\n",
		`data: {"object":"text_completion","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}`+"\n\n",
		doneEvent)))
	defer srv.Close()
	cfg := newConfig(srv.URL + "/v1/")
	cfg.Endpoint = EndpointCompletions
	res := mustNew(t, cfg).Stream(t.Context(), &Request{Prompt: "Say hi", MaxTokens: 2})
	if !res.OK() || res.Text != "Hello" || res.OutputTokens != 2 || res.FinishReason != "length" {
		t.Fatalf("%+v", res)
	}
	path, _, body, _ := cap.get()
	if path != "/v1/completions" {
		t.Errorf("path %q", path)
	}
	if string(body["prompt"]) != `"Say hi"` || string(body["max_tokens"]) != "2" || string(body["stream"]) != "true" ||
		string(body["stream_options"]) != `{"include_usage":true}` || body["messages"] != nil {
		t.Errorf("body %s", body)
	}
}

func TestStreamRequestBodyAndHeaders(t *testing.T) {
	var cap captured
	handler := cap.wrap(writeEvents(chunk("a", "stop"), doneEvent))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Served-By", "worker-3")
		handler(w, r)
	}))
	defer srv.Close()
	minTok, temp, seed := 16, 0.0, int64(42)
	cfg := newConfig(srv.URL)
	cfg.MinTokens, cfg.IgnoreEOS, cfg.Temperature, cfg.Seed = &minTok, true, &temp, &seed
	cfg.ExtraBody = json.RawMessage(`{"top_k": 5, "max_tokens": 99, "chat_template_kwargs": {"enable_thinking": false}}`)
	cfg.Headers = map[string]string{"X-Tenant": "t1", "X-Session-ID": "default"}
	cfg.WorkerHeader = "X-Served-By"
	res := mustNew(t, cfg).Stream(t.Context(), &Request{
		Messages:  []openai.Message{{Role: openai.RoleSystem, Content: "be <brief>"}, {Role: openai.RoleUser, Content: "hi"}},
		MaxTokens: 8,
		Headers:   map[string]string{"X-Session-ID": "s-17"},
	})
	if !res.OK() || res.Worker != "worker-3" || res.WorkerHeader != "X-Served-By" {
		t.Fatalf("class %q err %v worker %q from %q", res.Class, res.Err, res.Worker, res.WorkerHeader)
	}
	path, h, body, _ := cap.get()
	if path != "/v1/chat/completions" {
		t.Errorf("path %q", path)
	}
	want := map[string]string{
		"model": `"test-model"`, "stream": "true", "min_tokens": "16", "ignore_eos": "true",
		"temperature": "0", "seed": "42", "top_k": "5", "max_tokens": "99",
		"chat_template_kwargs": `{"enable_thinking":false}`,
		"messages":             `[{"role":"system","content":"be <brief>"},{"role":"user","content":"hi"}]`,
	}
	for k, v := range want {
		if got := string(body[k]); got != v {
			t.Errorf("body[%q] = %s, want %s", k, got, v)
		}
	}
	if h.Get("X-Tenant") != "t1" || h.Get("X-Session-ID") != "s-17" || h.Get("Accept") != "text/event-stream" || h.Get("Content-Type") != "application/json" {
		t.Errorf("headers %v", h)
	}
	if h.Get("Accept-Encoding") != "" {
		t.Errorf("Accept-Encoding %q, want none for streams", h.Get("Accept-Encoding"))
	}
}

// TestAPIKeyNeverLeaks sends the key as a bearer token and checks that it
// appears in no error, log line or printed form, even when the server echoes
// it back.
func TestAPIKeyNeverLeaks(t *testing.T) {
	const key = "sk-test-0123456789abcdef"
	t.Setenv("FLEETBENCH_TEST_KEY", key)
	var cap captured
	srv := httptest.NewServer(cap.wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Query().Get("mode") {
		default:
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprintf(w, `{"error":{"message":"invalid key %s"}}`, key)
		}
	})))
	defer srv.Close()
	var logs bytes.Buffer
	logger := hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Trace})
	cfg := newConfig(srv.URL)
	cfg.APIKeyEnv = "FLEETBENCH_TEST_KEY"
	c, err := New(cfg, logger)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	res := c.Stream(t.Context(), userRequest("hi"))
	if res.Class != ClassAuth {
		t.Fatalf("class %q err %v", res.Class, res.Err)
	}
	_, h, _, _ := cap.get()
	if got := h.Get("Authorization"); got != "Bearer "+key {
		t.Fatalf("Authorization %q, want the bearer key", got)
	}
	// The server's own text is streamed through redaction; a second
	// server-side path: a stream error echoing the key.
	srv2 := httptest.NewServer(writeEvents(`data: {"error":{"message":"bad key `+key+`"}}`+"\n\n", "data: {"+key+"\n\n"))
	defer srv2.Close()
	cfg2 := cfg
	cfg2.BaseURL = srv2.URL
	c2, err := New(cfg2, logger)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	res2 := c2.Stream(t.Context(), userRequest("hi"))
	logger.Info("stream done", "config", cfg, "client", c, "result", res.Err)
	printed := strings.Join([]string{
		res.Err.Error(), res2.Err.Error(), logs.String(),
		fmt.Sprint(c), fmt.Sprintf("%v %+v %#v %s", c, c, c, c), fmt.Sprintf("%+v", []*Client{c}),
		fmt.Sprintf("%v %+v %#v", cfg, cfg, cfg),
	}, "\n")
	if strings.Contains(printed, key) {
		t.Fatalf("API key leaked:\n%s", printed)
	}
	if !strings.Contains(res.Err.Error(), "invalid key [redacted]") {
		t.Errorf("err %q, want the redacted server message", res.Err)
	}
	if !strings.Contains(logs.String(), "request failed") {
		t.Errorf("no trace log of the failure; logs:\n%s", logs.String())
	}
}

// TestHeaderSecretsRedacted checks that a credential passed as a static
// header or as the URL's password is scrubbed from server text in errors
// and never shown by the Client, as the API key is.
func TestHeaderSecretsRedacted(t *testing.T) {
	const (
		headerSecret = "azure-key-0123456789"
		password     = "pw-0123456789"
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintf(w, `{"error":{"message":"rejected %s and %s"}}`, headerSecret, password)
	}))
	defer srv.Close()
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword("user", password)
	cfg := newConfig(u.String())
	cfg.Headers = map[string]string{"Api-Key": headerSecret, "X-Short": "1"}
	c, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	res := c.Stream(t.Context(), userRequest("hi"))
	if res.Class != ClassAuth {
		t.Fatalf("class %q err %v", res.Class, res.Err)
	}
	printed := res.Err.Error() + "\n" + c.String()
	for _, secret := range []string{headerSecret, password} {
		if strings.Contains(printed, secret) {
			t.Errorf("secret %q leaked:\n%s", secret, printed)
		}
	}
	if !strings.Contains(res.Err.Error(), "rejected [redacted] and [redacted]") {
		t.Errorf("err %q, want both credentials redacted", res.Err)
	}
}

func TestUnsetKeyEnvSendsNoKey(t *testing.T) {
	var auth atomic.Value
	auth.Store("unseen")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth.Store(r.Header.Get("Authorization"))
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "data: {\"choices\":[{\"delta\":{\"content\":\"hi\"}}]}\n\ndata: [DONE]\n\n")
	}))
	defer srv.Close()
	cfg := newConfig(srv.URL)
	cfg.APIKeyEnv = "FLEETBENCH_TEST_KEY_UNSET"
	var logs strings.Builder
	c, err := New(cfg, hclog.New(&hclog.LoggerOptions{Output: &logs}))
	if err != nil {
		t.Fatalf("New with an unset key variable: %v", err)
	}
	defer c.Close()
	if res := c.Stream(t.Context(), &Request{Prompt: "x"}); !res.OK() {
		t.Fatalf("stream: %v", res.Err)
	}
	if got := auth.Load().(string); got != "" {
		t.Errorf("Authorization %q, want none", got)
	}
	if !strings.Contains(logs.String(), "FLEETBENCH_TEST_KEY_UNSET") {
		t.Errorf("no warning naming the variable: %q", logs.String())
	}
}

func TestConfigValidate(t *testing.T) {
	neg := -1
	tests := []struct {
		name string
		edit func(*Config)
		ok   bool
	}{
		{name: "valid", edit: func(*Config) {}, ok: true},
		{name: "completions", edit: func(c *Config) { c.Endpoint = EndpointCompletions }, ok: true},
		{name: "no model", edit: func(c *Config) { c.Model = "" }},
		{name: "bad scheme", edit: func(c *Config) { c.BaseURL = "ftp://x" }},
		{name: "no host", edit: func(c *Config) { c.BaseURL = "http://" }},
		{name: "bad endpoint", edit: func(c *Config) { c.Endpoint = "embeddings" }},
		{name: "negative max tokens", edit: func(c *Config) { c.MaxTokens = -1 }},
		{name: "negative min tokens", edit: func(c *Config) { c.MinTokens = &neg }},
		{name: "extra body not object", edit: func(c *Config) { c.ExtraBody = json.RawMessage(`[1]`) }},
		{name: "extra body reserved", edit: func(c *Config) { c.ExtraBody = json.RawMessage(`{"stream":false}`) }},
		{name: "extra body ok", edit: func(c *Config) { c.ExtraBody = json.RawMessage(`{"top_p":0.9}`) }, ok: true},
		{name: "bad header", edit: func(c *Config) { c.Headers = map[string]string{"Bad Header": "x"} }},
		{name: "header injection", edit: func(c *Config) { c.Headers = map[string]string{"X-A": "a\r\nX-B: b"} }},
		{name: "negative timeout", edit: func(c *Config) { c.RequestTimeout = -time.Second }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := newConfig("http://localhost:8000")
			tt.edit(&cfg)
			if err := cfg.Validate(); (err == nil) != tt.ok {
				t.Fatalf("Validate() = %v, want ok %t", err, tt.ok)
			}
		})
	}
}

func TestHTTP2Cleartext(t *testing.T) {
	var cap captured
	srv := httptest.NewUnstartedServer(cap.wrap(writeEvents(chunk("a", "stop"), doneEvent)))
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetHTTP1(true)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	defer srv.Close()
	for _, h2 := range []bool{false, true} {
		cfg := newConfig(srv.URL)
		cfg.HTTP2 = h2
		res := mustNew(t, cfg).Stream(t.Context(), userRequest("hi"))
		_, _, _, proto := cap.get()
		if !res.OK() {
			t.Fatalf("http2=%t: %v", h2, res.Err)
		}
		if want := map[bool]int{false: 1, true: 2}[h2]; proto != want {
			t.Errorf("http2=%t: server saw HTTP/%d, want %d", h2, proto, want)
		}
	}
}

// TestWarmOpensConnections checks that Warm opens n distinct connections and
// that later streams reuse them without dialing.
func TestWarmOpensConnections(t *testing.T) {
	var opened atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/models" {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"object":"list","data":[]}`)
			return
		}
		writeEvents(chunk("a", "stop"), doneEvent)(w, r)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			opened.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	c := mustNew(t, newConfig(srv.URL))
	const n = 8
	if err := c.Warm(t.Context(), n); err != nil {
		t.Fatal(err)
	}
	// Over HTTP/1.1 Warm only dials: the server may accept a moment later.
	for deadline := time.Now().Add(5 * time.Second); opened.Load() < n && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	if got := opened.Load(); got != n {
		t.Fatalf("Warm opened %d connections, want %d", got, n)
	}
	done := make(chan *Result, n)
	for range n {
		go func() { done <- c.Stream(t.Context(), userRequest("hi")) }()
	}
	for range n {
		if res := <-done; !res.OK() || !res.ConnReused {
			t.Errorf("stream after warm: ok %t reused %t err %v", res.OK(), res.ConnReused, res.Err)
		}
	}
	if got := opened.Load(); got != n {
		t.Errorf("%d connections after streams, want the %d warmed ones", got, n)
	}
}

func TestWarmError(t *testing.T) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	c := mustNew(t, newConfig("http://"+addr))
	if err := c.Warm(t.Context(), 3); err == nil || !strings.Contains(err.Error(), "3 of 3 failed") {
		t.Fatalf("Warm = %v", err)
	}
}

// TestStreamNoPanicOnGarbage throws random bytes at Stream as the body.
func TestStreamNoPanicOnGarbage(t *testing.T) {
	inputs := []string{
		"\x00\xff\xfe", "data: \x00\n\n", "data: null\n\n", `data: {"choices":null}` + "\n\n",
		`data: {"choices":[null]}` + "\n\n", `data: {"choices":[{"delta":null,"finish_reason":7}]}` + "\n\n",
		`data: {"usage":{"prompt_tokens":"x"}}` + "\n\n", `data: {"error":null,"choices":[]}` + "\n\ndata: [DONE]\n\n",
		`data: {"error":"plain string"}` + "\n\n", `data: "just a string"` + "\n\n",
	}
	for i, in := range inputs {
		srv := httptest.NewServer(writeEvents(in))
		res := mustNew(t, newConfig(srv.URL)).Stream(t.Context(), userRequest("hi"))
		srv.Close()
		if res == nil || (res.Class == ClassOK) != (res.Err == nil) {
			t.Errorf("input %d: inconsistent result %+v", i, res)
		}
	}
}

// drainCheck makes sure the connection survives [DONE]: the second request
// must reuse the first one's connection.
func TestConnectionReusedAfterDone(t *testing.T) {
	srv := httptest.NewServer(writeEvents(chunk("a", "stop"), doneEvent))
	defer srv.Close()
	c := mustNew(t, newConfig(srv.URL))
	for i := range 3 {
		res := c.Stream(t.Context(), userRequest("hi"))
		if !res.OK() {
			t.Fatal(res.Err)
		}
		if i > 0 && !res.ConnReused {
			t.Errorf("request %d did not reuse the connection", i)
		}
	}
}

var _ io.Reader = (*timedBody)(nil)

// TestStreamBasicAuthFromURL checks that user info in the base URL is sent
// as basic auth, as http.Client would send it, unless an Authorization
// header is configured.
func TestStreamBasicAuthFromURL(t *testing.T) {
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Get("Authorization"))
		mu.Unlock()
		writeEvents(chunk("a", "stop"), doneEvent)(w, r)
	}))
	defer srv.Close()
	withUser := strings.Replace(srv.URL, "http://", "http://alice:s3cret@", 1)
	plain := mustNew(t, newConfig(withUser))
	cfg := newConfig(withUser)
	cfg.Headers = map[string]string{"Authorization": "Bearer configured"}
	configured := mustNew(t, cfg)
	for _, c := range []*Client{plain, configured} {
		if res := c.Stream(t.Context(), userRequest("hi")); !res.OK() {
			t.Fatal(res.Err)
		}
	}
	want := []string{"Basic YWxpY2U6czNjcmV0", "Bearer configured"}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(got, want) {
		t.Errorf("Authorization headers %q, want %q", got, want)
	}
}

// TestIdleConnectionClosedByServer checks the case of a server that closes
// idle keep-alive connections (uvicorn, under vLLM, after 5 s): the next
// turn after a longer pause must not fail, and a response that asks to
// close the connection must not be reused.
func TestIdleConnectionClosedByServer(t *testing.T) {
	var opened atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Close") != "" {
			w.Header().Set("Connection", "close")
		}
		writeEvents(chunk("a", "stop"), doneEvent)(w, r)
	}))
	srv.Config.IdleTimeout = 20 * time.Millisecond
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			opened.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	c := mustNew(t, newConfig(srv.URL))
	for i := range 3 {
		if res := c.Stream(t.Context(), userRequest("hi")); !res.OK() {
			t.Fatalf("request %d: class %q err %v", i, res.Class, res.Err)
		}
		time.Sleep(100 * time.Millisecond) // the server closes the idle connection
	}
	if got := opened.Load(); got != 3 {
		t.Errorf("%d connections opened, want 3 (one per request)", got)
	}
	req := userRequest("hi")
	req.Headers = map[string]string{"X-Close": "1"}
	if res := c.Stream(t.Context(), req); !res.OK() {
		t.Fatalf("request with Connection: close: %v", res.Err)
	}
	if res := c.Stream(t.Context(), userRequest("hi")); !res.OK() || res.ConnReused {
		t.Errorf("after Connection: close: ok %t reused %t err %v, want a new connection", res.OK(), res.ConnReused, res.Err)
	}
}

// TestStreamOverTLS checks the HTTP/1.1 transport over https://: the
// handshake, the stream and the connection's reuse.
func TestStreamOverTLS(t *testing.T) {
	var cap captured
	srv := httptest.NewTLSServer(cap.wrap(writeEvents(chunk("a", ""), chunk("b", "stop"), doneEvent)))
	defer srv.Close()
	c := mustNew(t, newConfig(srv.URL))
	if c.h1 == nil || c.h1.tlsConfig == nil {
		t.Fatal("https:// did not select the HTTP/1.1 transport with TLS")
	}
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	c.h1.tlsConfig.RootCAs = pool // the test server's own certificate
	for i := range 2 {
		res := c.Stream(t.Context(), userRequest("hi"))
		if !res.OK() || res.Text != "ab" {
			t.Fatalf("request %d: class %q err %v text %q", i, res.Class, res.Err, res.Text)
		}
		if res.ConnReused != (i > 0) {
			t.Errorf("request %d: reused %t", i, res.ConnReused)
		}
	}
	if _, _, _, proto := cap.get(); proto != 1 {
		t.Errorf("server saw HTTP/%d, want 1", proto)
	}
	// A server certificate nobody vouches for is a TLS error.
	other := mustNew(t, newConfig(srv.URL))
	if res := other.Stream(t.Context(), userRequest("hi")); res.Class != ClassTLS || !strings.Contains(res.Err.Error(), "certificate") {
		t.Errorf("untrusted server: class %q err %v, want tls and a certificate error", res.Class, res.Err)
	}
}

// rawResponse is a handler that takes the connection over and writes resp
// as it is, then closes the connection.
func rawResponse(resp string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		conn, buf, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		_, _ = buf.WriteString(resp)
		_ = buf.Flush()
	}
}

// TestStreamResponseFraming covers response framings other than chunked:
// a body that ends when the connection closes (HTTP/1.0 style), a
// Content-Length body, and an interim 100 Continue before the response.
func TestStreamResponseFraming(t *testing.T) {
	events := chunk("a", "") + chunk("b", "stop") + doneEvent
	tests := []struct {
		name, resp string
	}{
		{"close-delimited", "HTTP/1.0 200 OK\r\nContent-Type: text/event-stream\r\n\r\n" + events},
		{"content-length", fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: %d\r\n\r\n%s", len(events), events)},
		{"100 continue first", "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n" + events},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(rawResponse(tt.resp))
			defer srv.Close()
			c := mustNew(t, newConfig(srv.URL))
			for i := range 2 {
				start := time.Now()
				res := c.Stream(t.Context(), userRequest("hi"))
				if !res.OK() || res.Text != "ab" || res.ConnReused {
					t.Fatalf("request %d: class %q err %v text %q reused %t; want ab on a new connection each time",
						i, res.Class, res.Err, res.Text, res.ConnReused)
				}
				// The end of the body must be seen when the server closes,
				// not after the drain timeout gives up waiting for it.
				if d := time.Since(start); d >= drainTimeout/2 {
					t.Errorf("request %d took %v: the connection's end was missed", i, d)
				}
			}
		})
	}
}

// TestDrainAfterDoneIsBounded: after [DONE] the client reads on to the
// body's end so that the connection can be reused, but for at most
// drainTimeout. The server here sends [DONE] and then neither ends the body
// nor closes, on the event loops' path (chunked) and on the blocking path
// a Content-Length body is handed back to; the request succeeds once the
// drain gives up, and the connection is not reused.
func TestDrainAfterDoneIsBounded(t *testing.T) {
	events := chunk("a", "") + chunk("b", "stop") + doneEvent
	chunked := fmt.Sprintf("%x\r\n%s\r\n", len(events), events) // no last chunk
	tests := []struct {
		name, resp string
	}{
		{"chunked", "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n" + chunked},
		{"content-length", fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: %d\r\n\r\n%s", len(events)+100, events)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			release := make(chan struct{})
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				conn, buf, err := w.(http.Hijacker).Hijack()
				if err != nil {
					return
				}
				defer conn.Close()
				_, _ = buf.WriteString(tt.resp)
				_ = buf.Flush()
				<-release // the body never ends while the client waits
			}))
			defer srv.Close()
			defer close(release)
			c := mustNew(t, newConfig(srv.URL))
			for i := range 2 {
				start := time.Now()
				res := c.Stream(t.Context(), userRequest("hi"))
				d := time.Since(start)
				if !res.OK() || res.Text != "ab" || res.ConnReused {
					t.Fatalf("request %d: class %q err %v text %q reused %t; want ab on a new connection each time",
						i, res.Class, res.Err, res.Text, res.ConnReused)
				}
				if d < drainTimeout*9/10 || d > drainTimeout+2*time.Second {
					t.Errorf("request %d took %v: want the drain to give up after about %v", i, d, drainTimeout)
				}
			}
		})
	}
}
