package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// probeTarget lists its model at once but serves completions only after
// servesAfter, like a Dynamo frontend whose workers are still loading.
func probeTarget(t *testing.T, servesAfter time.Duration) *httptest.Server {
	t.Helper()
	start := time.Now()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/models":
			fmt.Fprint(w, `{"object":"list","data":[{"id":"m","object":"model"}]}`)
		case "/v1/chat/completions":
			if time.Since(start) < servesAfter {
				w.WriteHeader(http.StatusServiceUnavailable)
				fmt.Fprint(w, `{"error":{"message":"loading"}}`)
				return
			}
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"OK\"},\"finish_reason\":\"length\"}]}\n\ndata: [DONE]\n\n")
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestCmdProbe(t *testing.T) {
	srv := probeTarget(t, 500*time.Millisecond)
	var out, errb bytes.Buffer
	code := runMain(context.Background(), func() {}, []string{"--log-level", "error", "probe", "--target", srv.URL,
		"--model", "m", "--interval", "20ms", "--grace", "100ms", "--json"}, &out, &errb)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var rep struct {
		Served                bool   `json:"served"`
		ModelsBeforeServingMS *int64 `json:"models_before_serving_ms"`
		ModelsSound           *bool  `json:"models_sound"`
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("%v:\n%s", err, out.String())
	}
	if !rep.Served || rep.ModelsBeforeServingMS == nil || *rep.ModelsBeforeServingMS < 300 || rep.ModelsSound == nil || *rep.ModelsSound {
		t.Errorf("report %s", out.String())
	}
}

func TestCmdProbeNeverServes(t *testing.T) {
	srv := probeTarget(t, time.Hour)
	var out, errb bytes.Buffer
	code := runMain(context.Background(), func() {}, []string{"--log-level", "error", "probe", "--target", srv.URL,
		"--timeout", "300ms", "--interval", "20ms"}, &out, &errb)
	if code != exitError || !strings.Contains(errb.String(), "the model never served a completion within 300ms") {
		t.Errorf("exit %d, stderr %q", code, errb.String())
	}
	if !strings.Contains(out.String(), "/v1/models: said ready at") {
		t.Errorf("table:\n%s", out.String())
	}
	if code := runMain(context.Background(), func() {}, []string{"probe"}, &out, &errb); code != exitUsage {
		t.Errorf("no --target: exit %d", code)
	}
}

// TestCmdProbeWrongModel: a server that lists its model but answers 404
// to a completion for another: probe --model WRONG stops in seconds, not
// at its timeout, with the one line run's preflight prints, and fails.
func TestCmdProbeWrongModel(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/models":
			fmt.Fprint(w, `{"object":"list","data":[{"id":"real","object":"model"}]}`)
		case "/health", "/health/ready":
			w.WriteHeader(http.StatusOK)
		default:
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"object":"error","message":"The model `+"`wrong`"+` does not exist.","type":"NotFoundError","code":404}`)
		}
	}))
	defer srv.Close()
	var out, errb bytes.Buffer
	start := time.Now()
	code := runMain(context.Background(), func() {}, []string{"--log-level", "error", "probe", "--target", srv.URL,
		"--model", "wrong", "--timeout", "1m", "--interval", "20ms"}, &out, &errb)
	took := time.Since(start)
	stderr := strings.TrimSpace(errb.String())
	if code == exitOK || took > 10*time.Second {
		t.Fatalf("exit %d after %s, want a failure in seconds\nstderr: %s", code, took, stderr)
	}
	for _, want := range []string{`model "wrong" is not served by ` + srv.URL, "it serves: real"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr %q lacks %q", stderr, want)
		}
	}
	if strings.Count(stderr, "\n") > 0 || out.Len() > 0 {
		t.Errorf("want one line on stderr and no report, got stderr %q, stdout %q", stderr, out.String())
	}
}
