package sim

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/fleetbench/fleetbench/pkg/openai"
)

// startSim runs a simulator on a loopback port for the test's lifetime.
func startSim(t testing.TB, mutate func(*Config)) *Sim {
	t.Helper()
	return startSimWith(t, mutate, nil)
}

// startSimWith is startSim with prepare called on the Sim before it serves,
// to set hooks without racing the server's goroutines.
func startSimWith(t testing.TB, mutate func(*Config), prepare func(*Sim)) *Sim {
	t.Helper()
	cfg, err := ProfileConfig(DefaultProfile)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Listen = "127.0.0.1:0"
	cfg.TimeScale = 50
	cfg.ShutdownTimeout = time.Second
	if mutate != nil {
		mutate(&cfg)
	}
	s, err := New(cfg, hclog.NewNullLogger(), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	if prepare != nil {
		prepare(s)
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

// waitIndexed waits until the kv router's indexer shows some worker holding
// the first n blocks of prompt. Block events reach it Config.EventDelay
// after the step that stored them, or later on a loaded host, so tests
// wait for the state instead of sleeping for a guessed time.
func waitIndexed(t testing.TB, s *Sim, prompt []uint32, n int) {
	t.Helper()
	hashes := blockHashes(prompt, s.cfg.Engine.BlockSize)
	if n > len(hashes) {
		t.Fatalf("waitIndexed: prompt has %d full blocks, want %d", len(hashes), n)
	}
	overlap := make([]int, s.cfg.Replicas)
	deadline := time.Now().Add(10 * time.Second)
	for {
		s.idx.overlaps(hashes[:n], overlap)
		if slices.Max(overlap) == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("indexer shows overlaps %v after 10s, want %d on a worker", overlap, n)
		}
		time.Sleep(time.Millisecond)
	}
}

func testClient() *http.Client {
	return &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 10000, MaxConnsPerHost: 0}}
}

// result is what the minimal test client saw of one request.
type result struct {
	status  int
	worker  string
	ttft    time.Duration
	e2e     time.Duration
	content string
	chunks  int // chunks with content
	finish  string
	usage   *openai.Usage
	errBody *openai.ErrorResponse
	done    bool // saw [DONE]
	events  []string
}

// post sends body to path and reads a JSON or SSE response.
func post(ctx context.Context, c *http.Client, url, path string, body any) (*result, error) {
	b, ok := body.([]byte)
	if !ok {
		var err error
		if b, err = json.Marshal(body); err != nil {
			return nil, err
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+path, bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	start := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	r := &result{status: resp.StatusCode, worker: resp.Header.Get(WorkerHeader)}
	if resp.StatusCode != http.StatusOK {
		var e openai.ErrorResponse
		raw, _ := io.ReadAll(resp.Body)
		if err := json.Unmarshal(raw, &e); err != nil {
			return r, fmt.Errorf("decode error body %q: %w", raw, err)
		}
		r.errBody = &e
		return r, nil
	}
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		var cpl openai.Completion
		if err := json.NewDecoder(resp.Body).Decode(&cpl); err != nil {
			return r, err
		}
		r.e2e = time.Since(start)
		r.usage = cpl.Usage
		if len(cpl.Choices) > 0 {
			ch := cpl.Choices[0]
			r.finish = ch.FinishReason
			r.content = ch.Text
			if ch.Message != nil {
				r.content = ch.Message.Content
			}
		}
		return r, nil
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	var sb strings.Builder
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			return r, fmt.Errorf("unexpected SSE line %q", line)
		}
		r.events = append(r.events, data)
		if data == "[DONE]" {
			r.done = true
			continue
		}
		var ch openai.Chunk
		if err := json.Unmarshal([]byte(data), &ch); err != nil {
			return r, fmt.Errorf("decode chunk %q: %w", data, err)
		}
		if ch.Error != nil {
			r.errBody = &openai.ErrorResponse{Error: *ch.Error}
		}
		if ch.Usage != nil {
			r.usage = ch.Usage
		}
		for _, c := range ch.Choices {
			text := c.Text
			if c.Delta != nil {
				text = c.Delta.Content
			}
			if text != "" {
				if r.chunks == 0 {
					r.ttft = time.Since(start)
				}
				r.chunks++
				sb.WriteString(text)
			}
			if c.FinishReason != nil {
				r.finish = *c.FinishReason
			}
		}
	}
	r.e2e = time.Since(start)
	r.content = sb.String()
	return r, sc.Err()
}

func get(ctx context.Context, c *http.Client, url string, v any) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if v != nil {
		if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
			return resp.StatusCode, err
		}
	}
	return resp.StatusCode, nil
}

func ptr[T any](v T) *T { return &v }

func chatBody(msgs []openai.Message, maxTokens int) openai.ChatCompletionRequest {
	b := openai.ChatCompletionRequest{Messages: msgs, Stream: true, StreamOptions: &openai.StreamOptions{IncludeUsage: true}}
	if maxTokens > 0 {
		b.MaxTokens = ptr(maxTokens)
	}
	return b
}

// percentile of durations, p in 0..100 (nearest rank).
func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(float64(len(s))*p/100+0.5) - 1
	return s[max(0, min(len(s)-1, i))]
}

// words makes a deterministic text of about n tokens.
func words(seed, n int) string {
	var sb strings.Builder
	x := uint64(seed)*0x9e3779b97f4a7c15 + 1
	for i := range n {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		if i > 0 {
			sb.WriteByte(' ')
		}
		fmt.Fprintf(&sb, "w%x", x%5000)
	}
	return sb.String()
}

func mustRead(resp *http.Response) string {
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}
