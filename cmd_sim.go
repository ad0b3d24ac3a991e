package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/fleetbench/fleetbench/internal/flags"
	"github.com/fleetbench/fleetbench/pkg/sim"
)

// simFlags are the sim command's settings; zero numbers take the
// profile's values.
type simFlags struct {
	profile, listen, router, model                                     string
	listProfiles, coldStart, naturalStop                               bool
	replicas, blockSize, kvBlocks, maxBatch, maxNumTokens, maxModelLen int
	outputMean                                                         int
	timeScale, overlapWeight, temperature                              float64
	eventDelay, startup, listed, shutdown                              time.Duration
	seed                                                               int64
}

// simCmd serves the built-in inference simulator until ctx is done, then
// drains in-flight requests and exits.
func (c *cli) simCmd() *cobra.Command {
	var f simFlags
	cmd := &cobra.Command{
		Use:   "sim",
		Short: "serve the built-in inference simulator",
		Long: "Serves an OpenAI-compatible inference simulator: replicas with paged prefix caches,\n" +
			"continuous batching and a router (kv, prefix-hash, round_robin, random, least-loaded),\n" +
			"with /metrics in vLLM's and Dynamo's names and an admin API to switch routers.",
		Example: "  fleetbench sim --listen 127.0.0.1:8000 --replicas 4 --router kv --profile llama-3.1-70b-fp8-h100-tp2\n" +
			"  fleetbench sim --list-profiles",
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return c.serveSim(cmd.Context(), f) },
	}
	fs := cmd.Flags()
	fs.StringVar(&f.profile, "profile", sim.DefaultProfile, "hardware profile (see --list-profiles)")
	fs.BoolVar(&f.listProfiles, "list-profiles", false, "print the built-in profiles and exit")
	fs.StringVar(&f.listen, "listen", "127.0.0.1:8000", "address to listen on")
	fs.IntVar(&f.replicas, "replicas", 0, "number of workers (default: the profile's)")
	fs.StringVar(&f.router, "router", string(sim.ModeKV), "routing mode: kv, prefix-hash, round_robin, random, least-loaded")
	fs.Float64Var(&f.timeScale, "time-scale", 1, "divide all simulated times by this (10 runs 10x faster)")
	fs.StringVar(&f.model, "model", "", "served model name (default: the profile's)")
	fs.IntVar(&f.blockSize, "block-size", 0, "KV block size in tokens, 16 or 32 (default: the profile's)")
	fs.IntVar(&f.kvBlocks, "kv-blocks", 0, "KV blocks per worker (default: the profile's)")
	fs.IntVar(&f.maxBatch, "max-batch", 0, "max running sequences per worker (default: the profile's)")
	fs.IntVar(&f.maxNumTokens, "max-num-tokens", 0, "token budget per engine step (default: the profile's)")
	fs.IntVar(&f.maxModelLen, "max-model-len", 0, "max prompt+completion tokens (default: the profile's)")
	fs.IntVar(&f.outputMean, "output-mean", 0, "mean natural completion length in tokens (default: the profile's)")
	fs.BoolVar(&f.naturalStop, "natural-stop", false, "end answers at their natural length (log-normal, --output-mean) below max_tokens; by default they run to max_tokens, as with ignore_eos")
	fs.Float64Var(&f.overlapWeight, "overlap-weight", sim.DefaultOverlapWeight, "kv router: weight of blocks to prefill against decode blocks")
	fs.Float64Var(&f.temperature, "router-temperature", 0, "kv router: softmax temperature (0 picks the cheapest worker)")
	fs.DurationVar(&f.eventDelay, "event-delay", sim.DefaultEventDelay, "kv router: delay of KV block events (simulated time)")
	fs.DurationVar(&f.startup, "startup-time", sim.DefaultStartupTime, "worker startup time after a restart (simulated time)")
	fs.DurationVar(&f.listed, "models-listed-after", sim.DefaultModelsListedAfter, "when during startup /v1/models lists the model (completions still 503)")
	fs.BoolVar(&f.coldStart, "cold-start", false, "begin in the startup phases, as freshly started workers")
	fs.DurationVar(&f.shutdown, "shutdown-timeout", sim.DefaultShutdownTimeout, "graceful drain of in-flight requests on exit")
	fs.Int64Var(&f.seed, "seed", 1, "seed of the router's random choices")
	// run and sweep configure their in-process simulator with --sim-*;
	// those spellings work here too.
	for _, n := range []string{"profile", "router", "replicas", "time-scale", "kv-blocks"} {
		flags.Alias(fs, "sim-"+n, n)
	}
	return cmd
}

// serveSim serves until ctx is done.
func (c *cli) serveSim(ctx context.Context, f simFlags) error {
	if f.listProfiles {
		for _, p := range sim.Profiles() {
			e := p.Engine
			fmt.Fprintf(c.stdout, "%-28s %d replicas, %d blocks x %d tokens, batch %d, %d tokens/step, max len %d: %s\n",
				p.Name, p.Replicas, e.NumBlocks, e.BlockSize, e.MaxBatch, e.MaxNumTokens, e.MaxModelLen, p.Description)
		}
		return nil
	}
	cfg, err := sim.ProfileConfig(f.profile)
	if err != nil {
		return &usageError{err: err}
	}
	mode, err := sim.ParseMode(f.router)
	if err != nil {
		return &usageError{err: err}
	}
	cfg.Router, cfg.Listen, cfg.TimeScale = mode, f.listen, f.timeScale
	cfg.OverlapWeight, cfg.RouterTemperature, cfg.EventDelay = f.overlapWeight, f.temperature, f.eventDelay
	cfg.StartupTime, cfg.ModelsListedAfter = f.startup, min(f.listed, f.startup)
	cfg.ColdStart, cfg.ShutdownTimeout, cfg.Seed = f.coldStart, f.shutdown, f.seed
	setIf := func(dst *int, v int) {
		if v > 0 {
			*dst = v
		}
	}
	setIf(&cfg.Replicas, f.replicas)
	setIf(&cfg.Engine.BlockSize, f.blockSize)
	setIf(&cfg.Engine.NumBlocks, f.kvBlocks)
	setIf(&cfg.Engine.MaxBatch, f.maxBatch)
	setIf(&cfg.Engine.MaxNumTokens, f.maxNumTokens)
	setIf(&cfg.Engine.MaxModelLen, f.maxModelLen)
	if f.outputMean > 0 {
		cfg.Output.Mean = f.outputMean
		cfg.Output.Max = max(cfg.Output.Max, f.outputMean)
		cfg.Output.Min = min(cfg.Output.Min, f.outputMean)
	}
	if f.naturalStop {
		cfg.Output.UntilMaxTokens = false
	}
	if f.model != "" {
		cfg.Model = f.model
	}
	if err := cfg.Validate(); err != nil {
		return &usageError{err: err}
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
