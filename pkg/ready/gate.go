package ready

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fleetbench/fleetbench/pkg/client"
	"github.com/fleetbench/fleetbench/pkg/openai"
)

// Limits of the plain GET checks.
const (
	getTimeout = 10 * time.Second
	bodyLimit  = 1 << 20
	// primeMaxTokens is each priming turn's output length.
	primeMaxTokens = 16
)

// Gate waits until a target is ready to be measured. Create it with New and
// Close it when done. Its methods are safe for concurrent use; a sweep calls
// them one at a time.
type Gate struct {
	cfg    Config
	cl     *client.Client
	target *target
	log    hclog.Logger
	now    func() time.Time
	rand   func() float64
}

// Option adjusts a Gate.
type Option func(*Gate)

// WithClock makes the Gate read time from now, for the report's timestamps.
func WithClock(now func() time.Time) Option { return func(g *Gate) { g.now = now } }

// WithRand makes the Gate draw backoff jitter from r, a function returning
// numbers in [0,1).
func WithRand(r func() float64) Option { return func(g *Gate) { g.rand = r } }

// New applies defaults to cfg, validates it and builds a Gate. It reads the
// API key from the environment once. A nil logger discards logs.
func New(cfg Config, logger hclog.Logger, opts ...Option) (*Gate, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("readiness config: %w", err)
	}
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	cc := cfg.Client
	cc.MinTokens = nil
	if cc.RequestTimeout == 0 {
		cc.RequestTimeout = cfg.RequestTimeout
	}
	if cc.FirstTokenTimeout == 0 {
		cc.FirstTokenTimeout = cfg.RequestTimeout
	}
	cl, err := client.New(cc, logger)
	if err != nil {
		return nil, fmt.Errorf("build client: %w", err)
	}
	t, err := newTarget(cc)
	if err != nil {
		cl.Close()
		return nil, err
	}
	g := &Gate{
		cfg:    cfg,
		cl:     cl,
		target: t,
		log:    logger.Named("ready"),
		now:    time.Now,
		rand:   rand.Float64,
	}
	for _, o := range opts {
		o(g)
	}
	return g, nil
}

// Close releases idle connections.
func (g *Gate) Close() {
	g.cl.Close()
	g.target.hc.CloseIdleConnections()
}

// Wait runs every stage — health, models, completions, prime — and returns
// the report. On a timeout the error is a *StageError naming the stage that
// never became ready; the report then holds the stages up to it.
func (g *Gate) Wait(ctx context.Context) (*Report, error) {
	rep, err := g.Ready(ctx)
	if err != nil {
		return rep, err
	}
	return rep, g.Prime(ctx, rep)
}

// Ready runs the health, models and completions stages and returns a new
// report.
func (g *Gate) Ready(ctx context.Context) (*Report, error) {
	rep := &Report{Start: g.now()}
	g.log.Debug("waiting for readiness", "target", client.RedactURL(g.target.root), "model", g.cfg.Client.Model)
	if err := g.run(ctx, rep, StageHealth, g.cfg.HealthTimeout, g.checkHealth()); err != nil {
		return rep, err
	}
	if err := g.run(ctx, rep, StageModels, g.cfg.ModelsTimeout, g.checkModels()); err != nil {
		return rep, err
	}
	if err := g.run(ctx, rep, StageCompletions, g.cfg.CompletionsTimeout, g.checkCompletions()); err != nil {
		return rep, err
	}
	g.log.Info("target ready", "elapsed", rep.Elapsed().Round(time.Millisecond), "stages", rep.String())
	return rep, nil
}

// Prime runs the priming conversations and adds their stage to rep. With
// priming off it records the stage as off.
func (g *Gate) Prime(ctx context.Context, rep *Report) error {
	if g.cfg.Prime < 0 {
		at := g.now().Sub(rep.Start)
		rep.Stages = append(rep.Stages, StageResult{Stage: StagePrime, Status: StatusOff, Started: at, Ended: at})
		return nil
	}
	if err := g.run(ctx, rep, StagePrime, g.cfg.PrimeTimeout, g.checkPrime()); err != nil {
		return err
	}
	g.log.Debug("primed", "conversations", g.cfg.Prime, "turns", g.cfg.PrimeTurns)
	return nil
}

// outcome of one check attempt.
type outcome int

const (
	retry    outcome = iota // failed: back off, then try again
	progress                // succeeded but not done yet: try again now
	passed                  // the stage passed
	absent                  // the endpoint does not exist: skip the stage
)

// check is one attempt of a stage. On retry it returns the failure; at a
// timeout, the stage's error is built by describe from the last failure.
type check struct {
	try      func(ctx context.Context) (outcome, error)
	describe func(timeout time.Duration, last error) string
	// ttfts, when set, returns the TTFTs to report with the stage.
	ttfts func() []time.Duration
}

// run polls c until it passes, the stage times out or ctx is done, and
// appends the stage's result to rep. Retries back off exponentially.
func (g *Gate) run(ctx context.Context, rep *Report, stage Stage, timeout time.Duration, c check) error {
	res := StageResult{Stage: stage, Started: g.now().Sub(rep.Start)}
	finish := func(st Status, err error) error {
		res.Status = st
		res.Ended = g.now().Sub(rep.Start)
		if err != nil {
			res.Error = err.Error()
		}
		rep.Stages = append(rep.Stages, res)
		return err
	}
	sctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	bo := Backoff{Initial: g.cfg.Interval, Max: g.cfg.MaxInterval, Jitter: defaultJitter}
	var last error
	fails := 0
	for {
		res.Attempts++
		out, err := c.try(sctx)
		switch out {
		case passed:
			g.log.Debug("readiness stage passed", "stage", stage, "attempts", res.Attempts)
			if c.ttfts != nil {
				res.TTFTs = c.ttfts()
			}
			return finish(StatusPassed, nil)
		case absent:
			g.log.Debug("readiness stage skipped: endpoint absent", "stage", stage)
			return finish(StatusAbsent, nil)
		case progress:
			fails = 0
			continue
		}
		if ctx.Err() != nil {
			return finish(StatusFailed, fmt.Errorf("wait for readiness: %s: %w", stage, ctx.Err()))
		}
		// A failure caused by the stage's own deadline says nothing about
		// the target; keep the one before it.
		if err != nil && (sctx.Err() == nil || last == nil) {
			last = err
		}
		fails++
		if sctx.Err() == nil {
			g.log.Trace("readiness check failed", "stage", stage, "attempt", res.Attempts, "error", err)
			sleep(sctx, bo.Delay(fails, g.rand()))
		}
		if ctx.Err() != nil {
			return finish(StatusFailed, fmt.Errorf("wait for readiness: %s: %w", stage, ctx.Err()))
		}
		if sctx.Err() != nil {
			if c.ttfts != nil {
				res.TTFTs = c.ttfts()
			}
			return finish(StatusFailed, &StageError{Stage: stage, Timeout: timeout, Err: last, msg: c.describe(timeout, last)})
		}
	}
}

// checkHealth: GET /health answers 200; 404 means the server has none.
func (g *Gate) checkHealth() check {
	return check{
		try: func(ctx context.Context) (outcome, error) {
			status, body, err := g.target.get(ctx, "/health")
			switch {
			case err != nil:
				return retry, err
			case status == http.StatusOK:
				return passed, nil
			case status == http.StatusNotFound:
				return absent, nil
			}
			return retry, fmt.Errorf("/health answered %d: %s", status, clean(body))
		},
		describe: func(timeout time.Duration, last error) string {
			return fmt.Sprintf("/health did not answer 200 for %s: %v", timeout, last)
		},
	}
}

// errNotListed is a /v1/models answer without the model.
type errNotListed struct {
	model  string
	listed []string
}

func (e *errNotListed) Error() string {
	return fmt.Sprintf("model %q not listed (listed: %s)", e.model, orNone(e.listed))
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

// checkModels: GET /v1/models answers 200 and lists the model.
func (g *Gate) checkModels() check {
	model := g.cfg.Client.Model
	return check{
		try: func(ctx context.Context) (outcome, error) {
			ids, err := g.target.models(ctx)
			if err != nil {
				return retry, err
			}
			if slices.Contains(ids, model) {
				return passed, nil
			}
			return retry, &errNotListed{model: model, listed: ids}
		},
		describe: func(timeout time.Duration, last error) string {
			if nl := (*errNotListed)(nil); errors.As(last, &nl) {
				return fmt.Sprintf("/v1/models answered but did not list model %q for %s (listed: %s)", model, timeout, orNone(nl.listed))
			}
			return fmt.Sprintf("/v1/models did not answer 200 for %s: %v", timeout, last)
		},
	}
}

// errUnstable is K completions that succeeded with TTFTs too far apart.
type errUnstable struct {
	ttfts  []time.Duration
	spread float64
}

func (e *errUnstable) Error() string {
	lo, hi := slices.Min(e.ttfts), slices.Max(e.ttfts)
	r := make([]string, len(e.ttfts))
	for i, t := range e.ttfts {
		r[i] = t.Round(100 * time.Microsecond).String()
	}
	return fmt.Sprintf("last %d TTFTs %s vary by %.1fx (bound %.1fx)",
		len(e.ttfts), strings.Join(r, " "), float64(hi)/float64(max(lo, 1)), e.spread)
}

// Stable reports whether ttfts (non-empty) are within spread of each other
// (max <= spread*min) or within slack (max-min <= slack).
func Stable(ttfts []time.Duration, spread float64, slack time.Duration) bool {
	lo, hi := slices.Min(ttfts), slices.Max(ttfts)
	return hi-lo <= slack || float64(hi) <= spread*float64(lo)
}

// checkCompletions: K streamed completions in a row succeed with stable
// TTFT. Each attempt sends one completion; a success that does not yet make
// K in a row is progress (no back-off), a failure starts the count again.
func (g *Gate) checkCompletions() check {
	k := g.cfg.Completions
	var seq int
	var window []time.Duration // TTFTs of the current run of successes
	return check{
		try: func(ctx context.Context) (outcome, error) {
			seq++
			res := g.cl.Stream(ctx, &client.Request{
				Prompt:    fmt.Sprintf("Readiness check %d-%d. Reply with one short word.", g.now().UnixNano(), seq),
				MaxTokens: g.cfg.MaxTokens,
			})
			if !res.OK() || res.TTFT <= 0 {
				if ctx.Err() == nil { // a cut-short request says nothing of the target
					window = window[:0]
				}
				if res.OK() {
					return retry, errors.New("completion streamed no content")
				}
				return retry, res.Err
			}
			window = append(window, res.TTFT)
			if len(window) > k {
				window = append(window[:0], window[len(window)-k:]...)
			}
			if len(window) < k {
				return progress, nil
			}
			if Stable(window, g.cfg.TTFTSpread, g.cfg.TTFTSlack) {
				return passed, nil
			}
			// Unstable: keep sliding the window, but not in a tight loop.
			return retry, &errUnstable{ttfts: slices.Clone(window), spread: g.cfg.TTFTSpread}
		},
		describe: func(timeout time.Duration, last error) string {
			if us := (*errUnstable)(nil); errors.As(last, &us) {
				return fmt.Sprintf("completions succeeded but TTFT did not settle for %s: %v", timeout, last)
			}
			return fmt.Sprintf("/v1/models answered but completions failed for %s: %v", timeout, last)
		},
		ttfts: func() []time.Duration { return slices.Clone(window) },
	}
}

// checkPrime: every priming conversation completes. Each attempt runs the
// conversations not yet done, at once; a failed one is retried whole.
func (g *Gate) checkPrime() check {
	done := make([]bool, g.cfg.Prime)
	return check{
		try: func(ctx context.Context) (outcome, error) {
			var wg sync.WaitGroup
			errs := make([]error, len(done))
			for i := range done {
				if done[i] {
					continue
				}
				wg.Go(func() {
					errs[i] = g.converse(ctx, i)
					done[i] = errs[i] == nil
				})
			}
			wg.Wait()
			if err := firstErr(errs); err != nil {
				return retry, err
			}
			return passed, nil
		},
		describe: func(timeout time.Duration, last error) string {
			n := 0
			for _, d := range done {
				if !d {
					n++
				}
			}
			return fmt.Sprintf("completions work but %d of %d priming conversations failed for %s: %v", n, len(done), timeout, last)
		},
	}
}

func firstErr(errs []error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// primeTopics make the priming conversations differ.
var primeTopics = []string{
	"the water cycle", "how a bicycle gear works", "why the sky is blue", "how bread rises",
	"what a compiler does", "how tides work", "why leaves change color", "how a lock and key work",
}

// converse runs priming conversation i: PrimeTurns short turns, each sent
// with the whole history, as a user would.
func (g *Gate) converse(ctx context.Context, i int) error {
	topic := primeTopics[i%len(primeTopics)]
	history := []openai.Message{
		{Role: openai.RoleSystem, Content: "You are a concise assistant. Answer in one or two sentences."},
		{Role: openai.RoleUser, Content: fmt.Sprintf("Priming conversation %d: explain %s briefly.", i, topic)},
	}
	for turn := range g.cfg.PrimeTurns {
		res := g.cl.Stream(ctx, &client.Request{Messages: history, MaxTokens: primeMaxTokens})
		if !res.OK() {
			return fmt.Errorf("priming conversation %d turn %d: %w", i, turn+1, res.Err)
		}
		history = append(history,
			openai.Message{Role: openai.RoleAssistant, Content: res.Text},
			openai.Message{Role: openai.RoleUser, Content: fmt.Sprintf("Go on about %s, one more detail.", topic)})
	}
	return nil
}

// target does the plain GET checks against the server root.
type target struct {
	root   string // scheme://host[:port][/prefix], without /v1
	header http.Header
	hc     *http.Client
}

func newTarget(cc client.Config) (*target, error) {
	t := &target{
		root:   strings.TrimSuffix(strings.TrimRight(cc.BaseURL, "/"), "/v1"),
		header: make(http.Header, len(cc.Headers)+1),
		hc: &http.Client{
			Transport: &http.Transport{
				Proxy:               nil, // as the load client: measure the server, not a proxy
				DialContext:         (&net.Dialer{Timeout: getTimeout}).DialContext,
				MaxIdleConnsPerHost: 4,
				IdleConnTimeout:     90 * time.Second,
			},
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
	}
	for k, v := range cc.Headers {
		t.header.Set(k, v)
	}
	// As the load client: an unset variable means no key.
	if key := os.Getenv(cc.APIKeyEnv); cc.APIKeyEnv != "" && key != "" {
		t.header.Set("Authorization", "Bearer "+key)
	}
	return t, nil
}

// get sends GET root+path and returns the status and a bounded body.
func (t *target) get(ctx context.Context, path string) (int, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, getTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, t.root+path, nil)
	if err != nil {
		return 0, nil, fmt.Errorf("build request: %w", err)
	}
	for k, v := range t.header {
		req.Header[k] = v
	}
	resp, err := t.hc.Do(req)
	if err != nil {
		if ue := (*url.Error)(nil); errors.As(err, &ue) {
			err = ue.Err // drop the URL, keep "connection refused"
		}
		return 0, nil, fmt.Errorf("GET %s: %w", path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, bodyLimit))
	if err != nil {
		return resp.StatusCode, body, fmt.Errorf("GET %s: read body: %w", path, err)
	}
	return resp.StatusCode, body, nil
}

// models GETs /v1/models and returns the listed ids.
func (t *target) models(ctx context.Context) ([]string, error) {
	status, body, err := t.get(ctx, "/v1/models")
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return nil, fmt.Errorf("/v1/models answered %d: %s", status, clean(body))
	}
	var ml openai.ModelList
	if err := json.Unmarshal(body, &ml); err != nil {
		return nil, fmt.Errorf("decode /v1/models: %w", err)
	}
	ids := make([]string, 0, len(ml.Data))
	for _, m := range ml.Data {
		ids = append(ids, m.ID)
	}
	return ids, nil
}

// clean makes server text fit one line of an error.
func clean(b []byte) string {
	s := strings.ToValidUTF8(strings.TrimSpace(string(b)), "?")
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
	if len(s) > 256 {
		s = strings.ToValidUTF8(s[:256], "") + "..."
	}
	if s == "" {
		return "(empty body)"
	}
	return s
}
