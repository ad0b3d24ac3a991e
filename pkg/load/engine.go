package load

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fleetbench/fleetbench/pkg/client"
	"github.com/fleetbench/fleetbench/pkg/record"
	"github.com/fleetbench/fleetbench/pkg/workload"
)

// Streamer sends one streamed request and measures it. It must be safe for
// concurrent use, never return nil and report failures in Result.Class.
// *client.Client satisfies it.
type Streamer interface {
	Stream(ctx context.Context, req *client.Request) *client.Result
}

// StreamerFunc adapts a function to Streamer.
type StreamerFunc func(ctx context.Context, req *client.Request) *client.Result

// Stream calls f.
func (f StreamerFunc) Stream(ctx context.Context, req *client.Request) *client.Result {
	return f(ctx, req)
}

var (
	_ Streamer = StreamerFunc(nil)
	_ Streamer = (*client.Client)(nil)
)

// Errors returned by the engine.
var (
	// ErrAlreadyRun is returned by a second call of Run.
	ErrAlreadyRun = errors.New("engine already ran")
	// ErrOpenLoop is returned by SetConcurrency on an open-loop engine,
	// whose load is set by its rate.
	ErrOpenLoop = errors.New("open loop has no session count")
)

// Engine runs one load. Create it with New, start it with Run; SetWindow,
// Watermark, SetConcurrency and Stats are safe to call from any goroutine
// while it runs.
type Engine struct {
	cfg    Config
	src    workload.Source
	s      Streamer
	rec    *record.Recorder
	logger hclog.Logger

	// Options.
	indexer    Indexer
	drain      time.Duration
	singleTurn bool
	rampUp     time.Duration
	observe    func(*record.Sample)
	lateAfter  time.Duration
	win        *windows

	ran atomic.Bool

	// The budget. spent is closed when the last turn of TotalRequests is
	// reserved; noIndex when the Indexer runs dry.
	reserved    atomic.Int64
	spent       chan struct{}
	spentOnce   sync.Once
	noIndex     chan struct{}
	noIndexOnce sync.Once

	sessions atomic.Int64
	inflight atomic.Int64
	sent     atomic.Int64
	retired  atomic.Int64

	// The closed loop's sessions. Run's goroutine starts and retires them;
	// mu guards target and live, which sessions also touch when they end.
	mu     sync.Mutex
	target int
	live   []*session
	resize chan struct{} // buffered 1: target changed

	wg sync.WaitGroup // every session and open-loop conversation

	// abort is closed by Abort; Run then cancels everything at once.
	abort     chan struct{}
	abortOnce sync.Once
}

// New returns an engine for cfg. rec receives every sample; logger may be
// nil.
func New(cfg Config, src workload.Source, s Streamer, rec *record.Recorder, logger hclog.Logger, opts ...Option) (*Engine, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("validate load config: %w", err)
	}
	if src == nil || s == nil || rec == nil {
		return nil, errors.New("new load engine: source, streamer and recorder are required")
	}
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	e := &Engine{
		cfg:       cfg,
		src:       src,
		s:         s,
		rec:       rec,
		logger:    logger.Named("load"),
		indexer:   &Counter{},
		drain:     DefaultDrainTimeout,
		lateAfter: DefaultLateThreshold,
		win:       newWindows(0),
		spent:     make(chan struct{}),
		noIndex:   make(chan struct{}),
		target:    cfg.Concurrency,
		resize:    make(chan struct{}, 1),
		abort:     make(chan struct{}),
	}
	for _, opt := range opts {
		opt(e)
	}
	if e.indexer == nil {
		return nil, errors.New("new load engine: nil indexer")
	}
	if e.drain < 0 || e.rampUp < 0 {
		return nil, errors.New("new load engine: negative drain timeout or ramp-up")
	}
	return e, nil
}

// Run drives the load until ctx is done, the TotalRequests budget is spent
// or the Indexer runs dry. Then it sends no new turn and waits for the turns
// in flight: up to the drain timeout when ctx is done (the rest are
// cancelled and recorded as cancelled), without limit otherwise (each turn
// is bounded by the client's own timeouts). Every goroutine it started has
// ended when it returns. It returns nil after a stop for any of those
// reasons; everything measured is in the Recorder. Run may be called once.
func (e *Engine) Run(ctx context.Context) error {
	if !e.ran.CompareAndSwap(false, true) {
		return ErrAlreadyRun
	}
	defer e.win.close()
	// Turns outlive ctx until the drain gives up on them, so a turn in
	// flight when the run ends is measured to its end, not cut short.
	turnCtx, cancelTurns := context.WithCancel(context.WithoutCancel(ctx))
	ctx, cancelRun := context.WithCancel(ctx)
	defer cancelRun()
	// Abort ends both phases at once; the watcher ends with Run.
	aborted := make(chan struct{})
	go func() {
		defer close(aborted)
		select {
		case <-e.abort:
			cancelRun()
			cancelTurns()
		case <-turnCtx.Done():
		}
	}()
	defer func() {
		cancelTurns()
		<-aborted
	}()

	e.prepareWindow(e.win.current())
	start := time.Now()
	e.logger.Debug("run started", "open_loop", e.cfg.OpenLoop(), "concurrency", e.cfg.Concurrency,
		"request_rate", e.cfg.RequestRate, "max_concurrency", e.cfg.MaxConcurrency, "total_requests", e.cfg.TotalRequests)
	if e.cfg.OpenLoop() {
		e.arrive(ctx, turnCtx, start)
	} else {
		e.supervise(ctx, turnCtx, start)
	}
	e.finish(ctx, cancelTurns)
	e.logger.Debug("run stopped", "sent", e.sent.Load(), "elapsed", time.Since(start))
	return nil
}

// Abort stops the run at once: no new turn is sent and the turns in flight
// are cancelled (recorded as cancelled); Run returns as soon as they have
// ended. Use it to cut a drain short, for example on an interrupt. It is
// idempotent and safe to call from any goroutine, before, during or after
// Run.
func (e *Engine) Abort() {
	e.abortOnce.Do(func() { close(e.abort) })
}

// finish waits for every session and conversation to end, cancelling the
// turns still in flight once the drain timeout after ctx is done has passed.
func (e *Engine) finish(ctx context.Context, cancelTurns context.CancelFunc) {
	idle := make(chan struct{})
	go func() {
		e.wg.Wait()
		close(idle)
	}()
	select {
	case <-idle:
		return
	case <-ctx.Done():
	}
	e.logger.Debug("draining turns in flight", "in_flight", e.inflight.Load(), "timeout", e.drain)
	drain := time.NewTimer(e.drain)
	defer drain.Stop()
	select {
	case <-idle:
	case <-drain.C:
		e.logger.Warn("drain timed out, cancelling turns in flight", "in_flight", e.inflight.Load())
		cancelTurns()
		<-idle
	}
}

// SetWindow makes id the window in force: every turn sent from now on is
// stamped with it. Ids must increase; a smaller or equal id is ignored.
func (e *Engine) SetWindow(id uint32) {
	if id > e.win.current() {
		e.prepareWindow(id)
	}
	e.win.set(id)
}

// prepareWindow makes the Recorder allocate window id now, on the caller's
// goroutine. Otherwise every session that records into the new window
// before it exists allocates one (the Recorder allocates outside its lock;
// a window is about 1.4 MB), and thousands of sessions crossing the
// boundary at once allocate gigabytes and stall the process in GC:
// measured as TTFT outliers of hundreds of milliseconds at the start of
// each window.
func (e *Engine) prepareWindow(id uint32) {
	e.rec.Update(id, func(*record.Counters) {})
}

// Window returns the window in force.
func (e *Engine) Window() uint32 { return e.win.current() }

// Watermark returns the highest window W such that every turn sent in a
// window <= W has finished and been recorded, so Recorder data of those
// windows is final. The window in force is never final while Run may still
// send in it; after Run returns it is. ok is false when no window is final.
func (e *Engine) Watermark() (w uint32, ok bool) { return e.win.watermark() }

// SetConcurrency changes the closed loop's number of sessions while it runs
// (or before). Growing starts sessions at once; shrinking retires the most
// recently started sessions: one with a turn in flight finishes that turn
// and then ends, one thinking ends at once; their unfinished conversations
// are abandoned and counted in Stats.Retired.
func (e *Engine) SetConcurrency(n int) error {
	if n < 0 {
		return fmt.Errorf("set concurrency %d: must be >= 0", n)
	}
	if e.cfg.OpenLoop() {
		return ErrOpenLoop
	}
	e.mu.Lock()
	e.target = n
	e.mu.Unlock()
	select {
	case e.resize <- struct{}{}:
	default:
	}
	return nil
}

// Stats is a snapshot of the engine's state.
type Stats struct {
	// Sessions is the number of running closed-loop sessions (retiring ones
	// included until they end) or active open-loop conversations.
	Sessions int64
	// InFlight is the number of turns being streamed.
	InFlight int64
	// Sent is the number of turns sent so far.
	Sent int64
	// Retired counts conversations abandoned because SetConcurrency retired
	// their session between two of their turns.
	Retired int64
	// Target is the closed loop's session count asked for (Config or
	// SetConcurrency); 0 in the open loop.
	Target int
}

// Stats returns a snapshot; safe for concurrent use.
func (e *Engine) Stats() Stats {
	e.mu.Lock()
	target := e.target
	e.mu.Unlock()
	return Stats{
		Target:   target,
		Sessions: e.sessions.Load(),
		InFlight: e.inflight.Load(),
		Sent:     e.sent.Load(),
		Retired:  e.retired.Load(),
	}
}

// reserve takes one turn from the budget, false when it is spent.
func (e *Engine) reserve() bool {
	total := int64(e.cfg.TotalRequests)
	if total == 0 {
		return true
	}
	n := e.reserved.Add(1)
	if n >= total {
		e.spentOnce.Do(func() { close(e.spent) })
	}
	return n <= total
}

func (e *Engine) indexerDry() {
	e.noIndexOnce.Do(func() {
		e.logger.Debug("indexer has no more conversations")
		close(e.noIndex)
	})
}

// stopping reports, without blocking, whether a session must not start
// anything new.
func (e *Engine) stopping(ctx context.Context, stop <-chan struct{}) bool {
	select {
	case <-ctx.Done():
		return true
	case <-stop:
		return true
	case <-e.spent:
		return true
	default:
		return false
	}
}

// pauser sleeps a goroutine until a time, waking early when it must stop.
// Its timer is made on first use and reused.
type pauser struct{ t *time.Timer }

// until waits until at and reports whether the goroutine may go on: false
// when ctx is done, stop is closed or the budget is spent.
func (p *pauser) until(e *Engine, ctx context.Context, stop <-chan struct{}, at time.Time) bool {
	d := time.Until(at)
	if d <= 0 {
		return !e.stopping(ctx, stop)
	}
	if p.t == nil {
		p.t = time.NewTimer(d)
	} else {
		p.t.Reset(d)
	}
	select {
	case <-p.t.C:
		return !e.stopping(ctx, stop)
	case <-ctx.Done():
	case <-stop:
	case <-e.spent:
	}
	p.t.Stop()
	return false
}

func (p *pauser) close() {
	if p.t != nil {
		p.t.Stop()
	}
}
