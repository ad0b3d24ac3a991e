package loadmetrics

import (
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fleetbench/fleetbench/pkg/client"
	"github.com/fleetbench/fleetbench/pkg/record"
)

// The phases a window's data is labelled with.
const (
	PhaseWarmup  = "warmup"
	PhaseMeasure = "measure"
)

// Outcomes of fleetbench_requests_total.
const (
	OutcomeOK    = "ok"
	OutcomeError = "error"
)

// Labels name the series a window's data goes to: the routing mode (the
// sweep's mode, the coordinator's --mode, run's --label), the level (the
// closed loop's sessions; 0 in the open loop) and the phase (PhaseWarmup
// or PhaseMeasure). Every value is bounded: a run has a few of each.
type Labels struct {
	Mode  string
	Level int
	Phase string
}

func (l Labels) values() []string { return []string{l.Mode, strconv.Itoa(l.Level), l.Phase} }

// loadLabels are the variable labels of the per-window metrics.
var loadLabels = []string{"mode", "level", "phase"}

// Load is the fleet's load as Prometheus metrics. Its methods are safe for
// concurrent use.
type Load struct {
	requests                   *prometheus.CounterVec
	input, output, cached      *prometheus.CounterVec
	convStarted, convCompleted *prometheus.CounterVec
	ttft, itl, tpot, e2e, lag  *Histogram
	target, inFlight           prometheus.Gauge
	stage                      *prometheus.GaugeVec
	mu                         sync.Mutex
	children                   map[Labels]*children
	current                    Labels
	staged                     bool
}

// children are one label set's counters and histogram series, resolved
// once.
type children struct {
	values                                        []string
	ok, input, output, cached, started, completed prometheus.Counter
	hists                                         [len(histMetrics)]*series
}

// histMetrics are the window histograms the load histograms take, in the
// order of Load.hists.
var histMetrics = [...]record.Metric{record.TTFT, record.ITL, record.TPOT, record.E2E, record.Lag}

// hists returns the load histograms in the order of histMetrics.
func (l *Load) hists() [len(histMetrics)]*Histogram {
	return [...]*Histogram{l.ttft, l.itl, l.tpot, l.e2e, l.lag}
}

// NewLoad creates the load metrics and registers them with reg (nil:
// created, not exported).
func NewLoad(reg prometheus.Registerer) (*Load, error) {
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, append(append([]string{}, loadLabels...), labels...))
	}
	l := &Load{
		requests: counter("fleetbench_requests_total",
			"Requests (turns) ended, by the window they were sent in, outcome (ok or error) and error class (empty for ok).", "outcome", "class"),
		input:         counter("fleetbench_input_tokens_total", "Prompt tokens of the successful requests (usage.prompt_tokens)."),
		output:        counter("fleetbench_output_tokens_total", "Output tokens of the successful requests (usage.completion_tokens, else content chunks)."),
		cached:        counter("fleetbench_cached_tokens_total", "Cached prompt tokens of the successful requests (usage.prompt_tokens_details.cached_tokens)."),
		convStarted:   counter("fleetbench_conversations_started_total", "Conversations started."),
		convCompleted: counter("fleetbench_conversations_completed_total", "Conversations that ran all their turns."),
		target: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "fleetbench_target_concurrency",
			Help: "Sessions the running level asks for (0 between levels and in the open loop).",
		}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "fleetbench_sessions_in_flight",
			Help: "Sessions (conversations) running: the engine's own count, or the sum of the agents' last heartbeats.",
		}),
		stage: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "fleetbench_stage_info",
			Help: "1 for the level being run, with its mode, level and phase as labels; no series between levels.",
		}, loadLabels),
		children: make(map[Labels]*children),
	}
	var err error
	hist := func(name, help string, buckets []float64) *Histogram {
		if err != nil {
			return nil
		}
		var h *Histogram
		h, err = NewHistogram(HistogramOpts{Name: name, Help: help, Buckets: buckets}, loadLabels...)
		return h
	}
	l.ttft = hist("fleetbench_ttft_seconds", "Time to first token of the successful requests: from just before the request is handed to the HTTP transport to the first streamed chunk with content.", TTFTBuckets)
	l.itl = hist("fleetbench_itl_seconds", "Inter-token latency: every gap between consecutive content chunks of the successful requests.", TokenBuckets)
	l.tpot = hist("fleetbench_tpot_seconds", "Time per output token: (E2E - TTFT) / (output tokens - 1) of each successful request with at least two tokens.", TokenBuckets)
	l.e2e = hist("fleetbench_e2e_seconds", "End-to-end latency of the successful requests: from the same start to the end of the stream.", E2EBuckets)
	l.lag = hist("fleetbench_schedule_lag_seconds", "Schedule lag of every request: actual send time - intended send time.", LagBuckets)
	if err != nil {
		return nil, err
	}
	if err := register(reg, "load", l.requests, l.input, l.output, l.cached, l.convStarted, l.convCompleted,
		l.ttft, l.itl, l.tpot, l.e2e, l.lag, l.target, l.inFlight, l.stage); err != nil {
		return nil, err
	}
	return l, nil
}

// of returns lb's counters, creating them (at 0); l.mu is held.
func (l *Load) of(lb Labels) *children {
	c := l.children[lb]
	if c == nil {
		v := lb.values()
		c = &children{
			values:    v,
			ok:        l.requests.WithLabelValues(append(v, OutcomeOK, "")...),
			input:     l.input.WithLabelValues(v...),
			output:    l.output.WithLabelValues(v...),
			cached:    l.cached.WithLabelValues(v...),
			started:   l.convStarted.WithLabelValues(v...),
			completed: l.convCompleted.WithLabelValues(v...),
		}
		for i, h := range l.hists() {
			c.hists[i] = h.child(v)
		}
		l.children[lb] = c
	}
	return c
}

// Touch makes lb's series exist at 0 before any data arrives, so a
// scraper sees them start from 0 (rate() and increase() then count every
// request). Error classes appear with their first failure.
func (l *Load) Touch(lb Labels) {
	// The label set's children include its histogram series.
	l.mu.Lock()
	l.of(lb)
	l.mu.Unlock()
}

// Add adds a window's data (an agent's report, or a recorder's interval)
// under lb: requests by outcome and class, tokens, conversations, and the
// latency histograms. Successful requests only carry latencies and tokens,
// as in every other output; schedule lag counts every request.
func (l *Load) Add(w *record.Window, lb Labels) {
	if w == nil {
		return
	}
	ch := l.addCounts(w, lb)
	for i, h := range l.hists() {
		// A hand-built window may have a nil histogram: addTo skips it.
		h.addTo(ch.hists[i], w.Hist[histMetrics[i]])
	}
}

// AddCounts is Add without the latency histograms: for the data of a
// window whose histograms reach the metrics through SetOpen.
func (l *Load) AddCounts(w *record.Window, lb Labels) {
	if w != nil {
		l.addCounts(w, lb)
	}
}

// SetOpen makes the latency histograms of w, a window whose data is still
// merged into (a coordinator window while it is open), as they are now,
// the contribution of key under lb: they replace what key set before
// (Histogram.SetOpen), so a call costs a conversion of w's merged
// histograms however many reports went into them. final settles them once
// w stops changing and forgets key. Only the histograms are read: the
// counters come with AddCounts, report by report. The caller owns w and
// does not change it during the call.
func (l *Load) SetOpen(key uint64, lb Labels, w *record.Window, final bool) {
	if w == nil {
		return
	}
	l.mu.Lock()
	ch := l.of(lb)
	l.mu.Unlock()
	for i, h := range l.hists() {
		h.mu.Lock()
		h.setOpen(ch.hists[i], key, w.Hist[histMetrics[i]], final)
		h.mu.Unlock()
	}
}

// addCounts adds w's counters under lb and returns lb's children.
func (l *Load) addCounts(w *record.Window, lb Labels) *children {
	l.mu.Lock()
	ch := l.of(lb)
	l.mu.Unlock()
	c := &w.Counters
	v := ch.values
	ch.ok.Add(float64(c.Requests))
	for class, n := range c.FailedByClass {
		if n > 0 {
			l.requests.WithLabelValues(append(v, OutcomeError, string(class))...).Add(float64(n))
		}
	}
	if other := c.Failed - sumClasses(c.FailedByClass); other > 0 {
		// Failures a hand-built window counted without a class.
		l.requests.WithLabelValues(append(v, OutcomeError, string(record.ClassUnknown))...).Add(float64(other))
	}
	ch.input.Add(float64(c.InputTokens))
	ch.output.Add(float64(c.OutputTokens))
	ch.cached.Add(float64(c.CachedTokens))
	ch.started.Add(float64(c.ConversationsStarted))
	ch.completed.Add(float64(c.ConversationsCompleted))
	return ch
}

func sumClasses(m map[client.Class]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}

// SetStage records the level being run: its labels in
// fleetbench_stage_info and its sessions asked for in
// fleetbench_target_concurrency.
func (l *Load) SetStage(lb Labels, target int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.staged && l.current != lb {
		l.stage.DeleteLabelValues(l.current.values()...)
	}
	l.current, l.staged = lb, true
	l.stage.WithLabelValues(lb.values()...).Set(1)
	l.target.Set(float64(target))
}

// SetTarget records a new count of sessions asked for by the running
// level (a live change of concurrency).
func (l *Load) SetTarget(target int) { l.target.Set(float64(target)) }

// ClearStage records that no level runs.
func (l *Load) ClearStage() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.staged {
		l.stage.DeleteLabelValues(l.current.values()...)
	}
	l.staged = false
	l.target.Set(0)
	l.inFlight.Set(0)
}

// SetInFlight records the sessions running.
func (l *Load) SetInFlight(n int) { l.inFlight.Set(float64(n)) }
