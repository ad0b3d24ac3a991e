package workload

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/fleetbench/fleetbench/pkg/client"
	"github.com/fleetbench/fleetbench/pkg/openai"
)

// userModelServer is an OpenAI-compatible streaming server that answers
// every chat request with question, split into chunks, unless fail says the
// request number (from 1) should get a 500.
func userModelServer(t *testing.T, question string, fail func(n int64) bool) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := n.Add(1)
		var req openai.ChatCompletionRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || r.URL.Path != "/v1/chat/completions" || !req.Stream {
			http.Error(w, `{"error":{"message":"bad request"}}`, http.StatusBadRequest)
			return
		}
		if len(req.Messages) != 2 || req.Model != "user-sim" {
			http.Error(w, `{"error":{"message":"unexpected messages or model"}}`, http.StatusBadRequest)
			return
		}
		if fail(i) {
			http.Error(w, `{"error":{"message":"overloaded"}}`, http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		words := strings.SplitAfter(question, " ")
		for k, word := range words {
			chunk := map[string]any{
				"id": "q", "object": "chat.completion.chunk", "model": req.Model,
				"choices": []map[string]any{{"index": 0, "delta": map[string]string{"content": word}}},
			}
			if k == len(words)-1 {
				chunk["choices"].([]map[string]any)[0]["finish_reason"] = "stop"
			}
			b, _ := json.Marshal(chunk)
			fmt.Fprintf(w, "data: %s\n\n", b)
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

// TestDocChatUserModelHTTP runs the user model through the real client
// against an in-process OpenAI-compatible streaming server.
func TestDocChatUserModelHTTP(t *testing.T) {
	const question = "Which of the open risks has no owner yet?"
	srv, calls := userModelServer(t, question, func(n int64) bool { return n%3 == 0 })
	um := &UserModelConfig{URL: srv.URL, Model: "user-sim"}
	c, err := client.New(um.ClientConfig(), nil)
	if err != nil {
		t.Fatal(err)
	}
	d, err := NewDocChat(DocChatConfig{Seed: 9, MinTurns: 4, MaxTurns: 4, UserModel: um}, nil, c)
	if err != nil {
		t.Fatal(err)
	}
	fallbacks := 0
	for i := range 3 {
		conv := d.Conversation(i)
		history := []openai.Message{{Role: openai.RoleSystem, Content: conv.System()}}
		for k := range conv.Turns() {
			turn, err := conv.Next(context.Background(), k, history)
			if err != nil {
				t.Fatal(err)
			}
			if turn.Fallback {
				fallbacks++
			} else if k > 0 && turn.User != question {
				t.Errorf("conversation %d turn %d: %q", i, k, turn.User)
			}
			history = append(history,
				openai.Message{Role: openai.RoleUser, Content: turn.User},
				openai.Message{Role: openai.RoleAssistant, Content: "Some answer."})
		}
	}
	// 9 follow-ups, every third request fails.
	if calls.Load() != 9 || fallbacks != 3 || d.Fallbacks() != 3 {
		t.Errorf("calls %d, fallbacks %d (source %d); want 9 and 3", calls.Load(), fallbacks, d.Fallbacks())
	}
}
