package sim

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/fleetbench/fleetbench/pkg/openai"
)

// FuzzRequestParsing sends arbitrary bytes as the body of a chat or
// completions request to a running simulator. Whatever the bytes, the
// handler must not panic and must answer either with vLLM's error body or
// with a well-formed completion (JSON or SSE); a 200 needs a body that is
// valid JSON.
func FuzzRequestParsing(f *testing.F) {
	seeds := []string{
		`{"messages":[{"role":"user","content":"hi"}],"max_tokens":4}`,
		`{"messages":[{"role":"system","content":"x"},{"role":"user","content":"hi"}],"stream":true,"stream_options":{"include_usage":true}}`,
		`{"model":"meta-llama/Llama-3.1-70B-Instruct-FP8","prompt":"Once upon","max_tokens":3,"ignore_eos":true,"seed":7}`,
		`{"prompt":"x","stream":true,"min_tokens":2,"max_tokens":5}`,
		`{"model":"other","prompt":"x"}`,
		`{"prompt":"x","max_tokens":-1}`,
		`{"prompt":"x","max_tokens":1e30}`,
		`{"prompt":"x","min_tokens":9,"max_tokens":2}`,
		`{"messages":[]}`,
		`{"messages":null,"prompt":7}`,
		`{"messages":[{"role":"user","content":["a"]}]}`,
		`{"messages":[{"role":"\u0000","content":"\ud800"}]}`,
		"{\"prompt\":\"\xff\xfe\",\"max_tokens\":3}",
		`{"prompt":"` + strings.Repeat("w ", 200) + `"}`,
		`{}`, `[]`, `null`, `1`, `"x"`, ``, `{`, `{"prompt":`,
	}
	for _, seed := range seeds {
		f.Add(true, []byte(seed))
		f.Add(false, []byte(seed))
	}
	// Short model length and replies keep each valid request to a few
	// fast steps, so the fuzzer spends its time on parsing.
	s := startSim(f, func(c *Config) {
		c.Replicas = 2
		c.TimeScale = 1000
		c.Engine.MaxModelLen = 128
		c.Output = OutputConfig{Mean: 3, Sigma: 0.5, Min: 1, Max: 6}
	})
	h := s.Handler()
	f.Fuzz(func(t *testing.T, chat bool, body []byte) {
		path := "/v1/completions"
		if chat {
			path = "/v1/chat/completions"
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body)))
		if rec.Code != http.StatusOK {
			if rec.Code != http.StatusBadRequest && rec.Code != http.StatusNotFound {
				t.Errorf("status %d for body %q", rec.Code, body)
			}
			if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
				t.Errorf("error content type %q", ct)
			}
			checkErrorBody(t, rec.Body.Bytes(), rec.Code)
			return
		}
		if !json.Valid(body) {
			t.Errorf("200 for a body that is not JSON: %q", body)
		}
		if strings.HasPrefix(rec.Header().Get("Content-Type"), "text/event-stream") {
			checkStream(t, rec.Body.String())
			return
		}
		var c openai.Completion
		if err := json.Unmarshal(rec.Body.Bytes(), &c); err != nil {
			t.Fatalf("200 body %q: %v", rec.Body.Bytes(), err)
		}
		if len(c.Choices) != 1 || c.Usage == nil || c.Usage.PromptTokens < 1 || c.Usage.CompletionTokens < 1 || c.Choices[0].FinishReason == "" {
			t.Errorf("completion %s", rec.Body.Bytes())
		}
	})
}

// checkStream checks an SSE body: data events of JSON chunks without
// errors, ending with [DONE].
func checkStream(t *testing.T, body string) {
	t.Helper()
	events := strings.Split(strings.TrimSuffix(body, "\n\n"), "\n\n")
	if len(events) < 2 || events[len(events)-1] != "data: [DONE]" {
		t.Fatalf("stream %q does not end with [DONE]", body)
	}
	content := 0
	for _, ev := range events[:len(events)-1] {
		data, ok := strings.CutPrefix(ev, "data: ")
		if !ok {
			t.Fatalf("event %q is not a data line", ev)
		}
		var ch openai.Chunk
		if err := json.Unmarshal([]byte(data), &ch); err != nil {
			t.Fatalf("chunk %q: %v", data, err)
		}
		if ch.Error != nil {
			t.Fatalf("stream failed: %q", data)
		}
		for _, c := range ch.Choices {
			if c.Text != "" || c.Delta != nil && c.Delta.Content != "" {
				content++
			}
		}
	}
	if content == 0 {
		t.Errorf("stream %q has no content", body)
	}
}
