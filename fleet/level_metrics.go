package fleet

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/fleetbench/fleetbench/pkg/load"
	"github.com/fleetbench/fleetbench/pkg/loadmetrics"
	"github.com/fleetbench/fleetbench/pkg/record"
)

// MetricsInterval is how often a single-engine run drains its recorder
// into its Prometheus metrics (with RunConfig.Registerer).
const MetricsInterval = time.Second

// meter holds a single-engine run's windows: it drains the recorder into
// the windows accumulated so far and, with metrics, adds every drained
// interval to them, so a scrape sees the run as it goes, as the
// coordinator's metrics see a fleet's reports. The result and the early
// judge read the accumulated windows. Its methods are safe for concurrent
// use.
type meter struct {
	rec    *record.Recorder
	load   loadmetrics.Sink // nil without metrics or a live view
	logger hclog.Logger
	labels func(window uint32) loadmetrics.Labels

	mu  sync.Mutex
	acc map[uint32]*record.Window
}

func newMeter(rec *record.Recorder, ld loadmetrics.Sink, logger hclog.Logger, mode string, level int) *meter {
	return &meter{
		rec: rec, load: ld, logger: logger, acc: make(map[uint32]*record.Window),
		labels: func(w uint32) loadmetrics.Labels {
			if w == windowWarmUp {
				return loadmetrics.Labels{Mode: mode, Level: level, Phase: loadmetrics.PhaseWarmup}
			}
			return loadmetrics.Labels{Mode: mode, Level: level, Phase: loadmetrics.PhaseMeasure}
		},
	}
}

// drain moves what the recorder holds into the accumulated windows and
// the metrics; m.mu is held.
func (m *meter) drain() error {
	for _, w := range m.rec.Drain() {
		if m.load != nil {
			m.load.Add(w, m.labels(w.ID))
		}
		a := m.acc[w.ID]
		if a == nil {
			m.acc[w.ID] = w
			continue
		}
		if err := a.Merge(w); err != nil {
			return fmt.Errorf("merge window %d: %w", w.ID, err)
		}
	}
	return nil
}

// peek returns a copy of window id as recorded so far, nil if it has none.
func (m *meter) peek(id uint32) *record.Window {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.drain(); err != nil {
		m.logger.Error("drain recorder", "error", err)
	}
	if w := m.acc[id]; w != nil {
		return w.Clone()
	}
	return nil
}

// measured returns the measurement window once the load has stopped, nil
// if it has none.
func (m *meter) measured() (*record.Window, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.drain(); err != nil {
		return nil, err
	}
	return m.acc[windowMeasure], nil
}

// run updates the metrics every MetricsInterval until ctx ends, from the
// recorder and eng's sessions and target (a live change included), and
// clears the stage when it returns (the target is 0 in the open loop, open). It does nothing without metrics.
func (m *meter) run(ctx context.Context, eng *load.Engine, open, warmup bool) {
	if m.load == nil {
		return
	}
	if warmup {
		m.load.Touch(m.labels(windowWarmUp))
	}
	m.load.Touch(m.labels(windowMeasure))
	update := func() {
		m.mu.Lock()
		if err := m.drain(); err != nil {
			m.logger.Error("drain recorder", "error", err)
		}
		m.mu.Unlock()
		st := eng.Stats()
		target := st.Target
		if open {
			target = 0
		}
		m.load.SetStage(m.labels(eng.Window()), target)
		m.load.SetInFlight(int(st.Sessions))
	}
	update()
	t := time.NewTicker(MetricsInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			m.load.ClearStage()
			return
		case <-t.C:
			update()
		}
	}
}
