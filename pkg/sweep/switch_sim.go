package sweep

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
)

// simSwitch drives the built-in simulator's admin API: PUT /admin/router
// sets the mode, POST /admin/restart/frontend and /admin/restart/workers
// restart parts of the simulated stack. It speaks HTTP only and does not
// import pkg/sim, so it works against a simulator in another process.
type simSwitch struct {
	base            string
	restartFrontend bool
	restartWorkers  bool
	timeout         time.Duration
	hc              *http.Client
	log             hclog.Logger
}

var (
	_ Switcher   = (*simSwitch)(nil)
	_ ModeReader = (*simSwitch)(nil)
)

func newSimSwitch(cfg SwitchSpec, env SwitchEnv) (Switcher, error) {
	if err := cfg.OnlyFields("url", "restart_frontend", "restart_workers", "timeout"); err != nil {
		return nil, err
	}
	base := cfg.URL
	if base == "" {
		base = env.Target
	}
	if base == "" {
		return nil, errors.New("url is required when the sweep has no target")
	}
	if err := checkURL(base); err != nil {
		return nil, err
	}
	return &simSwitch{
		base:            rootURL(base),
		restartFrontend: cfg.RestartFrontend,
		restartWorkers:  cfg.RestartWorkers,
		timeout:         cfg.timeoutOr(DefaultHTTPTimeout),
		hc:              newHTTPClient(),
		log:             env.Logger.Named("switch").With("kind", KindSim),
	}, nil
}

// rootURL strips a trailing "/" and "/v1" from a target URL: the admin and
// health endpoints live beside /v1, not under it.
func rootURL(u string) string {
	u = strings.TrimRight(u, "/")
	return strings.TrimSuffix(u, "/v1")
}

type simModeBody struct {
	Mode string `json:"mode"`
}

// Switch sets the routing mode, then restarts the frontend and the workers
// when configured. After a worker restart the simulator goes through its
// startup phases; waiting for it is the readiness gate's job.
func (s *simSwitch) Switch(ctx context.Context, mode string) error {
	start := time.Now()
	body, err := json.Marshal(simModeBody{Mode: mode})
	if err != nil {
		return fmt.Errorf("switch to mode %q: %w", mode, err)
	}
	hdr := http.Header{"Content-Type": {"application/json"}}
	got, err := s.call(ctx, http.MethodPut, "/admin/router", string(body), hdr)
	if err != nil {
		return fmt.Errorf("switch to mode %q: %w", mode, err)
	}
	var mb simModeBody
	if err := json.Unmarshal(got, &mb); err != nil {
		return fmt.Errorf("switch to mode %q: decode answer: %w", mode, err)
	}
	if s.restartFrontend {
		if _, err := s.call(ctx, http.MethodPost, "/admin/restart/frontend", "", nil); err != nil {
			return fmt.Errorf("switch to mode %q: restart frontend: %w", mode, err)
		}
	}
	if s.restartWorkers {
		if _, err := s.call(ctx, http.MethodPost, "/admin/restart/workers", "", nil); err != nil {
			return fmt.Errorf("switch to mode %q: restart workers: %w", mode, err)
		}
	}
	s.log.Info("routing mode switched", "mode", mode, "simulator_mode", mb.Mode,
		"restart_frontend", s.restartFrontend, "restart_workers", s.restartWorkers,
		"elapsed", time.Since(start).Round(time.Millisecond))
	return nil
}

// Current reads the simulator's routing mode.
func (s *simSwitch) Current(ctx context.Context) (string, error) {
	got, err := s.call(ctx, http.MethodGet, "/admin/router", "", nil)
	if err != nil {
		return "", fmt.Errorf("read current mode: %w", err)
	}
	return modeFromBody(got)
}

// call sends one admin request and wants 200.
func (s *simSwitch) call(ctx context.Context, method, path, body string, hdr http.Header) ([]byte, error) {
	status, got, err := do(ctx, s.hc, s.timeout, method, s.base+path, body, hdr)
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return nil, fmt.Errorf("%s %s answered %d: %s", method, path, status, cleanText(got))
	}
	return got, nil
}
