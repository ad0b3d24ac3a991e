package servermetrics

import (
	"errors"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

// snap builds a snapshot of fixture pages, one endpoint per page.
func snap(t *testing.T, at time.Time, files map[string]string) Snapshot {
	t.Helper()
	s := Snapshot{At: at}
	for _, ep := range slices.Sorted(maps.Keys(files)) {
		s.Endpoints = append(s.Endpoints, EndpointPage{Endpoint: ep, Page: parseFixture(t, files[ep])})
	}
	return s
}

// want checks a measured figure against its exact value.
func want(t *testing.T, name string, got *float64, v float64) {
	t.Helper()
	if got == nil {
		t.Errorf("%s: not measured, want %v", name, v)
		return
	}
	if math.Abs(*got-v) > 1e-9*math.Max(1, math.Abs(v)) {
		t.Errorf("%s = %v, want %v", name, *got, v)
	}
}

func wantNil(t *testing.T, name string, got *float64) {
	t.Helper()
	if got != nil {
		t.Errorf("%s = %v, want not measured", name, *got)
	}
}

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func TestDiffVLLMv1(t *testing.T) {
	w := Diff(snap(t, t0, map[string]string{"a": "vllm_a_start.txt"}), snap(t, t0.Add(time.Minute), map[string]string{"a": "vllm_a_end.txt"}))
	f := w.Total
	want(t, "server_hit_rate", f.HitRate, 3000.0/4000)
	want(t, "spec_accept_rate", f.SpecAcceptRate, 210.0/300)
	want(t, "preemptions", f.Preemptions, 2)
	want(t, "prompt_tokens", f.PromptTokens, 4000)
	want(t, "generation_tokens", f.GenerationTokens, 600)
	want(t, "requests", f.Requests, 7)
	want(t, "queue_mean", f.QueueMean, 1) // samples 2 and 0
	want(t, "queue_max", f.QueueMax, 2)
	want(t, "running_mean", f.RunningMean, 5)
	want(t, "running_max", f.RunningMax, 6)
	want(t, "kv_usage_max", f.KVUsageMax, 0.45)
	// TTFT: 4 in (0.1,0.25], 3 in (0.25,0.5]; sum 1.75.
	if f.TTFT.Count != 7 {
		t.Errorf("ttft count %v", f.TTFT.Count)
	}
	want(t, "ttft mean", f.TTFT.Mean, 0.25)
	want(t, "ttft p50", f.TTFT.P50, 0.1+0.15*3.5/4)
	want(t, "ttft p95", f.TTFT.P95, 0.25+0.25*(6.65-4)/3)
	// ITL: 400 in (0.01,0.025], 120 in (0.025,0.05], 70 in (0.05,0.075], 10 in (0.075,0.1].
	want(t, "itl mean", f.ITL.Mean, 0.025)
	want(t, "itl p50", f.ITL.P50, 0.01+0.015*300/400)
	want(t, "itl p95", f.ITL.P95, 0.05+0.025*(570-520)/70)
	wantSources := map[string]string{
		"server_hit_rate":  "vllm:prefix_cache_hits_total / vllm:prefix_cache_queries_total",
		"spec_accept_rate": "vllm:spec_decode_num_accepted_tokens_total / vllm:spec_decode_num_draft_tokens_total",
		"server_itl":       "vllm:inter_token_latency_seconds",
		"kv_usage":         "vllm:kv_cache_usage_perc",
		"queue":            "vllm:num_requests_waiting",
	}
	for k, v := range wantSources {
		if f.Sources[k] != v {
			t.Errorf("source of %s = %q, want %q", k, f.Sources[k], v)
		}
	}
	if w.Reset || len(w.Missing()) != 0 {
		t.Errorf("reset %v missing %v", w.Reset, w.Missing())
	}
	// One endpoint: its figures are the total's.
	if e := w.Endpoints[0]; e.Endpoint != "a" || *e.HitRate != *f.HitRate || *e.Requests != 7 {
		t.Errorf("endpoint %+v", e)
	}
	if c := w.Workers["a engine=0"]; c.Requests != 7 || c.PromptTokens != 4000 || len(w.Workers) != 1 {
		t.Errorf("workers %+v", w.Workers)
	}
	want(t, "worker_skew", w.WorkerSkew(), 1)
}

func TestDiffVLLMDataParallelSumsEngines(t *testing.T) {
	w := Diff(snap(t, t0, map[string]string{"b": "vllm_b_start.txt"}), snap(t, t0.Add(time.Minute), map[string]string{"b": "vllm_b_end.txt"}))
	f := w.Total
	want(t, "server_hit_rate", f.HitRate, 800.0/3000)
	want(t, "preemptions", f.Preemptions, 1)
	want(t, "prompt_tokens", f.PromptTokens, 3000)
	want(t, "requests", f.Requests, 6)
	want(t, "queue_mean", f.QueueMean, 3) // 0+1 then 4+1
	want(t, "queue_max", f.QueueMax, 5)
	want(t, "running_mean", f.RunningMean, 5.5)
	want(t, "kv_usage_max", f.KVUsageMax, 0.9) // the fuller engine, not a sum
	wantNil(t, "spec_accept_rate", f.SpecAcceptRate)
	// Engine 0: 4 in (0.06,0.08]; engine 1: 2 in (0.25,0.5].
	want(t, "ttft mean", f.TTFT.Mean, 1.0/6)
	want(t, "ttft p50", f.TTFT.P50, 0.06+0.02*3/4)
	want(t, "ttft p95", f.TTFT.P95, 0.25+0.25*(5.7-4)/2)
	if w.Workers["b engine=0"].Requests != 4 || w.Workers["b engine=1"].Requests != 2 || w.Workers["b engine=1"].PromptTokens != 1000 {
		t.Errorf("workers %+v", w.Workers)
	}
	want(t, "request skew", w.Balance.RequestSkew, 4.0/3)
	want(t, "request cv", w.Balance.RequestCV, 1.0/3)
	want(t, "token skew", w.Balance.TokenSkew, 2000.0/1500)
}

func TestDiffCounterReset(t *testing.T) {
	w := Diff(snap(t, t0, map[string]string{"b": "vllm_b_start.txt"}), snap(t, t0.Add(time.Minute), map[string]string{"b": "vllm_b_reset.txt"}))
	if !w.Reset || !w.Endpoints[0].Reset {
		t.Fatal("window not marked reset")
	}
	f := w.Total
	// Engine 0 grew as before; engine 1 restarted and counts from zero.
	want(t, "server_hit_rate", f.HitRate, (500.0+30)/(2000+300))
	want(t, "prompt_tokens", f.PromptTokens, 2000+300)
	want(t, "generation_tokens", f.GenerationTokens, 400+50)
	want(t, "requests", f.Requests, 4+1)
	want(t, "preemptions", f.Preemptions, 0)
	if f.TTFT.Count != 4+1 {
		t.Errorf("ttft count %v, want 5", f.TTFT.Count)
	}
	want(t, "ttft mean", f.TTFT.Mean, (0.28+0.4)/5)
	if w.Workers["b engine=1"].Requests != 1 {
		t.Errorf("restarted engine requests %v", w.Workers["b engine=1"])
	}
}

func TestDiffVLLMv0MissingMetrics(t *testing.T) {
	w := Diff(snap(t, t0, map[string]string{"old": "vllm_v0_start.txt"}), snap(t, t0.Add(time.Minute), map[string]string{"old": "vllm_v0_end.txt"}))
	f := w.Total
	// No prefix-cache counters: the hit-rate gauge's mean stands in.
	want(t, "server_hit_rate", f.HitRate, 0.6)
	if f.Sources["server_hit_rate"] != "vllm:gpu_prefix_cache_hit_rate (gauge mean)" {
		t.Errorf("hit source %q", f.Sources["server_hit_rate"])
	}
	want(t, "kv_usage_max", f.KVUsageMax, 0.8)
	want(t, "preemptions", f.Preemptions, 0) // exported and zero: measured
	wantNil(t, "spec_accept_rate", f.SpecAcceptRate)
	want(t, "itl mean", f.ITL.Mean, 3.2/80)
	if f.Sources["server_itl"] != "vllm:time_per_output_token_seconds" || f.Sources["kv_usage"] != "vllm:gpu_cache_usage_perc" {
		t.Errorf("sources %v", f.Sources)
	}
}

func TestDiffSGLang(t *testing.T) {
	w := Diff(snap(t, t0, map[string]string{"s": "sglang_start.txt"}), snap(t, t0.Add(time.Minute), map[string]string{"s": "sglang_end.txt"}))
	f := w.Total
	want(t, "server_hit_rate", f.HitRate, 3000.0/6000) // counters, not the 0.3/0.35 gauge
	want(t, "prompt_tokens", f.PromptTokens, 6000)
	want(t, "generation_tokens", f.GenerationTokens, 1000)
	want(t, "requests", f.Requests, 10)
	want(t, "queue_mean", f.QueueMean, 4)
	want(t, "queue_max", f.QueueMax, 5)
	want(t, "running_max", f.RunningMax, 10)
	want(t, "kv_usage_max", f.KVUsageMax, 0.6)
	wantNil(t, "preemptions", f.Preemptions)
	want(t, "ttft mean", f.TTFT.Mean, 0.3)
	want(t, "ttft p50", f.TTFT.P50, 0.2+0.2*5/10)
	want(t, "itl mean", f.ITL.Mean, 12.5/1000)
	want(t, "itl p50", f.ITL.P50, 0.010+0.005*500/1000)
}

func TestDiffDynamoFrontendAndWorker(t *testing.T) {
	w := Diff(
		snap(t, t0, map[string]string{"fe": "dynamo_frontend_start.txt", "wk": "dynamo_worker_start.txt"}),
		snap(t, t0.Add(time.Minute), map[string]string{"fe": "dynamo_frontend_end.txt", "wk": "dynamo_worker_end.txt"}))
	f := w.Total
	// Token-weighted from the frontend's histograms; the worker's gauge is
	// not read when counters exist.
	want(t, "server_hit_rate", f.HitRate, 21000.0/30000)
	want(t, "prompt_tokens", f.PromptTokens, 30000)
	want(t, "generation_tokens", f.GenerationTokens, 6000)
	// Requests are counted at the workers (15), not again at the frontend.
	want(t, "requests", f.Requests, 15)
	want(t, "running_mean", f.RunningMean, 8) // the worker's 9 and 7
	want(t, "queue_mean", f.QueueMean, 3)     // the frontend's 5 and 1
	want(t, "kv_usage_max", f.KVUsageMax, 0.55)
	want(t, "ttft mean", f.TTFT.Mean, 4.5/30)
	want(t, "ttft p50", f.TTFT.P50, 0.1+0.12*15/30)
	want(t, "itl mean", f.ITL.Mean, 90.0/5970)
	var fe EndpointWindow
	for _, e := range w.Endpoints {
		if e.Endpoint == "fe" {
			fe = e
		}
	}
	want(t, "frontend requests (status=success only)", fe.Requests, 30)
	want(t, "frontend running", fe.RunningMean, 19)
	if len(w.Workers) != 1 || w.Workers["wk"].Requests != 15 {
		t.Errorf("workers %+v", w.Workers)
	}
}

func TestDiffMissingEndpoint(t *testing.T) {
	start := snap(t, t0, map[string]string{"a": "vllm_a_start.txt", "b": "vllm_b_start.txt"})
	end := snap(t, t0.Add(time.Minute), map[string]string{"a": "vllm_a_end.txt", "b": "vllm_b_end.txt"})
	end.Endpoints[1] = EndpointPage{Endpoint: "b", Err: errors.New("fetch metrics: status 503 Service Unavailable")}
	w := Diff(start, end)
	if got := w.Missing()["b"]; got != "window end: fetch metrics: status 503 Service Unavailable" {
		t.Errorf("missing %q", got)
	}
	b := w.Endpoints[1]
	wantNil(t, "b hit rate", b.HitRate)
	wantNil(t, "b requests", b.Requests)
	want(t, "b queue_max (start sample only)", b.QueueMax, 1)
	// The total holds what was measured: endpoint a alone.
	want(t, "total hit rate", w.Total.HitRate, 0.75)
	want(t, "total requests", w.Total.Requests, 7)
}

func TestDiffNoTrafficIsNotMeasured(t *testing.T) {
	s := snap(t, t0, map[string]string{"a": "vllm_a_end.txt"})
	w := Diff(s, s)
	wantNil(t, "hit rate with nothing queried", w.Total.HitRate)
	wantNil(t, "spec with nothing drafted", w.Total.SpecAcceptRate)
	want(t, "requests", w.Total.Requests, 0)
	wantNil(t, "ttft mean", w.Total.TTFT.Mean)
	wantNil(t, "worker skew", w.WorkerSkew())
}

func TestHistQuantile(t *testing.T) {
	h := hist{buckets: []bucket{{0, 1}, {1, 1}, {2, 3}}, count: 4}
	tests := []struct {
		q, want float64
	}{
		{0.1, 0},   // in the le=0 bucket
		{0.5, 1.5}, // rank 2 in (1,2]
		{0.75, 2},
		{1, 2}, // rank 4 in +Inf: highest finite bound
	}
	for _, tt := range tests {
		if got, ok := h.quantile(tt.q); !ok || math.Abs(got-tt.want) > 1e-12 {
			t.Errorf("quantile(%v) = %v %v, want %v", tt.q, got, ok, tt.want)
		}
	}
	if _, ok := (hist{}).quantile(0.5); ok {
		t.Error("quantile of an empty histogram")
	}
	if _, ok := h.add(hist{buckets: []bucket{{0.5, 1}}, count: 1}); ok {
		t.Error("added histograms of different bounds")
	}
}

func TestWindowJSONLeavesUnmeasuredOut(t *testing.T) {
	s := snap(t, t0, map[string]string{"a": "vllm_v0_end.txt"})
	f := Diff(s, s).Total
	if f.SpecAcceptRate != nil || f.HitRate == nil {
		t.Fatal("fixture assumption")
	}
	b := mustJSON(t, f)
	if strings.Contains(b, "spec_accept_rate") || !strings.Contains(b, `"server_hit_rate":0.7`) {
		t.Errorf("json %s", b)
	}
}
