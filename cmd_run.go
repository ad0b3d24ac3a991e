package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/fleetbench/fleetbench/fleet"
	"github.com/fleetbench/fleetbench/pkg/client"
	"github.com/fleetbench/fleetbench/pkg/load"
	"github.com/fleetbench/fleetbench/pkg/sim"
	"github.com/fleetbench/fleetbench/pkg/workload"
)

// runFlags are the run command's settings.
type runFlags struct {
	target, model   string
	concurrency     int
	duration        time.Duration
	warmup          time.Duration
	drain           time.Duration
	rampUp          time.Duration
	requestRate     float64
	arrival         string
	burstiness      float64
	maxConcurrency  int
	kind, dataset   string
	maxConvs        int
	minMessages     int
	numPrompts      int
	turns           string
	singleTurn      bool
	maxTokens       int
	promptTokens    int
	documents       int
	think           workload.ThinkTime
	seed            int64
	endpoint        string
	apiKeyEnv       string
	headers         headerFlags
	extraBody       string
	http2           bool
	sessionHeader   string
	userModelURL    string
	userModel       string
	userModelKeyEnv string
	timeout         time.Duration
	firstTokenTO    time.Duration
	connectTO       time.Duration
	out             string
	saveRequests    bool
	percentiles     string

	agents int

	simReplicas  int
	simRouter    string
	simProfile   string
	simTimeScale float64
}

// headerFlags collects repeated --header K:V flags. Values may be secrets:
// String shows names only.
type headerFlags map[string]string

func (h *headerFlags) String() string {
	if h == nil {
		return ""
	}
	names := make([]string, 0, len(*h))
	for k := range *h {
		names = append(names, k)
	}
	return strings.Join(names, ",")
}

func (h *headerFlags) Set(s string) error {
	k, v, ok := strings.Cut(s, ":")
	k = strings.TrimSpace(k)
	if !ok || k == "" {
		return errors.New("want NAME:VALUE")
	}
	if *h == nil {
		*h = make(headerFlags)
	}
	(*h)[k] = strings.TrimSpace(v)
	return nil
}

func (c *cli) runFlagSet(f *runFlags) *flag.FlagSet {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(c.stderr)
	fs.StringVar(&f.target, "target", "", "base URL of the OpenAI-compatible server; empty starts the built-in simulator in-process")
	fs.StringVar(&f.model, "model", "", "model name to request (default with the simulator: the profile's model)")
	fs.IntVar(&f.concurrency, "concurrency", 0, "closed loop: number of concurrent sessions")
	fs.DurationVar(&f.duration, "duration", time.Minute, "length of the measurement window (0 with --num-prompts: until the budget is spent)")
	fs.DurationVar(&f.warmup, "warmup", 10*time.Second, "warm-up before the measurement window; its turns are discarded, its sessions go on")
	fs.DurationVar(&f.drain, "drain-timeout", load.DefaultDrainTimeout, "how long to wait for turns in flight at the end before cancelling them")
	fs.DurationVar(&f.rampUp, "ramp-up", 0, "closed loop: spread the start of the sessions over this time (part of the warm-up)")
	fs.Float64Var(&f.requestRate, "request-rate", 0, "open loop: mean arrivals per second (0: closed loop)")
	fs.StringVar(&f.arrival, "arrival", load.ArrivalPoisson, "open loop arrival process: poisson or gamma")
	fs.Float64Var(&f.burstiness, "burstiness", 1, "gamma arrivals: shape (below 1 burstier, above 1 more regular)")
	fs.IntVar(&f.maxConcurrency, "max-concurrency", 0, "open loop: cap on concurrent conversations (0: none)")
	fs.StringVar(&f.kind, "workload", workload.KindDocChat, "workload: docchat, sharegpt or jsonl")
	fs.StringVar(&f.dataset, "dataset", "", "dataset file (sharegpt, jsonl) or documents directory (docchat)")
	fs.IntVar(&f.maxConvs, "max-conversations", 0, "sharegpt: keep at most N conversations (0: all)")
	fs.IntVar(&f.minMessages, "min-messages", 0, "sharegpt: drop conversations with fewer messages")
	fs.IntVar(&f.numPrompts, "num-prompts", 0, "request budget: stop after N turns (0: unlimited)")
	fs.StringVar(&f.turns, "turns", "3-5", "user turns per conversation: N or MIN-MAX (sharegpt: cap)")
	fs.BoolVar(&f.singleTurn, "single-turn", false, "send only each conversation's first turn (vLLM-style single requests)")
	fs.IntVar(&f.maxTokens, "max-tokens", 1024, "max_tokens of each turn unless the workload sets one")
	fs.IntVar(&f.promptTokens, "prompt-tokens", workload.DefaultPromptTokens, "docchat: first prompt size in tokens")
	fs.IntVar(&f.documents, "documents", workload.DefaultDocuments, "docchat: number of starter documents")
	fs.Var(&f.think, "think-time", "pause before each later turn: none, a duration (2s) or exp:MEAN")
	fs.Int64Var(&f.seed, "seed", 0, "seed of the workload, arrivals and session ids")
	fs.StringVar(&f.endpoint, "endpoint", client.EndpointChat, "endpoint: chat or completions")
	fs.StringVar(&f.apiKeyEnv, "api-key-env", "", "name of the environment variable holding the API key")
	fs.Var(&f.headers, "header", "extra request header NAME:VALUE (repeatable)")
	fs.StringVar(&f.extraBody, "extra-body", "", "JSON object merged into every request body")
	fs.BoolVar(&f.http2, "http2", false, "use HTTP/2 (h2c for http:// targets)")
	fs.StringVar(&f.sessionHeader, "session-header", "", "request header carrying a per-conversation session id, e.g. X-Session-ID")
	fs.StringVar(&f.userModelURL, "user-model-url", "", "docchat: base URL of a model that writes follow-up questions")
	fs.StringVar(&f.userModel, "user-model", "", "docchat: the user model's name")
	fs.StringVar(&f.userModelKeyEnv, "user-model-key-env", "", "docchat: environment variable holding the user model's API key")
	fs.DurationVar(&f.timeout, "timeout", 0, "bound on one whole request (0: none)")
	fs.DurationVar(&f.firstTokenTO, "first-token-timeout", 0, "bound on the time to the first token (0: none)")
	fs.DurationVar(&f.connectTO, "connect-timeout", client.DefaultConnectTimeout, "bound on dialing and the TLS handshake")
	fs.StringVar(&f.out, "out", "", "output directory for result.json (and requests.jsonl); required")
	fs.BoolVar(&f.saveRequests, "save-requests", false, "write every request to OUT/requests.jsonl")
	fs.StringVar(&f.percentiles, "percentiles", "99", "extra latency percentiles, comma-separated")
	fs.IntVar(&f.agents, "agents", 0, "run the level with a coordinator and this many agents in this process, over loopback gRPC (0: one engine, no coordinator)")
	fs.IntVar(&f.simReplicas, "sim-replicas", 0, "simulator: replicas (0: the profile's)")
	fs.StringVar(&f.simRouter, "sim-router", string(sim.ModeKV), "simulator: routing mode")
	fs.StringVar(&f.simProfile, "sim-profile", defaultSimProfile(), "simulator: hardware profile")
	fs.Float64Var(&f.simTimeScale, "sim-time-scale", 1, "simulator: speed-up of simulated time")
	return fs
}

func defaultSimProfile() string {
	if ps := sim.Profiles(); len(ps) > 0 {
		return ps[0].Name
	}
	return ""
}

// cmdRun drives one load level against a target (or the in-process
// simulator), prints the vLLM-style result block and writes OUT/result.json
// (fleet.RunConfig).
func (c *cli) cmdRun(ctx context.Context, args []string) error {
	var f runFlags
	fs := c.runFlagSet(&f)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	rc, err := f.runConfig(set)
	if err == nil {
		err = rc.Validate()
	}
	if err != nil {
		fmt.Fprintf(c.stderr, "fleetbench run: %v\n", err)
		return errUsage
	}
	_, err = rc.Run(ctx, c.logger, c.stdout, c.stderr)
	return err
}

// runConfig checks what only the flags know (which were given) and turns
// them into the run's configuration, with the defaults that depend on
// other flags applied.
func (f *runFlags) runConfig(set map[string]bool) (fleet.RunConfig, error) {
	if f.requestRate > 0 {
		if set["concurrency"] {
			return fleet.RunConfig{}, errors.New("--concurrency is the closed loop's; with --request-rate cap concurrency with --max-concurrency")
		}
	} else if set["max-concurrency"] || set["arrival"] || set["burstiness"] {
		return fleet.RunConfig{}, errors.New("--max-concurrency, --arrival and --burstiness apply to the open loop (--request-rate)")
	}
	if f.agents != 0 {
		for _, name := range []string{"num-prompts", "max-concurrency", "arrival", "burstiness"} {
			if set[name] {
				return fleet.RunConfig{}, fmt.Errorf("--%s is not supported with --agents", name)
			}
		}
	}
	if f.numPrompts > 0 {
		// A budget run, like vLLM's --num-prompts: no warm-up and no time
		// limit unless asked for.
		if !set["warmup"] {
			f.warmup = 0
		}
		if !set["duration"] {
			f.duration = 0
		}
	}
	lo, hi, err := parseTurns(f.turns)
	if err != nil {
		return fleet.RunConfig{}, err
	}
	ps, err := parsePercentiles(f.percentiles)
	if err != nil {
		return fleet.RunConfig{}, err
	}
	rc := fleet.RunConfig{
		Client: client.Config{
			BaseURL: f.target, Model: f.model, Endpoint: f.endpoint, APIKeyEnv: f.apiKeyEnv, Headers: f.headers,
			HTTP2: f.http2, ConnectTimeout: f.connectTO, FirstTokenTimeout: f.firstTokenTO, RequestTimeout: f.timeout,
		},
		Workload: workload.Config{
			Kind: f.kind, Dataset: f.dataset, SessionHeader: f.sessionHeader, MaxTokens: f.maxTokens, Seed: f.seed,
			Think: f.think, Documents: f.documents, PromptTokens: f.promptTokens, Turns: workload.Turns{Min: lo, Max: hi},
			MaxConversations: f.maxConvs, MinMessages: f.minMessages,
		},
		Load:   load.Config{Concurrency: f.concurrency, RequestRate: f.requestRate, TotalRequests: f.numPrompts},
		Agents: f.agents, Warmup: f.warmup, Duration: f.duration, Drain: f.drain, RampUp: f.rampUp,
		SingleTurn: f.singleTurn, OutDir: f.out, SaveRequests: f.saveRequests, Percentiles: ps,
		Sim:     fleet.SimConfig{Profile: f.simProfile, Replicas: f.simReplicas, Router: f.simRouter, TimeScale: f.simTimeScale},
		Version: version,
	}
	if f.extraBody != "" {
		rc.Client.ExtraBody = json.RawMessage(f.extraBody)
	}
	if f.requestRate > 0 {
		rc.Load.Arrival, rc.Load.Burstiness, rc.Load.MaxConcurrency = f.arrival, f.burstiness, f.maxConcurrency
	}
	if f.kind == workload.KindShareGPT && !set["turns"] {
		rc.Workload.Turns = workload.Turns{} // the default range is docchat's; take every turn
	}
	if f.userModelURL != "" || f.userModel != "" {
		rc.Workload.UserModel = &workload.UserModelConfig{URL: f.userModelURL, Model: f.userModel, APIKeyEnv: f.userModelKeyEnv}
	}
	return rc, nil
}

// parseTurns parses "N" or "MIN-MAX".
func parseTurns(s string) (lo, hi int, err error) {
	a, b, ok := strings.Cut(s, "-")
	if !ok {
		b = a
	}
	lo, err1 := strconv.Atoi(strings.TrimSpace(a))
	hi, err2 := strconv.Atoi(strings.TrimSpace(b))
	if err1 != nil || err2 != nil || lo < 1 || hi < lo {
		return 0, 0, fmt.Errorf("--turns %q: want N or MIN-MAX with 1 <= MIN <= MAX", s)
	}
	return lo, hi, nil
}

func parsePercentiles(s string) ([]float64, error) {
	var ps []float64
	for part := range strings.SplitSeq(s, ",") {
		p, err := strconv.ParseFloat(strings.TrimSpace(part), 64)
		if err != nil || p <= 0 || p > 100 {
			return nil, fmt.Errorf("--percentiles %q: want numbers in (0, 100]", s)
		}
		ps = append(ps, p)
	}
	return ps, nil
}

// redactURL drops user info, query and fragment, which may hold
// credentials (see client.RedactURL).
func redactURL(raw string) string { return client.RedactURL(raw) }
