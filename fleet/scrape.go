package fleet

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"k8s.io/client-go/kubernetes"

	"github.com/fleetbench/fleetbench/pkg/kubejob"
	"github.com/fleetbench/fleetbench/pkg/servermetrics"
)

// spanScraper is what serverScrape needs of a *servermetrics.Scraper.
type spanScraper interface {
	Begin(ctx context.Context)
	End(ctx context.Context) (servermetrics.Window, error)
}

var _ spanScraper = (*servermetrics.Scraper)(nil)

// span is the measured time of one stage: [start, end).
type span struct {
	stage      int
	start, end time.Time
}

// serverScrape reads the serving stack's /metrics over each stage's
// measured time, in the process that runs the coordinator (never in the
// agents): Begin at the span's start, End at its end, on a goroutine of
// its own (run) since each reading takes up to the scrape timeout and the
// coordinator's hooks must return at once. A stage's window is then
// waited for with result. Spans come one stage at a time, in order.
type serverScrape struct {
	s      spanScraper
	logger hclog.Logger
	spans  chan span
	done   chan struct{} // closed when run returns
	live   *Live         // shown each window so far and at its end; may be nil

	// measuring is true from a span's Begin to its End: only then is the
	// scraper's window so far a measured one to show. liveMu orders it
	// with the scraper's progress calls, so none lands after the end.
	liveMu    sync.Mutex
	measuring bool

	mu      sync.Mutex
	results map[int]chan *servermetrics.Window
}

// newServerScrape returns a serverScrape of s; run must be started.
func newServerScrape(s spanScraper, logger hclog.Logger) *serverScrape {
	return &serverScrape{
		s: s, logger: logger, spans: make(chan span, 16), done: make(chan struct{}),
		results: map[int]chan *servermetrics.Window{},
	}
}

// schedule sets the measured span of stage (coordinator.Config's
// OnMeasureSpan): a later call for the same stage moves its end. It never
// blocks.
func (d *serverScrape) schedule(stage int, start, end time.Time) {
	select {
	case d.spans <- span{stage: stage, start: start, end: end}:
	default:
		d.logger.Warn("server metrics: span dropped, scheduler behind", "stage", stage)
	}
}

// slot is the channel stage's window is delivered on (buffered, one).
func (d *serverScrape) slot(stage int) chan *servermetrics.Window {
	d.mu.Lock()
	defer d.mu.Unlock()
	c := d.results[stage]
	if c == nil {
		c = make(chan *servermetrics.Window, 1)
		d.results[stage] = c
	}
	return c
}

// result waits for stage's window: nil when it could not be read, when
// run has ended without it, or when ctx ends first.
func (d *serverScrape) result(ctx context.Context, stage int) *servermetrics.Window {
	select {
	case w := <-d.slot(stage):
		return w
	case <-d.done:
		select {
		case w := <-d.slot(stage):
			return w
		default:
			return nil
		}
	case <-ctx.Done():
		return nil
	}
}

// run follows the scheduled spans until ctx ends: Begin when a span
// starts, End when it ends (as last scheduled), each stage's window to
// its slot. A span whose stage is replaced by the next one's before its
// end is ended then.
func (d *serverScrape) run(ctx context.Context) {
	defer close(d.done)
	var (
		cur      *span
		begun    bool
		finished = -1 // the last stage delivered: later spans of it are stale
	)
	t := time.NewTimer(time.Hour)
	t.Stop()
	defer t.Stop()
	arm := func() {
		if cur == nil {
			return
		}
		at := cur.start
		if begun {
			at = cur.end
		}
		t.Reset(time.Until(at))
	}
	finish := func() {
		d.setMeasuring(false)
		w, err := d.s.End(ctx)
		var out *servermetrics.Window
		switch {
		case errors.Is(err, servermetrics.ErrNoWindow):
		case err != nil:
			d.logger.Warn("server metrics: window not read", "stage", cur.stage, "error", err)
		default:
			out = &w
			d.live.serverWindow(out)
		}
		d.slot(cur.stage) <- out
		finished, cur, begun = cur.stage, nil, false
	}
	for {
		select {
		case <-ctx.Done():
			return
		case sp := <-d.spans:
			if sp.stage <= finished {
				continue
			}
			if cur != nil && sp.stage != cur.stage {
				if begun {
					finish()
				} else {
					d.slot(cur.stage) <- nil // never begun: nothing read
					finished = cur.stage
				}
			}
			cur = &sp
			arm()
		case <-t.C:
			if cur == nil {
				continue
			}
			if !begun && !time.Now().Before(cur.start) {
				d.s.Begin(ctx)
				d.setMeasuring(true)
				begun = true
			}
			if begun && !time.Now().Before(cur.end) {
				finish()
				continue
			}
			arm()
		}
	}
}

// setMeasuring records whether a measured span's window is open.
func (d *serverScrape) setMeasuring(on bool) {
	d.liveMu.Lock()
	d.measuring = on
	d.liveMu.Unlock()
}

// progress shows w, the scraper's open window so far, when it is a
// measured one (servermetrics.WithProgress, from the scraper's Run).
func (d *serverScrape) progress(w *servermetrics.Window) {
	d.liveMu.Lock()
	defer d.liveMu.Unlock()
	if d.measuring {
		d.live.serverSoFar(w)
	}
}

// startServerScrape starts reading cfg's endpoints over the spans given
// to the returned serverScrape's schedule; nil without endpoints. With a
// live view, each measured window is shown there as it goes (every
// cfg.Interval) and when it ends. stop ends its goroutines and waits for
// them.
func startServerScrape(ctx context.Context, cfg servermetrics.Config, logger hclog.Logger, live *Live) (_ *serverScrape, stop func(), err error) {
	if len(cfg.Endpoints) == 0 && cfg.Pods == nil {
		return nil, func() {}, nil
	}
	logger = logger.Named("scrape")
	var opts []servermetrics.Option
	if cfg.Pods != nil {
		// Serving pods are found through the API server: the in-cluster
		// config, or $KUBECONFIG outside a cluster.
		rc, ns, err := kubejob.RESTConfig(cfg.Pods.Namespace)
		if err != nil {
			return nil, nil, fmt.Errorf("scrape pods: %w", err)
		}
		cs, err := kubernetes.NewForConfig(rc)
		if err != nil {
			return nil, nil, fmt.Errorf("scrape pods: create Kubernetes client: %w", err)
		}
		p := *cfg.Pods
		p.Namespace = ns
		cfg.Pods = &p
		opts = append(opts, servermetrics.WithKubernetes(cs))
	}
	var d *serverScrape // set before the scraper runs
	if live != nil && live.Feed != nil {
		opts = append(opts, servermetrics.WithProgress(func(w servermetrics.Window) { d.progress(&w) }))
	}
	s, err := servermetrics.New(cfg, logger, opts...)
	if err != nil {
		return nil, nil, err
	}
	d = newServerScrape(s, logger)
	d.live = live
	sctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { _ = s.Run(sctx) })
	wg.Go(func() { d.run(sctx) })
	logger.Info("reading server metrics", "endpoints", len(cfg.Endpoints), "interval", cfg.Interval)
	return d, func() { cancel(); wg.Wait() }, nil
}
