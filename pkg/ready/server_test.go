package ready

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetbench/fleetbench/pkg/openai"
)

const testModel = "test-model"

// startup is a fake serving stack that starts slowly, like Dynamo: the port
// refuses connections until up, then /health answers, then /v1/models lists
// the model while completions still fail with 503, and only after
// servesAfter do completions stream. Offsets are from its creation.
type startup struct {
	t0          time.Time
	upAfter     time.Duration // listener opens
	listedAfter time.Duration // /v1/models lists the model; completions 503
	servesAfter time.Duration // completions stream; /health/ready 200
	noHealth    bool          // /health and /health/ready 404
	// ttft returns the delay before the first token of completion n
	// (1-based); nil means none.
	ttft func(n int) time.Duration

	completions  atomic.Int64 // completion requests answered 200
	firstServedA atomic.Int64 // offset (ns) of the first 200 completion
	url          string
}

func (s *startup) since() time.Duration { return time.Since(s.t0) }

func (s *startup) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	el := s.since()
	switch r.URL.Path {
	case "/health":
		if s.noHealth {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(http.StatusOK)
	case "/health/ready":
		switch {
		case s.noHealth:
			http.NotFound(w, r)
		case el >= s.servesAfter:
			w.WriteHeader(http.StatusOK)
		default:
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	case "/v1/models":
		ml := openai.ModelList{Object: openai.ObjectList, Data: []openai.Model{}}
		if el >= s.listedAfter {
			ml.Data = append(ml.Data, openai.Model{ID: testModel, Object: openai.ObjectModel})
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(ml)
	case "/v1/chat/completions", "/v1/completions":
		switch {
		case el < s.listedAfter:
			writeErr(w, http.StatusNotFound, "model not found")
			return
		case el < s.servesAfter:
			writeErr(w, http.StatusServiceUnavailable, "workers not ready")
			return
		}
		n := int(s.completions.Add(1))
		s.firstServedA.CompareAndSwap(0, int64(el))
		if s.ttft != nil {
			time.Sleep(s.ttft(n))
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, `data: {"choices":[{"index":0,"delta":{"role":"assistant","content":"OK"},"finish_reason":null}]}`+"\n\n")
		fmt.Fprint(w, `data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`+"\n\n")
		fmt.Fprint(w, "data: [DONE]\n\n")
	default:
		http.NotFound(w, r)
	}
}

func writeErr(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(openai.ErrorResponse{Error: openai.ErrorDetail{Message: msg}})
}

// start reserves a loopback port, returns at once, and opens the port only
// after upAfter, so that early requests get "connection refused".
func (s *startup) start(t *testing.T) string {
	t.Helper()
	var lc net.ListenConfig
	ln, err := lc.Listen(t.Context(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	s.t0 = time.Now()
	s.url = "http://" + addr
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 5 * time.Second}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		select {
		case <-time.After(s.upAfter):
		case <-ctx.Done():
			return
		}
		ln, err := lc.Listen(ctx, "tcp", addr)
		if err != nil {
			t.Errorf("listen again on %s: %v", addr, err)
			return
		}
		_ = srv.Serve(ln)
	})
	t.Cleanup(func() {
		cancel()
		sctx, c := context.WithTimeout(context.Background(), 2*time.Second)
		defer c()
		_ = srv.Shutdown(sctx)
		wg.Wait()
	})
	return s.url
}

func (s *startup) firstServed() time.Duration { return time.Duration(s.firstServedA.Load()) }

// isStageErr returns err's *StageError.
func isStageErr(t *testing.T, err error) *StageError {
	t.Helper()
	var se *StageError
	if !errors.As(err, &se) {
		t.Fatalf("error %v (%T) is not a *StageError", err, err)
	}
	if !errors.Is(err, ErrNotReady) {
		t.Errorf("errors.Is(err, ErrNotReady) is false for %v", err)
	}
	return se
}
