package runner

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are a sweep's progress for Prometheus: the level being measured
// and the points done. Its methods are safe for concurrent use.
type Metrics struct {
	level  prometheus.Gauge
	points prometheus.Counter
}

// NewMetrics creates a sweep's metrics and registers them with reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		level: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "fleetbench_sweep_level",
			Help: "Concurrency level of the sweep point being measured (0 between levels).",
		}),
		points: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "fleetbench_sweep_points_done_total",
			Help: "Sweep points measured by this process (a resumed sweep's earlier points excluded).",
		}),
	}
	if reg != nil {
		if err := errors.Join(reg.Register(m.level), reg.Register(m.points)); err != nil {
			return nil, fmt.Errorf("register sweep metrics: %w", err)
		}
	}
	return m, nil
}

// SetLevel records the level about to be measured (0: none).
func (m *Metrics) SetLevel(level int) { m.level.Set(float64(level)) }

// PointDone counts a measured point.
func (m *Metrics) PointDone() { m.points.Inc() }
