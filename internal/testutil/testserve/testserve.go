package testserve

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetbench/fleetbench/pkg/openai"
)

// APIKey is the key SSE expects as a bearer token; long enough to count as
// a secret for redaction.
const APIKey = "sk-fleetbench-test-key-0123456789"

// SSE answers chat completions with five tokens 10 ms apart and usage,
// checking the API key and that each request carries a history; requests
// counts the requests served. Close it when done.
func SSE(t testing.TB, requests *atomic.Int64) *httptest.Server {
	t.Helper()
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" {
			http.NotFound(w, r)
			return
		}
		if r.Header.Get("Authorization") != "Bearer "+APIKey {
			http.Error(w, `{"error":{"message":"bad key"}}`, http.StatusUnauthorized)
			return
		}
		var req openai.ChatCompletionRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.Messages) < 2 || !req.Stream {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		requests.Add(1)
		w.Header().Set("Content-Type", "text/event-stream")
		rc := http.NewResponseController(w)
		for i := range 5 {
			time.Sleep(10 * time.Millisecond)
			fmt.Fprintf(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"t%d \"},\"finish_reason\":null}]}\n\n", i)
			_ = rc.Flush()
		}
		fmt.Fprint(w, "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n")
		fmt.Fprint(w, "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":120,\"completion_tokens\":5,\"total_tokens\":125,\"prompt_tokens_details\":{\"cached_tokens\":64}}}\n\n")
		fmt.Fprint(w, "data: [DONE]\n\n")
		_ = rc.Flush()
	}))
}

// FreeAddr returns a loopback address nothing listens on, for a server
// that takes its address as a setting.
func FreeAddr(t testing.TB) string {
	t.Helper()
	var lc net.ListenConfig
	l, err := lc.Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}
