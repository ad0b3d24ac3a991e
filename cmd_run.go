package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/term"

	"github.com/fleetbench/fleetbench/coordinator"
	"github.com/fleetbench/fleetbench/pkg/client"
	"github.com/fleetbench/fleetbench/pkg/hdr"
	"github.com/fleetbench/fleetbench/pkg/load"
	"github.com/fleetbench/fleetbench/pkg/record"
	"github.com/fleetbench/fleetbench/pkg/result"
	"github.com/fleetbench/fleetbench/pkg/sim"
	"github.com/fleetbench/fleetbench/pkg/workload"
)

// Windows of a run: warm-up turns are stamped 0 and discarded; the
// measurement window is 1.
const (
	windowWarmUp  uint32 = 0
	windowMeasure uint32 = 1
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
	turnsSet        bool
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
// simulator), prints the vLLM-style result block and writes OUT/result.json.
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
	if err := f.check(set); err != nil {
		fmt.Fprintf(c.stderr, "fleetbench run: %v\n", err)
		return errUsage
	}
	if f.agents != 0 {
		if err := f.checkAgents(set); err != nil {
			fmt.Fprintf(c.stderr, "fleetbench run: %v\n", err)
			return errUsage
		}
		return c.runAgents(ctx, &f)
	}
	return c.run(ctx, &f)
}

// check validates flags and applies the defaults that depend on others.
func (f *runFlags) check(set map[string]bool) error {
	if f.out == "" {
		return errors.New("--out DIR is required")
	}
	if f.requestRate > 0 {
		if set["concurrency"] {
			return errors.New("--concurrency is the closed loop's; with --request-rate cap concurrency with --max-concurrency")
		}
	} else {
		if f.concurrency <= 0 {
			return errors.New("set --concurrency N (closed loop) or --request-rate R (open loop)")
		}
		if set["max-concurrency"] || set["arrival"] || set["burstiness"] {
			return errors.New("--max-concurrency, --arrival and --burstiness apply to the open loop (--request-rate)")
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
	} else if f.duration <= 0 {
		return errors.New("--duration must be > 0 (or set --num-prompts)")
	}
	if f.warmup < 0 || f.duration < 0 || f.drain < 0 || f.rampUp < 0 {
		return errors.New("--warmup, --duration, --drain-timeout and --ramp-up must not be negative")
	}
	if f.rampUp > f.warmup {
		return errors.New("--ramp-up must fit in --warmup: the measurement starts with every session running")
	}
	if f.target == "" && f.simTimeScale <= 0 {
		return errors.New("--sim-time-scale must be > 0")
	}
	if f.target != "" && f.model == "" {
		return errors.New("--model is required with --target")
	}
	if (f.userModelURL == "") != (f.userModel == "") {
		return errors.New("--user-model-url and --user-model go together")
	}
	f.turnsSet = set["turns"]
	if _, _, err := parseTurns(f.turns); err != nil {
		return err
	}
	if _, err := parsePercentiles(f.percentiles); err != nil {
		return err
	}
	return nil
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

// runEnv is what both kinds of run set up before the load starts: the
// output directory, the target (the in-process simulator when --target is
// empty) and the optional request log.
type runEnv struct {
	target string
	// reqLog is nil without --save-requests.
	reqLog *result.RequestLog
	sim    *sim.Sim
}

// setUp prepares a run's environment; the caller must Close it.
func (c *cli) setUp(ctx context.Context, f *runFlags, logger hclog.Logger) (_ *runEnv, err error) {
	if err := os.MkdirAll(f.out, 0o755); err != nil {
		return nil, fmt.Errorf("create output directory: %w", err)
	}
	env := &runEnv{target: f.target}
	defer func() {
		if err != nil {
			env.Close()
		}
	}()
	if env.target == "" {
		if env.sim, err = c.startSim(ctx, f, logger); err != nil {
			return nil, err
		}
		env.target = env.sim.URL()
	}
	if f.saveRequests {
		if env.reqLog, err = result.CreateRequestLog(filepath.Join(f.out, "requests.jsonl"), time.Now()); err != nil {
			return nil, err
		}
	}
	return env, nil
}

// closeRequestLog flushes and closes the request log, once the load has
// stopped; nil without --save-requests.
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

// run performs a checked run.
func (c *cli) run(ctx context.Context, f *runFlags) error {
	logger := c.logger.Named("run")
	env, err := c.setUp(ctx, f, logger)
	if err != nil {
		return err
	}
	defer env.Close()
	target, reqLog := env.target, env.reqLog

	cl, err := client.New(f.clientConfig(target), logger)
	if err != nil {
		return fmt.Errorf("create client: %w", err)
	}
	defer cl.Close()

	src, err := c.newSource(f, logger)
	if err != nil {
		return err
	}

	rec := record.NewRecorder(hdr.Default)
	origin := time.Now().Add(f.warmup)
	peaks := result.NewPeaks(origin)
	prog := newProgress()
	observe := func(s *record.Sample) {
		if s.Window == windowMeasure {
			peaks.Add(s)
			prog.add(s)
		}
		if reqLog != nil {
			_ = reqLog.Write(s) // the first error is sticky; Close reports it
		}
	}

	lcfg := load.Config{
		Concurrency:   f.concurrency,
		RequestRate:   f.requestRate,
		TotalRequests: f.numPrompts,
		MaxTokens:     f.maxTokens,
		SessionHeader: f.sessionHeader,
		Seed:          f.seed,
	}
	if f.requestRate > 0 {
		lcfg.Concurrency = 0
		lcfg.Arrival, lcfg.Burstiness, lcfg.MaxConcurrency = f.arrival, f.burstiness, f.maxConcurrency
		if lcfg.Arrival == load.ArrivalPoisson && lcfg.Burstiness == 1 {
			lcfg.Burstiness = 0
		}
	}
	opts := []load.Option{load.WithObserver(observe), load.WithDrainTimeout(f.drain), load.WithRampUp(f.rampUp)}
	if f.warmup == 0 {
		opts = append(opts, load.WithWindow(windowMeasure))
	}
	if f.singleTurn {
		opts = append(opts, load.WithSingleTurn())
	}
	eng, err := load.New(lcfg, src, cl, rec, logger, opts...)
	if err != nil {
		return err
	}

	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	if f.duration > 0 {
		runCtx, stopRun = context.WithTimeout(ctx, f.warmup+f.duration)
		defer stopRun()
	}
	logger.Info("run starting", "target", redactURL(target), "model", f.model, "workload", src.Name(),
		"concurrency", f.concurrency, "request_rate", f.requestRate, "warmup", f.warmup, "duration", f.duration)

	// One goroutine, owned here, moves the window, reports progress and
	// cuts the drain short after an interrupt.
	var wg sync.WaitGroup
	ran := make(chan struct{})
	wg.Go(func() { c.watch(ctx, ran, eng, prog, f, origin) })
	runErr := eng.Run(runCtx)
	close(ran)
	wg.Wait()
	end := time.Now()
	if runErr != nil {
		return fmt.Errorf("run load: %w", runErr)
	}
	logErr := env.closeRequestLog()

	interrupted := ctx.Err() != nil
	w := measured(rec)
	if w == nil || w.Counters.Requests+w.Counters.Failed == 0 {
		return c.nothingMeasured(ctx, logErr)
	}
	// A run cut short (by the budget or a signal) lasts until its last
	// turn ended; a full run lasts the planned duration, as the turns sent
	// in it are the measurement.
	dur := f.duration
	if dur == 0 || interrupted || end.Before(origin.Add(f.duration)) {
		dur = w.LastEnd.Sub(origin)
	}
	if dur <= 0 {
		dur = time.Millisecond
	}
	if late := w.Counters.LateSends; late > 0 && late*100 >= w.Counters.Requests+w.Counters.Failed {
		// Sends behind schedule in a closed loop mean this process could
		// not keep up (CPU, connections); the lag is in the "from intended
		// send" figures.
		logger.Warn("the load generator fell behind its schedule; see the schedule lag figures",
			"late_sends", late, "threshold", load.DefaultLateThreshold)
	}
	ps, _ := parsePercentiles(f.percentiles)
	facts := result.Facts{
		Duration:    dur,
		RequestRate: f.requestRate,
		Model:       f.model,
		Target:      target,
		Workload:    src.Name(),
		Version:     version,
		Start:       origin,
		End:         origin.Add(dur),
		Percentiles: ps,
	}
	if f.requestRate > 0 {
		facts.MaxConcurrency, facts.Burstiness = f.maxConcurrency, f.burstiness
	} else {
		facts.MaxConcurrency = f.concurrency
	}
	facts.PeakOutputTokensPerSec, facts.PeakConcurrentRequests = peaks.Max()
	facts.Interrupted = interrupted
	return c.writeResult(ctx, f, w, facts, logErr, nil)
}

// nothingMeasured is the outcome of a run whose measurement window saw no
// turn: the interrupt that cut it short, or an error. logErr is the request
// log's close error, which is reported either way.
func (c *cli) nothingMeasured(ctx context.Context, logErr error) error {
	if ctx.Err() != nil {
		c.logRequestLogErr(logErr)
		fmt.Fprintln(c.stdout, "Interrupted before any turn of the measurement window was sent; nothing to report.")
		return errors.Join(ctx.Err(), logErr)
	}
	return errors.Join(errors.New("no turn was sent in the measurement window"), logErr)
}

// writeResult summarises the measurement window w, prints the vLLM block
// (then extra, when not nil) and writes OUT/result.json. logErr, the
// request log's close error, fails the command after the result is saved:
// requests.jsonl is incomplete and the user asked for it.
func (c *cli) writeResult(ctx context.Context, f *runFlags, w *record.Window, facts result.Facts, logErr error, extra func(io.Writer)) error {
	sum, err := result.New(w, facts)
	if err != nil {
		return fmt.Errorf("summarise result: %w", err)
	}
	if err := result.WriteBlock(c.stdout, sum); err != nil {
		return err
	}
	if extra != nil {
		extra(c.stdout)
	}
	if err := result.WriteJSONFile(filepath.Join(f.out, "result.json"), sum); err != nil {
		return errors.Join(err, logErr)
	}
	if facts.Interrupted {
		fmt.Fprintln(c.stdout, "Interrupted: the measurement window was cut short; result.json is marked \"interrupted\": true.")
		c.logRequestLogErr(logErr)
		return errors.Join(ctx.Err(), logErr)
	}
	return logErr
}

// logRequestLogErr logs the request log's close error on an interrupted
// run, whose exit reports only the interrupt.
func (c *cli) logRequestLogErr(err error) {
	if err != nil {
		c.logger.Named("run").Error("request log incomplete", "error", err)
	}
}

// measured returns the measurement window from the recorder, nil if empty.
func measured(rec *record.Recorder) *record.Window {
	for _, w := range rec.Drain() {
		if w.ID == windowMeasure {
			return w
		}
	}
	return nil
}

// clientConfig is the streaming client's configuration for target. The
// connection cap matches the sessions in flight so net/http does not dial a
// spare connection per session while another is being returned to the pool.
func (f *runFlags) clientConfig(target string) client.Config {
	cfg := client.Config{
		BaseURL:           target,
		Model:             f.model,
		Endpoint:          f.endpoint,
		APIKeyEnv:         f.apiKeyEnv,
		MaxTokens:         f.maxTokens,
		Headers:           f.headers,
		HTTP2:             f.http2,
		ConnectTimeout:    f.connectTO,
		FirstTokenTimeout: f.firstTokenTO,
		RequestTimeout:    f.timeout,
	}
	switch {
	case f.requestRate > 0:
		cfg.MaxConnsPerHost = f.maxConcurrency // 0: uncapped arrivals, no cap
	default:
		cfg.MaxConnsPerHost = f.concurrency
	}
	if f.extraBody != "" {
		cfg.ExtraBody = json.RawMessage(f.extraBody)
	}
	return cfg
}

// startSim starts the built-in simulator in-process on a loopback port.
func (c *cli) startSim(ctx context.Context, f *runFlags, logger hclog.Logger) (*sim.Sim, error) {
	cfg, err := sim.ProfileConfig(f.simProfile)
	if err != nil {
		return nil, fmt.Errorf("simulator profile: %w", err)
	}
	if f.simReplicas > 0 {
		cfg.Replicas = f.simReplicas
	}
	mode, err := sim.ParseMode(f.simRouter)
	if err != nil {
		return nil, err
	}
	cfg.Router, cfg.TimeScale, cfg.Listen = mode, f.simTimeScale, "127.0.0.1:0"
	if f.model != "" {
		cfg.Model = f.model
	}
	f.model = cfg.Model
	s, err := sim.New(cfg, logger, nil)
	if err != nil {
		return nil, fmt.Errorf("create simulator: %w", err)
	}
	// The simulator outlives the run's signal so turns can drain; Close
	// stops it.
	if err := s.Start(context.WithoutCancel(ctx)); err != nil {
		return nil, fmt.Errorf("start simulator: %w", err)
	}
	logger.Info("simulator started", "url", s.URL(), "profile", cfg.Profile, "replicas", cfg.Replicas, "router", cfg.Router)
	return s, nil
}

// newSource builds the workload, with a user-model client when asked.
func (c *cli) newSource(f *runFlags, logger hclog.Logger) (workload.Source, error) {
	lo, hi, _ := parseTurns(f.turns)
	wcfg := workload.Config{
		Kind:             f.kind,
		Dataset:          f.dataset,
		SessionHeader:    f.sessionHeader,
		MaxTokens:        f.maxTokens,
		Seed:             f.seed,
		Think:            f.think,
		Documents:        f.documents,
		PromptTokens:     f.promptTokens,
		Turns:            workload.Turns{Min: lo, Max: hi},
		MaxConversations: f.maxConvs,
		MinMessages:      f.minMessages,
	}
	if f.kind == workload.KindShareGPT && !f.turnsSet {
		wcfg.Turns = workload.Turns{} // the default range is docchat's; take every turn
	}
	if f.userModelURL != "" {
		wcfg.UserModel = &workload.UserModelConfig{URL: f.userModelURL, Model: f.userModel, APIKeyEnv: f.userModelKeyEnv}
	}
	return workload.Open(wcfg, logger)
}

// watch moves the engine to the measurement window at origin and reports
// progress until ran is closed: a line redrawn in place on a terminal, a log
// line every progressLogEvery otherwise. After an interrupt (ctx done) it
// gives the turns in flight interruptDrain to end, then aborts them.
func (c *cli) watch(ctx context.Context, ran <-chan struct{}, eng *load.Engine, prog *progress, f *runFlags, origin time.Time) {
	tty := isTerminal(c.stderr)
	every := progressLogEvery
	if tty {
		every = progressRedrawEvery
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	var measure <-chan time.Time
	if f.warmup > 0 {
		t := time.NewTimer(time.Until(origin))
		defer t.Stop()
		measure = t.C
	}
	interrupt := ctx.Done()
	var abort <-chan time.Time
	logger := c.logger.Named("run")
	for {
		select {
		case <-ran:
			if tty {
				fmt.Fprint(c.stderr, "\r\x1b[K")
			}
			return
		case <-interrupt:
			interrupt = nil
			grace := min(f.drain, interruptDrain)
			if tty {
				fmt.Fprint(c.stderr, "\r\x1b[K")
			}
			logger.Info("interrupted, finishing turns in flight; interrupt again to exit at once", "grace", grace)
			t := time.NewTimer(grace)
			defer t.Stop()
			abort = t.C
		case <-abort:
			abort = nil
			eng.Abort()
		case <-measure:
			measure = nil
			eng.SetWindow(windowMeasure)
			logger.Info("warm-up done, measuring", "duration", f.duration)
		case now := <-tick.C:
			if interrupt == nil {
				continue
			}
			line := prog.line(now, eng, f, origin)
			if tty {
				fmt.Fprint(c.stderr, "\r\x1b[K"+line.String())
			} else {
				logger.Info("progress", line.kv()...)
			}
		}
	}
}

const (
	progressRedrawEvery = 500 * time.Millisecond
	progressLogEvery    = 10 * time.Second
	// interruptDrain bounds the wait for turns in flight after an
	// interrupt (the planned end waits up to --drain-timeout).
	interruptDrain = 3 * time.Second
)

// redactURL drops user info, query and fragment, which may hold
// credentials (see client.RedactURL).
func redactURL(raw string) string { return client.RedactURL(raw) }

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// progress keeps running figures of the measurement window for the progress
// line; safe for concurrent use (the engine's observer feeds it).
type progress struct {
	mu       sync.Mutex
	ttft     *hdr.Histogram
	requests int64
	errors   int64
}

func newProgress() *progress { return &progress{ttft: hdr.Default.New()} }

func (p *progress) add(s *record.Sample) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !s.Result.OK() {
		p.errors++
		return
	}
	p.requests++
	if s.Result.TTFT > 0 {
		p.ttft.Record(s.Result.TTFT)
	}
}

// progressLine is one progress report.
type progressLine struct {
	phase              string
	elapsed, remaining time.Duration
	requests, errors   int64
	rate               float64
	p50, p95           time.Duration
	inflight           int64
}

func (l progressLine) String() string {
	return fmt.Sprintf("%s %s elapsed, %s left | %d requests %.1f req/s | TTFT p50 %s p95 %s | %d in flight | %d errors",
		l.phase, l.elapsed.Round(time.Second), l.remaining.Round(time.Second), l.requests, l.rate,
		l.p50.Round(time.Millisecond), l.p95.Round(time.Millisecond), l.inflight, l.errors)
}

func (l progressLine) kv() []any {
	return []any{"phase", l.phase, "elapsed", l.elapsed.Round(time.Second), "remaining", l.remaining.Round(time.Second),
		"requests", l.requests, "req_per_s", fmt.Sprintf("%.1f", l.rate), "ttft_p50", l.p50.Round(time.Millisecond),
		"ttft_p95", l.p95.Round(time.Millisecond), "in_flight", l.inflight, "errors", l.errors}
}

func (p *progress) line(now time.Time, eng *load.Engine, f *runFlags, origin time.Time) progressLine {
	l := progressLine{phase: "measure", inflight: eng.Stats().InFlight}
	if now.Before(origin) {
		l.phase, l.elapsed, l.remaining = "warm-up", now.Sub(origin.Add(-f.warmup)), origin.Sub(now)
		return l
	}
	l.elapsed = now.Sub(origin)
	if f.duration > 0 {
		l.remaining = max(origin.Add(f.duration).Sub(now), 0)
	}
	p.mu.Lock()
	l.requests, l.errors = p.requests, p.errors
	l.p50, l.p95 = p.ttft.Percentile(50), p.ttft.Percentile(95)
	p.mu.Unlock()
	if s := l.elapsed.Seconds(); s > 0 {
		l.rate = float64(l.requests) / s
	}
	return l
}

// checkAgents rejects the settings a fleet level does not carry: the
// coordinator's stages are a closed loop or a Poisson open loop of a fixed
// duration.
func (f *runFlags) checkAgents(set map[string]bool) error {
	if f.agents < 0 {
		return errors.New("--agents must not be negative")
	}
	for _, name := range []string{"num-prompts", "max-concurrency", "arrival", "burstiness"} {
		if set[name] {
			return fmt.Errorf("--%s is not supported with --agents", name)
		}
	}
	if f.duration <= 0 {
		return errors.New("--duration must be > 0 with --agents")
	}
	return nil
}

// runAgents runs the level with a coordinator and f.agents agents in this
// process (see runFleet), prints the vLLM block of the merged measurement
// and writes OUT/result.json, as the single-engine run does.
func (c *cli) runAgents(ctx context.Context, f *runFlags) error {
	logger := c.logger.Named("run")
	env, err := c.setUp(ctx, f, logger)
	if err != nil {
		return err
	}
	defer env.Close()
	target, reqLog := env.target, env.reqLog
	ccfg := f.clientConfig(target)
	src, err := c.newSource(f, logger)
	if err != nil {
		return err
	}
	var engOpts []load.Option
	if f.rampUp > 0 {
		engOpts = append(engOpts, load.WithRampUp(f.rampUp))
	}
	if f.singleTurn {
		engOpts = append(engOpts, load.WithSingleTurn())
	}
	// Peaks per coordinator window, all from one origin so the measured
	// windows' merge; which windows are measured is known only at the end.
	origin := time.Now()
	var peaksMu sync.Mutex
	peaks := map[uint32]*result.Peaks{}
	observe := func(s *record.Sample) {
		peaksMu.Lock()
		p := peaks[s.Window]
		if p == nil {
			p = result.NewPeaks(origin)
			peaks[s.Window] = p
		}
		peaksMu.Unlock()
		p.Add(s)
		if reqLog != nil {
			_ = reqLog.Write(s) // the first error is sticky; Close reports it
		}
	}
	stage := coordinator.Stage{Level: f.concurrency, RequestRate: f.requestRate, Warmup: f.warmup, Duration: f.duration}
	if f.requestRate > 0 {
		stage.Level = 0
	}
	logger.Info("run starting", "target", redactURL(target), "model", f.model, "workload", src.Name(), "agents", f.agents,
		"concurrency", f.concurrency, "request_rate", f.requestRate, "warmup", f.warmup, "duration", f.duration)
	res, runErr := runFleet(ctx, quiet(logger.Named("fleet")), fleetConfig{
		Agents: f.agents, Stages: []coordinator.Stage{stage}, Client: ccfg, Source: src,
		Workload: workload.Config{Seed: f.seed, MaxTokens: f.maxTokens, SessionHeader: f.sessionHeader},
		EngineOptions: engOpts, Observe: observe,
	})
	interrupted := ctx.Err() != nil
	if runErr != nil && !interrupted {
		return fmt.Errorf("run load: %w", runErr)
	}
	logErr := env.closeRequestLog()
	var sm *stageMeasurement
	st := stageResult(res, 0)
	if st != nil {
		sm, _ = measureStage(res, st)
	}
	if sm == nil || sm.Window.Counters.Requests+sm.Window.Counters.Failed == 0 {
		return c.nothingMeasured(ctx, logErr)
	}
	dur := sm.Duration
	if interrupted {
		// Cut short: the measurement lasted until its last turn ended.
		dur = max(sm.Window.LastEnd.Sub(sm.Start), time.Millisecond)
	}
	ps, _ := parsePercentiles(f.percentiles)
	facts := result.Facts{
		Duration: dur, RequestRate: f.requestRate, Model: f.model, Target: target, Workload: src.Name(),
		Version: version, Start: sm.Start, End: sm.Start.Add(dur), Percentiles: ps, MaxConcurrency: f.concurrency,
	}
	if f.requestRate > 0 {
		facts.MaxConcurrency = 0
	}
	merged := result.NewPeaks(origin)
	perAgent := map[string]int64{}
	for _, w := range stageWindows(res, st) {
		peaksMu.Lock()
		p := peaks[w.ID]
		peaksMu.Unlock()
		if err := merged.Merge(p); err != nil {
			return fmt.Errorf("merge peaks: %w", err)
		}
		for _, cv := range w.Coverage {
			perAgent[cv.Agent] += cv.Requests
		}
	}
	facts.PeakOutputTokensPerSec, facts.PeakConcurrentRequests = merged.Max()
	facts.Interrupted = interrupted
	agents := make([]string, 0, len(perAgent))
	for _, id := range slices.Sorted(maps.Keys(perAgent)) {
		agents = append(agents, fmt.Sprintf("%s=%d", id, perAgent[id]))
	}
	return c.writeResult(ctx, f, sm.Window, facts, logErr, func(w io.Writer) {
		fmt.Fprintf(w, "Agents: %d, requests per agent: %s; start skew %s%s\n", sm.Agents, strings.Join(agents, " "),
			st.StartSkew.Round(time.Microsecond), degradedSuffix(st.Degraded))
	})
}
