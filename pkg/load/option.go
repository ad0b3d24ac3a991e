package load

import (
	"time"

	"github.com/fleetbench/fleetbench/pkg/record"
)

// Defaults of the engine's options.
const (
	// DefaultWarmup is the warm-up before every measurement, the published
	// studies' 60 s: long enough for caches and batches to settle.
	DefaultWarmup = 60 * time.Second
	// DefaultDuration is the measured time of one level, the studies'
	// 300 s windows.
	DefaultDuration = 5 * time.Minute
	// DefaultCooldown is the idle pause between levels, so one level's tail
	// does not leak into the next.
	DefaultCooldown = 30 * time.Second
	// DefaultDrainTimeout bounds how long Run waits for turns in flight
	// after its context is done before cancelling them.
	DefaultDrainTimeout = 30 * time.Second
	// DefaultLateThreshold is how far behind its intended time a turn must
	// be sent to count as a late send.
	DefaultLateThreshold = 10 * time.Millisecond
)

// Option changes an Engine's defaults; pass options to New.
type Option func(*Engine)

// WithIndexer makes sessions take conversation indices from ix instead of
// a shared Counter from 0. Agents pass one that yields their shard.
func WithIndexer(ix Indexer) Option { return func(e *Engine) { e.indexer = ix } }

// WithDrainTimeout sets how long Run waits for turns in flight once its
// context is done; turns still running then are cancelled and recorded as
// cancelled. 0 cancels them at once.
func WithDrainTimeout(d time.Duration) Option { return func(e *Engine) { e.drain = d } }

// WithSingleTurn cuts every conversation to its first turn: each closed-loop
// session and each open-loop arrival sends one request, like vLLM's
// benchmark_serving.
func WithSingleTurn() Option { return func(e *Engine) { e.singleTurn = true } }

// WithRampUp spreads the start of the closed loop's initial sessions evenly
// over d instead of starting them all at once. Sessions added later by
// SetConcurrency start at once.
func WithRampUp(d time.Duration) Option { return func(e *Engine) { e.rampUp = d } }

// WithObserver calls fn with every recorded sample, after the Recorder, from
// the session's goroutine (so concurrently); fn must not keep the sample or
// its Result past the call, and must be quick: it runs on the hot path. Use
// it for the per-request log.
func WithObserver(fn func(*record.Sample)) Option { return func(e *Engine) { e.observe = fn } }

// WithLateThreshold sets how late against its intended time a send must be
// to be counted in Counters.LateSends (its lag is recorded regardless).
func WithLateThreshold(d time.Duration) Option { return func(e *Engine) { e.lateAfter = d } }

// WithWindow sets the window in force when Run starts (default 0).
func WithWindow(id uint32) Option { return func(e *Engine) { e.win = newWindows(id) } }
