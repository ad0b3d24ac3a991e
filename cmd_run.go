package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"sigs.k8s.io/yaml"

	"github.com/fleetbench/fleetbench/fleet"
	"github.com/fleetbench/fleetbench/internal/flags"
	"github.com/fleetbench/fleetbench/pkg/client"
	"github.com/fleetbench/fleetbench/pkg/load"
	"github.com/fleetbench/fleetbench/pkg/result"
	"github.com/fleetbench/fleetbench/pkg/servermetrics"
	"github.com/fleetbench/fleetbench/pkg/sim"
	"github.com/fleetbench/fleetbench/pkg/workload"
)

// runOptions are the run command's flags: the shared target, workload and
// load settings (internal/flags) and the run's own.
type runOptions struct {
	rc                              fleet.RunConfig
	levels                          []int
	headers, metadata, thresholds   []string
	goodput                         string
	pods                            servermetrics.Pods
	extraBody, percentiles, arrival string
	metrics, uiBaseline             string
	burstiness                      float64
	dryRun                          bool
}

func (c *cli) runCmd() *cobra.Command {
	cmd, _ := c.newRun()
	return cmd
}

// blockingReadsUsage is the help of run's and agent's --blocking-reads.
const blockingReadsUsage = "read each HTTP/1.1 stream on its request's goroutine (as TLS and HTTP/2 streams always are) instead of the client's event loops (Linux, http:// targets): a fallback should the loops misbehave with a server"

// newRun returns the run command and the options its flags fill.
func (c *cli) newRun() (*cobra.Command, *runOptions) {
	o := &runOptions{
		rc: fleet.RunConfig{
			Client:   client.Config{Endpoint: flags.DefaultEndpoint, APIKeyEnv: flags.DefaultAPIKeyEnv, ConnectTimeout: client.DefaultConnectTimeout},
			Workload: workload.Default(),
			Warmup:   flags.DefaultWarmup, Duration: flags.DefaultDuration, Drain: load.DefaultDrainTimeout,
			Sim:     fleet.SimConfig{Profile: sim.DefaultProfile, Router: string(sim.ModeKV), TimeScale: 1},
			Version: version,
		},
		percentiles: "99", arrival: load.ArrivalPoisson, burstiness: 1,
	}
	cmd := &cobra.Command{
		Use:   "run [flags]",
		Short: "drive one concurrency level against a target and print the result",
		Long: "Drives one level of load (closed loop of --concurrency sessions, or an open loop of\n" +
			"--request-rate arrivals) against an OpenAI-compatible target, or against the built-in\n" +
			"simulator when --target is empty. Prints vLLM's benchmark result block and writes\n" +
			"OUT/result.json; --agents K spreads the level over K agents merged exactly.",
		Example: "  fleetbench run --concurrency 64 --warmup 30s --duration 2m --out out/run1\n" +
			"  fleetbench run --target http://vllm:8000 --model m --concurrency 100 --out out/kv-100\n" +
			"  fleetbench run --concurrency 64 --out out/x --dry-run   # print the validated configuration",
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			rc, err := o.config(cmd.Flags())
			if err != nil {
				return &usageError{err: err}
			}
			if o.dryRun {
				return writeDryRun(c.stdout, rc.Plan())
			}
			if reserveLoopProcs && rc.Client.BaseURL != "" && !rc.Client.BlockingReads {
				// Against a target of its own, not the built-in simulator
				// sharing this process's CPUs.
				defer client.ReserveLoopProcs()()
			}
			reg := newMetricsRegistry(o.metrics)
			dash, err := newDashboard("run", o.metrics, os.Getenv(tokenEnv), o.uiBaseline, !rc.Load.OpenLoop(),
				"the open loop's arrival rate is fixed (--request-rate)", c.logger)
			if err != nil {
				return err
			}
			_, stopMetrics, err := serveMetrics(cmd.Context(), o.metrics, reg, c.logger, dash.routes()...)
			if err != nil {
				return err
			}
			defer stopMetrics()
			defer dash.close() // before the server stops: a feed stream never goes idle
			rc.Registerer, rc.Live = registerer(reg), dash.fleetLive()
			_, err = rc.Run(cmd.Context(), c.logger, c.stdout, c.stderr)
			return err
		},
	}
	fs := cmd.Flags()
	rc := &o.rc
	flags.Target(fs, &rc.Client.BaseURL, &rc.Client.Model, &rc.Client.Endpoint, &rc.Client.APIKeyEnv)
	flags.Preflight(fs, &rc.SkipPreflight)
	fs.StringArrayVar(&o.headers, "header", nil, "extra request header NAME:VALUE (repeatable)")
	fs.StringVar(&o.extraBody, "extra-body", "", "JSON object merged into every request body")
	fs.BoolVar(&rc.Client.HTTP2, "http2", false, "use HTTP/2 (h2c for http:// targets)")
	fs.BoolVar(&rc.Client.BlockingReads, "blocking-reads", false, blockingReadsUsage)
	fs.DurationVar(&rc.Client.RequestTimeout, "timeout", 0, "bound on one whole request (0: none)")
	fs.DurationVar(&rc.Client.FirstTokenTimeout, "first-token-timeout", 0, "bound on the time to the first token (0: none)")
	fs.DurationVar(&rc.Client.ConnectTimeout, "connect-timeout", rc.Client.ConnectTimeout, "bound on dialing and the TLS handshake")
	flags.Group(fs, flags.GroupTarget, "header", "extra-body", "http2", "blocking-reads", "timeout", "first-token-timeout", "connect-timeout")

	flags.Workload(fs, &rc.Workload)
	fs.BoolVar(&rc.SingleTurn, "single-turn", false, "send only each conversation's first turn (vLLM-style single requests)")
	flags.Group(fs, flags.GroupWorkload, "single-turn")

	flags.AddLoad(fs, flags.Load{Concurrency: &o.levels, RequestRate: &rc.Load.RequestRate, Warmup: &rc.Warmup, Duration: &rc.Duration})
	fs.Lookup("concurrency").Usage = "closed loop: concurrent sessions"
	fs.DurationVar(&rc.Drain, "drain-timeout", rc.Drain, "how long to wait for turns in flight at the end before cancelling them")
	fs.DurationVar(&rc.RampUp, "ramp-up", 0, "closed loop: spread the start of the sessions over this time (part of the warm-up)")
	fs.StringVar(&o.arrival, "arrival", o.arrival, "open loop arrival process: poisson or gamma")
	fs.Float64Var(&o.burstiness, "burstiness", o.burstiness, "gamma arrivals: shape (below 1 burstier, above 1 more regular)")
	fs.IntVar(&rc.Load.MaxConcurrency, "max-concurrency", 0, "open loop: cap on concurrent conversations (0: none)")
	rc.FailFast = flags.DefaultFailFast
	flags.FailFast(fs, &rc.FailFast)
	fs.IntVar(&rc.Load.TotalRequests, "num-prompts", 0, "request budget: stop after N turns (0: unlimited; no warm-up and no time limit unless set)")
	flags.Group(fs, flags.GroupLoad, "drain-timeout", "ramp-up", "arrival", "burstiness", "max-concurrency", "num-prompts")

	fs.StringVar(&rc.OutDir, "out", "", "output directory for result.json (and requests.jsonl); required")
	fs.BoolVar(&rc.SaveRequests, "save-requests", false, "write every request to OUT/requests.jsonl")
	fs.StringVar(&o.percentiles, "percentiles", o.percentiles, "extra latency percentiles, comma-separated")
	flags.Goodput(fs, &o.goodput)
	flags.Thresholds(fs, &o.thresholds, exitThresholds)
	flags.AbortOnFail(fs, &rc.AbortOnFail)
	flags.WorkerHeader(fs, &rc.Client.WorkerHeader)
	flags.Scrape(fs, &rc.Scrape.Endpoints, &rc.Scrape.Interval, &rc.Scrape.Timeout)
	flags.ScrapePods(fs, &o.pods)
	fs.StringVar(&rc.Label, "label", "", "vLLM's --label: a name for this result, saved in result.json")
	fs.StringArrayVar(&o.metadata, "metadata", nil, "vLLM's --metadata KEY=VALUE, saved as a top-level key of result.json (repeatable)")
	fs.StringVar(&rc.ResultFile, "result-filename", "result.json", "name of the result file in --out")
	fs.BoolVar(&o.dryRun, "dry-run", false, "print the merged, validated configuration and exit without sending load")
	flags.Group(fs, flags.GroupOutput, "out", "save-requests", "percentiles", "label", "metadata", "result-filename", "dry-run")
	flags.MetricsListen(fs, &o.metrics)
	flags.UIBaseline(fs, &o.uiBaseline)

	fs.IntVar(&rc.Agents, "agents", 0, "run the level with a coordinator and this many agents in this process, over loopback gRPC (0: one engine, no coordinator)")
	flags.Group(fs, flags.GroupFleet, "agents")
	addSimFlags(fs, &rc.Sim.Profile, &rc.Sim.Replicas, &rc.Sim.TimeScale, nil)
	fs.StringVar(&rc.Sim.Router, "sim-router", rc.Sim.Router, "simulator: routing mode (kv, prefix-hash, round_robin, random, least-loaded)")
	flags.Group(fs, flags.GroupSimulator, "sim-router")
	return cmd, o
}

// addSimFlags registers the flags of the in-process simulator that run and
// sweep start without a target; kvBlocks may be nil.
func addSimFlags(fs *pflag.FlagSet, profile *string, replicas *int, timeScale *float64, kvBlocks *int) {
	fs.StringVar(profile, "sim-profile", *profile, "simulator: hardware profile (fleetbench sim --list-profiles)")
	fs.IntVar(replicas, "sim-replicas", *replicas, "simulator: replicas (0: the profile's)")
	fs.Float64Var(timeScale, "sim-time-scale", *timeScale, "simulator: speed-up of simulated time (latencies are wall-clock)")
	flags.Group(fs, flags.GroupSimulator, "sim-profile", "sim-replicas", "sim-time-scale")
	if kvBlocks != nil {
		fs.IntVar(kvBlocks, "sim-kv-blocks", *kvBlocks, "simulator: KV blocks per replica (0: the profile's)")
		flags.Group(fs, flags.GroupSimulator, "sim-kv-blocks")
	}
}

// config turns the parsed flags into the run's configuration, validated.
// fs says which flags were typed where that changes their meaning.
func (o *runOptions) config(fs *pflag.FlagSet) (fleet.RunConfig, error) {
	rc := o.rc
	switch {
	case len(o.levels) > 1:
		return rc, fmt.Errorf("--concurrency %v: run drives one level; sweep or coordinator take a list", o.levels)
	case len(o.levels) == 1:
		rc.Load.Concurrency = o.levels[0]
	}
	open := rc.Load.RequestRate > 0
	switch {
	case open && fs.Changed("concurrency"):
		return rc, errors.New("--concurrency is the closed loop's; with --request-rate cap concurrency with --max-concurrency")
	case !open && (fs.Changed("max-concurrency") || fs.Changed("arrival") || fs.Changed("burstiness")):
		return rc, errors.New("--max-concurrency, --arrival and --burstiness apply to the open loop (--request-rate)")
	case rc.Agents != 0 && (fs.Changed("num-prompts") || fs.Changed("max-concurrency") || fs.Changed("arrival") || fs.Changed("burstiness")):
		return rc, errors.New("--num-prompts, --max-concurrency, --arrival and --burstiness are not supported with --agents")
	}
	if open {
		rc.Load.Arrival, rc.Load.Burstiness = o.arrival, o.burstiness
	}
	if rc.Load.TotalRequests > 0 {
		// A budget run, like vLLM's --num-prompts: no warm-up and no time
		// limit unless asked for.
		if !fs.Changed("warmup") {
			rc.Warmup = 0
		}
		if !fs.Changed("duration") {
			rc.Duration = 0
		}
	}
	for _, h := range o.headers {
		k, v, ok := strings.Cut(h, ":")
		if k = strings.TrimSpace(k); !ok || k == "" {
			return rc, fmt.Errorf("--header %q: want NAME:VALUE", h)
		}
		if rc.Client.Headers == nil {
			rc.Client.Headers = map[string]string{}
		}
		rc.Client.Headers[k] = strings.TrimSpace(v)
	}
	slo, ths, err := parseJudging(o.goodput, o.thresholds)
	if err != nil {
		return rc, err
	}
	rc.SLO, rc.Thresholds = slo, ths
	if o.pods != (servermetrics.Pods{}) {
		rc.Scrape.Pods = &o.pods
	}
	for _, m := range o.metadata {
		k, v, ok := strings.Cut(m, "=")
		if k = strings.TrimSpace(k); !ok || k == "" {
			return rc, fmt.Errorf("--metadata %q: want KEY=VALUE", m)
		}
		if rc.Metadata == nil {
			rc.Metadata = map[string]string{}
		}
		rc.Metadata[k] = strings.TrimSpace(v)
	}
	if o.extraBody != "" {
		rc.Client.ExtraBody = json.RawMessage(o.extraBody)
	}
	for part := range strings.SplitSeq(o.percentiles, ",") {
		p, err := strconv.ParseFloat(strings.TrimSpace(part), 64)
		if err != nil || p <= 0 || p > 100 {
			return rc, fmt.Errorf("--percentiles %q: want numbers in (0, 100]", o.percentiles)
		}
		rc.Percentiles = append(rc.Percentiles, p)
	}
	if err := checkMetricsListen(o.metrics); err != nil {
		return rc, err
	}
	if err := checkUIBaseline(o.uiBaseline, o.metrics); err != nil {
		return rc, err
	}
	if rc.Client.BaseURL == "" && !fs.Changed("api-key-env") {
		rc.Client.APIKeyEnv = "" // the built-in simulator takes no key
	}
	if err := rc.Validate(); err != nil {
		return rc, err
	}
	if err := rc.Workload.Validate(); err != nil {
		return rc, fmt.Errorf("workload: %w", err)
	}
	return rc, nil
}

// writeDryRun prints a configuration as YAML. v must hold no secret.
func writeDryRun(w io.Writer, v any) error {
	b, err := yaml.Marshal(v)
	if err != nil {
		return fmt.Errorf("encode configuration: %w", err)
	}
	_, err = fmt.Fprintf(w, "# fleetbench %s: validated configuration (dry run: nothing started, nothing sent)\n%s", version, b)
	return err
}

// parseJudging parses --goodput and --threshold, the same way in every
// command.
func parseJudging(goodput string, thresholds []string) (result.SLO, []result.Threshold, error) {
	var slo result.SLO
	if goodput != "" {
		var err error
		if slo, err = result.ParseSLO(goodput); err != nil {
			return slo, nil, fmt.Errorf("--goodput: %w", err)
		}
	}
	ths, err := parseThresholds(thresholds, !slo.IsZero())
	return slo, ths, err
}

// parseThresholds parses --threshold values; goodput ones need SLOs.
func parseThresholds(raw []string, haveSLO bool) ([]result.Threshold, error) {
	var out []result.Threshold
	for _, s := range raw {
		th, err := result.ParseThreshold(s)
		if err != nil {
			return nil, fmt.Errorf("--threshold: %w", err)
		}
		if th.Metric == "goodput" && !haveSLO {
			return nil, fmt.Errorf("--threshold %q: goodput needs --goodput SLOs", s)
		}
		out = append(out, th)
	}
	return out, nil
}
