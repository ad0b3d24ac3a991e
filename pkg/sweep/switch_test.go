package sweep

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/fleetbench/fleetbench/pkg/client"
	"github.com/fleetbench/fleetbench/pkg/ready"
	"github.com/fleetbench/fleetbench/pkg/sim"
)

func mustSwitcher(t *testing.T, cfg SwitchSpec, target string) Switcher {
	t.Helper()
	sw, err := NewSwitcher(cfg, SwitchEnv{Target: target, Logger: hclog.NewNullLogger()})
	if err != nil {
		t.Fatal(err)
	}
	return sw
}

func TestExecSwitch(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "mode")
	tests := []struct {
		name    string
		command []string
		want    string
	}{
		// The mode is appended ($1) and in FLEETBENCH_MODE.
		{"appended", []string{"sh", "-c", `printf '%s %s' "$FLEETBENCH_MODE" "$1" > ` + out, "sh"}, "kv kv"},
		{"placeholder", []string{"sh", "-c", `printf 'mode={mode}' > ` + out}, "mode=kv"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sw := mustSwitcher(t, SwitchSpec{Kind: KindExec, Command: tc.command}, "")
			if err := sw.Switch(t.Context(), "kv"); err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(out)
			if err != nil || string(b) != tc.want {
				t.Errorf("command wrote %q (%v), want %q", b, err, tc.want)
			}
		})
	}
}

func TestExecSwitchFailure(t *testing.T) {
	sw := mustSwitcher(t, SwitchSpec{Kind: KindExec, Command: []string{"sh", "-c",
		`i=0; while [ $i -lt 2000 ]; do echo "noise line $i" >&2; i=$((i+1)); done; echo "deployment frontend not found" >&2; exit 3`}}, "")
	err := sw.Switch(t.Context(), "round_robin")
	if err == nil {
		t.Fatal("Switch passed")
	}
	msg := err.Error()
	for _, w := range []string{`switch to mode "round_robin"`, "command sh exited with status 3", "deployment frontend not found"} {
		if !strings.Contains(msg, w) {
			t.Errorf("error lacks %q: %s", w, msg)
		}
	}
	// Only the tail of stderr.
	if strings.Contains(msg, "noise line 0 ") || len(msg) > 2*errTail {
		t.Errorf("error holds more than the tail (%d bytes)", len(msg))
	}
}

// TestExecSwitchTimeout: a hung command (and the child it started, which
// holds the output pipe) is killed at the timeout.
func TestExecSwitchTimeout(t *testing.T) {
	sw := mustSwitcher(t, SwitchSpec{Kind: KindExec, Timeout: Duration(200 * time.Millisecond),
		Command: []string{"sh", "-c", "echo starting >&2; sleep 30; echo never"}}, "")
	start := time.Now()
	err := sw.Switch(t.Context(), "kv")
	if el := time.Since(start); el > 3*time.Second {
		t.Errorf("Switch took %s with a 200ms timeout", el)
	}
	if err == nil || !strings.Contains(err.Error(), "timed out after 200ms") || !strings.Contains(err.Error(), "starting") {
		t.Fatalf("error %v", err)
	}
	// The caller's cancellation is reported as such, not as a timeout.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := sw.Switch(ctx, "kv"); !errors.Is(err, context.Canceled) {
		t.Errorf("canceled: %v", err)
	}
}

func TestExecCurrent(t *testing.T) {
	sw := mustSwitcher(t, SwitchSpec{Kind: KindExec, Command: []string{"true"}, CurrentCommand: []string{"sh", "-c", "echo ' kv '"}}, "")
	if got, err := Current(t.Context(), sw); err != nil || got != "kv" {
		t.Errorf("Current = %q, %v", got, err)
	}
	sw = mustSwitcher(t, SwitchSpec{Kind: KindExec, Command: []string{"true"}}, "")
	if _, err := Current(t.Context(), sw); !errors.Is(err, ErrNoCurrent) {
		t.Errorf("Current without a command: %v", err)
	}
}

// adminServer records requests to a fake router admin API.
type adminServer struct {
	mu     sync.Mutex
	reqs   []string // "METHOD path body auth"
	status int
	mode   string
}

func (a *adminServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	a.mu.Lock()
	defer a.mu.Unlock()
	a.reqs = append(a.reqs, r.Method+" "+r.URL.Path+" "+string(b)+" "+r.Header.Get("Authorization")+" "+r.Header.Get("Content-Type"))
	if r.Method == http.MethodGet {
		_, _ = io.WriteString(w, `{"mode":"`+a.mode+`"}`)
		return
	}
	w.WriteHeader(a.status)
	_, _ = io.WriteString(w, `{"error":"router is reloading"}`)
}

func TestHTTPSwitch(t *testing.T) {
	a := &adminServer{status: http.StatusOK, mode: "kv"}
	srv := httptest.NewServer(a)
	defer srv.Close()
	t.Setenv("ROUTER_TOKEN", "s3cret")
	cfg := SwitchSpec{
		Kind:       KindHTTP,
		Method:     "put",
		URL:        srv.URL + "/admin/mode/{mode}",
		Body:       `{"mode":"{mode}"}`,
		Headers:    map[string]string{"Authorization": "Bearer ${ROUTER_TOKEN}"},
		CurrentURL: srv.URL + "/admin/mode",
	}
	sw := mustSwitcher(t, cfg, "")
	if err := sw.Switch(t.Context(), "round_robin"); err != nil {
		t.Fatal(err)
	}
	want := `PUT /admin/mode/round_robin {"mode":"round_robin"} Bearer s3cret application/json`
	if len(a.reqs) != 1 || a.reqs[0] != want {
		t.Errorf("requests %q, want %q", a.reqs, want)
	}
	if got, err := Current(t.Context(), sw); err != nil || got != "kv" {
		t.Errorf("Current = %q, %v", got, err)
	}

	a.status = http.StatusInternalServerError
	err := sw.Switch(t.Context(), "kv")
	if err == nil || !strings.Contains(err.Error(), "answered 500, want 2xx") || !strings.Contains(err.Error(), "router is reloading") {
		t.Errorf("500: %v", err)
	}
	if strings.Contains(err.Error(), "s3cret") {
		t.Errorf("error leaks the token: %v", err)
	}

	a.status = http.StatusOK
	cfg.ExpectStatus = []int{http.StatusAccepted}
	if err := mustSwitcher(t, cfg, "").Switch(t.Context(), "kv"); err == nil || !strings.Contains(err.Error(), "answered 200, want 202") {
		t.Errorf("expect 202: %v", err)
	}

	srv.Close()
	if err := sw.Switch(t.Context(), "kv"); err == nil || !strings.Contains(err.Error(), "PUT http://") {
		t.Errorf("closed server: %v", err)
	}
}

func TestNoneSwitch(t *testing.T) {
	if err := mustSwitcher(t, SwitchSpec{Kind: KindNone}, "").Switch(t.Context(), "kv"); err != nil {
		t.Fatal(err)
	}
	if _, err := Current(t.Context(), mustSwitcher(t, SwitchSpec{Kind: KindNone}, "")); !errors.Is(err, ErrNoCurrent) {
		t.Errorf("Current: %v", err)
	}
}

// TestRegister: another package adds a kind with its own options, as the
// kubernetes switch will.
// registered counts test kinds, so that -count=N registers fresh names.
var registered atomic.Int64

func TestRegister(t *testing.T) {
	kind := fmt.Sprintf("test-kube-%d", registered.Add(1))
	var got []string
	Register(kind, func(cfg SwitchSpec, env SwitchEnv) (Switcher, error) {
		if err := cfg.OnlyFields("options", "timeout"); err != nil {
			return nil, err
		}
		if cfg.Options["deployment"] == "" {
			return nil, errors.New("options.deployment is required")
		}
		return SwitcherFunc(func(_ context.Context, mode string) error {
			got = append(got, cfg.Options["deployment"]+"="+mode)
			return nil
		}), nil
	})
	if !slices.Contains(Kinds(), kind) {
		t.Errorf("Kinds %v", Kinds())
	}
	s := validSpec()
	s.Switch = &SwitchSpec{Kind: kind, Options: map[string]string{"deployment": "frontend"}}
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	sws, err := s.Switchers(nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := sws["kv"].Switch(t.Context(), "kv"); err != nil || len(got) != 1 || got[0] != "frontend=kv" {
		t.Errorf("switch: %v %v", err, got)
	}
	s.Switch.Options = nil
	if err := s.Validate(); err == nil || !strings.Contains(err.Error(), "switch "+kind+": options.deployment is required") {
		t.Errorf("Validate: %v", err)
	}
	defer func() {
		if recover() == nil {
			t.Error("second Register did not panic")
		}
	}()
	Register(kind, func(SwitchSpec, SwitchEnv) (Switcher, error) { return nil, nil })
}

// startSim runs the built-in simulator in-process on a loopback port.
func startSim(t *testing.T, mutate func(*sim.Config)) *sim.Sim {
	t.Helper()
	cfg, err := sim.ProfileConfig(sim.DefaultProfile)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Listen = "127.0.0.1:0"
	cfg.TimeScale = 10
	cfg.ShutdownTimeout = time.Second
	cfg.Router = sim.ModeKV
	if mutate != nil {
		mutate(&cfg)
	}
	s, err := sim.New(cfg, nil, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close simulator: %v", err)
		}
	})
	return s
}

// TestSimSwitch switches a real in-process simulator's routing mode, reads
// it back, and restarts its workers; the readiness gate then passes only
// after the simulated startup, whose /v1/models lists the model before
// completions work.
func TestSimSwitch(t *testing.T) {
	s := startSim(t, func(c *sim.Config) {
		c.StartupTime = 6 * time.Second       // 600 ms wall
		c.ModelsListedAfter = 2 * time.Second // 200 ms wall
	})
	sw := mustSwitcher(t, SwitchSpec{Kind: KindSim}, s.URL()+"/v1")
	if err := sw.Switch(t.Context(), "round_robin"); err != nil {
		t.Fatal(err)
	}
	if s.Mode() != sim.ModeRoundRobin {
		t.Errorf("simulator mode %s after switching to round_robin", s.Mode())
	}
	if got, err := Current(t.Context(), sw); err != nil || got != "round_robin" {
		t.Errorf("Current = %q, %v", got, err)
	}
	if err := sw.Switch(t.Context(), "bogus"); err == nil || !strings.Contains(err.Error(), "answered 400") || !strings.Contains(err.Error(), "unknown routing mode") {
		t.Errorf("bogus mode: %v", err)
	}

	restart := mustSwitcher(t, SwitchSpec{Kind: KindSim, RestartFrontend: true, RestartWorkers: true}, s.URL())
	switched := time.Now()
	if err := restart.Switch(t.Context(), "kv"); err != nil {
		t.Fatal(err)
	}
	if s.Mode() != sim.ModeKV {
		t.Errorf("simulator mode %s after switching to kv", s.Mode())
	}
	gate, err := ready.New(ready.Config{
		Client:      client.Config{BaseURL: s.URL(), Model: s.Config().Model},
		Completions: 3,
		Prime:       2,
		PrimeTurns:  2,
		Interval:    10 * time.Millisecond,
		MaxInterval: 50 * time.Millisecond,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer gate.Close()
	rep, err := gate.Wait(t.Context())
	if err != nil {
		t.Fatalf("gate: %v", err)
	}
	if el := time.Since(switched); el < 550*time.Millisecond {
		t.Errorf("gate passed %s after the restart, before the 600 ms startup ended", el)
	}
	models, _ := rep.Stage(ready.StageModels)
	comp, _ := rep.Stage(ready.StageCompletions)
	if comp.Ended-models.Ended < 100*time.Millisecond || comp.Attempts <= 3 {
		t.Errorf("models passed at %s, completions at %s after %d attempts: the simulator's 400 ms gap is missing",
			models.Ended, comp.Ended, comp.Attempts)
	}
}
