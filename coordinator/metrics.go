package coordinator

import (
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fleetbench/fleetbench/pkg/loadmetrics"
	"github.com/fleetbench/fleetbench/pkg/record"
)

// metrics are the coordinator's Prometheus collectors: its own workings,
// and the fleet's load merged from the agents' reports (load: the
// Prometheus load metrics, and the live view of WithLive when set). They
// are updated only from Run's loop; the collectors themselves are safe for
// concurrent scrapes.
type metrics struct {
	// load takes the stage, target and in-flight figures, for both
	// promLoad and live.
	load loadmetrics.Sink
	// promLoad gets each report's counters, and the latency histograms of
	// the open windows every publishEvery (see publish); live, the live
	// view's feed, gets each report whole.
	promLoad         *loadmetrics.Load
	live             loadmetrics.Sink
	lastPublish      time.Time
	agents           prometheus.Gauge
	reportsApplied   prometheus.Counter
	reportsDuplicate prometheus.Counter
	windowsClosed    *prometheus.CounterVec
	lateRequests     prometheus.Counter
	agentsLost       prometheus.Counter
	mergeErrors      prometheus.Counter
	ttftP50          *prometheus.GaugeVec
	ttftP95          *prometheus.GaugeVec
}

// newMetrics creates the collectors and registers them with reg (nil:
// they are created but not exported).
func newMetrics(reg prometheus.Registerer, live loadmetrics.Sink) (*metrics, error) {
	load, err := loadmetrics.NewLoad(reg)
	if err != nil {
		return nil, err
	}
	m := &metrics{
		load:     loadmetrics.Tee(load, live),
		promLoad: load,
		live:     live,
		agents: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "fleetbench_coordinator_agents_connected",
			Help: "Agents connected and taking part in the run (lost agents excluded).",
		}),
		reportsApplied: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fleetbench_coordinator_reports_applied_total",
			Help: "Interval reports of agents merged into the run's windows.",
		}),
		reportsDuplicate: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fleetbench_coordinator_reports_duplicate_total",
			Help: "Interval reports received again after they were applied (resends after a reconnect), acked and ignored.",
		}),
		windowsClosed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fleetbench_coordinator_windows_closed_total",
			Help: "Windows closed, by what closed them: watermarks, grace or cancelled.",
		}, []string{"closed_by"}),
		lateRequests: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fleetbench_coordinator_late_requests_total",
			Help: "Requests reported for a window after it closed (kept apart as late samples).",
		}),
		agentsLost: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fleetbench_coordinator_agents_lost_total",
			Help: "Agents declared lost (heartbeat timeout, restart, or a lost pod reported by the caller).",
		}),
		mergeErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fleetbench_coordinator_report_merge_errors_total",
			Help: "Interval reports that could not be merged into their window.",
		}),
		// Modes are the few a sweep compares: a bounded label.
		ttftP50: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "fleetbench_coordinator_window_ttft_p50_seconds",
			Help: "Fleet-wide TTFT median of the last closed measured window, by routing mode.",
		}, []string{"mode"}),
		ttftP95: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "fleetbench_coordinator_window_ttft_p95_seconds",
			Help: "Fleet-wide TTFT 95th percentile of the last closed measured window, by routing mode.",
		}, []string{"mode"}),
	}
	if reg == nil {
		return m, nil
	}
	var errs []error
	for _, c := range []prometheus.Collector{m.agents, m.reportsApplied, m.reportsDuplicate, m.windowsClosed,
		m.lateRequests, m.agentsLost, m.mergeErrors, m.ttftP50, m.ttftP95} {
		errs = append(errs, reg.Register(c))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("register coordinator metrics: %w", err)
	}
	return m, nil
}

// publishEvery is how often the open windows' merged latency histograms
// go to the Prometheus load histograms: a scrape reads them at most this
// old (the counters are current).
const publishEvery = time.Second

// report adds rep, a report merged into w, to the load metrics and the
// live view. The Prometheus latency histograms take an open window's
// merged histograms every publishEvery instead of each report's (a second
// decode of every report otherwise); a late report, merged apart from the
// window's final data, goes in whole.
func (m *metrics) report(w *window, rep *record.Window) {
	lb := loadLabels(w.kind, w.mode, w.level)
	if w.closed {
		m.promLoad.Add(rep, lb)
	} else {
		m.promLoad.AddCounts(rep, lb)
		w.unpublished = true
	}
	if m.live != nil {
		m.live.Add(rep, lb)
	}
}

// publish hands the latency histograms of the open windows that merged
// reports since their last publication to the load metrics, once per
// publishEvery or at once when final (a run that ends with windows open).
func (m *metrics) publish(windows []*window, now time.Time, final bool) {
	if !final && now.Sub(m.lastPublish) < publishEvery {
		return
	}
	m.lastPublish = now
	for _, w := range windows {
		if !w.closed && w.unpublished {
			m.promLoad.SetOpen(uint64(w.id), loadLabels(w.kind, w.mode, w.level), w.data, false)
			w.unpublished = false
		}
	}
}

// windowClosed counts a closed window, settles its latency histograms in
// the load metrics and, for a measured one, exports its TTFT quantiles
// under its mode.
func (m *metrics) windowClosed(w *window) {
	m.promLoad.SetOpen(uint64(w.id), loadLabels(w.kind, w.mode, w.level), w.data, true)
	w.unpublished = false
	m.windowsClosed.WithLabelValues(w.closedBy).Inc()
	if w.kind != KindMeasure || w.data == nil {
		return
	}
	h := w.data.Hist[record.TTFT]
	if h == nil || h.Count() == 0 {
		return
	}
	m.ttftP50.WithLabelValues(w.mode).Set(h.Percentile(50).Seconds())
	m.ttftP95.WithLabelValues(w.mode).Set(h.Percentile(95).Seconds())
}

// loadLabels are the labels, in the load metrics, of the data of a
// window of kind at level in mode.
func loadLabels(kind Kind, mode string, level int) loadmetrics.Labels {
	phase := loadmetrics.PhaseMeasure
	if kind == KindWarmup {
		phase = loadmetrics.PhaseWarmup
	}
	return loadmetrics.Labels{Mode: mode, Level: level, Phase: phase}
}
