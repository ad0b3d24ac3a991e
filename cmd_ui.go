package main

import (
	"context"
	"fmt"
	"os"
	"sync"

	"github.com/hashicorp/go-hclog"

	"github.com/fleetbench/fleetbench/fleet"
	"github.com/fleetbench/fleetbench/pkg/report"
	"github.com/fleetbench/fleetbench/pkg/ui"
)

// checkUIBaseline checks --ui-baseline before anything starts: it needs
// the metrics port, and the file must be a sound baseline.json. The caller
// makes its error a usage error.
func checkUIBaseline(path, metricsAddr string) error {
	if path == "" {
		return nil
	}
	if metricsAddr == "" {
		return fmt.Errorf("--ui-baseline draws in the dashboard at METRICS-LISTEN/ui: give --metrics-listen too")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("--ui-baseline: %w", err)
	}
	if _, err := report.ParseBaseline(b); err != nil {
		return fmt.Errorf("--ui-baseline %s: %w", path, err)
	}
	return nil
}

// dashboard is a command's live dashboard: served at /ui on the metrics
// port whenever there is one.
type dashboard struct {
	srv  *ui.Server
	live *fleet.Live
	mu   sync.Mutex
	ctrl ui.Controller
}

// newDashboard returns the dashboard of command, nil without a metrics
// port (addr ""). token guards changes from beyond loopback; control says
// whether the command's level may change from the page (readOnly says why
// not otherwise).
func newDashboard(command, addr, token, baseline string, control bool, readOnly string, logger hclog.Logger) (*dashboard, error) {
	if addr == "" {
		return nil, nil
	}
	d := &dashboard{}
	cfg := ui.Config{Command: command, Feed: ui.NewFeed(), Token: token, Logger: logger, ReadOnly: readOnly}
	if control {
		cfg.Control = ui.ControllerFunc(d.setConcurrency)
		cfg.ReadOnly = ""
	}
	srv, err := ui.New(cfg)
	if err != nil {
		return nil, err
	}
	if baseline != "" {
		if err := srv.LoadBaselineFile(baseline); err != nil {
			return nil, err
		}
	}
	d.srv = srv
	d.live = &fleet.Live{Feed: cfg.Feed, Control: d.setControl}
	return d, nil
}

func (d *dashboard) setControl(c ui.Controller) {
	d.mu.Lock()
	d.ctrl = c
	d.mu.Unlock()
}

// errNotRunning is the page's answer while no level runs.
var errNotRunning = fmt.Errorf("no level is running yet (or any more): nothing changed")

func (d *dashboard) setConcurrency(ctx context.Context, level int) error {
	d.mu.Lock()
	c := d.ctrl
	d.mu.Unlock()
	if c == nil {
		return errNotRunning
	}
	return c.SetConcurrency(ctx, level)
}

// routes are the dashboard's routes on the metrics port.
func (d *dashboard) routes() []route {
	if d == nil {
		return nil
	}
	return []route{{ui.Path, d.srv}, {ui.Path + "/", d.srv}}
}

// fleetLive is the fleet's view of the dashboard, nil without one.
func (d *dashboard) fleetLive() *fleet.Live {
	if d == nil {
		return nil
	}
	return d.live
}

// close ends the page's feed streams (before the metrics server stops).
func (d *dashboard) close() {
	if d != nil {
		d.srv.Close()
	}
}
