package coordinator_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/fleetbench/fleetbench/agent"
	"github.com/fleetbench/fleetbench/coordinator"
	"github.com/fleetbench/fleetbench/pkg/record"
)

// TestMetricsOfARun runs two agents through one stage with a registry and
// checks what the coordinator exported: every report applied, no
// duplicates or losses, the windows closed by watermarks, no agent left
// connected after the run, and the measured window's TTFT under its mode.
func TestMetricsOfARun(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	res, err := fleet{
		agents:  2,
		builder: scriptedBuilder(2, 0),
		opts:    []coordinator.Option{coordinator.WithRegisterer(reg)},
		// Each agent's health goes to the same registry under its id.
		agentOpts: func(i int) []agent.Option {
			return []agent.Option{agent.WithRegisterer(prometheus.WrapRegistererWith(prometheus.Labels{"agent": fmt.Sprintf("agent-%d", i)}, reg))}
		},
		cfg: coordinator.Config{Stages: []coordinator.Stage{{
			Level: 4, Mode: "kv", Duration: 5 * time.Minute, Conversations: 40,
		}}},
	}.run(t, ctx)
	if err != nil {
		t.Fatal(err)
	}
	var reports int64
	for _, w := range res.Windows {
		for _, c := range w.Coverage {
			reports += int64(c.Reports)
		}
	}
	if got := gatheredSum(t, reg, "fleetbench_coordinator_reports_applied_total"); got < 1 || int64(got) != reports {
		t.Errorf("reports applied %v, want the %d reports the windows saw", got, reports)
	}
	const want = `
# HELP fleetbench_coordinator_agents_lost_total Agents declared lost (heartbeat timeout, restart, or a lost pod reported by the caller).
# TYPE fleetbench_coordinator_agents_lost_total counter
fleetbench_coordinator_agents_lost_total 0
# HELP fleetbench_coordinator_reports_duplicate_total Interval reports received again after they were applied (resends after a reconnect), acked and ignored.
# TYPE fleetbench_coordinator_reports_duplicate_total counter
fleetbench_coordinator_reports_duplicate_total 0
# HELP fleetbench_coordinator_late_requests_total Requests reported for a window after it closed (kept apart as late samples).
# TYPE fleetbench_coordinator_late_requests_total counter
fleetbench_coordinator_late_requests_total 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "fleetbench_coordinator_agents_lost_total",
		"fleetbench_coordinator_reports_duplicate_total", "fleetbench_coordinator_late_requests_total"); err != nil {
		t.Error(err)
	}
	closed, err := testutil.GatherAndCount(reg, "fleetbench_coordinator_windows_closed_total")
	if err != nil || closed < 1 {
		t.Errorf("windows_closed_total series %d, %v; want at least one", closed, err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var p50 float64
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			switch mf.GetName() {
			case "fleetbench_coordinator_window_ttft_p50_seconds":
				if m.GetLabel()[0].GetValue() == "kv" {
					p50 = m.GetGauge().GetValue()
				}
			case "fleetbench_coordinator_agents_connected":
				// The run is over: the gauge holds the last live count.
				if v := m.GetGauge().GetValue(); v < 0 || v > 2 {
					t.Errorf("agents_connected %v, want 0..2", v)
				}
			}
		}
	}
	if p50 <= 0 {
		t.Errorf("TTFT p50 of mode kv = %v, want > 0", p50)
	}
	if windows := gatheredSum(t, reg, "fleetbench_coordinator_windows_closed_total"); int(windows) != len(res.Windows) {
		t.Errorf("windows closed %v, want the run's %d windows", windows, len(res.Windows))
	}
	// The fleet-wide load: the measured phase's counters and histograms
	// hold exactly what the stage's merged result holds.
	measured := res.Stages[0].Measured
	var requests, ttftCount float64
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["phase"] != "measure" || labels["mode"] != "kv" || labels["level"] != "4" {
				continue
			}
			switch mf.GetName() {
			case "fleetbench_requests_total":
				requests += m.GetCounter().GetValue()
			case "fleetbench_ttft_seconds":
				ttftCount += float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	if want := measured.Counters.Requests + measured.Counters.Failed; requests != float64(want) || want == 0 {
		t.Errorf("fleetbench_requests_total{phase=measure} = %v, want the stage's %d", requests, want)
	}
	if want := measured.Hist[record.TTFT].Count(); ttftCount != float64(want) {
		t.Errorf("fleetbench_ttft_seconds{phase=measure} count %v, want the stage's %d", ttftCount, want)
	}
	if n, err := testutil.GatherAndCount(reg, "fleetbench_stage_info"); err != nil || n != 0 {
		t.Errorf("stage info series after the run: %d, %v", n, err)
	}
	// The agents' own health: every applied report was sent, the lag
	// histogram counts every request of both, and neither is connected
	// once the run is over.
	if sent := gatheredSum(t, reg, "fleetbench_agent_reports_sent_total"); sent < float64(reports) {
		t.Errorf("agents sent %v reports, the coordinator applied %d", sent, reports)
	}
	if n, err := testutil.GatherAndCount(reg, "fleetbench_agent_reports_sent_total"); err != nil || n != 2 {
		t.Errorf("reports sent series %d (%v), want one per agent", n, err)
	}
	if c := gatheredSum(t, reg, "fleetbench_agent_connected"); c != 0 {
		t.Errorf("agents connected after the run: %v", c)
	}
	var lagCount uint64
	for _, mf := range mfs {
		if mf.GetName() == "fleetbench_agent_schedule_lag_seconds" {
			for _, m := range mf.GetMetric() {
				lagCount += m.GetHistogram().GetSampleCount()
			}
		}
	}
	if lagCount == 0 {
		t.Error("the agents' schedule lag histograms are empty")
	}
}

// gatheredSum is the sum of the values of every series of name in reg.
func gatheredSum(t *testing.T, reg prometheus.Gatherer, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return sum
}
