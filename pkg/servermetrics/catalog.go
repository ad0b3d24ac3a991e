package servermetrics

import (
	"slices"
	"strings"
)

// The metric names fleetbench reads, by figure, in order of preference: an
// endpoint's figure comes from the first source present on its page.
// docs/server-metrics.md lists every name with the version that exports it
// and where it was checked; keep the two in step.

// level says where in the stack a source measures. Engines (vLLM, SGLang,
// a Dynamo worker) and a frontend in front of them (Dynamo's) count the
// same requests, so a window's total adds up one level only: the engines'
// when any endpoint exports them, else the frontends'.
type level int

const (
	levelEngine level = iota
	levelFrontend
)

func (l level) String() string {
	if l == levelFrontend {
		return "frontend"
	}
	return "engine"
}

// source is one metric a figure can be read from.
type source struct {
	name  string
	level level
	// match keeps only the series carrying these label values.
	match map[string]string
	// histSum reads a histogram's _sum as a counter (Dynamo's frontend
	// counts tokens in histograms only).
	histSum bool
}

// ratioSource is a figure that is delta(num) / delta(den).
type ratioSource struct {
	num, den source
}

// combine says how the series of one gauge on one page combine: queue
// lengths add up over engines, a usage fraction does not.
type combine int

const (
	combineSum combine = iota
	combineMax
	combineMean
)

// gaugeSource is a gauge sampled over the window.
type gaugeSource struct {
	source
	combine combine
}

func engine(name string) source   { return source{name: name, level: levelEngine} }
func frontend(name string) source { return source{name: name, level: levelFrontend} }

var (
	// Token-weighted prefix-cache hit rate from counters.
	hitRatioSources = []ratioSource{
		{num: engine("vllm:prefix_cache_hits_total"), den: engine("vllm:prefix_cache_queries_total")},
		{num: engine("vllm:gpu_prefix_cache_hits_total"), den: engine("vllm:gpu_prefix_cache_queries_total")},
		{num: engine("sglang:cached_tokens_total"), den: engine("sglang:prompt_tokens_total")},
		{
			num: source{name: "dynamo_frontend_cached_tokens", level: levelFrontend, histSum: true},
			den: source{name: "dynamo_frontend_input_sequence_tokens", level: levelFrontend, histSum: true},
		},
	}
	// Hit-rate gauges, read only where no counters exist.
	hitGaugeSources = []gaugeSource{
		{engine("vllm:gpu_prefix_cache_hit_rate"), combineMean},
		{engine("sglang:cache_hit_rate"), combineMean},
		{engine("dynamo_component_kvstats_gpu_prefix_cache_hit_rate"), combineMean},
	}
	queueSources = []gaugeSource{
		{engine("vllm:num_requests_waiting"), combineSum},
		{engine("sglang:num_queue_reqs"), combineSum},
		{frontend("dynamo_frontend_queued_requests"), combineSum},
	}
	runningSources = []gaugeSource{
		{engine("vllm:num_requests_running"), combineSum},
		{engine("sglang:num_running_reqs"), combineSum},
		{engine("dynamo_component_inflight_requests"), combineSum},
		{frontend("dynamo_frontend_inflight_requests"), combineSum},
	}
	kvUsageSources = []gaugeSource{
		{engine("vllm:kv_cache_usage_perc"), combineMax},
		{engine("vllm:gpu_cache_usage_perc"), combineMax},
		{engine("sglang:token_usage"), combineMax},
		{engine("dynamo_component_kvstats_gpu_cache_usage_percent"), combineMax},
	}
	preemptionSources = []source{
		engine("vllm:num_preemptions_total"),
	}
	promptTokenSources = []source{
		engine("vllm:prompt_tokens_total"),
		engine("sglang:prompt_tokens_total"),
		{name: "dynamo_frontend_input_sequence_tokens", level: levelFrontend, histSum: true},
	}
	generationTokenSources = []source{
		engine("vllm:generation_tokens_total"),
		engine("sglang:generation_tokens_total"),
		frontend("dynamo_frontend_output_tokens_total"),
	}
	requestSources = []source{
		engine("vllm:request_success_total"),
		engine("sglang:num_requests_total"),
		engine("dynamo_component_requests_total"),
		{name: "dynamo_frontend_requests_total", level: levelFrontend, match: map[string]string{"status": "success"}},
	}
	specRatioSources = []ratioSource{
		{num: engine("vllm:spec_decode_num_accepted_tokens_total"), den: engine("vllm:spec_decode_num_draft_tokens_total")},
	}
	ttftSources = []source{
		engine("vllm:time_to_first_token_seconds"),
		engine("sglang:time_to_first_token_seconds"),
		frontend("dynamo_frontend_time_to_first_token_seconds"),
	}
	// queueTimeSources: how long requests waited before they were first
	// scheduled (vLLM V1's WAITING phase).
	queueTimeSources = []source{
		engine("vllm:request_queue_time_seconds"),
	}
	itlSources = []source{
		engine("vllm:inter_token_latency_seconds"),
		engine("vllm:time_per_output_token_seconds"),
		engine("sglang:inter_token_latency_seconds"),
		frontend("dynamo_frontend_inter_token_latency_seconds"),
	}
)

// workerLabels name the labels that tell one engine from another on a
// page: the simulator's worker, vLLM's engine (data-parallel rank),
// Dynamo's dp_rank and worker_id, a pod label added by a relabelling
// aggregate. Workers are told apart by endpoint and these labels.
var workerLabels = []string{"worker", "pod", "engine", "dp_rank", "worker_id"}

// catalogue is the set of every name read; Parse keeps only these.
var catalogue = func() map[string]bool {
	m := map[string]bool{}
	for _, r := range slices.Concat(hitRatioSources, specRatioSources) {
		m[r.num.name], m[r.den.name] = true, true
	}
	for _, gs := range [][]gaugeSource{hitGaugeSources, queueSources, runningSources, kvUsageSources} {
		for _, g := range gs {
			m[g.name] = true
		}
	}
	for _, ss := range [][]source{preemptionSources, promptTokenSources, generationTokenSources, requestSources, ttftSources, itlSources, queueTimeSources} {
		for _, s := range ss {
			m[s.name] = true
		}
	}
	return m
}()

// CatalogNames returns every metric name the package reads, sorted. It is
// what docs/server-metrics.md documents; a test keeps them in step.
func CatalogNames() []string {
	names := make([]string, 0, len(catalogue))
	for n := range catalogue {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// counterAlias maps the name of each catalogued counter without its
// "_total" suffix to the catalogued name: both spellings are read.
var counterAlias = func() map[string]string {
	m := map[string]string{}
	for n := range catalogue {
		if bare, ok := strings.CutSuffix(n, "_total"); ok && !catalogue[bare] {
			m[bare] = n
		}
	}
	return m
}()
