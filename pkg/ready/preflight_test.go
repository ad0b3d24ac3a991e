package ready

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fleetbench/fleetbench/internal/testutil/testserve"
	"github.com/fleetbench/fleetbench/pkg/client"
)

// preflightServer answers /v1/models with models (404 when nil), refuses
// requests without the key when key is set, and streams one token.
func preflightServer(t *testing.T, models []string, key string, complete http.HandlerFunc) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if key != "" && r.Header.Get("Authorization") != "Bearer "+key {
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, `{"error":{"message":"Incorrect API key provided","type":"invalid_request_error"}}`)
			return
		}
		switch r.URL.Path {
		case "/v1/models":
			if models == nil {
				http.NotFound(w, r)
				return
			}
			var data []string
			for _, m := range models {
				data = append(data, fmt.Sprintf(`{"id":%q,"object":"model"}`, m))
			}
			fmt.Fprintf(w, `{"object":"list","data":[%s]}`, strings.Join(data, ","))
		default:
			complete(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// completionAuthServer lists model to anyone but refuses every completion
// with a 401 and its reason, as a gateway that guards only inference does.
func completionAuthServer(t *testing.T, model string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/models" {
			fmt.Fprintf(w, `{"object":"list","data":[{"id":%q,"object":"model"}]}`, model)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprint(w, `{"error":{"message":"key expired for this deployment","type":"authentication_error","code":"invalid_api_key"}}`)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func streamOne(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/event-stream")
	fmt.Fprint(w, "data: {\"choices\":[{\"index\":0,\"text\":\"ok\",\"delta\":{\"content\":\"ok\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
}

func streamNothing(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/event-stream")
	fmt.Fprint(w, "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"length\"}]}\n\ndata: [DONE]\n\n")
}

func notFoundModel(w http.ResponseWriter, _ *http.Request) {
	w.WriteHeader(http.StatusNotFound)
	fmt.Fprint(w, `{"object":"error","message":"The model `+"`wrong-model`"+` does not exist.","type":"NotFoundError","code":404}`)
}

// TestPreflight: each way a target can be unfit ends in one line that
// names the problem; a fit target passes.
func TestPreflight(t *testing.T) {
	t.Setenv("FLEETBENCH_PREFLIGHT_KEY", testserve.APIKey)
	const served = "meta-llama/Llama-3.1-8B-Instruct"
	tests := []struct {
		name    string
		url     string
		model   string
		keyEnv  string
		wantErr []string // empty: passes
	}{
		{name: "fit", url: preflightServer(t, []string{served}, "", streamOne), model: served},
		{name: "fit with key", url: preflightServer(t, []string{served}, testserve.APIKey, streamOne), model: served,
			keyEnv: "FLEETBENCH_PREFLIGHT_KEY"},
		{name: "no /v1/models, completion works", url: preflightServer(t, nil, "", streamOne), model: served},
		{name: "wrong model", url: preflightServer(t, []string{served}, "", streamOne), model: "wrong-model",
			wantErr: []string{`model "wrong-model" is not served by`, "it serves: " + served}},
		{name: "no /v1/models, wrong model", url: preflightServer(t, nil, "", notFoundModel), model: "wrong-model",
			wantErr: []string{"test completion", "failed"}},
		{name: "refused key", url: preflightServer(t, []string{served}, testserve.APIKey, streamOne), model: served,
			keyEnv: "FLEETBENCH_PREFLIGHT_UNSET", wantErr: []string{"refused the credentials (HTTP 401", "$FLEETBENCH_PREFLIGHT_UNSET"}},
		{name: "completion refuses key", url: completionAuthServer(t, served), model: served,
			keyEnv: "FLEETBENCH_PREFLIGHT_UNSET", wantErr: []string{"refused the credentials (HTTP 401: key expired for this deployment)", "$FLEETBENCH_PREFLIGHT_UNSET"}},
		{name: "no content", url: preflightServer(t, []string{served}, "", streamNothing), model: served,
			wantErr: []string{"streamed no content"}},
		{name: "unreachable", url: "http://127.0.0.1:1", model: served,
			wantErr: []string{"cannot reach http://127.0.0.1:1", "connection refused"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Preflight(t.Context(), client.Config{BaseURL: tt.url, Model: tt.model, APIKeyEnv: tt.keyEnv}, 10*time.Second, nil)
			if len(tt.wantErr) == 0 {
				if err != nil {
					t.Fatalf("preflight: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrPreflight) {
				t.Fatalf("error %v, want ErrPreflight", err)
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			t.Log(err)
			if strings.Contains(err.Error(), testserve.APIKey) || strings.Count(err.Error(), "\n") > 0 {
				t.Errorf("error shows the key or spans lines: %q", err)
			}
		})
	}
}

// TestPreflightTimeout: a server that accepts and never answers ends the
// preflight at its timeout, with a reason.
func TestPreflightTimeout(t *testing.T) {
	block := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-block }))
	defer srv.Close()
	defer close(block)
	start := time.Now()
	err := Preflight(t.Context(), client.Config{BaseURL: srv.URL, Model: "m"}, 500*time.Millisecond, nil)
	if !errors.Is(err, ErrPreflight) || time.Since(start) > 5*time.Second {
		t.Errorf("error %v after %s, want ErrPreflight within the timeout", err, time.Since(start))
	}
}

func TestWaitReachable(t *testing.T) {
	// A port that is free now: nothing listens until the server starts.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	cc := client.Config{BaseURL: "http://" + addr + "/v1", Model: "m"}

	start := time.Now()
	err = WaitReachable(context.Background(), cc, 1500*time.Millisecond, nil)
	if !errors.Is(err, ErrPreflight) || !strings.Contains(err.Error(), "after waiting 1.5s") {
		t.Fatalf("nothing listening: %v, want a preflight error naming the wait", err)
	}
	if el := time.Since(start); el < 1500*time.Millisecond || el > 10*time.Second {
		t.Errorf("gave up after %s, want about 1.5s", el)
	}

	// The server comes up (first behind a proxy answering 503) while
	// WaitReachable waits.
	var up atomic.Int32
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if up.Load() == 0 {
			http.Error(w, "starting", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte(`{"data":[]}`))
	}), ReadHeaderTimeout: time.Second}
	go func() {
		time.Sleep(time.Second)
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Error(err)
			return
		}
		go func() { _ = srv.Serve(l) }()
		time.Sleep(1500 * time.Millisecond)
		up.Store(1)
	}()
	defer srv.Close()
	start = time.Now()
	if err := WaitReachable(context.Background(), cc, 30*time.Second, nil); err != nil {
		t.Fatalf("server that comes up: %v", err)
	}
	if el := time.Since(start); el < 2*time.Second {
		t.Errorf("returned after %s, before the server stopped answering 503", el)
	}
}
