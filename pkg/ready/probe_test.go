package ready

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fleetbench/fleetbench/pkg/client"
)

// TestProbeModelsBeforeServing probes a server from before it is up: the
// port refuses connections, then /health answers, /v1/models lists the
// model 1.2 s before completions work. The probe must find /v1/models first
// and say by how much it was early; /health/ready, which turns ready with
// the completions, is sound. Bounds are loose: a loaded CI machine delays
// polls by tens of milliseconds.
func TestProbeModelsBeforeServing(t *testing.T) {
	s := &startup{upAfter: 100 * time.Millisecond, listedAfter: 300 * time.Millisecond, servesAfter: 1500 * time.Millisecond}
	url := s.start(t)
	const interval = 20 * time.Millisecond
	rep, err := Probe(t.Context(), ProbeConfig{
		Client:   client.Config{BaseURL: url}, // model found from /v1/models
		Timeout:  20 * time.Second,
		Interval: interval,
		Grace:    300 * time.Millisecond,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var text bytes.Buffer
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	out := text.String()
	t.Log("\n" + out)
	if rep.Model != testModel {
		t.Errorf("model %q, want the listed %q", rep.Model, testModel)
	}
	for _, sig := range rep.Signals {
		if !sig.OK {
			t.Errorf("signal %s never OK: %+v", sig.Signal, sig)
		}
	}
	if h, _ := rep.Signal(SignalHealth); h.Attempts < 2 || h.LastFailure > h.FirstOK {
		t.Errorf("/health: %d attempts, last failure at %s, first OK at %s; the port was closed for 100 ms", h.Attempts, h.LastFailure, h.FirstOK)
	}
	// The server's gap is 1200 ms; each figure is a send time.
	lead, ok := rep.Lead(SignalModels)
	if !ok || lead < 700*time.Millisecond || lead > 1700*time.Millisecond {
		t.Fatalf("/v1/models lead %s (ok %t), want about 1200ms", lead, ok)
	}
	if early, ok := rep.Early(SignalModels); !ok || early < 500*time.Millisecond {
		t.Errorf("/v1/models early by %s (%t): completions kept failing for 1.2 s after it listed the model", early, ok)
	}
	// /health/ready turns ready with the completions: at most scheduling
	// noise may make it look early.
	if early, ok := rep.Early(SignalHealthy); ok && early > 200*time.Millisecond {
		t.Errorf("/health/ready early by %s; it turned ready with the completions", early)
	} else if !ok && !strings.Contains(out, "/health/ready said ready only once the model could serve") {
		t.Errorf("no sound verdict on /health/ready")
	}
	if i, j := strings.Index(out, "\n/v1/models "), strings.Index(out, "\ncompletion "); i < 0 || j < 0 || i > j {
		t.Errorf("table does not list /v1/models before completion")
	}
	m := regexp.MustCompile(`/v1/models answered (\d+) ms before the model could serve \(a completion sent \d+ ms after it still failed\): not a sound readiness probe`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no verdict on /v1/models")
	}
	if n, _ := strconv.Atoi(m[1]); n != int(lead.Milliseconds()) {
		t.Errorf("verdict says %s ms, lead is %s", m[1], lead)
	}

	var js bytes.Buffer
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Model                 string `json:"model"`
		Served                bool   `json:"served"`
		ModelsBeforeServingMS *int64 `json:"models_before_serving_ms"`
		ModelsSound           *bool  `json:"models_sound"`
		Signals               []struct {
			Signal    string `json:"signal"`
			FirstOKMS *int64 `json:"first_ok_ms"`
		} `json:"signals"`
	}
	if err := json.Unmarshal(js.Bytes(), &got); err != nil {
		t.Fatalf("JSON: %v\n%s", err, js.String())
	}
	if !got.Served || got.ModelsBeforeServingMS == nil || *got.ModelsBeforeServingMS != lead.Milliseconds() ||
		got.ModelsSound == nil || *got.ModelsSound || len(got.Signals) != 4 || got.Signals[0].FirstOKMS == nil {
		t.Errorf("JSON: %s", js.String())
	}
}

// TestProbeNeverServes: the report says the model never served and the
// probe ends at its timeout.
func TestProbeNeverServes(t *testing.T) {
	s := &startup{noHealth: true, servesAfter: time.Hour}
	url := s.start(t)
	start := time.Now()
	rep, err := Probe(t.Context(), ProbeConfig{
		Client:   client.Config{BaseURL: url, Model: testModel},
		Timeout:  300 * time.Millisecond,
		Interval: 20 * time.Millisecond,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Errorf("probe took %s past its 300ms timeout", el)
	}
	if rep.Served() {
		t.Fatal("served")
	}
	var text bytes.Buffer
	_ = rep.WriteText(&text)
	for _, w := range []string{"the model never served a completion", "/health: absent (404)", "/v1/models: said ready at"} {
		if !strings.Contains(text.String(), w) {
			t.Errorf("text lacks %q:\n%s", w, text.String())
		}
	}
}

// TestProbeWrongModel: a configured model the server does not list, while
// completions for it answer 404, ends the probe at once with the
// preflight's error and no report, long before its timeout.
func TestProbeWrongModel(t *testing.T) {
	url := completionNotFoundServer(t, "real")
	start := time.Now()
	rep, err := Probe(t.Context(), ProbeConfig{
		Client:  client.Config{BaseURL: url, Model: "wrong"},
		Timeout: time.Minute, Interval: 20 * time.Millisecond,
	}, nil)
	if rep != nil || !errors.Is(err, ErrModelNotServed) || !errors.Is(err, ErrPreflight) {
		t.Fatalf("report %v, error %v; want no report and ErrModelNotServed", rep, err)
	}
	if want := `preflight: model "wrong" is not served by ` + url + "; it serves: real"; err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("took %s, want seconds (the timeout is a minute)", took)
	}
}

// completionNotFoundServer lists model and answers every completion with
// vLLM's 404 for an unknown model.
func completionNotFoundServer(t *testing.T, model string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/models":
			fmt.Fprintf(w, `{"object":"list","data":[{"id":%q,"object":"model"}]}`, model)
		case "/health", "/health/ready":
		default:
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `{"object":"error","message":"The model does not exist.","type":"NotFoundError","code":404}`)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}
