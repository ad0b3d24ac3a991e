package ready

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fleetbench/fleetbench/pkg/client"
)

// Signals the probe watches.
const (
	SignalHealth     = "/health"
	SignalHealthy    = "/health/ready"
	SignalModels     = "/v1/models"
	SignalCompletion = "completion" // a real one-token streamed completion
)

// Defaults of ProbeConfig.
const (
	DefaultProbeTimeout  = 10 * time.Minute
	DefaultProbeInterval = 100 * time.Millisecond
	DefaultProbeGrace    = 3 * time.Second
)

// ProbeConfig configures Probe. Zero fields take the defaults.
type ProbeConfig struct {
	// Client is the target. Model may be empty: then the first model
	// /v1/models lists is used, and /v1/models counts as OK when it lists
	// any.
	Client client.Config
	// Timeout bounds the whole probe.
	Timeout time.Duration
	// Interval is the time between the starts of two polls of one signal;
	// it is the resolution of every figure.
	Interval time.Duration
	// Grace is how long the other signals are still polled once the model
	// serves, for those that turn OK only just after it.
	Grace time.Duration
	// RequestTimeout bounds one completion request (default
	// DefaultRequestTimeout).
	RequestTimeout time.Duration
}

func (c ProbeConfig) withDefaults() ProbeConfig {
	c.Timeout = cmp.Or(c.Timeout, DefaultProbeTimeout)
	c.Interval = cmp.Or(c.Interval, DefaultProbeInterval)
	c.Grace = cmp.Or(c.Grace, DefaultProbeGrace)
	c.RequestTimeout = cmp.Or(c.RequestTimeout, DefaultRequestTimeout)
	return c
}

// SignalResult is what one signal did during the probe. Times are offsets
// from ProbeReport.Start to the send of the request in question.
type SignalResult struct {
	Signal string
	// Responded is set once any HTTP response arrived; FirstResponse is
	// when that request was sent. Before, connections were refused or
	// timed out.
	Responded     bool
	FirstResponse time.Duration
	// OK is set once the signal said ready: 200 for the health endpoints,
	// 200 listing the model for /v1/models, a streamed token for the
	// completion. FirstOK is when that request was sent.
	OK      bool
	FirstOK time.Duration
	// LastFailure is when the last failed request before the first OK was
	// sent (valid when Attempts > 1 or !OK). For the completion it bounds
	// when the model began to serve: after LastFailure, by FirstOK.
	LastFailure time.Duration
	// Attempts counts requests; LastStatus and LastError describe the last
	// one (LastStatus 0: no response).
	Attempts   int
	LastStatus int
	LastError  string
}

// ProbeReport is the outcome of Probe. It is immutable once returned.
type ProbeReport struct {
	// Target is the server's base URL without user info and query, which
	// may hold credentials (see client.RedactURL).
	Target   string
	Model    string
	Start    time.Time
	Interval time.Duration
	Elapsed  time.Duration
	// Signals in a fixed order: /health, /health/ready, /v1/models,
	// completion.
	Signals []SignalResult
}

// Signal returns the result of the named signal.
func (r *ProbeReport) Signal(name string) (SignalResult, bool) {
	for _, s := range r.Signals {
		if s.Signal == name {
			return s, true
		}
	}
	return SignalResult{}, false
}

// Served reports whether a completion succeeded.
func (r *ProbeReport) Served() bool {
	c, _ := r.Signal(SignalCompletion)
	return c.OK
}

// Lead returns how long before the first successful completion the named
// signal first said ready (negative: after), and false when either never
// succeeded. See Early for whether a lead makes the signal unsound.
func (r *ProbeReport) Lead(name string) (time.Duration, bool) {
	s, ok1 := r.Signal(name)
	c, ok2 := r.Signal(SignalCompletion)
	if !ok1 || !ok2 || !s.OK || !c.OK {
		return 0, false
	}
	return c.FirstOK - s.FirstOK, true
}

// Early returns how long before the model could serve the named signal
// surely said ready: the time from its first OK to a completion sent later
// that still failed. It reports false when there is no such completion, or
// when the margin is within one Interval (the send-to-arrival jitter of
// two requests): the signal is then sound in this startup.
func (r *ProbeReport) Early(name string) (time.Duration, bool) {
	s, ok1 := r.Signal(name)
	c, ok2 := r.Signal(SignalCompletion)
	if !ok1 || !ok2 || !s.OK || c.Attempts == 0 || (c.OK && c.Attempts == 1) {
		return 0, false
	}
	if d := c.LastFailure - s.FirstOK; d > r.Interval {
		return d, true
	}
	return 0, false
}

// Probe polls /health, /health/ready, /v1/models and a one-token completion
// concurrently, each every cfg.Interval, from before the server is up
// (connection refused counts as not ready) until the model serves plus
// cfg.Grace, or cfg.Timeout. It returns the report even when the model
// never served; the error is only for a bad configuration or a canceled
// ctx. A model the server will never serve is a bad configuration: when a
// completion answers 404 while /v1/models lists other models, Probe stops
// at once with no report and the error Preflight gives (ErrModelNotServed).
func Probe(ctx context.Context, cfg ProbeConfig, logger hclog.Logger) (*ProbeReport, error) {
	cfg = cfg.withDefaults()
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	log := logger.Named("probe")
	check := cfg.Client
	if check.Model == "" {
		check.Model = "probe" // only to validate the rest; the model is found later
	}
	if err := check.Validate(); err != nil {
		return nil, fmt.Errorf("probe config: %w", err)
	}
	if cfg.Interval <= 0 || cfg.Timeout <= 0 || cfg.Grace < 0 {
		return nil, errors.New("probe config: interval and timeout must be positive, grace not negative")
	}
	t, err := newTarget(cfg.Client)
	if err != nil {
		return nil, err
	}
	defer t.hc.CloseIdleConnections()

	rep := &ProbeReport{Target: client.RedactURL(cfg.Client.BaseURL), Model: cfg.Client.Model, Start: time.Now(), Interval: cfg.Interval}
	since := func(at time.Time) time.Duration { return at.Sub(rep.Start) }
	pctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()

	p := &prober{
		cfg: cfg, t: t, log: log, since: since,
		model:  make(chan string, 1),
		okc:    make(chan string, 4),
		wrong:  make(chan error, 1),
		models: cfg.Client.Model,
	}
	if p.models != "" {
		p.model <- p.models
	}
	names := []string{SignalHealth, SignalHealthy, SignalModels, SignalCompletion}
	results := make([]*SignalResult, len(names))
	var wg sync.WaitGroup
	for i, n := range names {
		results[i] = &SignalResult{Signal: n}
		wg.Go(func() { p.poll(pctx, results[i]) })
	}
	log.Info("probing", "target", rep.Target, "model", cfg.Client.Model, "interval", cfg.Interval, "timeout", cfg.Timeout)

	// Wait for the model to serve, then up to Grace for the signals still
	// short of OK; stop at once when all are OK.
	var grace <-chan time.Time
	okCount := 0
wait:
	for {
		select {
		case n := <-p.okc:
			okCount++
			log.Info("signal ok", "signal", n, "after_ms", since(time.Now()).Milliseconds())
			if okCount == len(names) {
				break wait
			}
			if n == SignalCompletion {
				tm := time.NewTimer(cfg.Grace)
				defer tm.Stop()
				grace = tm.C
			}
		case <-grace:
			break wait
		case <-pctx.Done():
			break wait
		case err := <-p.wrong:
			cancel()
			wg.Wait()
			return nil, err
		}
	}
	cancel()
	wg.Wait()
	rep.Elapsed = since(time.Now())
	if rep.Model == "" {
		select {
		case m := <-p.model:
			rep.Model = m
		default:
		}
	}
	for _, r := range results {
		rep.Signals = append(rep.Signals, *r)
	}
	if ctx.Err() != nil {
		return rep, fmt.Errorf("probe: %w", ctx.Err())
	}
	return rep, nil
}

// prober polls the signals. Each poll goroutine owns its SignalResult until
// Probe's wg.Wait.
type prober struct {
	cfg    ProbeConfig
	t      *target
	log    hclog.Logger
	since  func(time.Time) time.Duration
	model  chan string // the model to request, once known (buffered, 1)
	okc    chan string // a signal's name on its first OK
	wrong  chan error  // the model is not served (buffered, 1)
	models string      // the configured model, "" when discovered
}

// poll polls one signal every Interval until it is OK or ctx is done.
func (p *prober) poll(ctx context.Context, r *SignalResult) {
	var cl *client.Client
	defer func() {
		if cl != nil {
			cl.Close()
		}
	}()
	for {
		sent := time.Now()
		var status int
		var ok bool
		var err error
		switch r.Signal {
		case SignalCompletion:
			if cl == nil {
				model, got := p.waitModel(ctx)
				if !got {
					return
				}
				cc := p.cfg.Client
				cc.Model, cc.MinTokens = model, nil
				cc.RequestTimeout = cmp.Or(cc.RequestTimeout, p.cfg.RequestTimeout)
				if cl, err = client.New(cc, p.log); err != nil {
					r.LastError = err.Error()
					return
				}
				sent = time.Now()
			}
			res := cl.Stream(ctx, &client.Request{Prompt: "Say OK.", MaxTokens: 1})
			status, ok, err = res.Status, res.OK() && res.TTFT > 0, res.Err
			if res.OK() && !ok {
				err = errors.New("completion streamed no content")
			}
			if res.Class == client.ClassNotFound {
				if werr := p.notServed(ctx); werr != nil {
					p.wrong <- werr
					return
				}
			}
		case SignalModels:
			var ids []string
			var body []byte
			status, body, err = p.t.get(ctx, SignalModels)
			if err == nil && status == http.StatusOK {
				ids, err = decodeModels(body)
				ok = err == nil && p.listed(ids)
			}
		default:
			status, _, err = p.t.get(ctx, r.Signal)
			ok = err == nil && status == http.StatusOK
		}
		if ctx.Err() != nil && !ok {
			return // cut short by the end of the probe: not an attempt
		}
		r.Attempts++
		r.LastStatus = status
		r.LastError = ""
		if err != nil {
			r.LastError = err.Error()
		}
		if status != 0 && !r.Responded {
			r.Responded, r.FirstResponse = true, p.since(sent)
		}
		if ok {
			r.OK, r.FirstOK = true, p.since(sent)
			p.okc <- r.Signal
			return
		}
		r.LastFailure = p.since(sent)
		if !sleep(ctx, time.Until(sent.Add(p.cfg.Interval))) {
			return
		}
	}
}

// notServed returns the wrong-model error when the model was configured
// and /v1/models answers with a list that lacks it: a completion's 404 is
// then the model's name, not a server still starting. nil otherwise.
func (p *prober) notServed(ctx context.Context) error {
	if p.models == "" {
		return nil
	}
	ids := p.servedModels(ctx)
	if len(ids) == 0 || slices.Contains(ids, p.models) {
		return nil
	}
	return notServed(p.models, client.RedactURL(p.cfg.Client.BaseURL), ids)
}

// servedModels returns the models /v1/models lists, or nil when the list
// cannot be read: an unreadable list says nothing about the model, so the
// probe then goes on polling as for any other failure.
func (p *prober) servedModels(ctx context.Context) []string {
	status, body, err := p.t.get(ctx, SignalModels)
	if err != nil || status != http.StatusOK {
		return nil
	}
	if ids, err := decodeModels(body); err == nil {
		return ids
	}
	return nil
}

// listed reports whether ids include the model, or any model when none was
// configured (which then becomes the model the completion asks for).
func (p *prober) listed(ids []string) bool {
	if p.models != "" {
		return slices.Contains(ids, p.models)
	}
	if len(ids) == 0 {
		return false
	}
	select {
	case p.model <- ids[0]:
	default:
	}
	return true
}

// waitModel returns the model to request, waiting until it is known.
func (p *prober) waitModel(ctx context.Context) (string, bool) {
	select {
	case m := <-p.model:
		p.model <- m // leave it for the report
		return m, true
	case <-ctx.Done():
		return "", false
	}
}

func decodeModels(body []byte) ([]string, error) {
	var ml struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &ml); err != nil {
		return nil, fmt.Errorf("decode /v1/models: %w", err)
	}
	ids := make([]string, len(ml.Data))
	for i, m := range ml.Data {
		ids[i] = m.ID
	}
	return ids, nil
}

// ms formats a duration as whole milliseconds.
func ms(d time.Duration) string { return fmt.Sprintf("%d ms", d.Milliseconds()) }

// WriteText prints the signals in the order they first succeeded, then a
// verdict per readiness signal: did it say ready before the model could
// serve, and by how long.
func (r *ProbeReport) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "probe of %s, model %s, polled every %s for %s\n\n", r.Target, orUnknown(r.Model), r.Interval, r.Elapsed.Round(time.Millisecond))
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SIGNAL\tFIRST ANSWER\tFIRST OK\tBEFORE SERVING\tATTEMPTS\tLAST")
	for _, s := range r.byFirstOK() {
		answer, okAt, lead := "never", "never", "-"
		if s.Responded {
			answer = ms(s.FirstResponse)
		}
		if s.OK {
			okAt = ms(s.FirstOK)
		}
		if d, ok := r.Lead(s.Signal); ok && s.Signal != SignalCompletion {
			lead = ms(d)
		}
		last := fmt.Sprint(s.LastStatus)
		if s.LastStatus == 0 {
			last = "no answer"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\n", s.Signal, answer, okAt, lead, s.Attempts, last)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	b.WriteString("\n")
	if !r.Served() {
		c, _ := r.Signal(SignalCompletion)
		fmt.Fprintf(&b, "the model never served a completion (last: %s)\n", orUnknown(c.LastError))
	}
	for _, name := range []string{SignalModels, SignalHealthy, SignalHealth} {
		b.WriteString(r.verdict(name))
		b.WriteString("\n")
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// verdict says whether the named signal is a sound readiness probe in this
// startup.
func (r *ProbeReport) verdict(name string) string {
	s, _ := r.Signal(name)
	switch {
	case !s.OK && s.LastStatus == http.StatusNotFound:
		return fmt.Sprintf("%s: absent (404)", name)
	case !s.OK:
		return fmt.Sprintf("%s: never said ready", name)
	case !r.Served():
		return fmt.Sprintf("%s: said ready at %s but the model never served: not a sound readiness probe", name, ms(s.FirstOK))
	}
	lead, _ := r.Lead(name)
	if early, ok := r.Early(name); ok {
		return fmt.Sprintf("%s answered %s before the model could serve (a completion sent %s after it still failed): not a sound readiness probe",
			name, ms(lead), ms(early))
	}
	if lead < -r.Interval {
		return fmt.Sprintf("%s said ready %s after the model could serve: safe but late", name, ms(-lead))
	}
	return fmt.Sprintf("%s said ready only once the model could serve (within %s): sound in this startup", name, ms(max(lead, 0)+r.Interval))
}

// byFirstOK returns the signals ordered by when they first succeeded; those
// that never did come last, in their fixed order.
func (r *ProbeReport) byFirstOK() []SignalResult {
	out := slices.Clone(r.Signals)
	slices.SortStableFunc(out, func(a, b SignalResult) int {
		switch {
		case a.OK && b.OK:
			return cmp.Compare(a.FirstOK, b.FirstOK)
		case a.OK:
			return -1
		case b.OK:
			return 1
		}
		return 0
	})
	return out
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// probeJSON is the JSON form of a ProbeReport, in milliseconds.
type probeJSON struct {
	Target     string       `json:"target"`
	Model      string       `json:"model"`
	Start      time.Time    `json:"start"`
	IntervalMS int64        `json:"interval_ms"`
	ElapsedMS  int64        `json:"elapsed_ms"`
	Served     bool         `json:"served"`
	Signals    []signalJSON `json:"signals"`
	// ModelsBeforeServingMS is how long /v1/models said ready before the
	// model served (negative: after); null when either never did.
	ModelsBeforeServingMS *int64 `json:"models_before_serving_ms"`
	ModelsSound           *bool  `json:"models_sound"`
}

type signalJSON struct {
	Signal            string `json:"signal"`
	FirstResponseMS   *int64 `json:"first_response_ms"`
	FirstOKMS         *int64 `json:"first_ok_ms"`
	BeforeServingMS   *int64 `json:"before_serving_ms,omitempty"`
	Attempts          int    `json:"attempts"`
	LastStatus        int    `json:"last_status"`
	LastError         string `json:"last_error,omitempty"`
	NotSoundReadiness bool   `json:"not_sound,omitempty"`
}

func msPtr(d time.Duration) *int64 { v := d.Milliseconds(); return &v }

// WriteJSON writes the report as one JSON object with times in
// milliseconds since the start of the probe.
func (r *ProbeReport) WriteJSON(w io.Writer) error {
	out := probeJSON{
		Target: r.Target, Model: r.Model, Start: r.Start,
		IntervalMS: r.Interval.Milliseconds(), ElapsedMS: r.Elapsed.Milliseconds(),
		Served: r.Served(), Signals: []signalJSON{},
	}
	for _, s := range r.Signals {
		sj := signalJSON{Signal: s.Signal, Attempts: s.Attempts, LastStatus: s.LastStatus, LastError: s.LastError}
		if s.Responded {
			sj.FirstResponseMS = msPtr(s.FirstResponse)
		}
		if s.OK {
			sj.FirstOKMS = msPtr(s.FirstOK)
		}
		if lead, ok := r.Lead(s.Signal); ok && s.Signal != SignalCompletion {
			sj.BeforeServingMS = msPtr(lead)
			_, sj.NotSoundReadiness = r.Early(s.Signal)
		}
		out.Signals = append(out.Signals, sj)
	}
	if lead, ok := r.Lead(SignalModels); ok {
		out.ModelsBeforeServingMS = msPtr(lead)
		_, early := r.Early(SignalModels)
		sound := !early
		out.ModelsSound = &sound
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}
