package ready

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fleetbench/fleetbench/pkg/client"
)

// fastConfig polls quickly so tests take milliseconds.
func fastConfig(url string) Config {
	return Config{
		Client:             client.Config{BaseURL: url, Model: testModel},
		HealthTimeout:      5 * time.Second,
		ModelsTimeout:      5 * time.Second,
		CompletionsTimeout: 5 * time.Second,
		PrimeTimeout:       5 * time.Second,
		Completions:        3,
		MaxTokens:          2,
		Prime:              2,
		PrimeTurns:         2,
		Interval:           5 * time.Millisecond,
		MaxInterval:        20 * time.Millisecond,
		RequestTimeout:     5 * time.Second,
	}
}

func newGate(t *testing.T, cfg Config) *Gate {
	t.Helper()
	g, err := New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	return g
}

// TestGateWaitsForCompletions: /v1/models lists the model long before
// completions work; the gate must pass only after they do, and report each
// stage in order.
func TestGateWaitsForCompletions(t *testing.T) {
	s := &startup{upAfter: 50 * time.Millisecond, listedAfter: 150 * time.Millisecond, servesAfter: 600 * time.Millisecond}
	url := s.start(t)
	cfg := fastConfig(url)
	g := newGate(t, cfg)

	rep, err := g.Wait(t.Context())
	passedAt := s.since()
	if err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if passedAt < s.servesAfter {
		t.Fatalf("gate passed %s after start, before completions worked at %s", passedAt, s.servesAfter)
	}
	if s.firstServed() < s.servesAfter {
		t.Fatalf("server served at %s, before %s", s.firstServed(), s.servesAfter)
	}
	// K completions plus 2 conversations x 2 turns.
	if got, want := s.completions.Load(), int64(cfg.Completions+cfg.Prime*cfg.PrimeTurns); got < want {
		t.Errorf("server answered %d completions, want at least %d", got, want)
	}
	var order []Stage
	for _, st := range rep.Stages {
		order = append(order, st.Stage)
		if st.Status != StatusPassed {
			t.Errorf("stage %s: status %s, want passed", st.Stage, st.Status)
		}
		if st.Ended < st.Started {
			t.Errorf("stage %s ended (%s) before it started (%s)", st.Stage, st.Ended, st.Started)
		}
	}
	if got := strings.Join(stageNames(order), ","); got != "health,models,completions,prime" {
		t.Fatalf("stages %s", got)
	}
	models, _ := rep.Stage(StageModels)
	comp, _ := rep.Stage(StageCompletions)
	// The models stage passed when the model was listed, well before it
	// could serve; the completions stage only after.
	if gap := comp.Ended - models.Ended; gap < 100*time.Millisecond {
		t.Errorf("completions passed only %s after models; the server had a 450 ms gap", gap)
	}
	if len(comp.TTFTs) != cfg.Completions {
		t.Errorf("completions stage reports %d TTFTs, want %d", len(comp.TTFTs), cfg.Completions)
	}
	if comp.Attempts <= cfg.Completions {
		t.Errorf("completions stage made %d attempts; the 503s should have cost more", comp.Attempts)
	}
	// The report is JSON for reports.
	var back Report
	b, err := json.Marshal(rep)
	if err != nil || json.Unmarshal(b, &back) != nil || len(back.Stages) != 4 {
		t.Fatalf("report JSON round trip: %v %s", err, b)
	}
	if !strings.Contains(rep.String(), "completions passed at") {
		t.Errorf("String: %q", rep.String())
	}
}

func stageNames(s []Stage) []string {
	out := make([]string, len(s))
	for i, x := range s {
		out[i] = string(x)
	}
	return out
}

// TestGateHealthAbsent: a server without /health (404) skips that stage.
func TestGateHealthAbsent(t *testing.T) {
	s := &startup{noHealth: true}
	url := s.start(t)
	cfg := fastConfig(url)
	cfg.Prime = -1
	rep, err := newGate(t, cfg).Wait(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if h, _ := rep.Stage(StageHealth); h.Status != StatusAbsent {
		t.Errorf("health status %s, want absent", h.Status)
	}
	if p, _ := rep.Stage(StagePrime); p.Status != StatusOff {
		t.Errorf("prime status %s, want off", p.Status)
	}
}

// TestGateTimeoutNamesStage: each stage's timeout error says what never
// became ready.
func TestGateTimeoutNamesStage(t *testing.T) {
	never := time.Hour
	tests := []struct {
		name  string
		s     *startup
		set   func(*Config)
		stage Stage
		want  []string
	}{
		{
			name:  "completions never work",
			s:     &startup{servesAfter: never},
			set:   func(c *Config) { c.CompletionsTimeout = 300 * time.Millisecond },
			stage: StageCompletions,
			want:  []string{"wait for readiness: /v1/models answered but completions failed for 300ms", "503", "workers not ready"},
		},
		{
			name:  "model never listed",
			s:     &startup{listedAfter: never, servesAfter: never},
			set:   func(c *Config) { c.ModelsTimeout = 200 * time.Millisecond },
			stage: StageModels,
			want:  []string{`wait for readiness: /v1/models answered but did not list model "test-model" for 200ms (listed: none)`},
		},
		{
			name:  "server never up",
			s:     &startup{upAfter: never},
			set:   func(c *Config) { c.HealthTimeout = 200 * time.Millisecond },
			stage: StageHealth,
			want:  []string{"wait for readiness: /health did not answer 200 for 200ms", "connection refused"},
		},
		{
			name: "ttft never settles",
			s: &startup{ttft: func(n int) time.Duration {
				if n%2 == 0 {
					return 300 * time.Millisecond
				}
				return 0
			}},
			set: func(c *Config) {
				c.CompletionsTimeout = 1500 * time.Millisecond
				c.TTFTSlack = 10 * time.Millisecond
			},
			stage: StageCompletions,
			want:  []string{"completions succeeded but TTFT did not settle for 1.5s", "vary by"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			url := tc.s.start(t)
			cfg := fastConfig(url)
			tc.set(&cfg)
			rep, err := newGate(t, cfg).Wait(t.Context())
			if err == nil {
				t.Fatal("Wait passed")
			}
			se := isStageErr(t, err)
			if se.Stage != tc.stage {
				t.Errorf("stage %s, want %s", se.Stage, tc.stage)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			last := rep.Stages[len(rep.Stages)-1]
			if last.Stage != tc.stage || last.Status != StatusFailed || last.Error == "" {
				t.Errorf("last stage in report: %+v", last)
			}
		})
	}
}

// TestGateCancel: the caller's deadline ends the wait with the caller's error,
// not a StageError.
func TestGateCancel(t *testing.T) {
	s := &startup{servesAfter: time.Hour}
	url := s.start(t)
	g := newGate(t, fastConfig(url))
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	_, err := g.Wait(ctx)
	var se *StageError
	if !errors.Is(err, context.DeadlineExceeded) || errors.As(err, &se) {
		t.Fatalf("err %v: want the caller's deadline, not a stage timeout", err)
	}
}

func TestStable(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name  string
		ttfts []time.Duration
		want  bool
	}{
		{"equal", []time.Duration{100 * ms, 100 * ms, 100 * ms}, true},
		{"within 3x", []time.Duration{100 * ms, 250 * ms, 299 * ms}, true},
		{"beyond 3x", []time.Duration{100 * ms, 120 * ms, 301 * ms}, false},
		{"tiny but within slack", []time.Duration{1 * ms, 9 * ms}, true},
		{"tiny beyond slack", []time.Duration{1 * ms, 40 * ms}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Stable(tc.ttfts, 3, 10*ms); got != tc.want {
				t.Errorf("Stable(%v) = %t, want %t", tc.ttfts, got, tc.want)
			}
		})
	}
}

func TestBackoffDelay(t *testing.T) {
	b := Backoff{Initial: 100 * time.Millisecond, Max: time.Second, Jitter: 0.2}
	tests := []struct {
		n    int
		r    float64
		want time.Duration
	}{
		{1, 0, 100 * time.Millisecond},
		{2, 0, 200 * time.Millisecond},
		{4, 0, 800 * time.Millisecond},
		{5, 0, time.Second}, // capped
		{50, 0, time.Second},
		{1, 0.5, 90 * time.Millisecond}, // jitter takes up to 20% off
		{50, 0.999999, 800*time.Millisecond + time.Microsecond},
	}
	for _, tc := range tests {
		got := b.Delay(tc.n, tc.r)
		if diff := got - tc.want; diff < -time.Microsecond || diff > time.Microsecond {
			t.Errorf("Delay(%d, %g) = %s, want %s", tc.n, tc.r, got, tc.want)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	cfg := fastConfig("http://127.0.0.1:1")
	cfg.MaxTokens = 9
	cfg.TTFTSpread = 0.5
	err := cfg.WithDefaults().Validate()
	if err == nil {
		t.Fatal("want errors")
	}
	for _, w := range []string{"max tokens 9 must be 1..8", "ttft spread 0.5"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%q lacks %q", err, w)
		}
	}
}
