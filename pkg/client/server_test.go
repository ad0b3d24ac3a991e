package client

import (
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/fleetbench/fleetbench/pkg/openai"
)

// chunk encodes one chat chunk event with the given content and finish
// reason ("" for none).
func chunk(content, finish string) string {
	c := openai.Chunk{ID: "chatcmpl-1", Object: openai.ObjectChatCompletionChunk, Model: "m",
		Choices: []openai.ChunkChoice{{Delta: &openai.Delta{Content: content}}}}
	if finish != "" {
		c.Choices[0].FinishReason = &finish
	}
	b, _ := json.Marshal(c)
	return "data: " + string(b) + "\n\n"
}

// roleChunk is the first chunk vLLM sends: a role and no content.
func roleChunk() string {
	return `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}` + "\n\n"
}

func usageChunk(prompt, completion, cached int) string {
	u := openai.Usage{PromptTokens: prompt, CompletionTokens: completion, TotalTokens: prompt + completion}
	if cached >= 0 {
		u.PromptTokensDetails = &openai.PromptTokensDetails{CachedTokens: cached}
	}
	b, _ := json.Marshal(openai.Chunk{Object: openai.ObjectChatCompletionChunk, Choices: []openai.ChunkChoice{}, Usage: &u})
	return "data: " + string(b) + "\n\n"
}

const doneEvent = "data: [DONE]\n\n"

// writeEvents is a handler that streams events, flushing after each.
func writeEvents(events ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		for _, e := range events {
			fmt.Fprint(w, e)
			w.(http.Flusher).Flush()
		}
	}
}

// captured records what a test server received.
type captured struct {
	mu      sync.Mutex
	path    string
	header  http.Header
	body    map[string]json.RawMessage
	proto   int
	entries int
}

func (c *captured) wrap(next http.Handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var body map[string]json.RawMessage
		if r.Method == http.MethodPost {
			if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
				http.Error(w, "bad json: "+err.Error(), http.StatusBadRequest)
				return
			}
		}
		c.mu.Lock()
		c.path, c.header, c.body, c.proto = r.URL.Path, r.Header.Clone(), body, r.ProtoMajor
		c.entries++
		c.mu.Unlock()
		next.ServeHTTP(w, r)
	}
}

func (c *captured) get() (string, http.Header, map[string]json.RawMessage, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.path, c.header, c.body, c.proto
}

// script is a timed token stream: the role chunk at once, the first content
// chunk after First, then one every Gap, then a finish chunk, usage and
// [DONE] with the last token. Each token is due at a fixed offset from the
// handler's start so sleep overshoot does not accumulate.
type script struct {
	First  time.Duration
	Gap    time.Duration
	Tokens int

	mu    sync.Mutex
	sent  []time.Time // when each content chunk was flushed
	start time.Time   // when the handler started
}

func (s *script) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	base := time.Now()
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	fl := w.(http.Flusher)
	fmt.Fprint(w, roleChunk())
	fl.Flush()
	sent := make([]time.Time, 0, s.Tokens)
	for i := range s.Tokens {
		sleepUntil(base.Add(s.First + time.Duration(i)*s.Gap))
		if i == s.Tokens-1 {
			fmt.Fprint(w, chunk(" tok", "")+chunk("", openai.FinishLength)+usageChunk(10, s.Tokens, 4)+doneEvent)
		} else {
			fmt.Fprint(w, chunk(" tok", ""))
		}
		fl.Flush()
		sent = append(sent, time.Now())
	}
	s.mu.Lock()
	s.sent, s.start = sent, base
	s.mu.Unlock()
}

// sleepUntil sleeps to just before t and spins the rest of the way: timer
// wake-ups can be late by a millisecond on a busy machine, which would be
// blamed on the client's measurement.
func sleepUntil(t time.Time) {
	if d := time.Until(t) - 2*time.Millisecond; d > 0 {
		time.Sleep(d)
	}
	for time.Now().Before(t) {
		runtime.Gosched()
	}
}

func (s *script) observed() ([]time.Time, time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sent, s.start
}

// newConfig returns a valid chat Config for a test server URL.
// blockingReads runs the package's tests with Config.BlockingReads, on
// the goroutine-per-stream path instead of the event loops (make test runs
// both): go test ./pkg/client/ -args -blocking-reads
var blockingReads = flag.Bool("blocking-reads", false, "test the blocking-read path (Config.BlockingReads)")

func newConfig(url string) Config {
	return Config{BaseURL: url, Model: "test-model", MaxTokens: 16, BlockingReads: *blockingReads}
}

func mustNew(t testing.TB, cfg Config) *Client {
	t.Helper()
	c, err := New(cfg, nil)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

func userRequest(text string) *Request {
	return &Request{Messages: []openai.Message{{Role: openai.RoleUser, Content: text}}}
}
