package calibrate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/fleetbench/fleetbench/pkg/client"
	"github.com/fleetbench/fleetbench/pkg/hdr"
	"github.com/fleetbench/fleetbench/pkg/load"
	"github.com/fleetbench/fleetbench/pkg/record"
	"github.com/fleetbench/fleetbench/pkg/sim"
	"github.com/fleetbench/fleetbench/pkg/workload"
)

// Options is one calibration sweep. Warmup and Window are simulated time.
type Options struct {
	Profile   string
	TimeScale float64
	Levels    []int
	Modes     []sim.Mode
	Warmup    time.Duration
	Window    time.Duration
	// PromptTokens and MaxTokens shape the document chats (3-5 turns, 10
	// documents, no think time, answers at the published lengths).
	PromptTokens int
	MaxTokens    int
	Seed         int64
	// Tune, when set, adjusts each point's simulator config.
	Tune func(*sim.Config)
	// FreshPerPoint starts each point on a new simulator with empty
	// caches. By default each mode's levels run in order on one
	// simulator, as the published sweep ran on one deployment, so the
	// caches and the router's index carry over from level to level.
	FreshPerPoint bool
	// Prime, when set, plays the highest level for this long (simulated)
	// on each new simulator before the first level, unmeasured: the
	// publication averaged three sweeps run one after another on one
	// deployment, so two of its three first levels started with the
	// caches the previous sweep's last level left, every document on
	// every replica.
	Prime time.Duration
}

// Point is what one level in one mode measured.
type Point struct {
	Sessions int
	Mode     sim.Mode
	// Requests is how many turns were sent in the window; TTFT
	// percentiles are over those that got a first token.
	Requests   int
	TTFTP50    time.Duration
	TTFTP95    time.Duration
	HitRate    float64 // cached over queried prompt tokens, from /metrics
	RPS        float64 // turns completed per simulated second in the window
	MeanOutput float64 // output tokens per completed turn
	Failed     int
}

// errNoFirstToken is a window in which no request got its first token. A
// measured window must have some; the priming run's one-second window
// (simulated) often has none at the top level, where turns last tens of
// seconds and start together, and priming measures nothing.
var errNoFirstToken = errors.New("no request got a first token in the window")

// Run measures every level in every mode. Each mode's levels run in order
// on one simulator, as the published sweep ran on one deployment, unless
// Options.FreshPerPoint is set.
func Run(ctx context.Context, o Options, logger hclog.Logger) ([]Point, error) {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	var out []Point
	for _, m := range o.Modes {
		var (
			s    *sim.Sim
			stop func()
		)
		next := 0 // the first conversation of the next level
		for _, n := range o.Levels {
			if s == nil || o.FreshPerPoint {
				if stop != nil {
					stop()
				}
				var err error
				if s, stop, err = startSim(ctx, o, m); err != nil {
					return out, err
				}
				if o.Prime > 0 {
					po := o
					po.Warmup, po.Window = o.Prime, time.Second
					if _, err := measure(ctx, po, s, m, slices.Max(o.Levels), next); err != nil && !errors.Is(err, errNoFirstToken) {
						stop()
						return out, fmt.Errorf("prime %s: %w", m, err)
					}
					next += 100_000
				}
			}
			p, err := measure(ctx, o, s, m, n, next)
			if err != nil {
				stop()
				return out, fmt.Errorf("measure %s at %d sessions: %w", m, n, err)
			}
			// Later levels play new conversations on the same documents.
			next += 100_000
			logger.Info("point measured", "mode", m, "sessions", n, "ttft_p50", p.TTFTP50, "ttft_p95", p.TTFTP95,
				"hit_rate", p.HitRate, "rps", p.RPS, "output", p.MeanOutput)
			out = append(out, p)
		}
		if stop != nil {
			stop()
		}
	}
	return out, nil
}

func startSim(ctx context.Context, o Options, mode sim.Mode) (*sim.Sim, func(), error) {
	cfg, err := sim.ProfileConfig(o.Profile)
	if err != nil {
		return nil, nil, err
	}
	cfg.Router, cfg.TimeScale, cfg.Listen = mode, o.TimeScale, "127.0.0.1:0"
	if o.Tune != nil {
		o.Tune(&cfg)
	}
	s, err := sim.New(cfg, nil, nil)
	if err != nil {
		return nil, nil, err
	}
	simCtx, cancel := context.WithCancel(ctx)
	if err := s.Start(simCtx); err != nil {
		cancel()
		return nil, nil, err
	}
	return s, func() {
		cancel()
		_ = s.Close()
	}, nil
}

// offsetSource plays conversations from first on.
type offsetSource struct {
	workload.Source
	first int
}

func (s offsetSource) Conversation(i int) workload.Conversation {
	return s.Source.Conversation(s.first + i)
}

func measure(ctx context.Context, o Options, s *sim.Sim, mode sim.Mode, sessions, first int) (Point, error) {
	cfg := s.Config()
	cl, err := client.New(client.Config{BaseURL: s.URL(), Model: cfg.Model, MaxTokens: o.MaxTokens, MaxConnsPerHost: sessions}, nil)
	if err != nil {
		return Point{}, err
	}
	dc, err := workload.NewDocChat(workload.DocChatConfig{
		Seed: o.Seed, PromptTokens: o.PromptTokens, MaxTokens: o.MaxTokens,
	}, nil, nil)
	if err != nil {
		return Point{}, err
	}
	src := offsetSource{Source: dc, first: first}

	wall := func(d time.Duration) time.Duration { return time.Duration(float64(d) / o.TimeScale) }
	var (
		mu      sync.Mutex
		samples []*record.Sample
	)
	rec := record.NewRecorder(hdr.Default)
	e, err := load.New(load.Config{Concurrency: sessions, MaxTokens: o.MaxTokens, Seed: o.Seed}, src, cl, rec, nil,
		load.WithObserver(func(sm *record.Sample) {
			mu.Lock()
			samples = append(samples, sm)
			mu.Unlock()
		}))
	if err != nil {
		return Point{}, err
	}
	runDone := make(chan struct{})
	go func() {
		defer close(runDone)
		_ = e.Run(ctx)
	}()
	defer func() {
		e.Abort()
		<-runDone
	}()

	if !sleep(ctx, wall(o.Warmup)) {
		return Point{}, ctx.Err()
	}
	before, err := prefix(s.Gatherer())
	if err != nil {
		return Point{}, err
	}
	e.SetWindow(1)
	winStart := time.Now()
	if !sleep(ctx, wall(o.Window)) {
		return Point{}, ctx.Err()
	}
	winEnd := time.Now()
	e.SetWindow(2)
	after, err := prefix(s.Gatherer())
	if err != nil {
		return Point{}, err
	}
	// Turns sent near the end of the window get their first token in the
	// grace; then the run is cut short and the rest are cancelled.
	sleep(ctx, wall(3*time.Second))
	e.Abort()
	<-runDone

	mu.Lock()
	defer mu.Unlock()
	p := Point{Sessions: sessions, Mode: mode}
	if q := after[1] - before[1]; q > 0 {
		p.HitRate = (after[0] - before[0]) / q
	}
	var ttft []time.Duration
	completed, outTokens := 0, 0
	for _, sm := range samples {
		r := sm.Result
		if sm.Window == 1 {
			p.Requests++
			if r.TTFT > 0 {
				ttft = append(ttft, time.Duration(float64(r.TTFT)*o.TimeScale))
			}
		}
		// Throughput counts every turn that ended in the window, whenever
		// it was sent.
		end := r.Start.Add(r.E2E)
		switch {
		case r.OK() && !end.Before(winStart) && end.Before(winEnd):
			completed++
			outTokens += r.OutputTokens
		case !r.OK() && r.Class != client.ClassCancelled:
			p.Failed++
		}
	}
	if len(ttft) == 0 {
		return p, errNoFirstToken
	}
	p.TTFTP50, p.TTFTP95 = quantile(ttft, 0.50), quantile(ttft, 0.95)
	p.RPS = float64(completed) / (float64(winEnd.Sub(winStart)) * o.TimeScale / float64(time.Second))
	if completed > 0 {
		p.MeanOutput = float64(outTokens) / float64(completed)
	}
	return p, nil
}

// quantile is the nearest-rank q-quantile of ds.
func quantile(ds []time.Duration, q float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(float64(len(s))*q+0.5) - 1
	return s[max(0, min(len(s)-1, i))]
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// prefix sums vllm:prefix_cache_hits_total and _queries_total over the
// workers.
func prefix(g prometheus.Gatherer) ([2]float64, error) {
	var v [2]float64
	mfs, err := g.Gather()
	if err != nil {
		return v, fmt.Errorf("gather metrics: %w", err)
	}
	for _, mf := range mfs {
		i := -1
		switch mf.GetName() {
		case "vllm:prefix_cache_hits_total":
			i = 0
		case "vllm:prefix_cache_queries_total":
			i = 1
		}
		if i < 0 {
			continue
		}
		for _, m := range mf.GetMetric() {
			v[i] += counter(m)
		}
	}
	return v, nil
}

func counter(m *dto.Metric) float64 {
	if c := m.GetCounter(); c != nil {
		return c.GetValue()
	}
	return 0
}
