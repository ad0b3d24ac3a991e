package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/fleetbench/fleetbench/pkg/sim"
)

// cmdSim serves the built-in inference simulator until ctx is done, then
// drains in-flight requests and exits.
func (c *cli) cmdSim(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("sim", flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	profile := fs.String("profile", sim.DefaultProfile, "hardware profile (see --list-profiles)")
	listProfiles := fs.Bool("list-profiles", false, "print the built-in profiles and exit")
	listen := fs.String("listen", "127.0.0.1:8000", "address to listen on")
	replicas := fs.Int("replicas", 0, "number of workers (default: the profile's)")
	router := fs.String("router", string(sim.ModeKV), "routing mode: kv, prefix-hash, round_robin, random, least-loaded")
	timeScale := fs.Float64("time-scale", 1, "divide all simulated times by this (10 runs 10x faster)")
	model := fs.String("model", "", "served model name (default: the profile's)")
	blockSize := fs.Int("block-size", 0, "KV block size in tokens, 16 or 32 (default: the profile's)")
	kvBlocks := fs.Int("kv-blocks", 0, "KV blocks per worker (default: the profile's)")
	maxBatch := fs.Int("max-batch", 0, "max running sequences per worker (default: the profile's)")
	maxNumTokens := fs.Int("max-num-tokens", 0, "token budget per engine step (default: the profile's)")
	maxModelLen := fs.Int("max-model-len", 0, "max prompt+completion tokens (default: the profile's)")
	outputMean := fs.Int("output-mean", 0, "mean natural completion length in tokens (default 250)")
	overlapWeight := fs.Float64("overlap-weight", sim.DefaultOverlapWeight, "kv router: weight of blocks to prefill against decode blocks")
	temperature := fs.Float64("router-temperature", 0, "kv router: softmax temperature (0 picks the cheapest worker)")
	eventDelay := fs.Duration("event-delay", sim.DefaultEventDelay, "kv router: delay of KV block events (simulated time)")
	startup := fs.Duration("startup-time", sim.DefaultStartupTime, "worker startup time after a restart (simulated time)")
	listed := fs.Duration("models-listed-after", sim.DefaultModelsListedAfter, "when during startup /v1/models lists the model (completions still 503)")
	coldStart := fs.Bool("cold-start", false, "begin in the startup phases, as freshly started workers")
	shutdown := fs.Duration("shutdown-timeout", sim.DefaultShutdownTimeout, "graceful drain of in-flight requests on exit")
	seed := fs.Int64("seed", 1, "seed of the router's random choices")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	if *listProfiles {
		for _, p := range sim.Profiles() {
			e := p.Engine
			fmt.Fprintf(c.stdout, "%-28s %d replicas, %d blocks x %d tokens, batch %d, %d tokens/step, max len %d: %s\n",
				p.Name, p.Replicas, e.NumBlocks, e.BlockSize, e.MaxBatch, e.MaxNumTokens, e.MaxModelLen, p.Description)
		}
		return nil
	}
	cfg, err := sim.ProfileConfig(*profile)
	if err != nil {
		fmt.Fprintf(c.stderr, "fleetbench sim: %v\n", err)
		return errUsage
	}
	mode, err := sim.ParseMode(*router)
	if err != nil {
		fmt.Fprintf(c.stderr, "fleetbench sim: %v\n", err)
		return errUsage
	}
	cfg.Router = mode
	cfg.Listen = *listen
	cfg.TimeScale = *timeScale
	cfg.OverlapWeight = *overlapWeight
	cfg.RouterTemperature = *temperature
	cfg.EventDelay = *eventDelay
	cfg.StartupTime = *startup
	cfg.ModelsListedAfter = min(*listed, *startup)
	cfg.ColdStart = *coldStart
	cfg.ShutdownTimeout = *shutdown
	cfg.Seed = *seed
	setIf := func(dst *int, v int) {
		if v > 0 {
			*dst = v
		}
	}
	setIf(&cfg.Replicas, *replicas)
	setIf(&cfg.Engine.BlockSize, *blockSize)
	setIf(&cfg.Engine.NumBlocks, *kvBlocks)
	setIf(&cfg.Engine.MaxBatch, *maxBatch)
	setIf(&cfg.Engine.MaxNumTokens, *maxNumTokens)
	setIf(&cfg.Engine.MaxModelLen, *maxModelLen)
	if *outputMean > 0 {
		cfg.Output.Mean = *outputMean
		cfg.Output.Max = max(cfg.Output.Max, *outputMean)
		cfg.Output.Min = min(cfg.Output.Min, *outputMean)
	}
	if *model != "" {
		cfg.Model = *model
	}
	if err := cfg.Validate(); err != nil {
		fmt.Fprintf(c.stderr, "fleetbench sim: %v\n", err)
		return errUsage
	}

	s, err := sim.New(cfg, c.logger, nil)
	if err != nil {
		return fmt.Errorf("create simulator: %w", err)
	}
	if err := s.Start(ctx); err != nil {
		return fmt.Errorf("start simulator: %w", err)
	}
	fmt.Fprintf(c.stdout, "fleetbench sim: serving %s (%s, %d replicas, router %s, time scale %g) at %s\n",
		cfg.Model, cfg.Profile, cfg.Replicas, cfg.Router, cfg.TimeScale, s.URL())
	<-ctx.Done()
	start := time.Now()
	if err := s.Close(); err != nil {
		return fmt.Errorf("stop simulator: %w", err)
	}
	c.logger.Info("simulator stopped", "drain", time.Since(start).Round(time.Millisecond))
	return ctx.Err()
}
