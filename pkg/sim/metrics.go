package sim

import (
	"fmt"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// Metric names and types follow vLLM V1 (vllm/v1/metrics/loggers.py) for the
// workers and Dynamo's frontend (dynamo_frontend_*) for the router, so
// dashboards and scrapers written for the real stack work unchanged. vLLM
// labels per engine with model_name and engine; the simulator adds worker,
// the name sent in X-Fleetbench-Worker. Counters and histograms observe
// wall time, which is what clients measure (simulated time / TimeScale),
// except fleetbench_sim_time_to_first_token_simulated_seconds, which adds up
// the engine's simulated step times and so is what the cost model implies
// however loaded the host is.
var (
	vllmTTFTBuckets = []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75,
		1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0}
	dynamoTTFTBuckets = []float64{0, 0.0022, 0.0047, 0.01, 0.022, 0.047, 0.1, 0.22, 0.47, 1.0, 2.2,
		4.7, 10, 22, 48, 100, 220, 480}
	dynamoTokenBuckets = []float64{0, 100, 210, 430, 870, 1800, 3600, 7400, 15000, 31000, 63000, 130000}
)

// metrics holds every collector of one Sim.
type metrics struct {
	prefixQueries *prometheus.CounterVec
	prefixHits    *prometheus.CounterVec
	kvUsage       *prometheus.GaugeVec
	running       *prometheus.GaugeVec
	waiting       *prometheus.GaugeVec
	success       *prometheus.CounterVec
	promptTokens  *prometheus.CounterVec
	genTokens     *prometheus.CounterVec
	ttft          *prometheus.HistogramVec
	simTTFT       *prometheus.HistogramVec
	preemptions   *prometheus.CounterVec
	evictions     *prometheus.CounterVec
	queueTime     *prometheus.HistogramVec
	inflight      *prometheus.GaugeVec

	feRequests *prometheus.CounterVec
	feCached   *prometheus.HistogramVec
	feISL      *prometheus.HistogramVec
	feOutput   *prometheus.CounterVec
	feTTFT     *prometheus.HistogramVec
	feInflight *prometheus.GaugeVec
	routed     *prometheus.CounterVec
}

func newMetrics() *metrics {
	wl := []string{"model_name", "engine", "worker"}
	return &metrics{
		prefixQueries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vllm:prefix_cache_queries_total",
			Help: "Prefix cache queries, in terms of number of queried tokens.",
		}, wl),
		prefixHits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vllm:prefix_cache_hits_total",
			Help: "Prefix cache hits, in terms of number of cached tokens.",
		}, wl),
		kvUsage: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "vllm:kv_cache_usage_perc",
			Help: "KV-cache usage. 1 means 100 percent usage.",
		}, wl),
		running: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "vllm:num_requests_running",
			Help: "Number of requests in model execution batches.",
		}, wl),
		waiting: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "vllm:num_requests_waiting",
			Help: "Number of requests waiting to be processed.",
		}, wl),
		success: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vllm:request_success_total",
			Help: "Count of successfully processed requests.",
		}, append(wl[:3:3], "finished_reason")),
		promptTokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vllm:prompt_tokens_total",
			Help: "Number of prefill tokens processed.",
		}, wl),
		genTokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vllm:generation_tokens_total",
			Help: "Number of generation tokens processed.",
		}, wl),
		ttft: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "vllm:time_to_first_token_seconds",
			Help:    "Histogram of time to first token in seconds.",
			Buckets: vllmTTFTBuckets,
		}, wl),
		// vLLM V1's queue time (WAITING until first scheduled), per
		// worker, in wall-clock seconds like vLLM's TTFT here.
		queueTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "vllm:request_queue_time_seconds",
			Help:    "Histogram of time spent in WAITING phase for request.",
			Buckets: vllmTTFTBuckets,
		}, wl),
		// Dynamo's worker-side in-flight requests (the component's
		// inflight gauge), per worker: running plus waiting. Dynamo labels
		// it with the component's namespace, component and endpoint, which
		// queries select on (dynamo_component="backend",
		// dynamo_endpoint="generate"); the worker labels are ours.
		inflight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "dynamo_component_inflight_requests",
			Help: "Number of requests currently being processed by the worker.",
		}, append(wl[:3:3], "dynamo_namespace", "dynamo_component", "dynamo_endpoint")),
		simTTFT: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "fleetbench_sim_time_to_first_token_simulated_seconds",
			Help:    "Time to first token in simulated seconds (not divided by the time scale): engine step time from the request joining the worker's queue to its first token. Host load does not stretch it.",
			Buckets: vllmTTFTBuckets,
		}, wl),
		preemptions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vllm:num_preemptions_total",
			Help: "Cumulative number of preemption from the engine.",
		}, wl),
		evictions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fleetbench_sim_kv_cache_evicted_blocks_total",
			Help: "Cached KV blocks evicted (LRU) to make room, per worker.",
		}, wl),

		feRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dynamo_frontend_requests_total",
			Help: "Total number of LLM requests processed.",
		}, []string{"model", "endpoint", "request_type", "status"}),
		feCached: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "dynamo_frontend_cached_tokens",
			Help:    "Number of cached tokens (prefix cache hits) per request.",
			Buckets: dynamoTokenBuckets,
		}, []string{"model"}),
		feISL: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "dynamo_frontend_input_sequence_tokens",
			Help:    "Input sequence length in tokens.",
			Buckets: dynamoTokenBuckets,
		}, []string{"model"}),
		feOutput: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "dynamo_frontend_output_tokens_total",
			Help: "Total number of output tokens generated.",
		}, []string{"model"}),
		feTTFT: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "dynamo_frontend_time_to_first_token_seconds",
			Help:    "Time to first token in seconds.",
			Buckets: dynamoTTFTBuckets,
		}, []string{"model"}),
		feInflight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "dynamo_frontend_inflight_requests",
			Help: "Number of inflight requests.",
		}, []string{"model"}),
		routed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "fleetbench_sim_routed_requests_total",
			Help: "Requests routed, by routing mode and worker.",
		}, []string{"mode", "worker"}),
	}
}

func (m *metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{
		m.prefixQueries, m.prefixHits, m.kvUsage, m.running, m.waiting, m.success,
		m.promptTokens, m.genTokens, m.ttft, m.simTTFT, m.preemptions, m.evictions, m.queueTime, m.inflight,
		m.feRequests, m.feCached, m.feISL, m.feOutput, m.feTTFT, m.feInflight, m.routed,
	}
}

func (m *metrics) register(reg prometheus.Registerer) error {
	for _, c := range m.collectors() {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("register metrics: %w", err)
		}
	}
	return nil
}

// workerMetrics are one worker's children, bound once.
type workerMetrics struct {
	prefixQueries, prefixHits prometheus.Counter
	kvUsage, running, waiting prometheus.Gauge
	stop, length, abort       prometheus.Counter
	promptTokens, genTokens   prometheus.Counter
	ttft, simTTFT             prometheus.Observer
	preemptions, evictions    prometheus.Counter
	queueTime                 prometheus.Observer
	inflight                  prometheus.Gauge
}

func (m *metrics) forWorker(model string, w int) *workerMetrics {
	l := prometheus.Labels{"model_name": model, "engine": strconv.Itoa(w), "worker": workerName(w)}
	reason := func(r string) prometheus.Counter {
		return m.success.With(prometheus.Labels{"model_name": model, "engine": strconv.Itoa(w), "worker": workerName(w), "finished_reason": r})
	}
	return &workerMetrics{
		prefixQueries: m.prefixQueries.With(l),
		prefixHits:    m.prefixHits.With(l),
		kvUsage:       m.kvUsage.With(l),
		running:       m.running.With(l),
		waiting:       m.waiting.With(l),
		stop:          reason("stop"),
		length:        reason("length"),
		abort:         reason("abort"),
		promptTokens:  m.promptTokens.With(l),
		genTokens:     m.genTokens.With(l),
		ttft:          m.ttft.With(l),
		simTTFT:       m.simTTFT.With(l),
		preemptions:   m.preemptions.With(l),
		evictions:     m.evictions.With(l),
		queueTime:     m.queueTime.With(l),
		inflight: m.inflight.With(prometheus.Labels{"model_name": model, "engine": strconv.Itoa(w), "worker": workerName(w),
			"dynamo_namespace": dynamoNamespace, "dynamo_component": "backend", "dynamo_endpoint": "generate"}),
	}
}

// dynamoNamespace is the Dynamo namespace the simulator's workers report
// under, as a DynamoGraphDeployment's workers report theirs.
const dynamoNamespace = "fleetbench-sim"

func workerName(w int) string { return "worker-" + strconv.Itoa(w) }
