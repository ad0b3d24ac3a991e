package loadmetrics

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/fleetbench/fleetbench/pkg/client"
	"github.com/fleetbench/fleetbench/pkg/hdr"
	"github.com/fleetbench/fleetbench/pkg/record"
)

// window returns a window with ok successful requests of 100 prompt tokens
// (40 cached) and 10 output tokens, and one failure of each class given.
func window(ok int, failed ...client.Class) *record.Window {
	w := record.NewWindow(1, hdr.Default)
	t0 := time.Unix(1000, 0)
	for i := range ok {
		w.Add(&record.Sample{Turn: 1, Intended: t0, Result: &client.Result{
			Start: t0.Add(time.Millisecond), TTFT: 80 * time.Millisecond, TTFB: 10 * time.Millisecond,
			ITL: []time.Duration{20 * time.Millisecond, 30 * time.Millisecond}, E2E: time.Duration(300+i) * time.Millisecond,
			PromptTokens: 100, CachedTokens: 40, OutputTokens: 10, UsageReported: true,
		}})
	}
	for _, c := range failed {
		w.Add(&record.Sample{Turn: 1, Intended: t0, Result: &client.Result{Start: t0, Class: c, Err: errors.New("x")}})
	}
	w.Counters.ConversationsStarted, w.Counters.ConversationsCompleted = 3, 1
	return w
}

// TestLoadCountsAWindow: a window's requests, by outcome and class,
// tokens and conversations land under its labels, twice for two adds; the
// latency histograms count the successful requests, the lag every one.
func TestLoadCountsAWindow(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	l, err := NewLoad(reg)
	if err != nil {
		t.Fatal(err)
	}
	lb := Labels{Mode: "kv", Level: 40, Phase: PhaseMeasure}
	l.Touch(Labels{Mode: "kv", Level: 40, Phase: PhaseWarmup})
	l.Add(window(4, client.ClassTimeout, client.ClassHTTP5xx), lb)
	l.Add(window(1, client.ClassTimeout), lb)
	const want = `
# HELP fleetbench_requests_total Requests (turns) ended, by the window they were sent in, outcome (ok or error) and error class (empty for ok).
# TYPE fleetbench_requests_total counter
fleetbench_requests_total{class="",level="40",mode="kv",outcome="ok",phase="measure"} 5
fleetbench_requests_total{class="",level="40",mode="kv",outcome="ok",phase="warmup"} 0
fleetbench_requests_total{class="http_5xx",level="40",mode="kv",outcome="error",phase="measure"} 1
fleetbench_requests_total{class="timeout",level="40",mode="kv",outcome="error",phase="measure"} 2
# HELP fleetbench_cached_tokens_total Cached prompt tokens of the successful requests (usage.prompt_tokens_details.cached_tokens).
# TYPE fleetbench_cached_tokens_total counter
fleetbench_cached_tokens_total{level="40",mode="kv",phase="measure"} 200
fleetbench_cached_tokens_total{level="40",mode="kv",phase="warmup"} 0
# HELP fleetbench_conversations_started_total Conversations started.
# TYPE fleetbench_conversations_started_total counter
fleetbench_conversations_started_total{level="40",mode="kv",phase="measure"} 6
fleetbench_conversations_started_total{level="40",mode="kv",phase="warmup"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "fleetbench_requests_total",
		"fleetbench_cached_tokens_total", "fleetbench_conversations_started_total"); err != nil {
		t.Error(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]uint64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if h := m.GetHistogram(); h != nil && m.GetLabel()[2].GetValue() == PhaseMeasure {
				counts[mf.GetName()] = h.GetSampleCount()
			}
		}
	}
	want2 := map[string]uint64{"fleetbench_ttft_seconds": 5, "fleetbench_itl_seconds": 10, "fleetbench_tpot_seconds": 5,
		"fleetbench_e2e_seconds": 5, "fleetbench_schedule_lag_seconds": 8}
	for name, n := range want2 {
		if counts[name] != n {
			t.Errorf("%s count %d, want %d", name, counts[name], n)
		}
	}
}

// TestLoadStage: the stage info follows the level being run, one series
// at a time, and is gone between levels, with the target and in-flight
// gauges at 0.
func TestLoadStage(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	l, err := NewLoad(reg)
	if err != nil {
		t.Fatal(err)
	}
	l.SetStage(Labels{Mode: "kv", Level: 40, Phase: PhaseWarmup}, 40)
	l.SetStage(Labels{Mode: "kv", Level: 40, Phase: PhaseMeasure}, 40)
	l.SetTarget(80)
	l.SetInFlight(79)
	const want = `
# HELP fleetbench_stage_info 1 for the level being run, with its mode, level and phase as labels; no series between levels.
# TYPE fleetbench_stage_info gauge
fleetbench_stage_info{level="40",mode="kv",phase="measure"} 1
# HELP fleetbench_target_concurrency Sessions the running level asks for (0 between levels and in the open loop).
# TYPE fleetbench_target_concurrency gauge
fleetbench_target_concurrency 80
# HELP fleetbench_sessions_in_flight Sessions (conversations) running: the engine's own count, or the sum of the agents' last heartbeats.
# TYPE fleetbench_sessions_in_flight gauge
fleetbench_sessions_in_flight 79
`
	names := []string{"fleetbench_stage_info", "fleetbench_target_concurrency", "fleetbench_sessions_in_flight"}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
	l.ClearStage()
	if n, err := testutil.GatherAndCount(reg, "fleetbench_stage_info"); err != nil || n != 0 {
		t.Errorf("stage info series after the level: %d, %v", n, err)
	}
	if v := testutil.ToFloat64(l.target) + testutil.ToFloat64(l.inFlight); v != 0 {
		t.Errorf("target + in flight after the level = %v, want 0", v)
	}
}
