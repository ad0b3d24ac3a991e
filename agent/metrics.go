package agent

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/fleetbench/fleetbench/pkg/loadmetrics"
	"github.com/fleetbench/fleetbench/pkg/record"
)

// metrics are the agent's own health for Prometheus: its link, its
// reports, its streams and its schedule lag. The load it measures is the
// coordinator's to export, merged over the fleet. They are updated only
// from the agent's loop; the collectors are safe for concurrent scrapes.
type metrics struct {
	connected prometheus.Gauge
	reports   prometheus.Counter
	pending   prometheus.Gauge
	streams   prometheus.Gauge
	sessions  prometheus.Gauge
	lag       *loadmetrics.Histogram
}

// newMetrics creates the agent's metrics and registers them with reg
// (nil: created, not exported).
func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	lag, err := loadmetrics.NewHistogram(loadmetrics.HistogramOpts{
		Name:    "fleetbench_agent_schedule_lag_seconds",
		Help:    "Schedule lag of this agent's requests (actual send time - intended send time), every phase: how far it falls behind.",
		Buckets: loadmetrics.LagBuckets,
	})
	if err != nil {
		return nil, err
	}
	m := &metrics{
		connected: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "fleetbench_agent_connected",
			Help: "1 while the agent has a stream to its coordinator.",
		}),
		reports: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fleetbench_agent_reports_sent_total",
			Help: "Interval reports sent to the coordinator, resends after a reconnect included.",
		}),
		pending: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "fleetbench_agent_reports_pending",
			Help: "Interval reports the coordinator has not acknowledged yet (kept for a resend).",
		}),
		streams: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "fleetbench_agent_streams_in_flight",
			Help: "Requests this agent is streaming.",
		}),
		sessions: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "fleetbench_agent_sessions",
			Help: "Sessions (conversations) this agent runs.",
		}),
		lag: lag,
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.connected, m.reports, m.pending, m.streams, m.sessions, m.lag} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// drained records a drained interval's schedule lag.
func (m *metrics) drained(w *record.Window) { m.lag.Add(w.Hist[record.Lag]) }
