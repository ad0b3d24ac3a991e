package fleet

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/fleetbench/fleetbench/pkg/ready"
	"github.com/fleetbench/fleetbench/pkg/result"
	"github.com/fleetbench/fleetbench/pkg/sim"
)

// runEnv is what both kinds of run set up before the load starts: the
// output directory, the target (the in-process simulator when the config
// has none) and the optional request log.
type runEnv struct {
	target, model string
	// reqLog is nil without SaveRequests.
	reqLog *result.RequestLog
	sim    *sim.Sim
}

// setUp prepares a run's environment; the caller must Close it.
func (r *levelRun) setUp(ctx context.Context) (_ *runEnv, err error) {
	c := r.cfg
	if err := os.MkdirAll(c.OutDir, 0o755); err != nil {
		return nil, fmt.Errorf("create output directory: %w", err)
	}
	env := &runEnv{target: c.Client.BaseURL, model: c.Client.Model}
	defer func() {
		if err != nil {
			env.Close()
		}
	}()
	if env.target == "" {
		if env.sim, err = r.startSim(ctx); err != nil {
			return nil, err
		}
		env.target, env.model = env.sim.URL(), env.sim.Config().Model
	}
	if c.Client.BaseURL != "" && !c.SkipPreflight {
		cc := c.Client
		cc.BaseURL, cc.Model = env.target, env.model
		if err := ready.Preflight(ctx, cc, 0, r.logger.Named("preflight")); err != nil {
			return nil, err
		}
	}
	if c.SaveRequests {
		if env.reqLog, err = result.CreateRequestLog(filepath.Join(c.OutDir, "requests.jsonl"), time.Now()); err != nil {
			return nil, err
		}
	}
	return env, nil
}

// closeRequestLog flushes and closes the request log, once the load has
// stopped; nil without SaveRequests.
func (e *runEnv) closeRequestLog() error {
	if e.reqLog == nil {
		return nil
	}
	return e.reqLog.Close()
}

// Close releases what setUp started; the request log's own error is
// reported by closeRequestLog, so Close on an early return loses nothing
// the user was promised.
func (e *runEnv) Close() {
	_ = e.closeRequestLog()
	if e.sim != nil {
		_ = e.sim.Close()
	}
}

// startSim starts the built-in simulator in-process on a loopback port.
func (r *levelRun) startSim(ctx context.Context) (*sim.Sim, error) {
	c := r.cfg
	cfg, err := sim.ProfileConfig(c.Sim.Profile)
	if err != nil {
		return nil, fmt.Errorf("simulator profile: %w", err)
	}
	if c.Sim.Replicas > 0 {
		cfg.Replicas = c.Sim.Replicas
	}
	mode, err := sim.ParseMode(c.Sim.Router)
	if err != nil {
		return nil, err
	}
	cfg.Router, cfg.TimeScale, cfg.Listen = mode, c.Sim.TimeScale, "127.0.0.1:0"
	if c.Client.Model != "" {
		cfg.Model = c.Client.Model
	}
	// The workload's natural stop is the simulator's natural-stop model:
	// only the cap is sent, so answers end on their own.
	if c.Workload.NaturalStop {
		cfg.Output.UntilMaxTokens = false
	}
	s, err := sim.New(cfg, r.logger, nil)
	if err != nil {
		return nil, fmt.Errorf("create simulator: %w", err)
	}
	// The simulator outlives the run's signal so turns can drain; Close
	// stops it.
	if err := s.Start(context.WithoutCancel(ctx)); err != nil {
		return nil, fmt.Errorf("start simulator: %w", err)
	}
	r.logger.Info("simulator started", "url", s.URL(), "profile", cfg.Profile, "replicas", cfg.Replicas, "router", cfg.Router)
	return s, nil
}

// startScrape starts reading the run's --scrape endpoints (the in-process
// simulator's for "sim"); a nil serverScrape without any. Its readings
// outlive an interrupt, so the measured part of a run cut short is still
// read, each bounded by the scrape timeout; stop ends it.
func (r *levelRun) startScrape(ctx context.Context, env *runEnv) (*serverScrape, func(), error) {
	if len(r.cfg.Scrape.Endpoints) == 0 && r.cfg.Scrape.Pods == nil {
		return nil, func() {}, nil
	}
	simURL := ""
	if env.sim != nil {
		simURL = env.sim.URL()
	}
	sc, err := r.cfg.Scrape.WithDefaults().ResolveSim(simURL)
	if err != nil {
		return nil, nil, fmt.Errorf("scrape: %w", err)
	}
	return startServerScrape(context.WithoutCancel(ctx), sc, r.logger, r.cfg.Live)
}
